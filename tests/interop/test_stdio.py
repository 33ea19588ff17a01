"""`sluice stdio` launched by real MCP clients, as a desktop client launches an
`mcpServers` entry: each client spawns `sluice stdio --config FILE` itself and
speaks newline-delimited JSON-RPC on its pipes.

| client | transport | era |
|---|---|---|
| `py-legacy` / `py-2026` | the Python SDK's `mcp.client.stdio` (through `mcp.Client`) | 2025-11-25 session / 2026-07-28 |
| `ts` | TypeScript SDK v1 `StdioClientTransport` (ts_client.mjs) | 2025 session |
| `ts2-legacy` / `ts2-2026` | TypeScript SDK v2 `@modelcontextprotocol/client/stdio` (ts2_client.mjs), default and `versionNegotiation: {mode: "auto"}` | 2025 session / 2026-07-28 |
| Inspector | `mcp-inspector --cli` with a `stdio` server entry | one process per request |

Backends: the built-in demo and server-everything over stdio (per-session).
Each client lists tools, calls one, and has server-everything's sampling,
elicitation and roots requests answered by its own callbacks (a 2025 session
gets each request relayed as a line and its answer posted back; a 2026-07-28
client gets `input_required` and retries). When the client
closes, `sluice stdio` and every process under it are gone (by PID, from
/proc), with no signal from the test.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from harness import _alive, demo_backend, descendants, everything_stdio_backend
from real_clients import Host, Target, call_tool, driver, inspector, inspector_config, texts

pytestmark = pytest.mark.anyio

TEST_TIMEOUT_S = 90
MODERN = "2026-07-28"
KINDS = ["py-legacy", "py-2026", "ts", "ts2-legacy", "ts2-2026"]
LEGACY = {"py-legacy", "ts", "ts2-legacy"}
# How long the processes may take to go once the client has closed.
EXIT_WAIT_S = 15


def stdio_target(sluice_bin: Path, config: Path) -> Target:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/"), "SLUICE_LOG": "info"}
    # CI runs the suite again with SLUICE_HTTP=hyper: the child must see it.
    if "SLUICE_HTTP" in os.environ:
        env["SLUICE_HTTP"] = os.environ["SLUICE_HTTP"]
    return Target(command=str(sluice_bin), args=["stdio", "--config", str(config)], env=env)


@pytest.fixture
def config(sluice_bin: Path, everything_js: Path, tmp_path: Path) -> Path:
    path = tmp_path / "sluice.toml"
    # Per-session: the backend asks this client for its roots (a shared one
    # is given the configured roots instead).
    everything = everything_stdio_backend(everything_js, isolation='"per-session"')
    path.write_text(demo_backend(sluice_bin) + everything)
    return path


def gateway_pids(config: Path) -> list[int]:
    """The `sluice stdio` processes serving `config` (a path unique to this test), by /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"stdio" in argv and str(config).encode() in argv and _alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def process_tree(config: Path) -> list[int]:
    """The one `sluice stdio` of `config` and every process under it."""
    pids = gateway_pids(config)
    assert len(pids) == 1, f"one sluice stdio for {config}, found {pids}"
    return [pids[0], *descendants(pids[0])]


def assert_all_gone(pids: list[int]) -> None:
    deadline = time.monotonic() + EXIT_WAIT_S
    while (alive := [p for p in pids if _alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive, f"still running {EXIT_WAIT_S}s after the client closed: {alive}"


def host(kind: str) -> Host:
    return Host(
        sampling_text=f"SAMPLED-OVER-STDIO-{kind}",
        elicitation_content={"name": f"Ada {kind}"},
        roots=[{"uri": f"file:///srv/stdio-root-{kind}", "name": "stdio-root"}],
        declare=("sampling", "elicitation", "roots"),
    )


@pytest.mark.parametrize("kind", KINDS)
async def test_client_lists_calls_and_is_asked(sluice_bin: Path, config: Path, kind: str) -> None:
    """The client spawns `sluice stdio`: lists, calls, and answers the backend's sampling,
    elicitation and roots requests with its own callbacks; closing it ends the gateway and
    its children."""
    h = host(kind)
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with driver(kind, stdio_target(sluice_bin, config), h, direct=False) as c:
            if kind in LEGACY:
                # The v1 SDK's stdio transport does not report the version it negotiated.
                assert (c.protocol_version or kind == "ts") and c.protocol_version != MODERN, c.protocol_version
            else:
                assert c.protocol_version == MODERN, c.protocol_version
            tools = {t["name"] for t in (await c.request("tools/list"))["tools"]}
            assert {"demo__echo", "demo__add", "everything__trigger-sampling-request"} <= tools, sorted(tools)
            summed = await call_tool(c, "demo__add", {"a": 40, "b": 2})
            assert texts(summed) == ["42"], summed
            await c.events()
            sampled = await call_tool(
                c, "everything__trigger-sampling-request", {"prompt": "say the marker", "maxTokens": 16}
            )
            seen = await c.events()
            elicited = await call_tool(c, "everything__trigger-elicitation-request", {})
            elicited_seen = await c.events()
            roots = await call_tool(c, "everything__get-roots-list", {})
            tree = process_tree(config)
            assert len(tree) >= 3, f"sluice stdio, the demo and server-everything: {tree}"
    assert "error" not in sampled and not sampled.get("isError"), sampled
    assert len(seen.sampling) == 1, seen.sampling
    assert "say the marker" in json.dumps(seen.sampling[0]["messages"]), seen.sampling
    assert h.sampling_text in json.dumps(sampled["content"]), sampled
    assert "error" not in elicited and not elicited.get("isError"), elicited
    assert len(elicited_seen.elicitation) == 1, elicited_seen
    assert any(f"- Name: Ada {kind}" in t for t in texts(elicited)), elicited
    assert h.roots[0]["uri"] in json.dumps(roots), roots
    assert_all_gone(tree)


@pytest.mark.parametrize("kind", ["py-legacy", "ts"])
async def test_backend_logs_reach_the_client(sluice_bin: Path, config: Path, kind: str) -> None:
    """`logging/setLevel` goes to the backend and its log messages come back as lines: the
    client subscribes to a server-everything resource, which it logs at `info`."""
    uri = "sluice://everything/demo://resource/static/document/instructions.md"
    got: list[dict[str, Any]] = []
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with driver(kind, stdio_target(sluice_bin, config), host(kind), direct=False) as c:
            await c.request("logging/setLevel", {"level": "info"})
            await c.request("resources/subscribe", {"uri": uri})
            # Logs come when the backend sends them, not with an answer: polled, bounded.
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                got.extend(p for _, p in (await c.events()).logs)
                if any("Received Subscribe Resource request" in str(p.get("data")) for p in got):
                    break
                await anyio.sleep(0.1)
    assert any("Received Subscribe Resource request" in str(p.get("data")) for p in got), got


def test_inspector_cli_lists_and_calls(sluice_bin: Path, config: Path, tmp_path: Path) -> None:
    """The Inspector CLI with a stdio `mcpServers` entry running `sluice stdio`: one process per
    request, each listed or called and then ended with nothing left behind."""
    home = tmp_path / "inspector-home"
    home.mkdir()
    servers = inspector_config(tmp_path / "inspector.json", {"sluice": stdio_target(sluice_bin, config)})
    listed = inspector(servers, "sluice", home, "--method", "tools/list").result()
    names = {t["name"] for t in listed["tools"]}
    assert {"demo__echo", "everything__echo"} <= names, sorted(names)
    called = inspector(
        servers, "sluice", home, "--method", "tools/call", "--tool-name", "demo__echo",
        "--tool-args-json", json.dumps({"text": "from the inspector"}),
    ).result()
    assert texts(called) == ["from the inspector"], called
    assert_all_gone(gateway_pids(config))


async def test_a_client_killed_leaves_nothing(sluice_bin: Path, config: Path) -> None:
    """A client that dies (its end of the pipes closed by the kernel, no goodbye) still
    ends `sluice stdio` and every backend child."""
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with driver("ts", stdio_target(sluice_bin, config), host("ts"), direct=False) as c:
            await c.request("tools/list")
            tree = process_tree(config)
            assert c._proc is not None
            c._proc.kill()  # the Node client itself, by its own PID
            await c._proc.wait()
    assert_all_gone(tree)
