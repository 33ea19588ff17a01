"""Issue 8: a single gateway with sealed session ids, restarted under real
clients that never re-initialize (the official Python SDK in legacy mode,
the official TypeScript SDK).

Each client connects through balancer.py (standing for whatever sits in
front of the gateway, so that the restarted gateway's new port is the
same URL to the client), calls a shared stdio backend and a per-session
HTTP backend, and keeps calling while the gateway is stopped with SIGTERM
and started again, then SIGKILLed and started again: every call succeeds,
the client sends one `initialize` in all, and the restarted gateway counts
the session as resumed.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import anyio
import pytest

from balancer import Balancer
from harness import start_gateway, stop_gateway, toml_str
from real_clients import Host, Target, driver

pytestmark = pytest.mark.anyio

TEST_TIMEOUT_S = 90


def text_of(result: dict) -> str:
    return "".join(c.get("text", "") for c in result.get("content", []))


@pytest.mark.parametrize("kind", ["py-legacy", "ts"])
async def test_a_client_keeps_its_session_across_restarts(
    sluice_bin: Path, tmp_path: Path, stateful_url: str, kind: str
) -> None:
    key = subprocess.run([str(sluice_bin), "keygen"], check=True, capture_output=True, text=True).stdout.strip()
    config = f"""
[server]
session_ids = "sealed"

[backends.demo]
transport = "stdio"
command = {toml_str(str(sluice_bin))}
args = ["demo-server"]

[backends.mine]
transport = "http"
url = {toml_str(stateful_url)}
isolation = "per-session"
"""
    starts = iter(range(3))

    def start():
        workdir = tmp_path / f"run{next(starts)}"
        workdir.mkdir()
        gw = start_gateway(sluice_bin, workdir, config, env={"SLUICE_SESSION_KEY": key})
        gw.wait_ready()
        return gw

    gw = start()
    balancer = Balancer([gw.base_url])
    host = Host(declare=())
    try:
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with driver(kind, Target(url=balancer.url + "/mcp"), host, direct=False) as c:

                async def works(when: str) -> None:
                    r = await c.request("tools/call", {"name": "demo__echo", "arguments": {"text": when}})
                    assert text_of(r) == when, r
                    r = await c.request("tools/call", {"name": "mine__counter", "arguments": {}})
                    assert text_of(r).isdigit(), r

                await works("before")
                for how in (signal.SIGTERM, signal.SIGKILL):
                    if how == signal.SIGTERM:
                        assert not stop_gateway(gw)
                    else:
                        os.kill(gw.pid, signal.SIGKILL)
                        gw.proc.wait(timeout=10)
                    balancer.remove(gw.base_url)
                    gw = start()
                    balancer.add(gw.base_url)
                    await works(f"after {how.name}")
                    resumed = gw.metrics().total("sluice_client_sessions_resumed_total", cause="restart")
                    assert resumed == 1, f"after {how.name}: resumed {resumed}"
    finally:
        balancer.close()
        if gw.proc.poll() is None:
            assert not stop_gateway(gw)
    initializes = [u for u, body in balancer.log if '"method":"initialize"' in body.replace(" ", "")]
    assert len(initializes) == 1, f"the client initialized {len(initializes)} times"
