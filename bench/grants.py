#!/usr/bin/env python3
"""What each principal's grant costs the gateway (issue 50): N principals,
each with a static token, connect one backend by the authorization code
flow, the way a person does (a browser, oauth_browser.py: the start URL,
oidc-provider's login and consent pages, the callback), and the gateway's
resident memory is read as the grants accumulate.

    .venv/bin/python bench/grants.py [--sluice BIN] [--principals 10000]
                                     [--browsers 4] [--out FILE]

The authorization server and the backend are the interop suite's
(tests/interop/oidc_server.mjs, protected_backend.mjs: run `scripts/test`
once so that tests/interop/node_modules exists). Access tokens are
oidc-provider's JWTs (about 0.9 KB each) with a refresh token each, as a
real server gives. RSS (VmRSS) is read at 5 points after the gateway is
idle; the figure is the least-squares slope, KiB per grant, and the grants
held are checked against `sluice_oauth_grants`. Every process binds
127.0.0.1 and is stopped by its PID. Writes a JSON summary to --out
(default bench/.work/results/grants.json) and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INTEROP = ROOT / "tests" / "interop"
sys.path.insert(0, str(INTEROP))
from oauth_browser import Browser  # noqa: E402 - beside the tests, not a package

LISTENING = re.compile(r"listening on (127\.0\.0\.1:\d+)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(argv: list[str], *, env: dict[str, str] | None = None, cwd: Path = INTEROP) -> tuple[subprocess.Popen, str]:
    """Starts argv and waits (60 s) for its `... listening on ADDR` line."""
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **(env or {})},
    )
    deadline = time.monotonic() + 60
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        found = LISTENING.search(line)
        if found:
            return proc, found.group(1)
    proc.kill()
    raise SystemExit(f"{argv[:2]} did not say where it listens")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()  # by its own PID
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise SystemExit("no VmRSS")


def get(url: str, token: str | None = None) -> bytes:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.read()


def grants_held(base: str) -> int:
    text = get(base + "/metrics").decode()
    found = re.search(r'^sluice_oauth_grants\{backend="protected"\} (\d+)', text, re.M)
    return int(found.group(1)) if found else 0


def connect(base: str, token: str, login: str) -> None:
    """One person: their start URL from /oauth/connections, then the browser."""
    (conn,) = json.loads(get(base + "/oauth/connections", token))["connections"]
    browser = Browser()
    back = browser.consent(conn["start_url"], login, base + "/oauth/callback")
    status, _, page = browser.request(back)
    if status != 200:
        raise SystemExit(f"{login}: the callback answered {status}: {page[:200]}")


def slope(points: list[tuple[int, int]]) -> float:
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sluice", default=str(ROOT / "target" / "release" / "sluice"))
    ap.add_argument("--principals", type=int, default=10_000)
    ap.add_argument("--browsers", type=int, default=4)
    ap.add_argument("--out", default=str(ROOT / "bench" / ".work" / "results" / "grants.json"))
    a = ap.parse_args()
    n = a.principals
    node = os.environ.get("NODE", "node")
    tokens = {f"p{i}": f"tok-{i:06d}-0123456789" for i in range(n)}
    procs: list[subprocess.Popen] = []
    try:
        auth, auth_addr = start([node, "oidc_server.mjs", "3600", "7200"])
        procs.append(auth)
        backend, backend_addr = start([node, "protected_backend.mjs", f"http://{auth_addr}", "7200"])
        procs.append(backend)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        work = Path(a.out).parent
        work.mkdir(parents=True, exist_ok=True)
        config = work / "grants.toml"
        config.write_text(
            f'[server]\npublic_url = "{base}"\n'
            '[auth]\nbearer_tokens_env = "GW_TOKENS"\n'
            f'[backends.protected]\ntransport = "http"\nurl = "http://{backend_addr}/mcp"\n'
            f'oauth = {{ flow = "authorization_code" }}\nmax_grants = {n}\n'
        )
        # Too long for one environment string: the `_FILE` form, as operators use.
        (work / "tokens").write_text(",".join(f"{k}={v}" for k, v in tokens.items()))
        env = {"GW_TOKENS_FILE": str(work / "tokens"), "SLUICE_LOG": "warn"}
        gw, _ = start([a.sluice, "serve", "--listen", f"127.0.0.1:{port}", "--config", str(config)], env=env, cwd=work)
        procs.append(gw)
        marks = [round(n * k / 4) for k in range(5)]
        points: list[tuple[int, int]] = []
        started = time.monotonic()
        names = list(tokens)
        with ThreadPoolExecutor(a.browsers) as pool:
            done = 0
            for mark in marks:
                list(pool.map(lambda p: connect(base, tokens[p], p), names[done:mark]))
                done = mark
                time.sleep(1)  # the last callbacks' buffers given back before the reading
                points.append((grants_held(base), rss_kib(gw.pid)))
                print(f"grants {points[-1][0]:>6}  rss {points[-1][1]:>8} KiB", file=sys.stderr)
        took = time.monotonic() - started
        per = slope(points)
        summary = {
            "principals": n,
            "points": points,
            "kib_per_grant": per,
            "rss_kib_start": points[0][1],
            "rss_kib_end": points[-1][1],
            "connect_seconds": took,
            "sluice": a.sluice,
        }
        Path(a.out).write_text(json.dumps(summary, indent=2))
        print("| grants held | gateway RSS |\n|---|---|")
        for held, rss in points:
            print(f"| {held:,} | {rss / 1024:,.1f} MiB |")
        print(f"\nSlope: {per:.2f} KiB per grant ({per * 1024:,.0f} bytes); {n:,} flows in {took:,.0f} s.")
        if points[-1][0] != n:
            print(f"only {points[-1][0]} grants held of {n}", file=sys.stderr)
            return 1
        return 0
    finally:
        for p in reversed(procs):
            stop(p)


if __name__ == "__main__":
    sys.exit(main())
