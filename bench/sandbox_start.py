#!/usr/bin/env python3
"""What a sandbox adds to a stdio child's start (issue 53; target: < 10 ms).

One gateway, one backend per variant, each `isolation = "per-session"` so
that every client session starts a child of its own. A round opens a
client session, calls the variant's `pid` tool (the child's spawn, its
sandbox, its MCP handshake and the call) and closes the session; rounds
alternate between variants so the machine's drift falls on all alike.
Reported: the median and 90th percentile of that first call per variant,
and each median's difference from the unsandboxed one.

    bench/sandbox_start.py [--sluice target/release/sluice] [--rounds 60]

Needs root on a host with cgroups, Landlock and network namespaces for
every variant to be what its name says (`sluice check` tells).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

VARIANTS = [
    ("none", None),
    ("rlimits", '{ open_files = 1024 }'),
    ("cgroup", '{ memory = "512MiB", processes = 64 }'),
    ("netns", '{ network = "none" }'),
    ("landlock", '{ read = [], write = [] }'),
    (
        "all",
        '{ memory = "512MiB", processes = 64, open_files = 1024, network = "none", read = [], write = [] }',
    ),
]


def post(url, body, session=None):
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
    }
    if session:
        headers["mcp-session-id"] = session
    req = urllib.request.Request(url, json.dumps(body).encode(), headers)
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.headers.get("mcp-session-id"), resp.read()


def delete(url, session):
    req = urllib.request.Request(url, method="DELETE", headers={"mcp-session-id": session})
    try:
        urllib.request.urlopen(req, timeout=10).read()
    except urllib.error.HTTPError:
        pass


def first_call(url, variant):
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    }
    session, _ = post(url, init)
    post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": f"{variant}__pid", "arguments": {}},
    }
    start = time.perf_counter()
    _, body = post(url, call, session)
    took = time.perf_counter() - start
    if b'"pid"' not in body:
        sys.exit(f"{variant}: unexpected answer {body[:300]!r}")
    delete(url, session)
    return took


def main():
    ap = argparse.ArgumentParser()
    default = os.path.join(ROOT, "target", "release", "sluice")
    if not os.path.exists(default):
        default = os.path.join(ROOT, "target", "debug", "sluice")
    ap.add_argument("--sluice", default=default)
    ap.add_argument("--escape", default=None, help="examples/escape_backend binary")
    ap.add_argument("--rounds", type=int, default=60)
    args = ap.parse_args()
    escape = args.escape or os.path.join(os.path.dirname(args.sluice), "examples", "escape_backend")
    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "sluice.toml")
        with open(config, "w") as f:
            for name, sandbox in VARIANTS:
                f.write(f'[backends.{name}]\ncommand = "{escape}"\nisolation = "per-session"\n')
                if sandbox:
                    f.write(f"sandbox = {sandbox}\n")
        check = subprocess.run([args.sluice, "check", "--config", config], capture_output=True, text=True)
        if check.returncode != 0:
            sys.exit(check.stdout + check.stderr)
        host = check.stdout.split("sandbox (this host):", 1)[1]
        gw = subprocess.Popen(
            [args.sluice, "serve", "--config", config, "--listen", "127.0.0.1:0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            line = gw.stdout.readline().strip()
            url = "http://" + line.removeprefix("sluice listening on ") + "/mcp"
            for name, _ in VARIANTS:  # warm: page cache, first spawn
                first_call(url, name)
            times = {name: [] for name, _ in VARIANTS}
            for _ in range(args.rounds):
                for name, _ in VARIANTS:
                    times[name].append(first_call(url, name))
        finally:
            gw.terminate()
            gw.wait(timeout=20)
    base = statistics.median(times["none"])
    print(f"sluice {args.sluice}; {args.rounds} rounds; kernel {os.uname().release}")
    print("host:" + host.rstrip())
    print()
    print("| variant | median first call (ms) | p90 (ms) | added to the median (ms) |")
    print("|---|---|---|---|")
    for name, _ in VARIANTS:
        t = sorted(times[name])
        med = statistics.median(t)
        p90 = t[int(len(t) * 0.9) - 1]
        print(f"| {name} | {med * 1e3:.2f} | {p90 * 1e3:.2f} | {(med - base) * 1e3:+.2f} |")


if __name__ == "__main__":
    main()
