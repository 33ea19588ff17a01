"""The interop matrix: the official Python SDK client in each of its
protocol modes against sluice, fronting a legacy stdio backend (the demo
server) and a 2026-07-28 HTTP backend (the conformance fixture, dual-era,
which sluice uses statelessly). Each cell: handshake (initialize or
discover), list, call, and a call that reports progress.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Iterator

import anyio
import pytest
from mcp import Client

from harness import REPO_ROOT, toml_str

pytestmark = pytest.mark.anyio

TEST_TIMEOUT_S = 60
MODES = ["legacy", "2026-07-28", "auto"]


@pytest.fixture(scope="module")
def fixture_url() -> Iterator[str]:
    """The conformance fixture on 127.0.0.1; it exits when our pipe closes."""
    binary = Path(os.environ.get("CARGO_TARGET_DIR", REPO_ROOT / "target")) / "debug" / "examples" / "conformance_fixture"
    if not binary.exists():
        subprocess.run(["cargo", "build", "--example", "conformance_fixture"], cwd=REPO_ROOT, check=True)
    proc = subprocess.Popen(
        [str(binary), "--listen", "127.0.0.1:0", "--max-lifetime", "300"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline().strip()
    prefix = "conformance_fixture listening on "
    assert line.startswith(prefix), line
    yield f"http://{line[len(prefix):]}/mcp"
    proc.stdin.close()
    proc.terminate()
    proc.wait(timeout=10)


def backends(kind: str, fixture: str | None) -> str:
    if kind == "legacy-stdio":
        return ""  # no config: the built-in demo backend
    return f'[backends.modern]\ntransport = "http"\nurl = {toml_str(fixture)}\n'


CALLS = {
    # backend -> (simple tool, args, expected text, progress tool, args)
    "legacy-stdio": ("demo__echo", {"text": "cell"}, "cell", "demo__sleep_ms", {"ms": 30}),
    "modern-http": (
        "modern__test_simple_text",
        {},
        "This is a simple text response for testing.",
        "modern__test_tool_with_progress",
        {},
    ),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", ["legacy-stdio", "modern-http"])
async def test_python_sdk_cell(gateway_factory, fixture_url, mode: str, backend: str) -> None:
    config = backends(backend, fixture_url)
    gw = gateway_factory(config or None)
    tool, args, expected, slow_tool, slow_args = CALLS[backend]
    progress: list[float] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append(p)

    with anyio.fail_after(TEST_TIMEOUT_S):
        async with Client(gw.mcp_url, mode=mode, cache=None, read_timeout_seconds=30) as client:
            if mode == "legacy":
                assert client.protocol_version == "2025-11-25"
            else:
                # Both "2026-07-28" and "auto" end up stateless: sluice serves it.
                assert client.protocol_version == "2026-07-28"
            names = {t.name for t in (await client.list_tools()).tools}
            assert tool in names and slow_tool in names, names
            r = await client.call_tool(tool, args)
            assert [b.text for b in r.content] == [expected]
            r = await client.call_tool(slow_tool, slow_args, progress_callback=on_progress)
            assert not r.is_error, r
    assert len(progress) >= 3, progress
    assert progress == sorted(progress), progress
    m = gw.metrics()
    if mode == "legacy":
        assert m.total("sluice_client_sessions_opened_total") == 1
    else:
        assert m.total("sluice_client_sessions_opened_total") == 0, "modern clients have no session"
