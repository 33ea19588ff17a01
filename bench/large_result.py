#!/usr/bin/env python3
"""A large tool result through the gateway: its memory (issue 38, item 3).

    bench/large_result.py --sluice BIN --backend FAULTY_BACKEND [--mb 48] [--mode huge-line|huge-sse|stdio]
                          [--label NAME] [--json OUT]

Starts the fault backend (examples/faulty_backend.rs, `huge-line`: `fault`
answers a text of MB MiB as `application/json` with its length; `huge-sse`:
as one event of an SSE response, as the Python SDK's servers answer;
`stdio`: as one line of a stdio child, which the gateway starts itself) and
the gateway in front of it, warms a session, then reads the gateway's memory
from /proc/PID/status: RSS before, the peak (VmHWM, reset just before)
while one result passes, RSS 20 s later; then 8 results at once, their
peak and whether each came whole. Bounded: about 30 s per binary. Every
process it starts is stopped by its PID when it ends.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

MIB = 1 << 20


def status(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body, session=None, timeout=120):
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
    }
    if session:
        headers["mcp-session-id"] = session
    req = urllib.request.Request(url, json.dumps(body).encode(), headers)
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.headers.get("mcp-session-id"), resp.read()


def call(url, session, id, name, args):
    msg = {"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": args}}
    return post(url, msg, session)[1]


def run(sluice, backend, mb, mode):
    procs = []
    try:
        port = free_port()
        conf = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
        if mode == "stdio":
            args = ", ".join(json.dumps(a) for a in [
                "--transport", "stdio", "--mode", "huge-line", "--mb", str(mb), "--max-lifetime", "300"])
            conf.write(f'[backends.big]\ncommand = {json.dumps(backend)}\nargs = [{args}]\n')
        else:
            b = subprocess.Popen(
                [backend, "--transport", "http", "--listen", "127.0.0.1:0",
                 "--mode", mode, "--mb", str(mb), "--max-lifetime", "300"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**os.environ, "FIXTURE_LOG": "off"})
            procs.append(b)
            addr = b.stdout.readline().decode().strip().rsplit(" ", 1)[-1]
            conf.write(f'[backends.big]\ntransport = "http"\nurl = "http://{addr}/mcp"\n')
        conf.close()
        g = subprocess.Popen([sluice, "serve", "--config", conf.name, "--listen", f"127.0.0.1:{port}"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(g)
        base = f"http://127.0.0.1:{port}"
        limit = time.time() + 30
        while True:
            try:
                urllib.request.urlopen(base + "/readyz", timeout=2).read()
                break
            except Exception:
                if time.time() > limit:
                    raise RuntimeError("gateway not ready in 30 s")
                time.sleep(0.1)
        url = base + "/mcp"
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}}}
        session, _ = post(url, init)
        for i in range(3):
            call(url, session, i + 1, "big__echo", {"text": "hi"})
        pid = g.pid
        before = status(pid, "VmRSS:")
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        body = call(url, session, 10, "big__fault", {})
        m = json.loads(body)
        if "result" not in m:
            raise RuntimeError(f"no result: {m['error']['message'][:200]}")
        whole = len(m["result"]["content"][0]["text"]) == mb * MIB
        peak = status(pid, "VmHWM:")
        time.sleep(20)
        after = status(pid, "VmRSS:")

        # Eight at once.
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        rss8 = status(pid, "VmRSS:")
        outcomes = [None] * 8

        def one(i):
            try:
                b = call(url, session, 100 + i, "big__fault", {})
                m = json.loads(b)
                outcomes[i] = "whole" if "result" in m else m["error"]["message"][:80]
            except Exception as e:  # a cut connection, a timeout
                outcomes[i] = f"failed: {e}"[:80]
        threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(180)
        peak8 = status(pid, "VmHWM:")
        return {
            "payload_bytes": len(body),
            "whole": whole,
            "rss_before": before,
            "peak": peak,
            "peak_rise": peak - before,
            "rss_after_20s": after,
            "after_rise": after - before,
            "eight_rss_before": rss8,
            "eight_peak_rise": peak8 - rss8,
            "eight_outcomes": outcomes,
        }
    finally:
        for p in procs:
            p.kill()
            p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--backend", required=True)
    ap.add_argument("--mb", type=int, default=48)
    ap.add_argument("--mode", default="huge-line", choices=["huge-line", "huge-sse", "stdio"])
    ap.add_argument("--label", default="sluice")
    ap.add_argument("--json")
    a = ap.parse_args()
    r = run(a.sluice, a.backend, a.mb, a.mode)
    r["label"] = a.label
    r["mb"] = a.mb
    r["mode"] = a.mode
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=1)
    m = lambda n: f"{n / MIB:+.0f} MiB"
    whole8 = sum(o == "whole" for o in r["eight_outcomes"])
    print(f"| {a.label} | {a.mode} | {a.mb} MiB | {r['rss_before'] / MIB:.0f} MiB | {m(r['peak_rise'])} "
          f"| {m(r['after_rise'])} | {m(r['eight_peak_rise'])}, {whole8}/8 whole |")
    json.dump(r, sys.stderr, indent=1)


if __name__ == "__main__":
    main()
