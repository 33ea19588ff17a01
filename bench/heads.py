#!/usr/bin/env python3
"""Memory of connections that each hold an unfinished request head (issue 38
item 2), bounded: N connections each send HEAD bytes of a head that never
ends, and the gateway's RSS is read before, while they are held, and after
they close.

    bench/heads.py --bin target/release/sluice                  # 8,192 x 65,534 B
    bench/heads.py --bin /tmp/sluice-main --head 409600         # the issue's ~400 KB
    SLUICE_HTTP=hyper bench/heads.py --bin target/release/sluice

Prints one JSON document. Raises its own open-file limit (and the
gateway's, which inherits it) to fit N, and sets `max_connections` to N
plus room; the header-read timeout is 10 minutes, so that no head is
closed for taking long. Only loopback; the gateway is stopped by PID.
"""

import argparse
import json
import os
import resource
import selectors
import socket
import sys
import time

import gateway


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def settle(pid, quiet=1.0, limit=30.0):
    """RSS once it has stopped moving (unchanged for `quiet` seconds)."""
    end = time.time() + limit
    last, since = rss_kib(pid), time.time()
    while time.time() < end:
        time.sleep(0.2)
        now = rss_kib(pid)
        if abs(now - last) > 256:
            last, since = now, time.time()
        elif time.time() - since >= quiet:
            return now
    return rss_kib(pid)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--conns", type=int, default=8192)
    ap.add_argument("--head", type=int, default=65534, help="bytes of head each sends, unfinished (65,534: the most held)")
    ap.add_argument("--after", type=float, default=10.0, help="seconds to wait after closing")
    args = ap.parse_args()

    want = args.conns + 64 + 64
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # Both ends live here and in the gateway: each needs N descriptors.
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, want * 2)), hard))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    conns = min(args.conns, soft - 128)

    gw, base = gateway.start(
        args.bin,
        "[server]\n"
        f"max_connections = {conns + 64}\n"
        'header_read_timeout = "10m"\n'
        "[backends.demo]\n"
        'transport = "stdio"\n'
        f'command = "{os.path.abspath(args.bin)}"\n'
        'args = ["demo-server"]\n',
    )
    port = int(base.rsplit(":", 1)[1])
    try:
        before = settle(gw.pid)

        prefix = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: "
        head = prefix + b"a" * (args.head - len(prefix))
        socks = []
        sel = selectors.DefaultSelector()
        for _ in range(conns):
            s = socket.create_connection(("127.0.0.1", port))
            s.setblocking(False)
            socks.append(s)
            sel.register(s, selectors.EVENT_WRITE, [0])
        # Every head written as far as the gateway reads it.
        pending = len(socks)
        refused = 0
        deadline = time.time() + 120
        while pending and time.time() < deadline:
            for key, _ in sel.select(timeout=1.0):
                sent = key.data
                try:
                    n = key.fileobj.send(head[sent[0] : sent[0] + 65536])
                    sent[0] += n
                    done = sent[0] >= len(head)
                except (BrokenPipeError, ConnectionResetError):
                    refused += 1
                    done = True
                except BlockingIOError:
                    done = False
                if done:
                    sel.unregister(key.fileobj)
                    pending -= 1
        # What did not fit: the gateway stopped reading those heads.
        stalled = pending
        for key in list(sel.get_map().values()):
            sel.unregister(key.fileobj)
        held = settle(gw.pid, quiet=2.0)
        answered = {}
        for s in socks:
            try:
                data = s.recv(64)
            except (BlockingIOError, ConnectionResetError):
                continue
            if data:
                status = data.split(b" ")[1].decode(errors="replace") if b" " in data else "?"
                answered[status] = answered.get(status, 0) + 1
        for s in socks:
            s.close()
        closed_at = time.time()
        time.sleep(1.0)
        after_1s = rss_kib(gw.pid)
        time.sleep(max(0.0, args.after - (time.time() - closed_at)))
        after = rss_kib(gw.pid)
        print(
            json.dumps(
                {
                    "bin": args.bin,
                    "engine": os.environ.get("SLUICE_HTTP", "own"),
                    "connections": conns,
                    "head_bytes": args.head,
                    "writes_stalled": stalled,
                    "writes_refused": refused,
                    "answered": answered,
                    "rss_before_mib": round(before / 1024, 1),
                    "rss_held_mib": round(held / 1024, 1),
                    "kib_per_connection": round((held - before) / conns, 1),
                    "rss_after_close_1s_mib": round(after_1s / 1024, 1),
                    f"rss_after_close_{args.after:g}s_mib": round(after / 1024, 1),
                    "kept_after_close_mib": round((after - before) / 1024, 1),
                },
                indent=1,
            )
        )
    finally:
        gateway.stop(gw)


if __name__ == "__main__":
    sys.exit(main())
