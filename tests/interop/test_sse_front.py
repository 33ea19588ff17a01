"""The deprecated HTTP+SSE transport (2024-11-05) served by sluice (issue 41, part 2).

Two official clients that speak it, against a real `sluice serve`:

* the Python SDK's `mcp.client.sse.sse_client`, under `mcp.Client`;
* the TypeScript SDK v1's `SSEClientTransport`
  (`@modelcontextprotocol/sdk/client/sse.js`), through ts_client.mjs.

Each connects to `GET /sse` (the default namespace: server-everything over
stdio) and to `GET /ns/other/sse` (a namespace that also has the demo
backend), lists tools, calls one, and answers server-everything's
sampling request, which reaches the client as a request on its one stream
and whose answer the client POSTs back to the message endpoint. Closing
the client drops its stream: its session and its per-session backend
session end.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client
from mcp.client.sse import sse_client

from harness import Gateway, GatewayFactory, demo_backend, everything_stdio_backend
from real_clients import Host, Target, TsDriver
from test_python_sdk import FakeSampler

pytestmark = pytest.mark.anyio

TEST_TIMEOUT_S = 60
MARKER = "SAMPLED-OVER-SSE-5d1e"
# Each path's namespace, and whether the demo backend is in it.
PATHS = {"/sse": False, "/ns/other/sse": True}


def sse_config(everything_js: Path, sluice_bin: Path) -> str:
    return (
        everything_stdio_backend(everything_js, isolation='"per-session"')
        + demo_backend(sluice_bin)
        + '[namespaces.default]\nbackends = ["everything"]\n'
        + '[namespaces.other]\nbackends = ["everything", "demo"]\n'
    )


@pytest.fixture
def sse_gateway(gateway_factory: GatewayFactory, everything_js: Path, sluice_bin: Path) -> Gateway:
    return gateway_factory(sse_config(everything_js, sluice_bin))


class TsSseDriver(TsDriver):
    """The TypeScript SDK v1 client over SSEClientTransport."""

    kind = "ts-sse"

    def _connect_extra(self) -> dict[str, Any]:
        return {"transport": "sse"}


def result_texts(result: dict[str, Any]) -> list[str]:
    return [b["text"] for b in result.get("content", []) if b.get("type") == "text"]


async def sessions_end(gw: Gateway) -> None:
    """The client's stream dropped: its session and its backend session end (bounded)."""
    deadline = time.monotonic() + 20
    while True:
        m = gw.metrics()
        live = m.value("sluice_client_sessions_live")
        backend = m.total("sluice_backend_sessions_live", backend="everything")
        if live == 0 and backend == 0:
            break
        assert time.monotonic() < deadline, (live, backend)
        await anyio.sleep(0.1)
    closed = m.value("sluice_client_sessions_closed_total", reason="delete")
    assert closed == 1, m.text


@pytest.mark.parametrize("path", PATHS)
async def test_python_sdk_sse_client(sse_gateway: Gateway, path: str) -> None:
    sampler = FakeSampler(MARKER)
    url = sse_gateway.base_url + path
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with Client(sse_client(url), mode="legacy", cache=None, sampling_callback=sampler) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert "everything__echo" in names, names
            assert ("demo__echo" in names) == PATHS[path], names
            echoed = await client.call_tool("everything__echo", {"message": "over sse"})
            assert [b.text for b in echoed.content if isinstance(b, types.TextContent)] == ["Echo: over sse"]
            sampled = await client.call_tool(
                "everything__trigger-sampling-request", {"prompt": "say the marker", "maxTokens": 16}
            )
            assert not sampled.is_error, sampled
            assert any(isinstance(b, types.TextContent) and MARKER in b.text for b in sampled.content), sampled
            assert sse_gateway.metrics().value("sluice_client_sessions_live") == 1
        assert len(sampler.requests) == 1, sampler.requests
        assert sampler.requests[0].max_tokens == 16
        await sessions_end(sse_gateway)


@pytest.mark.parametrize("path", PATHS)
async def test_typescript_sdk_sse_client_transport(sse_gateway: Gateway, path: str) -> None:
    host = Host(sampling_text=MARKER, declare=("sampling",))
    target = Target(url=sse_gateway.base_url + path)
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with TsSseDriver(target, host) as client:
            names = {t["name"] for t in (await client.request("tools/list"))["tools"]}
            assert "everything__echo" in names, names
            assert ("demo__echo" in names) == PATHS[path], names
            echoed = await client.request("tools/call", {"name": "everything__echo", "arguments": {"message": "ts"}})
            assert result_texts(echoed) == ["Echo: ts"]
            sampled = await client.request(
                "tools/call",
                {"name": "everything__trigger-sampling-request", "arguments": {"prompt": "p", "maxTokens": 8}},
            )
            assert not sampled.get("isError"), sampled
            assert any(MARKER in t for t in result_texts(sampled)), sampled
            events = await client.events()
            assert len(events.sampling) == 1, events.sampling
            assert sse_gateway.metrics().value("sluice_client_sessions_live") == 1
        await sessions_end(sse_gateway)
