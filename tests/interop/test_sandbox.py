"""Real servers still work under a tight sandbox (issue 53).

Each stdio backend here runs under `sandbox = { ... }` behind a real
`sluice serve`, and is driven through the official Python SDK client
(`mcp.Client`, legacy mode) over the gateway's Streamable HTTP:

* server-filesystem serving one temporary directory, with memory,
  processes, open files, network and Landlock bounds: its tools list, a
  file in the served directory is read and written. A second directory the
  server itself allows (a command-line argument) but the sandbox's `read`
  does not list cannot be read or written: the kernel refuses what the
  server would allow. The same server without `sandbox`, in the same
  gateway, reads and writes it (the control).
* server-everything (`echo`) and server-memory (`create_entities`, then
  `read_graph`, its file in a directory `write` lists) under network,
  memory, processes and Landlock bounds.
* a server on the Python SDK (`MCPServer` over stdio, run by this venv's
  interpreter): a tool answers under the sandbox; a TCP connection to a
  listener this test opens on 127.0.0.1 and a read of a file outside its
  `read` both fail under it and succeed for the same server without it.

Each sandboxed child is also inspected from outside (/proc, its cgroup):
its network namespace is not ours, `no_new_privs` is set, core dumps are
off, and its memory, processes and open files bounds are the configured
ones, so that "it still works" is never said of a child that ran unbounded.
"""

from __future__ import annotations

import os
import socket
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import anyio
import mcp.types as types
import pytest
from mcp import Client

from harness import (
    NODE_MODULES,
    Gateway,
    GatewayFactory,
    _cmdline,
    descendants,
    locate_everything_js,
    node_bin,
    toml_str,
)

pytestmark = pytest.mark.anyio

TEST_TIMEOUT_S = 90
MIB = 1024 * 1024

FILESYSTEM_JS = NODE_MODULES / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
MEMORY_JS = NODE_MODULES / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"


def client(gw: Gateway) -> Client:
    return Client(gw.mcp_url, mode="legacy", cache=None, read_timeout_seconds=30)


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


def toml_list(paths: list[Path]) -> str:
    return "[" + ", ".join(toml_str(str(p)) for p in paths) + "]"


def node_modules_dir() -> Path:
    """The installed node_modules, the least a Node server here needs in `read`.

    The script's own directory (dist/) is readable anyway (a file argument's
    directory is), but its package's dependencies are hoisted beside it:
    with only `.../server-filesystem` listed, Node fails with
    ERR_MODULE_NOT_FOUND for `@modelcontextprotocol/sdk/server/mcp.js`.
    Resolved, since Node loads modules by their real path.
    """
    for script in (FILESYSTEM_JS, MEMORY_JS):
        if not script.is_file():
            pytest.fail(f"{script} is missing: run `npm ci` in tests/interop (scripts/test does)")
    return NODE_MODULES.resolve()


# --------------------------------------------------------------------------
# what the kernel holds a child to, read from outside it


def child_pids(gw: Gateway, marker: str, count: int = 1) -> list[int]:
    """The processes the gateway started whose command line contains `marker`
    (`count` of them), those in a network namespace of their own first."""
    found = [pid for pid in descendants(gw.pid) if marker in _cmdline(pid)]
    assert len(found) == count, f"want {count} children running {marker!r}, found {[(p, _cmdline(p)) for p in found]}"
    return sorted(found, key=lambda pid: os.readlink(f"/proc/{pid}/ns/net") == os.readlink("/proc/self/ns/net"))


def child_pid(gw: Gateway, marker: str) -> int:
    return child_pids(gw, marker)[0]


def _limits(pid: int) -> dict[str, str]:
    """/proc/PID/limits: {"Max open files": "SOFT HARD UNITS", ...}."""
    rows = Path(f"/proc/{pid}/limits").read_text().splitlines()[1:]
    return {row[:26].strip(): row[26:].strip() for row in rows}


def _cgroup_file(pid: int, controller: str, v1_name: str, v2_name: str) -> str | None:
    """A file of the child's own cgroup for `controller` (v1 hierarchy or v2), None without one."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            candidate = Path("/sys/fs/cgroup") / controller / path.lstrip("/") / v1_name
        elif controllers == "":
            candidate = Path("/sys/fs/cgroup") / path.lstrip("/") / v2_name
        else:
            continue
        if candidate.is_file():
            return candidate.read_text().strip()
    return None


def assert_confined(
    pid: int,
    *,
    memory_mib: int | None = None,
    processes: int | None = None,
    open_files: int | None = None,
    network_none: bool = False,
) -> None:
    """The bounds a sandboxed child runs under, as the kernel reports them."""
    status = Path(f"/proc/{pid}/status").read_text()
    assert "NoNewPrivs:\t1" in status, f"no_new_privs is not set for {pid}"
    limits = _limits(pid)
    assert limits["Max core file size"].split()[:2] == ["0", "0"], limits["Max core file size"]
    if network_none:
        ours = os.readlink("/proc/self/ns/net")
        assert os.readlink(f"/proc/{pid}/ns/net") != ours, "the child shares the test's network namespace"
    if open_files is not None:
        assert limits["Max open files"].split()[:2] == [str(open_files)] * 2, limits["Max open files"]
    if processes is not None:
        pids_max = _cgroup_file(pid, "pids", "pids.max", "pids.max")
        assert pids_max == str(processes), f"pids.max of {pid}'s cgroup: {pids_max}"
    if memory_mib is not None:
        # a cgroup's memory.max where the gateway may create one, else RLIMIT_DATA
        cgroup = _cgroup_file(pid, "memory", "memory.limit_in_bytes", "memory.max")
        data = limits["Max data size"].split()[0]
        want = str(memory_mib * MIB)
        assert want in (cgroup, data), f"memory of {pid}: cgroup {cgroup}, RLIMIT_DATA {data}, want {want}"


# --------------------------------------------------------------------------
# 1. server-filesystem


@pytest.fixture
def share(tmp_path: Path) -> dict[str, Path]:
    """served/ (the sandbox reads and writes it), other/ (the server allows it, the
    sandbox does not list it) and outside/ (neither does)."""
    dirs = {name: tmp_path / name for name in ("served", "other", "outside")}
    for name, d in dirs.items():
        d.mkdir()
        (d / "note.txt").write_text(f"{name} note\n")
    return dirs


def filesystem_backend(name: str, dirs: dict[str, Path], sandbox: str | None) -> str:
    lines = [
        f"[backends.{name}]",
        f"command = {toml_str(node_bin())}",
        f"args = {toml_list([FILESYSTEM_JS, dirs['served'], dirs['other']])}",
    ]
    if sandbox is not None:
        lines.append(f"sandbox = {sandbox}")
    return "\n".join(lines) + "\n"


async def test_filesystem_server_under_a_tight_sandbox(gateway_factory: GatewayFactory, share: dict[str, Path]) -> None:
    served, other, outside = share["served"], share["other"], share["outside"]
    sandbox = (
        '{ memory = "512MiB", processes = 64, open_files = 1024, network = "none", '
        f"read = {toml_list([served, node_modules_dir()])}, write = {toml_list([served])} }}"
    )
    gw = gateway_factory(filesystem_backend("files", share, sandbox) + filesystem_backend("open", share, None))
    boxed_pid, free_pid = child_pids(gw, str(FILESYSTEM_JS), count=2)
    assert_confined(boxed_pid, memory_mib=512, processes=64, open_files=1024, network_none=True)
    assert os.readlink(f"/proc/{free_pid}/ns/net") == os.readlink("/proc/self/ns/net")

    with anyio.fail_after(TEST_TIMEOUT_S):
        async with client(gw) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            boxed_tools = {n.removeprefix("files__") for n in names if n.startswith("files__")}
            free_tools = {n.removeprefix("open__") for n in names if n.startswith("open__")}
            assert {"read_text_file", "write_file", "list_allowed_directories"} <= boxed_tools, names
            assert boxed_tools == free_tools, "the sandboxed server lists other tools than the free one"

            async def call(backend: str, tool: str, **args: str) -> types.CallToolResult:
                return await c.call_tool(f"{backend}__{tool}", args)

            # the served directory: read and written under the sandbox
            read = await call("files", "read_text_file", path=str(served / "note.txt"))
            assert not read.is_error and "served note" in text_of(read), read
            wrote = await call("files", "write_file", path=str(served / "new.txt"), content="written in the box\n")
            assert not wrote.is_error, wrote
            assert (served / "new.txt").read_text() == "written in the box\n"

            # outside every allowed directory: the server itself refuses, either way
            for backend in ("files", "open"):
                refused = await call(backend, "read_text_file", path=str(outside / "note.txt"))
                assert refused.is_error and "outside note" not in text_of(refused), refused

            # a directory the server allows and the sandbox does not list: the kernel refuses
            boxed = await call("files", "read_text_file", path=str(other / "note.txt"))
            assert boxed.is_error, f"read {other}/note.txt under the sandbox: {boxed}"
            assert "other note" not in text_of(boxed)
            assert "EACCES" in text_of(boxed) or "permission denied" in text_of(boxed).lower(), boxed
            boxed_write = await call("files", "write_file", path=str(other / "boxed.txt"), content="x")
            assert boxed_write.is_error, boxed_write
            assert not (other / "boxed.txt").exists()

            # ... while the same server without the sandbox reads and writes it
            free = await call("open", "read_text_file", path=str(other / "note.txt"))
            assert not free.is_error and "other note" in text_of(free), free
            free_write = await call("open", "write_file", path=str(other / "free.txt"), content="y")
            assert not free_write.is_error, free_write
            assert (other / "free.txt").read_text() == "y"


# --------------------------------------------------------------------------
# 2. server-everything and server-memory


async def test_everything_and_memory_servers_under_a_sandbox(gateway_factory: GatewayFactory, tmp_path: Path) -> None:
    modules = node_modules_dir()
    memory_dir = tmp_path / "memory"
    memory_dir.mkdir()
    memory_file = memory_dir / "memory.jsonl"
    box = f'{{ network = "none", memory = "512MiB", processes = 64, read = {toml_list([modules])}, write = %s }}'
    config = f"""
[backends.everything]
command = {toml_str(node_bin())}
args = [{toml_str(str(locate_everything_js()))}, "stdio"]
sandbox = {box % "[]"}

[backends.memory]
command = {toml_str(node_bin())}
args = [{toml_str(str(MEMORY_JS))}]
env = {{ MEMORY_FILE_PATH = {toml_str(str(memory_file))} }}
sandbox = {box % toml_list([memory_dir])}
"""
    gw = gateway_factory(config)
    for marker in (str(locate_everything_js()), str(MEMORY_JS)):
        assert_confined(child_pid(gw, marker), memory_mib=512, processes=64, network_none=True)

    with anyio.fail_after(TEST_TIMEOUT_S):
        async with client(gw) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert {"everything__echo", "memory__create_entities", "memory__read_graph"} <= names, names

            echoed = await c.call_tool("everything__echo", {"message": "boxed hello"})
            assert not echoed.is_error and "boxed hello" in text_of(echoed), echoed

            entity = {"name": "sluice", "entityType": "gateway", "observations": ["runs sandboxed"]}
            created = await c.call_tool("memory__create_entities", {"entities": [entity]})
            assert not created.is_error, created
            graph = await c.call_tool("memory__read_graph", {})
            assert not graph.is_error and "runs sandboxed" in text_of(graph), graph
    assert "runs sandboxed" in memory_file.read_text()


# --------------------------------------------------------------------------
# 3. a Python SDK stdio server

PY_SERVER = '''
"""A stdio MCP server on the official Python SDK, for sluice's sandbox test."""
import socket

from mcp.server.mcpserver import MCPServer

server = MCPServer("py-boxed", log_level="WARNING")


@server.tool()
def answer() -> str:
    """A value computed in the child."""
    return f"answer={6 * 7}"


@server.tool()
def connect(port: int) -> str:
    """Opens a TCP connection to 127.0.0.1:PORT; `connected` or the error."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            return "connected"
    except OSError as exc:
        return f"error: {exc!r}"


@server.tool()
def read(path: str) -> str:
    """The file's text, or the error."""
    try:
        with open(path) as f:
            return "content: " + f.read()
    except OSError as exc:
        return f"error: {exc!r}"


if __name__ == "__main__":
    server.run("stdio")
'''


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP listener on 127.0.0.1 (connections complete in its backlog; never accepted)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield sock
    sock.close()


async def test_python_sdk_server_under_a_sandbox(
    gateway_factory: GatewayFactory, tmp_path: Path, listener: socket.socket
) -> None:
    server_dir = tmp_path / "pyserver"
    server_dir.mkdir()
    script = server_dir / "boxed_server.py"
    script.write_text(textwrap.dedent(PY_SERVER))
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the box\n")
    # this venv's interpreter (as the harness runs Python peers): sys.executable
    backend = f"command = {toml_str(sys.executable)}\nargs = [{toml_str(str(script))}]\n"
    config = (
        f"[backends.boxed]\n{backend}"
        'sandbox = { network = "none", memory = "256MiB", processes = 32, read = [], write = [] }\n'
        f"\n[backends.free]\n{backend}"
    )
    gw = gateway_factory(config)
    boxed_pid, free_pid = child_pids(gw, str(script), count=2)
    assert_confined(boxed_pid, memory_mib=256, processes=32, network_none=True)
    assert os.readlink(f"/proc/{free_pid}/ns/net") == os.readlink("/proc/self/ns/net")

    port = listener.getsockname()[1]
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with client(gw) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert {"boxed__answer", "boxed__connect", "boxed__read"} <= names, names

            answered = await c.call_tool("boxed__answer", {})
            assert not answered.is_error and text_of(answered) == "answer=42", answered

            boxed = text_of(await c.call_tool("boxed__connect", {"port": port}))
            assert boxed.startswith("error: "), f"the sandboxed child reached 127.0.0.1:{port}: {boxed}"
            free = text_of(await c.call_tool("free__connect", {"port": port}))
            assert free == "connected", free

            boxed_read = text_of(await c.call_tool("boxed__read", {"path": str(secret)}))
            assert boxed_read.startswith("error: ") and "PermissionError" in boxed_read, boxed_read
            free_read = text_of(await c.call_tool("free__read", {"path": str(secret)}))
            assert free_read == "content: not for the box\n", free_read
