"""Real clients against real servers behind sluice (issue 13, "what to show").

One gateway (module-scoped) fronts seven backends, all third-party servers
installed by scripts/test and bound to loopback:

| backend | server | transport, isolation |
|---|---|---|
| `fs` | @modelcontextprotocol/server-filesystem over a temp dir | stdio, shared, `roots` = that dir |
| `memory` | @modelcontextprotocol/server-memory | stdio, shared |
| `everything` | @modelcontextprotocol/server-everything | stdio, shared, `roots` = SHARED_ROOT |
| `everything_ps` | the same | stdio, per-session |
| `everything_http` | the same in streamableHttp mode (via loopback-preload.cjs) | http, shared, `roots` = SHARED_ROOT |
| `time` | mcp-server-time (PyPI) | stdio, shared |
| `fetch` | mcp-server-fetch (PyPI; no web here: listed, never called) | stdio, shared |

The clients (real_clients.py): the official Python SDK in its legacy mode
(`py-legacy`) and its 2026-07-28 mode (`py-2026`), the official TypeScript
SDK client (`ts`), and the MCP Inspector CLI. Every check compares what a
client gets through the gateway with what the *same* client (same
capabilities, same callbacks) gets from the backend directly: stdio servers
spawned by the client itself, the HTTP peer by its URL.

Checks (each test's docstring says exactly what it asserts):

* LISTS: one `tools/list` (`prompts/list`, `resources/list`,
  `resources/templates/list`) through the gateway, no cursor following, is
  exactly the union of each backend's own list: per backend by names
  (`{backend}__{name}`, `sluice://{backend}/{uri}`) and in total by count.
  server-everything's list depends on what its client declares (sampling,
  elicitation and its URL mode, roots), so its slices show how the gateway
  declares capabilities to shared and per-session backends; and a
  per-session backend's list must be the client's own, whatever other
  clients declared.
* TOOLS: every tool server-everything lists to the client directly, called
  through the gateway, gives the result it gives directly (normalized only
  as `normalize` documents; every other exception is in EXCEPTIONS).
* SAMPLING/ELICITATION: answered by the client's own callback, in both
  Python eras and with the TS client; in 2026-07-28 through the gateway's
  `input_required` result.
* LOGS: at and above the level the client set, none below.
* RESOURCE LINKS: every `resource_link` a tool returns is readable through
  the gateway at the URI exactly as returned.
* ROOTS: a per-session backend sees the client's roots; a shared one the
  configured ones.
* TASKS: server-everything's task-only tool, task-augmented (2025-11-25).
* INSPECTOR: tools/list and tools/call through the gateway equal the direct ones
  (the Inspector CLI declares roots, not sampling or elicitation).

Nothing here is skipped or expected to fail: a failing check is the gateway
(or a finding to be documented as by design).
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import copy
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest

from harness import (
    NODE_MODULES,
    Gateway,
    NodePeer,
    locate_everything_js,
    node_bin,
    start_gateway,
    start_node_http_peer,
    stop_gateway,
    stop_node_peer,
    toml_str,
)
from real_clients import (
    CLIENT_KINDS,
    ClientError,
    Host,
    PyDriver,
    Target,
    driver,
    inspector,
    inspector_config,
    venv_script,
)

pytestmark = pytest.mark.anyio

TEST_TIMEOUT_S = 120
# How long a backend's notifications/tools/list_changed may take to reach a client.
LIST_CHANGED_S = 10
FS_JS = NODE_MODULES / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
MEMORY_JS = NODE_MODULES / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"

BACKENDS = ["fs", "memory", "everything", "everything_ps", "everything_http", "time", "fetch"]
EVERYTHINGS = ["everything", "everything_http", "everything_ps"]
STDIO_EVERYTHINGS = {"everything", "everything_ps"}
SHARED_EVERYTHINGS = {"everything", "everything_http"}
# What the gateway declares to a shared backend (docs/clients.md).
GATEWAY_DECLARES = ("sampling", "elicitation", "elicitation_url", "roots")
# server-everything's tools that exist only for a client declaring sampling,
# elicitation (form) and elicitation (url mode).
CAPABILITY_TOOLS = {"trigger-sampling-request", "trigger-elicitation-request", "trigger-url-elicitation"}

LIST_METHODS: dict[str, tuple[str, str, str]] = {
    # method -> (result key, item key, server capability that offers it)
    "tools/list": ("tools", "name", "tools"),
    "prompts/list": ("prompts", "name", "prompts"),
    "resources/list": ("resources", "uri", "resources"),
    "resources/templates/list": ("resourceTemplates", "uriTemplate", "resources"),
}

# Arguments that work for each server-everything tool (its input schemas,
# @modelcontextprotocol/server-everything 2026.8.31). A tool missing here is
# called with {} when its schema requires nothing, else reported.
GZIP_DATA = "data:text/plain;base64," + base64.b64encode(b"sluice interop: gzip me\n" * 4).decode()
TOOL_ARGS: dict[str, dict[str, Any]] = {
    "echo": {"message": "through sluice: ünïcødé ✓"},
    "get-annotated-message": {"messageType": "error", "includeImage": True},
    "get-env": {},
    "get-resource-links": {"count": 4},
    "get-resource-reference": {"resourceType": "Blob", "resourceId": 3},
    "get-structured-content": {"location": "Chicago"},
    "get-sum": {"a": 19, "b": 23},
    "get-tiny-image": {},
    # a data: URL, so nothing is fetched from the web
    "gzip-file-as-resource": {"name": "interop.txt.gz", "data": GZIP_DATA, "outputType": "resource"},
    "toggle-simulated-logging": {},
    "toggle-subscriber-updates": {},
    "trigger-long-running-operation": {"duration": 0.3, "steps": 3},
    "get-roots-list": {},
    "trigger-elicitation-request": {},
    # a fixed elicitationId, else the result carries a random one
    "trigger-url-elicitation": {"url": "https://example.invalid/interop", "elicitationId": "interop-fixed-id"},
    "trigger-sampling-request": {"prompt": "say the marker", "maxTokens": 16},
    # task-only (taskSupport "required"): a plain call is refused the same way
    # on both sides; the task-augmented call is test_task_tool.
    "simulate-research-query": {"topic": "interop"},
}
# Stateful toggles: called twice on each side (on, then off), both answers compared.
TOGGLES = {"toggle-simulated-logging", "toggle-subscriber-updates"}

# Documented exceptions to "the same result through the gateway as directly".
EXCEPTIONS = {
    ("get-env", "stdio"): (
        "the tool prints its own process environment: the gateway's child and the client's child are "
        "different processes with different environments; only the shape (one text block holding a "
        "JSON object) is compared"
    ),
    ("get-roots-list", "shared"): (
        "a shared backend is given the gateway's configured `roots`, not the client's (by design); "
        "checked in test_roots"
    ),
}


# --------------------------------------------------------------------------
# the world: peers, gateway, direct targets


@dataclass
class World:
    gateway: Gateway
    base: Path
    fs_root: Path
    shared_root_uri: str
    direct: dict[str, Target]
    everything_http: NodePeer
    list_cache: dict[tuple[str, str], Any] = field(default_factory=dict)

    @property
    def gateway_target(self) -> Target:
        return Target(url=self.gateway.mcp_url)

    def host(self, kind: str) -> Host:
        root = self.base / f"client-root-{kind}"
        return Host(
            sampling_text=f"SAMPLED-BY-{kind}-7f3a",
            roots=[{"uri": root.as_uri(), "name": f"client-root-{kind}"}],
        )


def gateway_config(w_base: Path, fs_root: Path, shared_root_uri: str, everything_js: Path, http_url: str) -> str:
    node = toml_str(node_bin())
    ev = toml_str(str(everything_js))
    return f"""
[server]
request_timeout = "30s"

[backends.fs]
command = {node}
args = [{toml_str(str(FS_JS))}, {toml_str(str(fs_root))}]
roots = [{toml_str(fs_root.as_uri())}]

[backends.memory]
command = {node}
args = [{toml_str(str(MEMORY_JS))}]
env = {{ MEMORY_FILE_PATH = {toml_str(str(w_base / "gateway-memory.jsonl"))} }}

[backends.everything]
command = {node}
args = [{ev}, "stdio"]
roots = [{toml_str(shared_root_uri)}]

[backends.everything_ps]
command = {node}
args = [{ev}, "stdio"]
isolation = "per-session"

[backends.everything_http]
transport = "http"
url = {toml_str(http_url)}
roots = [{toml_str(shared_root_uri)}]

[backends.time]
command = {toml_str(venv_script("mcp-server-time"))}
args = ["--local-timezone", "UTC"]

[backends.fetch]
command = {toml_str(venv_script("mcp-server-fetch"))}

[namespaces.default]
backends = [{", ".join(toml_str(b) for b in BACKENDS)}]
"""


@pytest.fixture(scope="module")
def world(sluice_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("real-clients")
    fs_root = base / "fs-root"
    (fs_root / "sub").mkdir(parents=True)
    (fs_root / "hello.txt").write_text("hello from the interop suite\n")
    (fs_root / "sub" / "nested.md").write_text("# nested\n")
    shared_root_uri = (base / "shared-root").as_uri()
    everything_js = locate_everything_js()
    for path in (FS_JS, MEMORY_JS):
        if not path.is_file():
            pytest.fail(f"{path} is missing: run `npm ci` in tests/interop (scripts/test does)")

    peer_dir = base / "everything-http"
    peer_dir.mkdir()
    peer = start_node_http_peer(everything_js, ["streamableHttp"], peer_dir)
    gw_dir = base / "gw"
    gw_dir.mkdir()
    try:
        gw = start_gateway(
            sluice_bin, gw_dir, gateway_config(base, fs_root, shared_root_uri, everything_js, peer.mcp_url)
        )
    except BaseException:
        stop_node_peer(peer)
        raise
    node = node_bin()
    direct = {
        "fs": Target(command=node, args=[str(FS_JS), str(fs_root)]),
        "memory": Target(command=node, args=[str(MEMORY_JS)], env={"MEMORY_FILE_PATH": str(base / "direct-memory.jsonl")}),
        "everything": Target(command=node, args=[str(everything_js), "stdio"]),
        "everything_ps": Target(command=node, args=[str(everything_js), "stdio"]),
        "everything_http": Target(url=peer.mcp_url),
        "time": Target(command=venv_script("mcp-server-time"), args=["--local-timezone", "UTC"]),
        "fetch": Target(command=venv_script("mcp-server-fetch")),
    }
    w = World(
        gateway=gw, base=base, fs_root=fs_root, shared_root_uri=shared_root_uri, direct=direct, everything_http=peer
    )
    try:
        gw.wait_ready()
        yield w
    finally:
        problems = stop_gateway(gw)
        stop_node_peer(peer)
        if problems:
            pytest.fail("gateway teardown:\n" + "\n".join(problems) + "\n" + gw.stderr_tail(), pytrace=False)


# --------------------------------------------------------------------------
# helpers


def prefixed(backend: str, method: str, item: str) -> str:
    """The gateway's name for a backend's list item."""
    if method in ("tools/list", "prompts/list"):
        return f"{backend}__{item}"
    return f"sluice://{backend}/{item}"


def belongs(backend: str, method: str, exposed: str) -> bool:
    if method in ("tools/list", "prompts/list"):
        return exposed.startswith(f"{backend}__")
    return exposed.startswith(f"sluice://{backend}/")


async def server_capabilities(c: Any) -> dict[str, Any]:
    if isinstance(c, PyDriver):
        return c.client.server_capabilities.model_dump(by_alias=True, exclude_none=True)
    return c.server_capabilities  # TsDriver


async def list_once(c: Any, method: str) -> tuple[list[str], str | None]:
    """One list request (no cursor following): the item keys and the nextCursor."""
    key, item, _ = LIST_METHODS[method]
    result = await c.request(method)
    return [entry[item] for entry in result.get(key, [])], result.get("nextCursor")


async def lists_of(c: Any, methods: dict[str, bool]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for method, offered in methods.items():
        out[method] = (await list_once(c, method))[0] if offered else []
    return out


async def all_lists(w: World, kind: str) -> tuple[dict[str, tuple[list[str], str | None]], dict[str, dict[str, list[str]]]]:
    """(the gateway's one-call lists with their nextCursor, each backend's own lists), as `kind`
    sees them; fetched once per client kind (the direct connections concurrently: a stdio
    server-everything takes its SDK's 2 s to close)."""
    key = ("lists", kind)
    if key in w.list_cache:
        return w.list_cache[key]
    own: dict[str, dict[str, list[str]]] = {}

    async def one(backend: str) -> None:
        host = w.host(kind)
        if backend in SHARED_EVERYTHINGS:
            # A shared backend serves every client with one session: it sees
            # the capabilities the gateway declares (all of them), not this
            # client's; documented in docs/clients.md.
            host = Host(roots=host.roots, sampling_text=host.sampling_text, declare=GATEWAY_DECLARES)
        async with driver(kind, w.direct[backend], host, direct=True) as c:
            caps = await server_capabilities(c)
            own[backend] = await lists_of(c, {m: cap in caps for m, (_, _, cap) in LIST_METHODS.items()})

    async with anyio.create_task_group() as tg:
        for backend in BACKENDS:
            tg.start_soon(one, backend)
    gateway: dict[str, tuple[list[str], str | None]] = {}
    async with driver(kind, w.gateway_target, w.host(kind), direct=False) as c:
        for method in LIST_METHODS:
            gateway[method] = await list_once(c, method)
    w.list_cache[key] = (gateway, own)
    return gateway, own


TIME_RE = re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:\s?[AP]M)?")
ISO_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})")
UUID_RE = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")


def norm_text(s: str) -> str:
    """Values that legitimately differ between two runs of the same server: times, session uuids.

    server-everything stamps its dynamic resources "created at <time>", and
    names its (HTTP) session id in toggle answers: each side has its own.
    """
    return TIME_RE.sub("<time>", UUID_RE.sub("<uuid>", ISO_RE.sub("<iso-time>", s)))


def norm_blob(b64: str) -> str:
    try:
        raw = base64.b64decode(b64, validate=True)
        return "text-blob:" + norm_text(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return b64


def normalize(result: dict[str, Any], backend: str) -> dict[str, Any]:
    """A tool result reduced to what must be equal through the gateway and directly.

    Dropped: the envelope a transport or era adds (`_meta`, `resultType`,
    `ttlMs`, `cacheScope`) and `isError: false` (absent means false).
    Mapped back: URIs of `sluice://{backend}/...` to the backend's own (the
    gateway must map them: checked separately by `unmapped_uris`).
    Normalized: `norm_text` in texts and in text blobs; in an error the client
    raised itself, the gateway's `{backend}__` prefix of the tool's name.
    """
    r = copy.deepcopy(result)
    if isinstance(r.get("error"), dict) and isinstance(r["error"].get("message"), str):
        # An error the client raised itself (e.g. the TS SDK refusing a task-only tool before
        # sending anything) names the tool as the client called it.
        r["error"]["message"] = r["error"]["message"].replace(f"{backend}__", "")
    for key in ("_meta", "meta", "resultType", "ttlMs", "cacheScope"):
        r.pop(key, None)
    if r.get("isError") is False:
        r.pop("isError")
    prefix = f"sluice://{backend}/"

    def walk(x: Any) -> Any:
        if isinstance(x, dict):
            out = {}
            for k, v in x.items():
                if k == "uri" and isinstance(v, str):
                    out[k] = v[len(prefix) :] if v.startswith(prefix) else v
                elif k == "blob" and isinstance(v, str):
                    out[k] = norm_blob(v)
                else:
                    out[k] = walk(v)
            return out
        if isinstance(x, list):
            return [walk(i) for i in x]
        if isinstance(x, str):
            return norm_text(x)
        return x

    return walk(r)


def content_uris(result: dict[str, Any]) -> list[str]:
    """URIs of resource_link and embedded resource blocks of a tool result."""
    uris = []
    for block in result.get("content", []):
        if block.get("type") == "resource_link":
            uris.append(block["uri"])
        elif block.get("type") == "resource":
            uris.append(block["resource"]["uri"])
    return uris


def unmapped_uris(result: dict[str, Any], backend: str) -> list[str]:
    return [u for u in content_uris(result) if not u.startswith(f"sluice://{backend}/")]


def short(value: Any, limit: int = 1500) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


async def call(c: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """tools/call; a JSON-RPC error becomes {"error": {code, message}} so both sides compare
    alike, and a client-side failure (e.g. a result the SDK rejects) {"client-exception": ...}."""
    try:
        return await c.request("tools/call", {"name": name, "arguments": arguments})
    except ClientError as e:
        return {"error": {"code": e.code, "message": e.message}}
    except Exception as e:  # noqa: BLE001 - reported as a difference, not raised inside the client's task group
        return {"client-exception": repr(e)}


async def read_(c: Any, uri: str) -> dict[str, Any]:
    """resources/read, failures folded into the result like `call`."""
    try:
        return await c.request("resources/read", {"uri": uri})
    except ClientError as e:
        return {"error": {"code": e.code, "message": e.message}}
    except Exception as e:  # noqa: BLE001
        return {"client-exception": repr(e)}


def tool_args(name: str, schema: dict[str, Any] | None) -> dict[str, Any] | None:
    if name in TOOL_ARGS:
        return TOOL_ARGS[name]
    if not (schema or {}).get("required"):
        return {}
    return None


# ==========================================================================
# LISTS


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", CLIENT_KINDS)
async def test_list_per_backend(world: World, kind: str, backend: str) -> None:
    """LISTS, one backend: its slice of the gateway's one-call lists equals its own list.

    For each of tools/prompts/resources/templates: the names (`{backend}__{name}`,
    `sluice://{backend}/{uri}`) the gateway lists for this backend, in one call,
    equal exactly what the backend lists to the same client connected directly
    (same capabilities and callbacks; for a shared server-everything, a direct
    client declaring what the gateway declares to it, GATEWAY_DECLARES).
    """
    with anyio.fail_after(TEST_TIMEOUT_S):
        gateway, own = await all_lists(world, kind)
    problems = []
    for method in LIST_METHODS:
        names, cursor = gateway[method]
        got = sorted(n for n in names if belongs(backend, method, n))
        want = sorted(prefixed(backend, method, n) for n in own[backend][method])
        if got != want or cursor is not None:
            problems.append(
                f"{method}: through the gateway {len(got)}, directly {len(want)}; "
                f"missing {sorted(set(want) - set(got))}, extra {sorted(set(got) - set(want))}"
                + (f", nextCursor {cursor!r}" if cursor is not None else "")
            )
    assert not problems, f"[{kind}] backend {backend}:\n" + "\n".join(problems)


@pytest.mark.parametrize("kind", CLIENT_KINDS)
async def test_list_is_the_union(world: World, kind: str) -> None:
    """LISTS, all backends: each one-call list's count is the sum of the backends' own counts.

    And its names are exactly the union of the backends' names, prefixed;
    nothing else, and no nextCursor (the lists fit in one page).
    """
    with anyio.fail_after(TEST_TIMEOUT_S):
        gateway, own = await all_lists(world, kind)
    problems = []
    for method in LIST_METHODS:
        names, cursor = gateway[method]
        want = sorted(prefixed(b, method, n) for b in BACKENDS for n in own[b][method])
        counts = {b: len(own[b][method]) for b in BACKENDS}
        if sorted(names) != want or cursor is not None:
            problems.append(
                f"{method}: one call gave {len(names)} (nextCursor {cursor!r}), the backends' own "
                f"lists sum to {len(want)} {counts}; missing {sorted(set(want) - set(names))}, "
                f"extra {sorted(set(names) - set(want))}"
            )
    assert not problems, f"[{kind}]\n" + "\n".join(problems)


async def test_per_session_list_is_the_clients_own(world: World) -> None:
    """LISTS, per-session backend, two clients with different capabilities.

    server-everything registers tools by what its client declared. Client X
    (Python SDK, legacy) declares only roots and uses everything_ps (its backend
    session then has get-roots-list but no sampling/elicitation tools, and says
    tools/list_changed). Client Y (Python SDK, legacy, declaring sampling,
    elicitation and roots) then lists: its everything_ps tools must be exactly
    what server-everything lists to Y directly, not what it listed to X.
    """
    base_host = world.host("py-legacy")
    x_host = Host(roots=base_host.roots, declare=("roots",))
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with driver("py-legacy", world.direct["everything_ps"], base_host, direct=True) as d:
            want = sorted(f"everything_ps__{t['name']}" for t in (await d.request("tools/list"))["tools"])
        async with driver("py-legacy", world.direct["everything_ps"], x_host, direct=True) as d:
            x_own = sorted(f"everything_ps__{t['name']}" for t in (await d.request("tools/list"))["tools"])
        async with driver("py-legacy", world.gateway_target, x_host, direct=False) as x:
            assert isinstance(x, PyDriver)
            x_call = await call(x, "everything_ps__echo", {"message": "x"})
            # Its backend session's tools/list_changed has reached the gateway once the
            # gateway passes it on to X (its list cache is dropped before that).
            with anyio.move_on_after(LIST_CHANGED_S):
                await x.tools_list_changed.wait()
            assert x.tools_list_changed.is_set(), (
                f"X's backend session's tools/list_changed did not reach X within {LIST_CHANGED_S} s"
            )
            async with driver("py-legacy", world.gateway_target, base_host, direct=False) as y:
                listed = (await y.request("tools/list"))["tools"]
    got = sorted(t["name"] for t in listed if t["name"].startswith("everything_ps__"))
    assert got == want, (
        f"client Y's everything_ps tools through the gateway: {got}\n"
        f"    what server-everything lists to Y directly: {want}\n"
        f"    what it lists to X (roots only) directly: {x_own}\n"
        f"    (X's everything_ps__echo: {short(x_call, 200)})"
    )


# ==========================================================================
# TOOLS (every server-everything tool) and SAMPLING/ELICITATION


@pytest.mark.parametrize("backend", EVERYTHINGS)
@pytest.mark.parametrize("kind", CLIENT_KINDS)
async def test_everything_tools(world: World, kind: str, backend: str) -> None:
    """TOOLS: every tool server-everything lists to the client directly gives, through the
    gateway, the result it gives directly (after `normalize`, with EXCEPTIONS).

    Also: URIs in results come back mapped (`sluice://{backend}/...`), and the
    sampling and elicitation tools reach this client's own callbacks (once each).
    """
    host = world.host(kind)
    failures: list[str] = []
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with driver(kind, world.direct[backend], host, direct=True) as d, driver(
            kind, world.gateway_target, host, direct=False
        ) as g:
            direct_tools = (await d.request("tools/list"))["tools"]
            gateway_names = {t["name"] for t in (await g.request("tools/list"))["tools"]}
            for tool in direct_tools:
                name = tool["name"]
                via = f"{backend}__{name}"
                if name == "get-roots-list" and backend in SHARED_EVERYTHINGS:
                    continue  # EXCEPTIONS[("get-roots-list", "shared")]
                args = tool_args(name, tool.get("inputSchema"))
                if args is None:
                    failures.append(f"{name}: no arguments known (add it to TOOL_ARGS)")
                    continue
                if via not in gateway_names:
                    failures.append(f"{name}: listed directly but not as {via} through the gateway")
                rounds = 2 if name in TOGGLES else 1
                for n in range(rounds):
                    await g.events()
                    got = await call(g, via, args)
                    seen = await g.events()
                    want = await call(d, name, args)
                    tag = f"{name}" + (f" (call {n + 1})" if rounds > 1 else "")
                    bad = unmapped_uris(got, backend)
                    if bad:
                        failures.append(f"{tag}: URIs in the gateway's result are not mapped: {bad}")
                    if name == "get-env" and backend in STDIO_EVERYTHINGS:
                        # EXCEPTIONS[("get-env", "stdio")]
                        for side, r in (("gateway", got), ("direct", want)):
                            blocks = r.get("content", [])
                            ok = len(blocks) == 1 and blocks[0].get("type") == "text"
                            if not ok or not isinstance(json.loads(blocks[0]["text"]), dict):
                                failures.append(f"{tag}: {side} result is not one JSON-object text: {short(r)}")
                        continue
                    if normalize(got, backend) != normalize(want, backend):
                        failures.append(
                            f"{tag}: through the gateway != directly\n"
                            f"    request: tools/call {via} {short(args)}\n"
                            f"    gateway: {short(normalize(got, backend))}\n"
                            f"    direct : {short(normalize(want, backend))}"
                        )
                    if name == "trigger-sampling-request" and len(seen.sampling) != 1:
                        failures.append(f"{tag}: the client's sampling callback ran {len(seen.sampling)} times")
                    if name in ("trigger-elicitation-request", "trigger-url-elicitation") and len(seen.elicitation) != 1:
                        failures.append(f"{tag}: the client's elicitation callback ran {len(seen.elicitation)} times")
    assert not failures, f"[{kind}] {backend}: {len(failures)} problem(s)\n" + "\n".join(failures)


@pytest.mark.parametrize("backend", EVERYTHINGS)
@pytest.mark.parametrize("kind", CLIENT_KINDS)
async def test_sampling_and_elicitation(world: World, kind: str, backend: str) -> None:
    """SAMPLING/ELICITATION: the backend's question is answered by this client's own callback.

    trigger-sampling-request: the callback gets the backend's request (its
    prompt, maxTokens, systemPrompt) exactly once and the tool returns the
    callback's answer. trigger-elicitation-request: the callback gets the form
    (requestedSchema with `name`) once and the tool reports the submitted name.
    In the 2026-07-28 mode the gateway must first answer with an
    `input_required` result naming the request (checked with the SDK's
    `allow_input_required=True`), and the call resumed with the answer and
    `requestState` must complete.
    """
    host = world.host(kind)
    sampling_args = {"prompt": "say the marker", "maxTokens": 16}
    resume_args = {"prompt": "input required?", "maxTokens": 8}
    first: Any = None
    final: Any = None
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with driver(kind, world.gateway_target, host, direct=False) as g:
            await g.events()
            sampled = await call(g, f"{backend}__trigger-sampling-request", sampling_args)
            sampled_seen = await g.events()
            elicited = await call(g, f"{backend}__trigger-elicitation-request", {})
            elicited_seen = await g.events()
            if kind == "py-2026":
                assert isinstance(g, PyDriver)
                try:
                    first = await g.client.session.call_tool(
                        f"{backend}__trigger-sampling-request", resume_args, allow_input_required=True
                    )
                    if isinstance(first, types.InputRequiredResult) and first.input_requests:
                        key = next(iter(first.input_requests))
                        answer = types.CreateMessageResult(
                            role="assistant",
                            content=types.TextContent(type="text", text="RESUMED-7c1d"),
                            model="interop-fake-model",
                            stop_reason="endTurn",
                        )
                        final = await g.client.call_tool(
                            f"{backend}__trigger-sampling-request",
                            resume_args,
                            input_responses={key: answer},
                            request_state=first.request_state,
                        )
                except Exception as e:  # noqa: BLE001 - asserted below, outside the client's task group
                    first = first if first is not None else e
                    final = final if final is not None else e

    request = f"tools/call {backend}__trigger-sampling-request {short(sampling_args)}"
    assert not sampled.get("isError") and "error" not in sampled and "client-exception" not in sampled, (
        f"[{kind}] {request} -> {short(sampled)}"
    )
    assert len(sampled_seen.sampling) == 1, f"[{kind}] {request}: sampling callback calls {sampled_seen.sampling}"
    asked = sampled_seen.sampling[0]
    assert asked.get("maxTokens") == 16, asked
    assert asked.get("systemPrompt") == "You are a helpful test server.", asked
    assert "say the marker" in json.dumps(asked["messages"]), asked
    assert host.sampling_text in json.dumps(sampled["content"]), sampled

    request = f"tools/call {backend}__trigger-elicitation-request {{}}"
    assert not elicited.get("isError") and "error" not in elicited and "client-exception" not in elicited, (
        f"[{kind}] {request} -> {short(elicited)}"
    )
    assert len(elicited_seen.elicitation) == 1, f"[{kind}] {request}: elicitation callback calls {elicited_seen.elicitation}"
    assert "name" in elicited_seen.elicitation[0]["requestedSchema"]["properties"], elicited_seen.elicitation[0]
    texts = [b.get("text", "") for b in elicited["content"]]
    assert any("- Name: Ada Lovelace" in t for t in texts), elicited

    if kind == "py-2026":
        assert isinstance(first, types.InputRequiredResult), (
            "a 2026-07-28 call whose backend asks the client must first get an input_required result; got "
            + (short(first.model_dump(mode="json", by_alias=True, exclude_none=True)) if hasattr(first, "model_dump") else repr(first))
        )
        assert first.input_requests and len(first.input_requests) == 1, first
        (req,) = first.input_requests.values()
        assert req.method == "sampling/createMessage", req
        assert isinstance(final, types.CallToolResult) and not final.is_error, f"resumed call: {final!r}"
        assert "RESUMED-7c1d" in json.dumps(final.model_dump(mode="json")), final


# ==========================================================================
# LOGS


LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


def rank(level: str) -> int:
    return LEVELS.index(level)


async def wait_for(predicate, timeout: float, poll: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await predicate():
            return True
        await anyio.sleep(poll)
    return await predicate()


LOG_KINDS = ["py-legacy", "ts"]  # logging/setLevel is a legacy-session feature


@pytest.mark.parametrize("kind", LOG_KINDS)
async def test_logs_per_session_backend(world: World, kind: str) -> None:
    """LOGS, per-session backend (deterministic; legacy session, `logging/setLevel` through
    the gateway): the client sets `info` and subscribes to an everything_ps resource, which
    server-everything logs at `info`: that message reaches the client's logging callback. It
    then sets `warning` and unsubscribes (also logged at `info`): nothing below `warning` arrives.
    """
    host = world.host(kind)
    ps_uri = "sluice://everything_ps/demo://resource/static/document/instructions.md"
    got: list[dict[str, Any]] = []
    answers: dict[str, Any] = {}
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with driver(kind, world.gateway_target, host, direct=False) as b:
            answers["setLevel info"] = await b.request("logging/setLevel", {"level": "info"})
            await b.events()
            answers["subscribe"] = await b.request("resources/subscribe", {"uri": ps_uri})

            async def subscribed_logged() -> bool:
                got.extend(p for _, p in (await b.events()).logs)
                return any("Received Subscribe Resource request" in str(p.get("data")) for p in got)

            arrived = await wait_for(subscribed_logged, 10)
            answers["setLevel warning"] = await b.request("logging/setLevel", {"level": "warning"})
            await b.events()
            answers["unsubscribe"] = await b.request("resources/unsubscribe", {"uri": ps_uri})
            await anyio.sleep(2)
            late = [p for _, p in (await b.events()).logs]
    assert arrived, (
        f"[{kind}] after logging/setLevel info and resources/subscribe {ps_uri} (answers {answers}), "
        f"server-everything's info-level message did not reach the client within 10 s; logs seen: {got}"
    )
    assert all(rank(p["level"]) >= rank("info") for p in got), got
    assert all(rank(p["level"]) >= rank("warning") for p in late), (
        f"[{kind}] messages below warning reached a client that set warning: {late}"
    )


async def test_logs_shared_backend(world: World) -> None:
    """LOGS, shared backend (legacy sessions): server-everything's simulated logging (a random
    level every 5 s, for every client of the shared backend).

    A reference client (Python SDK) sets `debug`; the clients under test (Python SDK and TS SDK)
    set `warning` before it (on a shared backend the last level set wins, so the backend sends
    everything and the gateway must filter per client). The reference turns the logging on
    until it has seen messages both below and at/above `warning` (bounded), then off. Each
    client under test must have received exactly the reference's messages at or above
    `warning` in that window (same levels, same order), and nothing below `warning`.
    """
    ref: list[tuple[float, dict[str, Any]]] = []
    seen: dict[str, list[tuple[float, dict[str, Any]]]] = {}
    # Each message is below warning with p = 3/8: none in 150 s (30 messages) has p < 1e-6;
    # 60 s (12 messages, p = 0.4%) once failed in CI.
    mixed_within_s = 150
    with anyio.fail_after(TEST_TIMEOUT_S + mixed_within_s):
        async with contextlib.AsyncExitStack() as stack:
            bs = {
                kind: await stack.enter_async_context(driver(kind, world.gateway_target, world.host(kind), direct=False))
                for kind in LOG_KINDS
            }
            for b in bs.values():
                await b.request("logging/setLevel", {"level": "warning"})
            a = await stack.enter_async_context(
                driver("py-legacy", world.gateway_target, world.host("py-legacy"), direct=False)
            )
            await a.request("logging/setLevel", {"level": "debug"})
            for c in (a, *bs.values()):
                await c.events()
            toggled = await call(a, "everything__toggle-simulated-logging", {})
            t_on = time.time()

            async def mixed() -> bool:
                ref.extend((await a.events()).logs)
                window = [p for t, p in ref if t > t_on + 1]
                return any(rank(p["level"]) < rank("warning") for p in window) and any(
                    rank(p["level"]) >= rank("warning") for p in window
                )

            enough = await wait_for(mixed, mixed_within_s, poll=0.5)
            await anyio.sleep(1)
            t_off = time.time()
            off = await call(a, "everything__toggle-simulated-logging", {})
            ref.extend((await a.events()).logs)
            for kind, b in bs.items():
                seen[kind] = (await b.events()).logs
    assert "Started" in json.dumps(toggled) and "Stopped" in json.dumps(off), (toggled, off)
    assert enough, f"the reference client (level debug) did not see both kinds of levels within {mixed_within_s} s: {ref}"
    window_ref = [p["level"] for t, p in ref if t_on + 1 < t < t_off - 1]
    want = [lv for lv in window_ref if rank(lv) >= rank("warning")]
    problems = []
    for kind, logs in seen.items():
        below = [p for _, p in logs if rank(p["level"]) < rank("warning")]
        window = [p["level"] for t, p in logs if t_on + 1 < t < t_off]
        if below:
            problems.append(f"[{kind}] set warning, received below it: {below}")
        # Its window closes later (delivery latency): it may hold one message more at its end.
        if not (window[: len(want)] == want and len(window) <= len(want) + 1):
            problems.append(f"[{kind}] set warning; the reference (debug) got {window_ref}, so want {want}; got {window}")
    assert not problems, "\n".join(problems)


# ==========================================================================
# RESOURCE LINKS


@pytest.mark.parametrize("backend", EVERYTHINGS)
@pytest.mark.parametrize("kind", CLIENT_KINDS)
async def test_resource_links_readable(world: World, kind: str, backend: str) -> None:
    """RESOURCE LINKS: every resource_link (and embedded resource) a tool returns through the
    gateway is `sluice://{backend}/...`, and `resources/read` on that URI exactly as returned
    gives the contents the backend gives directly for its own URI (`normalize`d), under the
    same URI the client asked for.

    Tools: get-resource-links (4 links, text and blob), gzip-file-as-resource
    (a link to a session resource it registers), get-resource-reference
    (an embedded resource).
    """
    host = world.host(kind)
    calls = [
        ("get-resource-links", {"count": 4}),
        ("gzip-file-as-resource", {"name": f"link-{kind}.txt.gz", "data": GZIP_DATA, "outputType": "resourceLink"}),
        ("get-resource-reference", {"resourceType": "Text", "resourceId": 2}),
    ]
    failures: list[str] = []
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with driver(kind, world.direct[backend], host, direct=True) as d, driver(
            kind, world.gateway_target, host, direct=False
        ) as g:
            for name, args in calls:
                # The gateway's side first, reads included: server-everything keeps one global
                # registration per session-resource URI, so the direct call of the same tool
                # moves that resource to the direct session.
                got = await call(g, f"{backend}__{name}", args)
                uris = content_uris(got)
                reads = {uri: await read_(g, uri) for uri in uris if uri.startswith(f"sluice://{backend}/")}
                await call(d, name, args)
                if not uris:
                    failures.append(f"{name}: no links in {short(got)}")
                for uri in uris:
                    if uri not in reads:
                        failures.append(f"{name}: link {uri!r} is not a gateway URI")
                        continue
                    read = reads[uri]
                    if "contents" not in read:
                        failures.append(f"{name}: resources/read {uri!r} through the gateway failed: {short(read)}")
                        continue
                    own = await read_(d, uri[len(f"sluice://{backend}/") :])
                    if [c.get("uri") for c in read.get("contents", [])] != [uri]:
                        failures.append(f"{name}: read {uri!r} answered for {[c.get('uri') for c in read['contents']]}")
                    if normalize(read, backend) != normalize(own, backend):
                        failures.append(
                            f"{name}: read {uri!r}\n    gateway: {short(normalize(read, backend))}\n"
                            f"    direct : {short(normalize(own, backend))}"
                        )
    assert not failures, f"[{kind}] {backend}:\n" + "\n".join(failures)


# ==========================================================================
# ROOTS


@pytest.mark.parametrize("kind", CLIENT_KINDS)
async def test_roots(world: World, kind: str) -> None:
    """ROOTS: a per-session backend sees the client's own roots; shared ones the configured roots.

    everything_ps__get-roots-list through the gateway answers exactly what
    get-roots-list answers directly to the same client (its roots, by name and
    URI). everything__ and everything_http__get-roots-list (shared, `roots`
    configured) name the configured root and not the client's. fs (shared,
    `roots` = its directory) lists that directory as allowed.
    """
    host = world.host(kind)
    client_root = host.roots[0]["uri"]
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with driver(kind, world.direct["everything_ps"], host, direct=True) as d:
            want = await d.request("tools/call", {"name": "get-roots-list", "arguments": {}})
        assert client_root in json.dumps(want), want
        async with driver(kind, world.gateway_target, host, direct=False) as g:
            own = await g.request("tools/call", {"name": "everything_ps__get-roots-list", "arguments": {}})
            shared = {
                b: await g.request("tools/call", {"name": f"{b}__get-roots-list", "arguments": {}})
                for b in sorted(SHARED_EVERYTHINGS)
            }
            allowed = await g.request("tools/call", {"name": "fs__list_allowed_directories", "arguments": {}})
    assert normalize(own, "everything_ps") == normalize(want, "everything_ps"), (
        f"[{kind}] per-session get-roots-list\n    gateway: {short(own)}\n    direct : {short(want)}"
    )
    for b, r in shared.items():
        text = json.dumps(r)
        assert world.shared_root_uri in text and client_root not in text, (
            f"[{kind}] {b}__get-roots-list should name the configured root {world.shared_root_uri}: {short(r)}"
        )
    assert str(world.fs_root) in json.dumps(allowed), f"[{kind}] fs allowed directories: {short(allowed)}"


# ==========================================================================
# TASKS (2025-11-25 task-augmented tools/call)


async def run_task(c: PyDriver, name: str, arguments: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """tools/call with `task`, tasks/get until terminal (bounded), tasks/result."""
    created = await c.raw_request("tools/call", {"name": name, "arguments": arguments, "task": {"ttl": 60000}})
    assert "task" in created and "taskId" in created["task"], f"not a CreateTaskResult: {created}"
    task_id = created["task"]["taskId"]
    statuses = [created["task"]["status"]]
    with anyio.fail_after(30):
        while statuses[-1] not in ("completed", "failed", "cancelled"):
            await anyio.sleep(0.5)
            got = await c.raw_request("tasks/get", {"taskId": task_id})
            statuses.append(got["status"])
    result = await c.raw_request("tasks/result", {"taskId": task_id})
    return statuses, result


@pytest.mark.parametrize("backend", EVERYTHINGS)
async def test_task_tool(world: World, backend: str) -> None:
    """TASKS: server-everything's simulate-research-query (taskSupport "required"), called
    task-augmented by the Python SDK (legacy, 2025-11-25): CreateTaskResult, tasks/get until
    completed, tasks/result; the final result through the gateway equals the direct one.

    (The SDK has no typed task API in this version: the requests go through
    its own session dispatcher; see PyDriver.raw_request.)
    """
    host = world.host("py-legacy")
    args = {"topic": "interop"}
    out: dict[str, Any] = {}

    async def side(which: str, target: Target, name: str) -> None:
        async with driver("py-legacy", target, host, direct=which == "direct") as c:
            assert isinstance(c, PyDriver)
            try:
                out[which] = await run_task(c, name, args)
            except (ClientError, AssertionError, TimeoutError) as e:
                out[which] = e

    with anyio.fail_after(TEST_TIMEOUT_S):
        async with anyio.create_task_group() as tg:
            tg.start_soon(side, "direct", world.direct[backend], "simulate-research-query")
            tg.start_soon(side, "gateway", world.gateway_target, f"{backend}__simulate-research-query")
    assert not isinstance(out["direct"], Exception), f"directly: {out['direct']!r}"
    want_statuses, want = out["direct"]
    assert not isinstance(out["gateway"], Exception), (
        f"{backend}: the task flow through the gateway failed: {out['gateway']}\n"
        f"    (directly: statuses {want_statuses}, result {short(want, 300)})"
    )
    statuses, got = out["gateway"]
    assert want_statuses[-1] == "completed", want_statuses
    assert statuses[-1] == "completed", statuses
    strip = lambda r: {k: v for k, v in normalize(r, backend).items() if k != "_meta"}  # noqa: E731
    assert strip(got) == strip(want), f"\n    gateway: {short(strip(got))}\n    direct : {short(strip(want))}"


# ==========================================================================
# INSPECTOR CLI


@dataclass
class InspectorSetup:
    config: Path
    home: Path
    tools: dict[str, Any]  # server name -> the tools/list run's result (or the run, when it failed)


@pytest.fixture(scope="module")
def inspector_setup(world: World) -> InspectorSetup:
    """The Inspector's config (the gateway and every backend directly) and one tools/list of
    each, run concurrently (each run is a Node process that connects, lists, and exits)."""
    home = world.base / "inspector-home"
    home.mkdir(exist_ok=True)
    servers = dict(world.direct)
    servers["gateway"] = world.gateway_target
    config = inspector_config(world.base / "inspector.json", servers)
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        runs = dict(zip(servers, pool.map(lambda name: inspector(config, name, home, "--method", "tools/list"), servers)))
    return InspectorSetup(config=config, home=home, tools={name: run for name, run in runs.items()})


@pytest.mark.parametrize("backend", BACKENDS)
def test_inspector_tools_list(inspector_setup: InspectorSetup, backend: str) -> None:
    """INSPECTOR: `mcp-inspector --cli --method tools/list` through the gateway (one call) lists
    for this backend exactly the tools the Inspector lists connected to the backend directly.

    Except by design for a shared server-everything: it registers its sampling
    and elicitation tools for a client declaring those capabilities, and its
    one session is the gateway's, which declares them (GATEWAY_DECLARES); the
    Inspector declares only roots, so directly it lacks exactly those tools."""
    gateway_tools = [t["name"] for t in inspector_setup.tools["gateway"].result()["tools"]]
    own = [t["name"] for t in inspector_setup.tools[backend].result()["tools"]]
    got = sorted(n for n in gateway_tools if n.startswith(f"{backend}__"))
    if backend in SHARED_EVERYTHINGS:
        assert not set(own) & CAPABILITY_TOOLS, f"the Inspector declared sampling or elicitation: {own}"
        own = own + sorted(CAPABILITY_TOOLS)
    want = sorted(f"{backend}__{n}" for n in own)
    assert got == want, (
        f"[inspector] {backend}: through the gateway {len(got)}, directly {len(want)}; "
        f"missing {sorted(set(want) - set(got))}, extra {sorted(set(got) - set(want))}"
    )


INSPECTOR_CALLS = [
    ("everything", "get-sum", {"a": 19, "b": 23}),
    ("everything_http", "get-structured-content", {"location": "Los Angeles"}),
    ("everything_ps", "echo", {"message": "inspector ✓"}),
    ("time", "convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
    ("memory", "read_graph", {}),
    ("fs", "list_directory", {"path": "<fs_root>"}),
]


@pytest.mark.parametrize("backend,tool,args", INSPECTOR_CALLS, ids=[f"{b}__{t}" for b, t, _ in INSPECTOR_CALLS])
def test_inspector_tools_call(
    world: World, inspector_setup: InspectorSetup, backend: str, tool: str, args: dict[str, Any]
) -> None:
    """INSPECTOR: `--method tools/call` through the gateway gives the direct result (`normalize`d)."""
    config, home = inspector_setup.config, inspector_setup.home
    args = {k: (str(world.fs_root) if v == "<fs_root>" else v) for k, v in args.items()}
    payload = json.dumps(args)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        via = pool.submit(
            inspector, config, "gateway", home, "--method", "tools/call", "--tool-name", f"{backend}__{tool}",
            "--tool-args-json", payload,
        )
        own = pool.submit(
            inspector, config, backend, home, "--method", "tools/call", "--tool-name", tool, "--tool-args-json", payload
        )
        got, want = via.result().result(), own.result().result()
    assert normalize(got, backend) == normalize(want, backend), (
        f"[inspector] tools/call {backend}__{tool} {payload}\n    gateway: {short(got)}\n    direct : {short(want)}"
    )
