"""Helpers for sluice's interop tests (fixtures are in conftest.py).

The gateway under test is a real `sluice serve` process:

* the binary is `$SLUICE_BIN` when set, otherwise `cargo build` is run once per
  test session at the repository root and `target/debug/sluice` is used;
* each test that asks for a gateway gets its own process, started with
  `--listen 127.0.0.1:0` (and `--config FILE` written into the test's
  tmp_path when a config is given). Readiness is the one stdout line
  `sluice listening on 127.0.0.1:PORT`, read with a bounded timeout; no port
  is ever polled;
* on teardown the gateway's own PID gets SIGTERM, the exit is awaited
  (bounded) and must be 0, and every process the gateway had started must be
  gone (children die with the gateway: no orphans).
"""

from __future__ import annotations

import functools
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
INTEROP_DIR = Path(__file__).resolve().parent
NODE_MODULES = INTEROP_DIR / "node_modules"
EVERYTHING_JS = NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
LOOPBACK_PRELOAD = INTEROP_DIR / "loopback-preload.cjs"

# `https://` before the address when the listener has `[server] tls`.
READY_RE = re.compile(r"^sluice listening on (https://)?(127\.0\.0\.1:(\d+))$")
READY_TIMEOUT_S = float(os.environ.get("SLUICE_READY_TIMEOUT", "30"))
# shutdown_grace defaults to 10s in the contract; leave room for it.
STOP_TIMEOUT_S = float(os.environ.get("SLUICE_STOP_TIMEOUT", "20"))
CARGO_BUILD_TIMEOUT_S = 1800


# --------------------------------------------------------------------------
# the binary


def locate_sluice_bin() -> Path:
    """Path of the sluice binary: $SLUICE_BIN, or target/debug/sluice after `cargo build`."""
    env_bin = os.environ.get("SLUICE_BIN")
    if env_bin:
        path = Path(env_bin)
        if not path.is_absolute():
            path = (REPO_ROOT / path).resolve()
        if not (path.is_file() and os.access(path, os.X_OK)):
            pytest.fail(f"SLUICE_BIN={env_bin} is not an executable file")
        return path

    proc = subprocess.run(
        ["cargo", "build", "--bin", "sluice"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=CARGO_BUILD_TIMEOUT_S,
    )
    if proc.returncode != 0:
        pytest.fail(f"`cargo build` failed (exit {proc.returncode}):\n{proc.stdout[-8000:]}")
    path = REPO_ROOT / "target" / "debug" / "sluice"
    if not path.is_file():
        pytest.fail(f"`cargo build` succeeded but {path} does not exist")
    return path



# --------------------------------------------------------------------------
# process helpers (everything is by PID; nothing is matched by name)


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, ppid) of a live PID from /proc, or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # comm is in parentheses and may contain spaces: split after the last ')'
    rest = raw[raw.rfind(")") + 2 :].split()
    return rest[0], int(rest[1])


def descendants(pid: int) -> list[int]:
    """All live descendants of `pid` (children, grandchildren, ...), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        stat = _proc_stat(int(entry.name))
        if stat is None:
            continue
        children.setdefault(stat[1], []).append(int(entry.name))
    found: list[int] = []
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child in children.get(parent, []):
            found.append(child)
            frontier.append(child)
    return found


def _alive(pid: int) -> bool:
    stat = _proc_stat(pid)
    return stat is not None and stat[0] != "Z"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


# --------------------------------------------------------------------------
# the gateway


class GatewayExited(Exception):
    """sluice exited before printing its readiness line (e.g. exit 2 on a config it refuses)."""

    def __init__(self, code: int, stdout: list[str], stderr: str) -> None:
        super().__init__(f"sluice exited ({code}) before its readiness line; stdout={stdout!r}\nstderr:\n{stderr}")
        self.code = code
        self.stdout = stdout
        self.stderr = stderr


@dataclass
class Gateway:
    """One running `sluice serve` process."""

    proc: subprocess.Popen[str]
    addr: str
    stderr_path: Path
    config_path: Path | None
    stdout_lines: list[str] = field(default_factory=list)
    scheme: str = "http"

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def base_url(self) -> str:
        return f"{self.scheme}://{self.addr}"

    @property
    def mcp_url(self) -> str:
        return f"{self.base_url}/mcp"

    def ns_url(self, namespace: str) -> str:
        return f"{self.base_url}/ns/{namespace}/mcp"

    def stderr_tail(self, limit: int = 6000) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-limit:]
        except OSError:
            return "<no stderr>"

    def metrics(self, path: str = "/metrics", token: str | None = None) -> Metrics:
        return read_metrics(self.base_url + path, token=token)

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Wait (bounded) until GET /readyz answers 200: every backend healthy (contract).

        The readiness line only says the gateway accepts connections; backends
        (a stdio child running `initialize` + a list call) may still be starting.
        """
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"sluice exited ({self.proc.returncode}) while waiting for /readyz\n{self.stderr_tail()}")
            try:
                resp = httpx.get(self.base_url + "/readyz", timeout=5)
                if resp.status_code == 200:
                    return
                last = f"{resp.status_code} {resp.text[:500]}"
            except httpx.HTTPError as exc:
                last = repr(exc)
            time.sleep(0.05)
        pytest.fail(f"GET /readyz was not 200 within {timeout}s (last: {last})\n{self.stderr_tail()}")


def _drain(stream, sink: queue.Queue[str | None]) -> None:
    for line in stream:
        sink.put(line.rstrip("\n"))
    sink.put(None)


def start_gateway(
    sluice_bin: Path,
    tmp_path: Path,
    config: str | None = None,
    *,
    config_name: str = "sluice.toml",
    extra_args: list[str] | None = None,
    env: dict[str, str] | None = None,
    listen: str = "127.0.0.1:0",
    command: list[str] | None = None,
) -> Gateway:
    """Start `sluice serve` and wait (bounded) for its readiness line.

    `command`, when given, is the argv that runs sluice in place of
    `sluice_bin` (e.g. `chroot ROOT /usr/local/bin/sluice`); each program in
    it must exec the next, so the gateway keeps the PID started here.
    """
    config_path = None
    args = [*(command or [str(sluice_bin)]), "serve", "--listen", listen]
    if config is not None:
        config_path = tmp_path / config_name
        config_path.write_text(config)
        args += ["--config", str(config_path)]
    args += extra_args or []

    stderr_path = tmp_path / "sluice.stderr.log"
    stderr_file = open(stderr_path, "w")  # noqa: SIM115 - the child holds its own copy
    proc_env = dict(os.environ)
    proc_env.setdefault("RUST_LOG", "info")
    proc_env.update(env or {})
    proc = subprocess.Popen(
        args,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr_file,
        text=True,
        env=proc_env,
        start_new_session=True,  # a ^C to pytest's terminal does not reach it; teardown signals it by PID
    )
    stderr_file.close()
    lines: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(target=_drain, args=(proc.stdout, lines), daemon=True)
    reader.start()

    seen: list[str] = []
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        remaining = deadline - time.monotonic()
        try:
            line = lines.get(timeout=max(remaining, 0.01))
        except queue.Empty:
            if time.monotonic() >= deadline:
                _kill(proc)
                pytest.fail(
                    f"sluice printed no readiness line within {READY_TIMEOUT_S}s; stdout={seen!r}\n"
                    f"stderr:\n{stderr_path.read_text(errors='replace')[-6000:]}"
                )
            continue
        if line is None:
            code = proc.wait(timeout=5)
            raise GatewayExited(code, seen, stderr_path.read_text(errors="replace")[-6000:])
        seen.append(line)
        m = READY_RE.match(line)
        if m:
            break

    gw = Gateway(
        proc=proc,
        addr=m.group(2),
        stderr_path=stderr_path,
        config_path=config_path,
        stdout_lines=seen,
        scheme="https" if m.group(1) else "http",
    )

    # keep draining stdout so the gateway never blocks on a full pipe
    def keep() -> None:
        while True:
            item = lines.get()
            if item is None:
                return
            gw.stdout_lines.append(item)

    threading.Thread(target=keep, daemon=True).start()
    return gw


def _kill(proc: subprocess.Popen[str]) -> None:
    """SIGKILL a process we started, then whatever it had started (each by PID)."""
    if proc.poll() is None:
        kids = descendants(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def stop_gateway(gw: Gateway) -> list[str]:
    """SIGTERM the gateway's PID, wait (bounded); return a list of problems (empty when clean)."""
    problems: list[str] = []
    if gw.proc.poll() is not None:
        problems.append(f"sluice had already exited with {gw.proc.returncode} before teardown")
        return problems
    kids = descendants(gw.pid)
    os.kill(gw.pid, signal.SIGTERM)
    try:
        code = gw.proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _kill(gw.proc)
        problems.append(f"sluice did not exit within {STOP_TIMEOUT_S}s of SIGTERM (killed)")
        code = None
    if code is not None and code != 0:
        problems.append(f"sluice exited with {code} after SIGTERM (want 0)")

    # children die with the gateway: wait (bounded) for every process it had started
    deadline = time.monotonic() + 5
    left = [pid for pid in kids if _alive(pid)]
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = [pid for pid in left if _alive(pid)]
    if left:
        problems.append("processes started by sluice outlived it: " + "; ".join(f"{p}: {_cmdline(p)}" for p in left))
        for pid in left:  # clean up what we (through the gateway) started, by PID
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return problems


GatewayFactory = Callable[..., Gateway]


# --------------------------------------------------------------------------
# configs


def toml_str(value: str) -> str:
    """A TOML basic string (JSON string escapes are valid TOML escapes)."""
    return json.dumps(value)


def demo_backend(sluice_bin: Path, name: str = "demo") -> str:
    """A `[backends.NAME]` table running the binary's own demo server."""
    return f"[backends.{name}]\ncommand = {toml_str(str(sluice_bin))}\nargs = [\"demo-server\"]\n"


def locate_everything_js() -> Path:
    if not EVERYTHING_JS.is_file():
        pytest.fail(f"{EVERYTHING_JS} is missing: run `npm ci` in tests/interop (scripts/test does)")
    return EVERYTHING_JS


def node_bin() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH (the interop tests need Node.js 20)")
    return node




def everything_stdio_backend(everything_js: Path, name: str = "everything", **settings: str) -> str:
    """A `[backends.NAME]` table running server-everything over stdio."""
    lines = [
        f"[backends.{name}]",
        'transport = "stdio"',
        f"command = {toml_str(node_bin())}",
        f"args = [{toml_str(str(everything_js))}, \"stdio\"]",
    ]
    for key, value in settings.items():
        lines.append(f"{key} = {value}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------
# metrics

_SAMPLE_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$")
_LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


def _unescape(value: str) -> str:
    return value.replace(r"\\", "\0").replace(r"\"", '"').replace(r"\n", "\n").replace("\0", "\\")


def _parse_value(text: str) -> float:
    return {"+Inf": float("inf"), "-Inf": float("-inf"), "NaN": float("nan")}.get(text) or float(text)


@dataclass
class Metrics:
    """Parsed Prometheus text exposition.

    `samples` maps a canonical key (`name` or `name{a="x",b="y"}` with labels
    sorted) to its value. `value(name, **labels)` is the one sample with
    exactly those labels (None if absent); `total(name, **labels)` sums every
    sample of `name` whose labels include the given ones (a `KeyError` for a
    name no family of the exposition has).
    """

    samples: dict[str, float]
    parsed: list[tuple[str, dict[str, str], float]]
    text: str

    def value(self, name: str, **labels: str) -> float | None:
        return self.samples.get(metric_key(name, labels))

    def total(self, name: str, **labels: str) -> float:
        # An untouched labelled series is not in the exposition, so 0 is a
        # fair reading only of a series the gateway documents: a misspelled
        # name or label fails here instead of reading as "none counted".
        documented_series(name, labels)
        return sum(
            v for n, ls, v in self.parsed if n == name and all(ls.get(k) == want for k, want in labels.items())
        )

    def names(self) -> set[str]:
        return {n for n, _, _ in self.parsed}

    def __contains__(self, key: str) -> bool:
        return key in self.samples or key in self.names()

    def __getitem__(self, key: str) -> float:
        return self.samples[key]


@functools.cache
def documented_metrics() -> dict[str, set[str]]:
    """Each metric in docs/operations.md's table, with its labels."""
    table = (REPO_ROOT / "docs" / "operations.md").read_text()
    found = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.split("|")]
        # Metric rows only: other tables (sluice_bounded_entries' maps) share the layout.
        if len(cells) > 4 and re.fullmatch(r"`(sluice|mcp|process)_[a-z_]+`", cells[1]):
            found[cells[1].strip("`")] = set(re.findall(r"`([a-z_]+)`", cells[3]))
    assert found, "docs/operations.md has no metrics table"
    return found


def documented_series(name: str, labels: dict[str, str]) -> None:
    """Raises KeyError unless `name` is a documented metric's sample (a
    histogram's `_count`, `_sum` and `_bucket` included) with those labels."""
    docs = documented_metrics()
    family = next(
        (f for f in [name] + [name.removesuffix(s) for s in ("_count", "_sum", "_bucket") if name.endswith(s)] if f in docs),
        None,
    )
    if family is None:
        raise KeyError(f"{name}: not a metric docs/operations.md lists")
    unknown = set(labels) - docs[family] - ({"le"} if name.endswith("_bucket") else set())
    if unknown:
        raise KeyError(f"{name}: no label {sorted(unknown)} (documented: {sorted(docs[family])})")


def metric_key(name: str, labels: dict[str, str] | None = None) -> str:
    if not labels:
        return name
    inner = ",".join(f'{k}="{labels[k]}"' for k in sorted(labels))
    return f"{name}{{{inner}}}"


def parse_metrics(text: str) -> Metrics:
    samples: dict[str, float] = {}
    parsed: list[tuple[str, dict[str, str], float]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE_RE.match(line)
        if not m:
            raise ValueError(f"unparseable metrics line: {raw!r}")
        name, _, label_text, value_text, _ts = m.groups()
        labels = {k: _unescape(v) for k, v in _LABEL_RE.findall(label_text or "")}
        value = _parse_value(value_text)
        samples[metric_key(name, labels)] = value
        parsed.append((name, labels, value))
    return Metrics(samples=samples, parsed=parsed, text=text)


def read_metrics(url: str, token: str | None = None) -> Metrics:
    """GET a /metrics URL and parse it (asserts 200)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    resp = httpx.get(url, headers=headers, timeout=10)
    assert resp.status_code == 200, f"GET {url}: {resp.status_code} {resp.text[:500]}"
    return parse_metrics(resp.text)


def metrics_dict(url: str, token: str | None = None) -> dict[str, float]:
    """GET /metrics as a plain dict {canonical sample key: value}."""
    return read_metrics(url, token=token).samples


# --------------------------------------------------------------------------
# Node peers over HTTP (reference runs, not through the gateway)


@dataclass
class NodePeer:
    proc: subprocess.Popen[str]
    port: int
    stderr_lines: list[str]

    @property
    def mcp_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


_PRELOAD_RE = re.compile(r"^loopback-preload listening on 127\.0\.0\.1:(\d+)$")


def start_node_http_peer(script: Path, args: list[str], tmp_path: Path, timeout: float = 30) -> NodePeer:
    """Start a Node HTTP peer on 127.0.0.1 (through loopback-preload.cjs, PORT=0) and wait for its port."""
    env = dict(os.environ, PORT="0")
    proc = subprocess.Popen(
        [node_bin(), "--require", str(LOOPBACK_PRELOAD), str(script), *args],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_drain, args=(proc.stderr, lines), daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        try:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            if time.monotonic() >= deadline:
                _kill(proc)
                pytest.fail(f"node peer printed no listening line within {timeout}s: {seen!r}")
            continue
        if line is None:
            pytest.fail(f"node peer exited ({proc.wait(timeout=5)}) before listening: {seen!r}")
        seen.append(line)
        m = _PRELOAD_RE.match(line)
        if m:
            peer = NodePeer(proc=proc, port=int(m.group(1)), stderr_lines=seen)
            break

    def keep() -> None:
        while (item := lines.get()) is not None:
            seen.append(item)

    threading.Thread(target=keep, daemon=True).start()
    return peer


def stop_node_peer(peer: NodePeer) -> None:
    if peer.proc.poll() is None:
        os.kill(peer.proc.pid, signal.SIGTERM)
        try:
            peer.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _kill(peer.proc)




# --------------------------------------------------------------------------
# peers that announce their address on stdout and exit on stdin EOF
# (examples/faulty_backend.rs over http, ts2_server.mjs)


@dataclass
class LinePeer:
    """A server process we started: bound to 127.0.0.1, it printed `PREFIX ADDR` on stdout
    and exits when its stdin (our pipe) closes; also bounded by its own max lifetime."""

    proc: subprocess.Popen[str]
    addr: str
    stderr_path: Path

    @property
    def base_url(self) -> str:
        return f"http://{self.addr}"

    @property
    def mcp_url(self) -> str:
        return f"{self.base_url}/mcp"

    def stderr_tail(self, limit: int = 4000) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-limit:]
        except OSError:
            return "<no stderr>"


def start_line_peer(
    argv: list[str],
    prefix: str,
    tmp_path: Path,
    name: str,
    *,
    cwd: Path | None = None,
    timeout: float = 30,
    env: dict[str, str] | None = None,
) -> LinePeer:
    """Start `argv` and wait (bounded) for its `PREFIX 127.0.0.1:PORT` stdout line (`env`: added)."""
    stderr_path = tmp_path / f"{name}.stderr.log"
    stderr_file = open(stderr_path, "w")  # noqa: SIM115 - the child holds its own copy
    proc = subprocess.Popen(
        argv,
        cwd=cwd or tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr_file,
        text=True,
        env={**os.environ, "FIXTURE_LOG": "off", **(env or {})},
        start_new_session=True,
    )
    stderr_file.close()
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_drain, args=(proc.stdout, lines), daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        try:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            if time.monotonic() >= deadline:
                _kill(proc)
                pytest.fail(f"{name} printed no `{prefix}` line within {timeout}s: {seen!r}")
            continue
        if line is None:
            code = proc.wait(timeout=5)
            pytest.fail(f"{name} exited ({code}) before listening: {seen!r}\n{stderr_path.read_text(errors='replace')}")
        seen.append(line)
        if line.startswith(prefix + " "):
            addr = line[len(prefix) + 1 :].strip()
            assert addr.startswith("127.0.0.1:"), f"{name} is not bound to loopback: {line!r}"
            return LinePeer(proc=proc, addr=addr, stderr_path=stderr_path)


def stop_line_peer(peer: LinePeer) -> None:
    """Close its stdin (it exits by itself); SIGKILL by PID only if it does not within a bound."""
    if peer.proc.stdin is not None:
        try:
            peer.proc.stdin.close()
        except OSError:
            pass
    try:
        peer.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        _kill(peer.proc)


def example_bin(name: str) -> Path:
    """target/debug/examples/NAME (`cargo build --example NAME` when it is missing)."""
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO_ROOT / "target"))
    binary = target / "debug" / "examples" / name
    if not binary.exists():
        subprocess.run(["cargo", "build", "--example", name], cwd=REPO_ROOT, check=True, timeout=CARGO_BUILD_TIMEOUT_S)
    return binary


def start_faulty_http(mode: str, tmp_path: Path, max_lifetime_s: int = 300) -> LinePeer:
    """examples/faulty_backend.rs over HTTP in `mode` (e.g. `modern`), on 127.0.0.1."""
    argv = [
        str(example_bin("faulty_backend")),
        "--transport", "http", "--listen", "127.0.0.1:0", "--mode", mode,
        "--max-lifetime", str(max_lifetime_s),
    ]  # fmt: skip
    return start_line_peer(argv, "faulty_backend listening on", tmp_path, f"faulty-{mode}")


TS2_SERVER = INTEROP_DIR / "ts2_server.mjs"


def start_ts2_server(mode: str, tmp_path: Path, max_lifetime_s: int = 300) -> LinePeer:
    """ts2_server.mjs (the TypeScript SDK v2 server) in `mode`: `modern` or `dual`."""
    argv = [node_bin(), str(TS2_SERVER), mode, str(max_lifetime_s)]
    return start_line_peer(argv, "ts2_server listening on", tmp_path, f"ts2-{mode}", cwd=INTEROP_DIR)
