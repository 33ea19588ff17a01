"""pytest fixtures for sluice's interop tests (the helpers live in harness.py).

* `sluice_bin`: $SLUICE_BIN, or `cargo build` once per run and target/debug/sluice.
* `gateway_factory(config_toml_or_None, wait_ready=True, **kw)`: starts
  `sluice serve --listen 127.0.0.1:0 [--config tmp/sluice.toml]`, waits
  (bounded) for the line `sluice listening on 127.0.0.1:PORT`, then (unless
  wait_ready=False) for GET /readyz to answer 200 (every backend healthy; the
  listening line comes before backends finish starting), and returns a `harness.Gateway`
  (base_url, mcp_url, ns_url(), metrics()). At teardown every gateway it
  started gets SIGTERM by PID, must exit 0 within a bound, and must leave
  none of its child processes behind.
* `demo_gateway`: a gateway with no config (the built-in demo backend).
* `everything_js`: path of server-everything's entry point (from `npm ci`).
* `everything_http`: server-everything in streamableHttp mode on 127.0.0.1
  (via loopback-preload.cjs), a reference peer outside the gateway.
* `stateful_url`: examples/stateful_backend.rs (per-session counter, an `ask`
  tool that samples the client) on 127.0.0.1.

Async tests run on anyio's pytest plugin (anyio ships with the MCP SDK),
asyncio backend.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import (
    REPO_ROOT,
    Gateway,
    GatewayFactory,
    NodePeer,
    locate_everything_js,
    locate_sluice_bin,
    start_gateway,
    start_node_http_peer,
    stop_gateway,
    stop_node_peer,
)


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def sluice_bin() -> Path:
    return locate_sluice_bin()


@pytest.fixture
def gateway_factory(sluice_bin: Path, tmp_path: Path) -> Iterator[GatewayFactory]:
    started: list[Gateway] = []

    def factory(config: str | None = None, *, wait_ready: bool = True, **kw) -> Gateway:
        workdir = tmp_path / f"gw{len(started) + 1}"
        workdir.mkdir()
        gw = start_gateway(sluice_bin, workdir, config, **kw)
        started.append(gw)
        if wait_ready:
            gw.wait_ready()
        return gw

    yield factory

    problems: list[str] = []
    for gw in started:
        for problem in stop_gateway(gw):
            problems.append(f"{problem}\n--- sluice stderr (tail) ---\n{gw.stderr_tail()}")
    if problems:
        pytest.fail("gateway teardown:\n" + "\n".join(problems), pytrace=False)


@pytest.fixture
def demo_gateway(gateway_factory: GatewayFactory) -> Gateway:
    """`sluice serve` with no --config: the built-in demo backend."""
    return gateway_factory(None)


@pytest.fixture(scope="session")
def everything_js() -> Path:
    return locate_everything_js()


@pytest.fixture
def everything_http(everything_js: Path, tmp_path: Path) -> Iterator[NodePeer]:
    """server-everything in streamableHttp mode on 127.0.0.1 (a reference peer, no gateway)."""
    peer = start_node_http_peer(everything_js, ["streamableHttp"], tmp_path)
    yield peer
    stop_node_peer(peer)


@pytest.fixture
def stateful_url() -> Iterator[str]:
    """examples/stateful_backend.rs (its `ask` tool samples the client); exits when our pipe closes."""
    binary = Path(os.environ.get("CARGO_TARGET_DIR", REPO_ROOT / "target")) / "debug" / "examples" / "stateful_backend"
    if not binary.exists():
        subprocess.run(["cargo", "build", "--example", "stateful_backend"], cwd=REPO_ROOT, check=True)
    proc = subprocess.Popen(
        [str(binary), "--listen", "127.0.0.1:0", "--max-lifetime", "300"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "FIXTURE_LOG": "off"},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    prefix = "stateful_backend listening on "
    assert line.startswith(prefix), line
    yield f"http://{line[len(prefix):]}/mcp"
    assert proc.stdin is not None
    proc.stdin.close()
    proc.terminate()
    proc.wait(timeout=10)
