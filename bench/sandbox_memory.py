#!/usr/bin/env python3
"""What RLIMIT_AS and RLIMIT_DATA do to real Node and Python stdio MCP
servers (issue 53): the fallback memory bound for a host without a cgroup
the gateway may use.

    /work/wt/search/.venv/bin/python bench/sandbox_memory.py [--write bench/SANDBOX.md]

Run it with a Python that has the `mcp` SDK: its server runs on the same
interpreter. Three servers, server-everything (`stdio`), server-memory (both
from tests/interop/node_modules, or `--node-modules`) and a Python SDK
(`mcp`) stdio server written to a temporary directory, each started with the
soft and hard limit of one rlimit set to 64 MiB .. 16 GiB, then sent
initialize, notifications/initialized and tools/list: it started if
tools/list is answered within 20 s. Peak RSS is wait4's ru_maxrss (VmHWM);
VmPeak (peak virtual size) is read from /proc before the kill. Then, at the
lowest limit a mechanism lets every server of a runtime start under and at
256 MiB, a Node script (a Buffer array, off the V8 heap; an array of
doubles, on it), a Python script (a bytearray list) and the Python server's
`allocate` tool grow to 1 GiB, and how each ends is recorded. Every process
is bounded in time (20 s) and killed by its PID; none dumps core. Prints
markdown; `--write FILE` also replaces the section in FILE (keeping its
hand-written `## Conclusions`).
"""

import argparse
import json
import os
import platform
import re
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time

MIB = 1 << 20
LIMITS_MIB = [64, 128, 256, 512, 1024, 4096, 16384]
MECHANISMS = {"AS": resource.RLIMIT_AS, "DATA": resource.RLIMIT_DATA}
DEADLINE = 20.0
HEADING = (
    "Memory limits without a cgroup: what RLIMIT_AS and RLIMIT_DATA do to "
    "Node and Python servers"
)

# mcp 2.x renamed FastMCP to MCPServer.
SDK_SERVER = """
try:
    from mcp.server.mcpserver import MCPServer
except ImportError:
    from mcp.server.fastmcp import FastMCP as MCPServer

server = MCPServer("bench", log_level="WARNING")
held = []


@server.tool()
def echo(text: str) -> str:
    return text


@server.tool()
def allocate(mib: int) -> str:
    for n in range(mib):
        held.append(bytearray(1 << 20))
    return f"allocated {mib} MiB"


server.run()
"""

# Off the V8 heap: Buffers are ArrayBuffer backing stores (malloc/mmap).
NODE_BUFFERS = """
const held = [];
for (let mib = 1; mib <= 1024; mib++) {
  held.push(Buffer.alloc(1 << 20, 1));
  if (mib % 16 === 0) console.log(mib);
}
console.log("done");
"""

# On the V8 heap: arrays of 2^17 unboxed doubles, 1 MiB each.
NODE_HEAP = """
const held = [];
for (let mib = 1; mib <= 1024; mib++) {
  const a = [];
  for (let i = 0; i < 1 << 17; i++) a.push(i + 0.5);
  held.push(a);
  if (mib % 16 === 0) console.log(mib);
}
console.log("done");
"""

PYTHON_BYTES = """
held = []
for mib in range(1, 1025):
    held.append(bytearray(1 << 20))
    if mib % 16 == 0:
        print(mib, flush=True)
print("done", flush=True)
"""


def limiter(mechanism, mib):
    """A preexec_fn setting one rlimit, soft and hard, in the child."""
    if mechanism is None:
        return None
    limit = mib * MIB

    def apply():
        # No core dumps: an aborting runtime would spend the deadline on one.
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(MECHANISMS[mechanism], (limit, limit))

    return apply


def proc_status(pid):
    fields = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmHWM", "VmPeak", "VmRSS", "VmSize", "VmData"):
                    fields[key] = int(value.split()[0]) // 1024  # kB -> MiB
    except OSError:
        pass
    return fields


def listening_ports(pid):
    """TCP ports the process listens on (its socket inodes in /proc/net)."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        return []
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for row in f.readlines()[1:]:
                cols = row.split()
                if cols[3] == "0A" and cols[9] in inodes:  # 0A: LISTEN
                    ports.append(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def how_it_ended(proc):
    if proc.returncode is None:
        return "killed at the deadline"
    if proc.returncode < 0:
        return signal.Signals(-proc.returncode).name
    return f"exit {proc.returncode}"


SALIENT = re.compile(r"FATAL|Fatal|fatal|Error|error|out of memory|Killed|Aborted")
STACK_FRAME = re.compile(r"^\d+: 0x")


def last_line(path):
    """The last line of stderr that says what went wrong (not a native stack
    frame), else the last line."""
    with open(path, "rb") as f:
        lines = [l.strip() for l in f.read().decode(errors="replace").splitlines()]
    lines = [l for l in lines if l]
    salient = [l for l in lines if SALIENT.search(l) and not STACK_FRAME.match(l)]
    return (salient or lines or [""])[-1][:200]


def end(proc, grace=0.0):
    """Kills the process if it still runs after `grace` seconds; reaps it.
    Returns whether it was running and its peak RSS in MiB (wait4's
    ru_maxrss, right even for a process that died)."""
    until = time.monotonic() + grace
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid != 0 or time.monotonic() >= until:
            break
        time.sleep(0.05)
    running = pid == 0
    if running:
        os.kill(proc.pid, signal.SIGKILL)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    for pipe in (proc.stdin, proc.stdout):
        try:
            pipe.close()
        except OSError:
            pass
    return running, usage.ru_maxrss // 1024


class Session:
    """A server on pipes: JSON-RPC lines out, answers read under a deadline."""

    def __init__(self, argv, mechanism, mib, tmp, env=None):
        self.stderr_path = os.path.join(tmp, "stderr")
        self.start = time.monotonic()
        self.spawn_error = None
        self.proc = None
        try:
            with open(self.stderr_path, "wb") as err:
                self.proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    preexec_fn=limiter(mechanism, mib),
                    env=env,
                    cwd=tmp,
                )
        except OSError as e:
            self.spawn_error = f"exec failed: {e.strerror}"
        self.buf = b""

    def send(self, msg):
        try:
            self.proc.stdin.write((json.dumps(msg) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass

    def wait_for(self, id_, deadline):
        """The answer to request `id_`, or None (died, or the deadline)."""
        fd = self.proc.stdout.fileno()
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if msg.get("id") == id_ and "method" not in msg:
                    return msg
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self.buf += chunk

    def handshake(self):
        self.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "sandbox-memory", "version": "0"},
                },
            }
        )
        deadline = self.start + DEADLINE
        if self.wait_for(1, deadline) is None:
            return False
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        return self.wait_for(2, deadline) is not None


def start_run(server, mechanism, mib, tmp):
    session = Session(server["argv"], mechanism, mib, tmp, server.get("env"))
    row = {"server": server["name"], "mechanism": mechanism, "mib": mib}
    if session.spawn_error:
        row.update(started=False, ended=session.spawn_error, stderr="")
        return row
    try:
        started = session.handshake()
        row["started"] = started
        row["seconds"] = round(time.monotonic() - session.start, 2)
        row["VmPeak"] = proc_status(session.proc.pid).get("VmPeak")
        if started:
            row["ports"] = listening_ports(session.proc.pid)
    finally:
        # A server that failed may be exiting still: its stdout closes a
        # moment before it can be reaped.
        grace = 0.0 if row.get("started") else 2.0
        running, row["VmHWM"] = end(session.proc, grace)
    if running:
        row["ended"] = "running (killed)" if row.get("started") else "hung (killed at 20 s)"
    else:
        row["ended"] = how_it_ended(session.proc)
    row["stderr"] = last_line(session.stderr_path)
    return row


def allocation_run(name, argv, mechanism, mib, tmp, via_tool=False):
    """Grows to 1 GiB under the limit; records how far and how it ends."""
    row = {"what": name, "mechanism": mechanism, "mib": mib}
    session = Session(argv, mechanism, mib, tmp)
    if session.spawn_error:
        row.update(reached="-", ended=session.spawn_error, stderr="")
        return row
    deadline = session.start + DEADLINE
    try:
        if via_tool:
            if not session.handshake():
                row.update(reached="-", ended="did not start")
            else:
                session.send(
                    {
                        "jsonrpc": "2.0",
                        "id": 3,
                        "method": "tools/call",
                        "params": {"name": "allocate", "arguments": {"mib": 1024}},
                    }
                )
                answer = session.wait_for(3, deadline)
                row["answer"] = describe_answer(answer)
                # Still serving after the failure?
                session.send({"jsonrpc": "2.0", "id": 4, "method": "ping"})
                pong = session.wait_for(4, min(deadline, time.monotonic() + 2.0))
                row["answer"] += "; then ping " + ("answered" if pong else "unanswered")
        else:
            session.proc.stdin.close()
            reached = 0
            fd = session.proc.stdout.fileno()
            while time.monotonic() < deadline:
                ready, _, _ = select.select([fd], [], [], deadline - time.monotonic())
                chunk = os.read(fd, 1 << 16) if ready else b""
                if not chunk:
                    break
                for word in chunk.split():
                    reached = 1024 if word == b"done" else int(word)
            row["reached"] = reached
    finally:
        # Its stdout closes a moment before it can be reaped.
        running, row["VmHWM"] = end(session.proc, grace=2.0)
    row["ended"] = "still running (killed)" if running else how_it_ended(session.proc)
    row["stderr"] = last_line(session.stderr_path)
    return row


def describe_answer(answer):
    if answer is None:
        return "no answer"
    if "error" in answer:
        return f"JSON-RPC error: {answer['error'].get('message', '')[:120]}"
    result = answer["result"]
    text = " ".join(c.get("text", "") for c in result.get("content", []))
    return ("tool error: " if result.get("isError") else "ok: ") + text[:120]


def idle_footprint(argv, tmp):
    """VmPeak/VmHWM of a bare runtime one second after start."""
    session = Session(argv, None, None, tmp)
    try:
        time.sleep(1.0)
        return proc_status(session.proc.pid)
    finally:
        end(session.proc)


def mib_label(mib):
    return f"{mib // 1024} GiB" if mib >= 1024 and mib % 1024 == 0 else f"{mib} MiB"


def startup_table(rows):
    head = "| server | rlimit | " + " | ".join(mib_label(m) for m in LIMITS_MIB) + " |"
    out = [head, "|---|---|" + "---|" * len(LIMITS_MIB)]
    for server in dict.fromkeys(r["server"] for r in rows):
        base = next(r for r in rows if r["server"] == server and r["mechanism"] is None)
        out.append(
            f"| {server} | none | "
            + f"started, {base.get('VmHWM', '?')} MiB RSS, {base.get('VmPeak', '?')} MiB virtual"
            + " |" * len(LIMITS_MIB)
        )
        for mechanism in MECHANISMS:
            cells = []
            for mib in LIMITS_MIB:
                r = next(
                    x
                    for x in rows
                    if x["server"] == server
                    and x["mechanism"] == mechanism
                    and x["mib"] == mib
                )
                cells.append(f"ok {r.get('VmHWM', '?')}" if r["started"] else f"**{r['ended']}**")
            out.append(f"| {server} | {mechanism} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def failures_table(rows):
    out = ["| server | rlimit | limit | ended | last stderr line |", "|---|---|---|---|---|"]
    for r in rows:
        if r["mechanism"] and not r["started"]:
            line = f"`{r['stderr']}`".replace("|", "\\|") if r["stderr"] else "(nothing)"
            out.append(
                f"| {r['server']} | {r['mechanism']} | {mib_label(r['mib'])} | {r['ended']} | {line} |"
            )
    return "\n".join(out)


def allocation_table(rows):
    out = [
        "| what | rlimit | limit | reached (MiB) | ended | peak RSS (MiB) | last stderr line / answer |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        detail = r.get("answer") or r["stderr"]
        if r.get("answer") and r["stderr"]:
            detail += f"; stderr: {r['stderr']}"
        detail = f"`{detail}`".replace("|", "\\|") if detail else "(nothing)"
        limit = mib_label(r["mib"]) if r["mib"] else "-"
        out.append(
            f"| {r['what']} | {r['mechanism'] or 'none'} | {limit} | {r.get('reached', '-')} "
            f"| {r['ended']} | {r.get('VmHWM', '?')} | {detail} |"
        )
    return "\n".join(out)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_modules = os.path.join(here, "..", "tests", "interop", "node_modules")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--node-modules", default=default_modules)
    parser.add_argument("--write", help="replace the section in this markdown file")
    args = parser.parse_args()
    bin_dir = os.path.join(os.path.abspath(args.node_modules), ".bin")

    with tempfile.TemporaryDirectory(prefix="sandbox-memory-") as tmp:
        server_py = os.path.join(tmp, "sdk_server.py")
        with open(server_py, "w") as f:
            f.write(SDK_SERVER)
        env = dict(os.environ, MEMORY_FILE_PATH=os.path.join(tmp, "memory.jsonl"))
        servers = [
            {
                "name": "server-everything",
                "runtime": "node",
                "argv": ["node", os.path.join(bin_dir, "mcp-server-everything"), "stdio"],
            },
            {
                "name": "server-memory",
                "runtime": "node",
                "argv": ["node", os.path.join(bin_dir, "mcp-server-memory")],
                "env": env,
            },
            {"name": "python SDK (MCPServer)", "runtime": "python", "argv": [sys.executable, server_py]},
        ]

        idle = {
            "node": idle_footprint(["node", "-e", "setTimeout(() => {}, 60000)"], tmp),
            "python": idle_footprint([sys.executable, "-c", "import time; time.sleep(60)"], tmp),
        }
        rows = []
        for server in servers:
            for mechanism, mib in [(None, None)] + [
                (m, mib) for m in MECHANISMS for mib in LIMITS_MIB
            ]:
                row = start_run(server, mechanism, mib, tmp)
                print(json.dumps(row), file=sys.stderr)
                rows.append(row)

        # The lowest limit each mechanism lets every server of a runtime
        # start under, and 256 MiB.
        lowest = {}
        for server in servers:
            for mechanism in MECHANISMS:
                ok = [
                    r["mib"]
                    for r in rows
                    if r["server"] == server["name"] and r["mechanism"] == mechanism and r["started"]
                ]
                key = (server["runtime"], mechanism)
                lowest[key] = max(lowest.get(key, 0), min(ok) if ok else 0)
        grow = {
            "node": [
                ("node Buffer array", ["node", "-e", NODE_BUFFERS], False),
                ("node string array (V8 heap)", ["node", "-e", NODE_HEAP], False),
            ],
            "python": [
                ("python bytearray list", [sys.executable, "-c", PYTHON_BYTES], False),
                ("python SDK server, `allocate` tool", [sys.executable, server_py], True),
            ],
        }
        alloc_rows = []
        for runtime, runs in grow.items():
            for mechanism in MECHANISMS:
                for mib in sorted({lowest[(runtime, mechanism)], 256} - {0}):
                    for name, argv, via_tool in runs:
                        row = allocation_run(name, argv, mechanism, mib, tmp, via_tool)
                        print(json.dumps(row), file=sys.stderr)
                        alloc_rows.append(row)
        # Unlimited, for comparison.
        for runtime, runs in grow.items():
            for name, argv, via_tool in runs:
                row = allocation_run(name, argv, None, None, tmp, via_tool)
                row["mib"] = 0
                alloc_rows.append(row)

    node_version = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    ports = sorted({p for r in rows for p in r.get("ports", [])})
    report = render(rows, alloc_rows, idle, lowest, node_version, ports)
    print(report)
    if args.write:
        replace_section(args.write, report)


def render(rows, alloc_rows, idle, lowest, node_version, ports):
    lines = [
        f"# {HEADING}",
        "",
        f"Machine: Linux {platform.release()}, {os.cpu_count()} cores; node {node_version}; "
        f"Python {platform.python_version()}. Measured {time.strftime('%Y-%m-%d')}.",
        "",
        "    /work/wt/search/.venv/bin/python bench/sandbox_memory.py --write bench/SANDBOX.md",
        "",
        "Idle runtimes one second after start: "
        f"node VmPeak {idle['node'].get('VmPeak')} MiB virtual, VmHWM {idle['node'].get('VmHWM')} MiB RSS; "
        f"python VmPeak {idle['python'].get('VmPeak')} MiB, VmHWM {idle['python'].get('VmHWM')} MiB.",
        "",
        "Did tools/list come back within 20 s (`ok N`: yes, with a peak RSS of N MiB), "
        "with the soft and hard limit set to:",
        "",
        startup_table(rows),
        "",
        "Listening TCP ports seen on a started server: "
        + (", ".join(map(str, ports)) if ports else "none (stdio only)")
        + ".",
        "",
        "How the servers that did not start ended:",
        "",
        failures_table(rows),
        "",
        "Lowest limit every server of a runtime started under: "
        + "; ".join(
            f"{runtime} {mechanism} {mib_label(mib) if mib else 'none'}"
            for (runtime, mechanism), mib in sorted(lowest.items())
        )
        + ".",
        "",
        "Growing to 1 GiB past the bound (`reached`: MiB allocated, in steps of 16, "
        "before the end):",
        "",
        allocation_table(alloc_rows),
        "",
    ]
    return "\n".join(lines)


def replace_section(path, report):
    """Replaces the section under HEADING (to the next `# `), or appends it;
    a hand-written `## Conclusions` in the old section is kept."""
    text = open(path).read() if os.path.exists(path) else ""
    pattern = re.compile(rf"^# {re.escape(HEADING)}\n.*?(?=^# |\Z)", re.M | re.S)
    old = pattern.search(text)
    if old:
        kept = re.search(r"^## Conclusions\n.*", old.group(0), re.M | re.S)
        if kept:
            report += "\n" + kept.group(0).rstrip() + "\n"
        text = pattern.sub(lambda _: report + "\n", text)
    else:
        text = (text.rstrip() + "\n\n" if text else "") + report + "\n"
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
