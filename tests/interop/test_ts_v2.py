"""The official TypeScript SDK v2 (`@modelcontextprotocol/client` and
`@modelcontextprotocol/server` 2.x, package.json) with sluice, as a client in
both eras and as a backend in both of its serving modes.

| part | what | era |
|---|---|---|
| client `ts2-legacy` | ts2_client.mjs, default `versionNegotiation` (`legacy`) | 2025-11-25 session |
| client `ts2-2026` | ts2_client.mjs, `versionNegotiation: {mode: "auto"}` | 2026-07-28 |
| backend `ts2` `modern` | ts2_server.mjs: `createMcpHandler(factory, {legacy: "reject"})` | 2026-07-28 only |
| backend `ts2` `dual` | ts2_server.mjs: `createMcpHandler(factory, {legacy: "stateless"})` (the SDK's default) | 2026-07-28, and 2025 served statelessly (a fresh server per request, no sessions) |

ts2_server.mjs's tools say which era served them (`[modern]`/`[legacy]`):
`echo`, `add` (structured output), and three that ask the client with the
SDK's `inputRequired(...)` builder: `ask_name` (form elicitation),
`ask_sampling`, `ask_roots`.

Clients of the backend, through the gateway: the Python SDK (legacy and
2026-07-28), the TypeScript SDK v1 (legacy), the v2 client in both eras
(real_clients.py). What is shown:

* the v2 client lists and calls the gateway's built-in demo backend in both eras;
* both v2 server modes behind the gateway (`transport = "http"`, probed with
  `server/discover`): every client lists exactly the server's tools and calls
  them; the served era is the documented one (docs/architecture.md: the
  gateway uses a 2026-07-28 backend statelessly, and gives a legacy client of
  a dual-era backend a legacy session of its own);
* the tools' questions: a 2026-07-28-only v2 server's `input_required` reaches
  legacy clients through the gateway's bridge (server-to-client requests) and
  2026-07-28 clients as the result itself; each client's own callback answers.
  A legacy client of the *dual* server is served by the SDK's stateless
  legacy leg, which cannot ask anyone: its tools fail for that client exactly
  as they do directly (by design, docs/clients.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from harness import GatewayFactory, LinePeer, demo_backend, start_ts2_server, stop_line_peer, toml_str
from real_clients import ALL_KINDS, LEGACY_KINDS, Events, Host, Target, call_tool, driver, only, texts

pytestmark = pytest.mark.anyio

TEST_TIMEOUT_S = 90
MODERN = "2026-07-28"
ROOT = {"uri": "file:///srv/interop-root", "name": "interop-root"}
TS2_TOOLS = {"echo", "add", "ask_name", "ask_sampling", "ask_roots"}
DEMO_TOOLS = {"demo__echo", "demo__add", "demo__sleep_ms", "demo__counter"}


def host(kind: str) -> Host:
    return Host(
        sampling_text=f"SAMPLED-BY-{kind}-93d0",
        elicitation_content={"name": f"Ada {kind}"},
        roots=[ROOT],
        declare=("sampling", "elicitation", "elicitation_url", "roots"),
    )


def check_era(kind: str, c: Any) -> None:
    """The client's own idea of its era through the gateway."""
    if kind in LEGACY_KINDS:
        assert c.protocol_version and c.protocol_version != MODERN, f"[{kind}] {c.protocol_version!r}"
    else:
        assert c.protocol_version == MODERN, f"[{kind}] {c.protocol_version!r}"
    if kind.startswith("ts2-"):
        assert c.era == ("legacy" if kind in LEGACY_KINDS else "modern"), f"[{kind}] era {c.era!r}"


# ==========================================================================
# the v2 client, both eras, against the built-in demo backend


@pytest.mark.parametrize("kind", ["ts2-legacy", "ts2-2026"])
async def test_ts2_client_lists_and_calls_demo(kind: str, gateway_factory: GatewayFactory, sluice_bin: Path) -> None:
    """The v2 client through the gateway (legacy: `initialize`, 2025-11-25; auto: `server/discover`,
    then 2026-07-28 per request): tools/list is exactly the demo backend's four tools, prefixed;
    demo__echo returns its text and demo__add its sum, as text and structuredContent."""
    gw = gateway_factory(demo_backend(sluice_bin))
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with driver(kind, Target(url=gw.mcp_url), Host(declare=()), direct=False) as c:
            listed = await c.request("tools/list")
            echoed = await call_tool(c, "demo__echo", {"text": f"through sluice ✓ {kind}"})
            added = await call_tool(c, "demo__add", {"a": 19, "b": 23})
            check_era(kind, c)
    assert c.server_capabilities.get("tools") is not None, c.server_capabilities
    assert {t["name"] for t in listed["tools"]} == DEMO_TOOLS, listed
    add = next(t for t in listed["tools"] if t["name"] == "demo__add")
    assert set(add["inputSchema"]["properties"]) == {"a", "b"}, add
    assert texts(echoed) == [f"through sluice ✓ {kind}"] and not echoed.get("isError"), echoed
    assert texts(added) == ["42"] and added.get("structuredContent") == {"sum": 42}, added


# ==========================================================================
# the v2 server, both modes, behind the gateway


@pytest.fixture(params=["modern", "dual"])
def ts2_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, LinePeer]]:
    """(mode, ts2_server.mjs in that mode on 127.0.0.1); it exits when our pipe closes."""
    peer = start_ts2_server(request.param, tmp_path)
    yield request.param, peer
    stop_line_peer(peer)


def ts2_backend(url: str) -> str:
    return f'[backends.ts2]\ntransport = "http"\nurl = {toml_str(url)}\n'


def served_era(mode: str, kind: str) -> str:
    """The era a call of `kind` is served in by the v2 server in `mode`, through the gateway."""
    if mode == "dual" and kind in LEGACY_KINDS:
        return "legacy"  # the legacy client's own legacy session (docs/architecture.md)
    return "modern"


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_ts2_server_lists_and_calls(
    kind: str, ts2_server: tuple[str, LinePeer], gateway_factory: GatewayFactory
) -> None:
    """Through the gateway, the client lists exactly the v2 server's tools (`ts2__` + each name,
    with the input schemas the server lists to a 2026-07-28 client directly), and ts2__echo and
    ts2__add answer in the era `served_era` says."""
    mode, server = ts2_server
    gw = gateway_factory(ts2_backend(server.mcp_url))
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with driver("ts2-2026", Target(url=server.mcp_url), Host(declare=()), direct=True) as d:
            own = {t["name"]: t["inputSchema"] for t in (await d.request("tools/list"))["tools"]}
        async with driver(kind, Target(url=gw.mcp_url), host(kind), direct=False) as c:
            check_era(kind, c)
            listed = {t["name"]: t["inputSchema"] for t in (await c.request("tools/list"))["tools"]}
            echoed = await call_tool(c, "ts2__echo", {"message": "hi ✓"})
            added = await call_tool(c, "ts2__add", {"a": 2, "b": 3})
    assert set(own) == TS2_TOOLS, own
    assert listed == {f"ts2__{name}": schema for name, schema in own.items()}, f"[{kind}] {mode}: {listed}"
    era = served_era(mode, kind)
    assert texts(echoed) == [f"echo: hi ✓ [{era}]"] and not echoed.get("isError"), f"[{kind}] {mode}: {echoed}"
    assert texts(added) == [f"5 [{era}]"] and added.get("structuredContent") == {"sum": 5}, f"[{kind}] {mode}: {added}"


QUESTION_TOOLS = {
    # tool -> (callback, inputRequests key, the answer's text)
    "ask_name": ("elicitation", "who", "Hello, Ada {kind}! [modern]"),
    "ask_sampling": ("sampling", "llm", "sampled: SAMPLED-BY-{kind}-93d0 [modern]"),
    "ask_roots": ("roots", "roots", "roots: " + ROOT["uri"] + " [modern]"),
}


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_ts2_server_questions(
    kind: str, ts2_server: tuple[str, LinePeer], gateway_factory: GatewayFactory
) -> None:
    """The v2 server's `input_required` questions (form elicitation, sampling, roots), through
    the gateway, each answered by this client's own callback, once, with the server's question;
    the tool's result carries the answer.

    2026-07-28-only server: a legacy client is asked by the gateway's bridge (a server-to-client
    request, relay id `sluice:@:...`); a 2026-07-28 client gets the `input_required` result and
    its SDK hands the callback the server's key. Dual server, legacy client: served by the SDK's
    stateless legacy leg, which cannot ask: each tool fails (isError, no callback runs), and with
    exactly the result the same client gets from the server directly."""
    mode, server = ts2_server
    gw = gateway_factory(ts2_backend(server.mcp_url))
    h = host(kind)
    results: dict[str, dict[str, Any]] = {}
    seen: dict[str, Any] = {}
    direct: dict[str, dict[str, Any]] = {}
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with driver(kind, Target(url=gw.mcp_url), h, direct=False) as c:
            check_era(kind, c)
            await c.events()
            for tool in QUESTION_TOOLS:
                results[tool] = await call_tool(c, f"ts2__{tool}", {})
                seen[tool] = await c.events()
        if served_era(mode, kind) == "legacy":
            async with driver(kind, Target(url=server.mcp_url), h, direct=True) as d:
                for tool in QUESTION_TOOLS:
                    direct[tool] = await call_tool(d, tool, {})

    if served_era(mode, kind) == "legacy":
        for tool, (_, key, _) in QUESTION_TOOLS.items():
            got, want = results[tool], direct[tool]
            assert got.get("isError") and texts(got) == texts(want) and want.get("isError"), (
                f"[{kind}] dual {tool}: through the gateway {json.dumps(got)}\n    directly {json.dumps(want)}"
            )
            assert f"Cannot request input '{key}'" in texts(got)[0], got
            assert seen[tool] == Events(), f"[{kind}] {tool}: a callback ran: {seen[tool]}"
        return

    for tool, (callback, _, want) in QUESTION_TOOLS.items():
        assert texts(results[tool]) == [want.format(kind=kind)], f"[{kind}] {mode} {tool}: {json.dumps(results[tool])}"
        assert len(only(seen[tool], callback)) == 1, f"[{kind}] {tool}: {seen[tool]}"
    (asked,) = seen["ask_name"].elicitation
    assert asked["message"] == "Your name?" and "name" in asked["requestedSchema"]["properties"], asked
    (asked,) = seen["ask_sampling"].sampling
    assert asked["maxTokens"] == 16 and asked["messages"][0]["content"]["text"] == "Capital of France?", asked
    ids = c.callback_request_ids
    if kind in LEGACY_KINDS:
        assert len(set(ids)) == 3 and all(str(i).startswith("sluice:@:") for i in ids), f"[{kind}] {ids}"
    else:
        assert sorted(ids) == sorted(key for _, key, _ in QUESTION_TOOLS.values()), f"[{kind}] {ids}"
