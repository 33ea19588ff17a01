"""server-everything over HTTP as a real third-party backend of sluice.

Streamable HTTP (`streamableHttp` mode) in shared and per-session isolation,
and the deprecated HTTP+SSE transport (`sse` mode). Every peer binds
127.0.0.1 through loopback-preload.cjs. The gateway's own backend-session
metrics show that sessions do not accumulate.
"""

from __future__ import annotations

from typing import Iterator

import anyio
import pytest
from mcp import Client

from harness import NodePeer, start_node_http_peer, stop_node_peer, toml_str

pytestmark = pytest.mark.anyio

TEST_TIMEOUT_S = 90
CYCLES = 6


def client(url: str, **kw) -> Client:
    return Client(url, mode="legacy", cache=None, read_timeout_seconds=30, **kw)


def http_backend(url: str, transport: str, isolation: str) -> str:
    return (
        f"[backends.ev]\ntransport = {toml_str(transport)}\nurl = {toml_str(url)}\n"
        f"isolation = {toml_str(isolation)}\nidle_ttl = \"2s\"\n"
    )


@pytest.fixture
def everything_sse(everything_js, tmp_path) -> Iterator[NodePeer]:
    peer = start_node_http_peer(everything_js, ["sse"], tmp_path)
    yield peer
    stop_node_peer(peer)


async def one_cycle(url: str, n: int) -> None:
    progress: list[float] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append(p)

    async with client(url) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert "ev__echo" in names, names
        r = await c.call_tool("ev__echo", {"message": f"cycle {n}"})
        assert [b.text for b in r.content] == [f"Echo: cycle {n}"]
        r = await c.call_tool(
            "ev__trigger-long-running-operation", {"duration": 0.2, "steps": 2}, progress_callback=on_progress
        )
        assert not r.is_error, r
        assert progress == [1, 2], progress


@pytest.mark.parametrize("isolation", ["shared", "per-session"])
async def test_streamable_http_backend(gateway_factory, everything_http: NodePeer, isolation: str) -> None:
    gw = gateway_factory(http_backend(everything_http.mcp_url, "http", isolation))
    with anyio.fail_after(TEST_TIMEOUT_S):
        for n in range(CYCLES):
            await one_cycle(gw.mcp_url, n)
            m = gw.metrics()
            live = m.total("sluice_backend_sessions_live", backend="ev")
            if isolation == "shared":
                assert live == 1, live
            else:
                # The SDK DELETEs its session on exit: its backend session ends with it.
                assert live <= m.total("sluice_client_sessions_live"), (live, m.samples)
    m = gw.metrics()
    opened = m.total("sluice_backend_sessions_opened_total", backend="ev")
    if isolation == "shared":
        assert opened == 1, "one backend session for every client and every list"
    else:
        # The health probe, then one per client session that called a tool.
        assert opened == CYCLES + 1, opened
        assert m.total("sluice_backend_sessions_closed_total", backend="ev", reason="client_closed") == CYCLES


async def test_http_sse_backend(gateway_factory, everything_sse: NodePeer) -> None:
    url = f"http://127.0.0.1:{everything_sse.port}/sse"
    gw = gateway_factory(http_backend(url, "sse", "shared"))
    with anyio.fail_after(TEST_TIMEOUT_S):
        for n in range(2):
            await one_cycle(gw.mcp_url, n)
    assert gw.metrics().total("sluice_backend_sessions_opened_total", backend="ev") == 1
