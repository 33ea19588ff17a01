#!/usr/bin/env python3
"""A flood of request heads whose bodies never come (issue 49 item 2), by
hand: `--sockets` connections from the `--from` addresses, each sending a
complete `POST /mcp` head with `Content-Length: 100000` and nothing more
(`--silent`: nothing at all), re-opened as soon as the gateway lets it go.
Meanwhile, in this process, a fresh client from `--client-from` opens a
connection every second and sends `initialize` at once (`--delay`: that
many seconds after connecting): served is a 200 within 5 s.

    bench/withheld.py --bin target/release/sluice
    bench/withheld.py --bin /tmp/sluice-main                    # before
    SLUICE_HTTP=hyper bench/withheld.py --bin target/release/sluice
    bench/withheld.py --bin BIN --silent --from 127.0.0.1 --client-from 127.0.0.1 --delay 2.5

The flood runs in a process of its own (asyncio), so that the fresh
client's request goes out when it says, not when a busy event loop gets
to it. `max_connections` is 956 (what `ulimit -n 1024` leaves, as in
`bench/flood`). Prints one JSON document: fresh clients served, why the
others were not, flood connects, and the gateway's connection counters.
Only loopback; the gateway is stopped by PID.
"""

import argparse
import asyncio
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import gateway

# IP_BIND_ADDRESS_NO_PORT: the port is chosen at connect, so re-opens from
# one bound address do not run out of ports.
BIND_NO_PORT = 24
INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "withheld", "version": "0"},
        },
    }
)


def post(body, length=None):
    length = len(body) if length is None else length
    return (
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\n"
        f"Content-Length: {length}\r\n\r\n{body}"
    ).encode()


def bound(frm):
    s = socket.socket()
    s.setsockopt(socket.SOL_IP, BIND_NO_PORT, 1)
    s.bind((frm, 0))
    return s


async def hold(frm, port, head, end, connecting, counts):
    """One flood socket: connected, `head` sent, held until the gateway
    lets go, re-opened, until `end`."""
    loop = asyncio.get_running_loop()
    while time.time() < end:
        s = bound(frm)
        s.setblocking(False)
        try:
            async with connecting:
                await asyncio.wait_for(loop.sock_connect(s, ("127.0.0.1", port)), end - time.time())
            counts["connects"] += 1
            if head:
                await loop.sock_sendall(s, head)
            while await asyncio.wait_for(loop.sock_recv(s, 4096), max(0.01, end - time.time())):
                pass
        except (OSError, asyncio.TimeoutError):
            counts["errors"] += 1
            await asyncio.sleep(0.01)
        finally:
            s.close()


def flood(args):
    """The flood process: prints `held` once every socket has connected
    (or after 5 s), then runs until SIGTERM (or `--duration` more seconds);
    prints its counts."""
    port = int(args.flood)
    head = b"" if args.silent else post("", 100000)
    froms = args.froms.split(",")
    counts = {"connects": 0, "errors": 0}

    async def run():
        connecting = asyncio.Semaphore(args.connecting)
        end = time.time() + 5 + args.duration
        tasks = [
            asyncio.create_task(hold(froms[i % len(froms)], port, head, end, connecting, counts))
            for i in range(args.sockets)
        ]
        ramp = time.time() + 5
        while counts["connects"] < args.sockets and time.time() < ramp:
            await asyncio.sleep(0.05)
        print("held", flush=True)
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, lambda: [t.cancel() for t in tasks])
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(run())
    print(json.dumps(counts), flush=True)


def fresh(port, frm, delay):
    """One fresh client: its answer's status, or why there was none."""
    s = bound(frm)
    s.settimeout(5)
    try:
        try:
            s.connect(("127.0.0.1", port))
        except socket.timeout:
            return "connect timeout"
        if delay:
            time.sleep(delay)
        s.sendall(post(INITIALIZE))
        line = s.makefile("rb").readline()
        return line.split()[1].decode() if line else "closed"
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return type(e).__name__
    finally:
        s.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", help="the sluice binary")
    ap.add_argument("--sockets", type=int, default=1100)
    ap.add_argument("--from", dest="froms", default="127.0.0.2,127.0.0.3")
    ap.add_argument("--client-from", default="127.0.0.4")
    ap.add_argument("--tries", type=int, default=16)
    ap.add_argument("--delay", type=float, default=0.0, help="seconds between a fresh client's connect and its request")
    ap.add_argument("--silent", action="store_true", help="flood sockets send nothing")
    ap.add_argument("--connecting", type=int, default=1100, help="flood connects under way at once")
    ap.add_argument("--flood", help=argparse.SUPPRESS)
    ap.add_argument("--duration", type=float, help=argparse.SUPPRESS)
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.sockets + 256)), hard))
    if args.flood:
        return flood(args)

    proc, base = gateway.start(
        args.bin,
        '[server]\nmax_connections = 956\n[backends.demo]\ntransport = "stdio"\n'
        f'command = "{os.path.abspath(args.bin)}"\nargs = ["demo-server"]\n',
    )
    port = base.rsplit(":", 1)[1]
    child = None
    try:
        # The flood lasts until every try is done (SIGTERM), at most as
        # long as every try could take.
        duration = args.tries * (args.delay + 6) + 10
        cmd = [sys.executable, os.path.abspath(__file__), "--flood", port, "--duration", str(duration)]
        cmd += ["--sockets", str(args.sockets), "--from", args.froms, "--connecting", str(args.connecting)]
        cmd += ["--silent"] if args.silent else []
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "held"
        served, failures = 0, {}
        for _ in range(args.tries):
            began = time.time()
            status = fresh(int(port), args.client_from, args.delay)
            if status == "200":
                served += 1
            else:
                failures[status] = failures.get(status, 0) + 1
            time.sleep(max(0.0, 1 - (time.time() - began)))
        child.send_signal(signal.SIGTERM)
        flooded = json.loads(child.stdout.read().strip().splitlines()[-1])
        child.wait()
        child = None
        # The flood's sockets are closed now; the gateway lets go of them
        # as it reads their ends.
        for _ in range(50):
            try:
                text = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
                break
            except OSError:
                time.sleep(0.2)
        else:
            raise SystemExit("no /metrics after the flood")
        counters = {
            k: int(float(v))
            for k, v in (line.rsplit(" ", 1) for line in text.splitlines())
            if k.startswith("sluice_connections_")
        }
        print(
            json.dumps(
                {
                    "bin": args.bin,
                    "http": os.environ.get("SLUICE_HTTP", "own"),
                    "flood": "silent" if args.silent else "withheld",
                    "from": args.froms,
                    "client_from": args.client_from,
                    "delay_s": args.delay,
                    "fresh": {"tried": args.tries, "served": served, "failures": failures},
                    "flood_connects": flooded["connects"],
                    "gateway": counters,
                },
                indent=2,
            )
        )
    finally:
        if child is not None:
            child.kill()
            child.wait()
        gateway.stop(proc)


if __name__ == "__main__":
    main()
