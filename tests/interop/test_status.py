"""GET /status (issue 12, part 2) in a real browser: headless Chromium
(Debian's `chromium`, installed by scripts/test) loads the page of a gateway
with one backend up and one down; the test reads the rendered DOM and saves
a screenshot under target/test-output/. The page must name both backends
and their states, count the client sessions, and carry no session id or
token; with `[metrics] token_env` it needs that token, like /metrics.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import httpx

from harness import REPO_ROOT, demo_backend

OUTPUT = REPO_ROOT / "target" / "test-output"
TOKEN = "status-page-token"


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "chromium not found (Debian's chromium package; scripts/test installs it)"
    return found


def browse(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """One headless Chromium run (its profile in a throwaway directory)."""
    profile = OUTPUT / f"chromium-profile-{os.getpid()}"
    try:
        return subprocess.run(
            [
                chromium(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                f"--user-data-dir={profile}",
                *args,
                url,
            ],
            capture_output=True,
            text=True,
            timeout=90,
            stdin=subprocess.DEVNULL,
        )
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def initialize(base_url: str) -> str:
    resp = httpx.post(
        base_url + "/mcp",
        headers={"content-type": "application/json", "accept": "application/json, text/event-stream"},
        content=json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
            }
        ),
        timeout=10,
    )
    assert resp.status_code == 200, resp.text
    return resp.headers["mcp-session-id"]


def test_status_page_in_a_browser(sluice_bin: Path, gateway_factory) -> None:
    gw = gateway_factory(
        demo_backend(sluice_bin)
        + """
[backends.gone]
transport = "http"
url = "http://user:secret-password@127.0.0.1:9/mcp"
""",
        wait_ready=False,
    )
    sessions = [initialize(gw.base_url) for _ in range(3)]
    status = gw.base_url + "/status"
    deadline = time.monotonic() + 30
    while "down: unreachable" not in (page := httpx.get(status, timeout=10).text):
        assert time.monotonic() < deadline, page
        time.sleep(0.2)

    dom = browse(status, "--dump-dom")
    assert dom.returncode == 0, dom.stderr
    text = dom.stdout
    assert "<h2>Backends</h2>" in text, text
    assert ">demo<" in text and ">gone<" in text, text
    assert 'class="up">up<' in text, text
    assert 'class="down">down: unreachable<' in text, text
    assert "unreachable at " in text, text
    # Three sessions live: the client-sessions table starts with them, and
    # the default namespace holds all three.
    assert "<tr><td>3</td>" in text, text
    assert "<tr><td>default</td><td>/mcp</td><td>3</td><td>3</td></tr>" in text, text
    assert "<svg" in text and "polyline" in text, text
    for secret in [*sessions, "secret-password", "user:"]:
        assert secret not in text, f"{secret!r} is on the page"

    OUTPUT.mkdir(parents=True, exist_ok=True)
    shot = OUTPUT / "status.png"
    shot.unlink(missing_ok=True)
    run = browse(status, "--hide-scrollbars", "--window-size=1100,720", f"--screenshot={shot}")
    assert run.returncode == 0, run.stderr
    assert shot.exists() and shot.stat().st_size > 10_000, run.stderr


def test_status_page_needs_the_metrics_token(sluice_bin: Path, gateway_factory, monkeypatch) -> None:
    monkeypatch.setenv("STATUS_TOKEN", TOKEN)
    gw = gateway_factory(f'[metrics]\ntoken_env = "STATUS_TOKEN"\n{demo_backend(sluice_bin)}')
    status = gw.base_url + "/status"
    assert httpx.get(status, timeout=10).status_code == 401
    assert httpx.get(status, headers={"authorization": "Bearer wrong"}, timeout=10).status_code == 401
    ok = httpx.get(status, headers={"authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert ok.status_code == 200 and ok.headers["content-type"].startswith("text/html"), ok.text
    assert TOKEN not in ok.text
