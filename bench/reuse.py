#!/usr/bin/env python3
"""Calls through the gateway to a uvicorn MCP server after idle gaps close
to uvicorn's keep-alive timeout (5 s): counts the calls that failed
(issue 38 item 5). uvicorn closes a connection idle for 5 s; a backend
request sent on it just then is reset.

    bench/reuse.py --bin target/release/sluice [--workers 16] [--calls 10] [--gap 4.985 5.005]

Needs a Python with the MCP SDK (`mcp`, uvicorn), as `bench/run` installs in
`bench/.work/venv` or `scripts/test` in `.venv`: run with that python. The
backend is `peers/py_one_tool.py --stateless`; each worker opens a client
session and makes its calls one after another, sleeping a gap drawn
uniformly from the range before each. Prints one JSON line.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import gateway

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--gap", type=float, nargs=2, default=[4.985, 5.005])
    args = ap.parse_args()
    lo, hi = args.gap

    srv = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "peers", "py_one_tool.py"), "--stateless"],
        stdout=subprocess.PIPE,
        text=True,
    )
    gw = None
    try:
        backend = "http://" + srv.stdout.readline().strip().split("listening on ")[1] + "/mcp"
        gw, base = gateway.start(
            args.bin, f'[server]\n[backends.py]\ntransport = "http"\nurl = "{backend}"\n'
        )

        def post(msg, session=None):
            headers = {
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
            }
            if session:
                headers["mcp-session-id"] = session
            req = urllib.request.Request(
                base + "/mcp", data=json.dumps(msg).encode(), headers=headers
            )
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    return r.status, r.headers.get("mcp-session-id"), r.read().decode()
            except urllib.error.HTTPError as e:
                return e.code, None, e.read().decode()

        ok, failed, lock = [0], [], threading.Lock()

        def worker():
            init = {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "reuse", "version": "1"},
            }
            _, session, _ = post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
            post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
            for i in range(args.calls):
                time.sleep(random.uniform(lo, hi))
                params = {"name": "py__echo", "arguments": {"text": "x"}}
                msg = {"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": params}
                status, _, body = post(msg, session)
                good = status == 200 and '"error"' not in body and '"x"' in body
                with lock:
                    if good:
                        ok[0] += 1
                    else:
                        failed.append(body[:200])

        threads = [threading.Thread(target=worker) for _ in range(args.workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(
            json.dumps(
                {
                    "bin": args.bin,
                    "engine": os.environ.get("SLUICE_HTTP", "own"),
                    "calls": ok[0] + len(failed),
                    "failed": len(failed),
                    "gap_s": [lo, hi],
                    "errors": sorted(set(failed))[:3],
                }
            )
        )
    finally:
        gateway.stop(gw)
        gateway.stop(srv)


if __name__ == "__main__":
    sys.exit(main())
