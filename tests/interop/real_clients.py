"""Drivers for the real MCP clients of test_real_clients.py.

One interface over three clients, so that every check runs the same way
through the gateway and straight against a backend:

* `py-legacy`: the official Python SDK (`mcp`, requirements.txt),
  `mcp.Client(mode="legacy")` (initialize handshake, 2025-11-25).
* `py-2026`: the same SDK in its 2026-07-28 mode: `mode="2026-07-28"` against
  the gateway (stateless, no handshake), and `mode="auto"` when it connects
  straight to a backend (a backend that only speaks the legacy protocol
  cannot be reached with a pinned modern version; `auto` probes
  `server/discover` and falls back to `initialize`, which is what this SDK
  does with such a server).
* `ts`: the official TypeScript SDK client (`@modelcontextprotocol/sdk`,
  package.json), driven through `ts_client.mjs` (JSON lines over a pipe).
* `ts2-legacy` / `ts2-2026`: the official TypeScript SDK v2 client
  (`@modelcontextprotocol/client` 2.x), driven through `ts2_client.mjs` (the
  same line protocol): `versionNegotiation` `legacy` (its default: the 2025
  `initialize` handshake) or `auto` (probes `server/discover` and speaks
  2026-07-28 when the server answers it); a URL or a stdio command; not in
  CLIENT_KINDS (test_input_bridge.py and test_ts_v2.py use it).

A driver is an async context manager connected to a `Target` (a URL, or a
stdio command the client spawns itself) with a `Host`: what its sampling,
elicitation and roots callbacks answer. `request(method, params)` sends one
request with the client's own method for it (one call, no cursor following)
and returns the result as JSON (a dict); an error response raises
`ClientError`. `events()` returns, and forgets, what the callbacks saw:
log messages, sampling and elicitation requests, roots requests.

The MCP Inspector CLI (`@modelcontextprotocol/inspector --cli`) is one-shot
(one process per request): `inspector(...)` runs it. Inspector 2.x declares
Node >= 22.19 in its `engines`; its CLI (a prebuilt bundle) runs on the Node 20
these machines have, and npm only warns. package.json pins `vite` (a
dependency of the Inspector's web UI, never run here) to 8.3.8 through
`overrides`: vite 8.4.0 names an optional dependency the registry does not
serve (`napi-windows-process-start-time`), which makes `npm ci` refuse the lock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from anyio.abc import Process
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.session import ClientRequestContext

from harness import INTEROP_DIR, NODE_MODULES, node_bin

TS_DRIVER = INTEROP_DIR / "ts_client.mjs"
TS2_DRIVER = INTEROP_DIR / "ts2_client.mjs"
INSPECTOR_BIN = NODE_MODULES / ".bin" / "mcp-inspector"
CLIENT_KINDS = ["py-legacy", "py-2026", "ts"]
# CLIENT_KINDS and the TypeScript SDK v2 client in both eras (HTTP only).
ALL_KINDS = [*CLIENT_KINDS, "ts2-legacy", "ts2-2026"]
# The kinds that talk to the gateway over a 2025-era session (the others: 2026-07-28).
LEGACY_KINDS = {"py-legacy", "ts", "ts2-legacy"}
REQUEST_TIMEOUT_S = 30


class ClientError(Exception):
    """A JSON-RPC error response (or a client-side failure) to one request."""

    def __init__(self, message: str, code: int | None = None, data: Any = None) -> None:
        super().__init__(f"{code}: {message}" if code is not None else message)
        self.code = code
        self.message = message
        self.data = data


@dataclass
class Target:
    """Where a client connects: a Streamable HTTP URL, or a stdio server it spawns."""

    url: str | None = None
    command: str | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] | None = None

    def describe(self) -> str:
        return self.url or " ".join([str(self.command), *self.args])


@dataclass
class Host:
    """What the client's callbacks answer (a real host would ask a model or a person)."""

    sampling_text: str = "SAMPLED-BY-THE-CLIENT"
    elicitation_content: dict[str, Any] = field(default_factory=lambda: {"name": "Ada Lovelace", "check": True})
    roots: list[dict[str, str]] = field(default_factory=list)
    # The capabilities the client declares (it installs only those callbacks);
    # roots only when `roots` is not empty.
    declare: tuple[str, ...] = ("sampling", "elicitation", "roots")


@dataclass
class Events:
    """What reached the client's callbacks. `logs` are (receipt time, params) pairs."""

    logs: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    sampling: list[dict[str, Any]] = field(default_factory=list)
    elicitation: list[dict[str, Any]] = field(default_factory=list)
    roots: list[dict[str, Any]] = field(default_factory=list)


def dump(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


# --------------------------------------------------------------------------
# the Python SDK


class PyDriver:
    """The official Python SDK client (legacy, or 2026-07-28 / auto)."""

    def __init__(self, kind: str, target: Target, host: Host, *, direct: bool) -> None:
        assert kind in ("py-legacy", "py-2026"), kind
        self.kind = kind
        self.target = target
        self.host = host
        if kind == "py-legacy":
            self.mode = "legacy"
        else:
            # The gateway serves 2026-07-28 itself; a backend may only speak the legacy protocol.
            self.mode = "auto" if direct else "2026-07-28"
        self._events = Events()
        # Per callback invocation: the request id the SDK handed the callback. On a
        # 2026-07-28 connection there is no server-to-client request channel, so a
        # callback can only run from an `input_required` result (its id is then the
        # key of the input request, a string the server chose).
        self.callback_request_ids: list[Any] = []
        # Set when the server says its tool list changed.
        self.tools_list_changed = anyio.Event()
        self._client: Client | None = None

    async def _sampling(self, ctx: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
        self.callback_request_ids.append(ctx.request_id)
        self._events.sampling.append(dump(params))
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=self.host.sampling_text),
            model="interop-fake-model",
            stop_reason="endTurn",
        )

    async def _elicitation(self, ctx: ClientRequestContext, params: Any) -> types.ElicitResult:
        self.callback_request_ids.append(ctx.request_id)
        self._events.elicitation.append(dump(params))
        if getattr(params, "mode", "form") == "url":
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content=self.host.elicitation_content)

    async def _roots(self, ctx: ClientRequestContext) -> types.ListRootsResult:
        self.callback_request_ids.append(ctx.request_id)
        self._events.roots.append({})
        return types.ListRootsResult(roots=[types.Root(**r) for r in self.host.roots])

    async def _log(self, params: types.LoggingMessageNotificationParams) -> None:
        self._events.logs.append((time.time(), dump(params)))

    async def _message(self, message: types.ServerNotification | Exception) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.tools_list_changed.set()

    async def __aenter__(self) -> PyDriver:
        if self.target.url:
            server: Any = self.target.url
        else:
            server = StdioServerParameters(command=self.target.command, args=self.target.args, env=self.target.env)
        self._client = Client(
            server,
            mode=self.mode,
            cache=None,
            read_timeout_seconds=REQUEST_TIMEOUT_S,
            sampling_callback=self._sampling if "sampling" in self.host.declare else None,
            elicitation_callback=self._elicitation if "elicitation" in self.host.declare else None,
            list_roots_callback=self._roots if self.host.roots and "roots" in self.host.declare else None,
            logging_callback=self._log,
            message_handler=self._message,
        )
        await self._client.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self._client is not None
        await self._client.__aexit__(*exc)

    @property
    def client(self) -> Client:
        assert self._client is not None
        return self._client

    @property
    def protocol_version(self) -> str:
        return self.client.protocol_version

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        c = self.client
        p = params or {}
        try:
            if method == "tools/list":
                return dump(await c.list_tools())
            if method == "prompts/list":
                return dump(await c.list_prompts())
            if method == "resources/list":
                return dump(await c.list_resources())
            if method == "resources/templates/list":
                return dump(await c.list_resource_templates())
            if method == "tools/call":
                return dump(await c.call_tool(p["name"], p.get("arguments") or {}))
            if method == "resources/read":
                return dump(await c.read_resource(p["uri"]))
            if method == "logging/setLevel":
                return dump(await c.set_logging_level(p["level"]))
            if method == "resources/subscribe":
                return dump(await c.subscribe_resource(p["uri"]))
            if method == "resources/unsubscribe":
                return dump(await c.unsubscribe_resource(p["uri"]))
        except MCPError as e:
            raise ClientError(e.error.message, e.error.code, e.error.data) from e
        raise ValueError(f"PyDriver has no method for {method}")

    async def raw_request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A request the SDK has no typed method for (2025-11-25 task-augmented calls, tasks/*).

        Goes through the SDK's own dispatcher (the same transport and session),
        skipping only its result-type validation, which knows no task results.
        """
        dispatcher = self.client.session._dispatcher  # noqa: SLF001 - see docstring
        try:
            return await dispatcher.send_raw_request(method, params, {"timeout": REQUEST_TIMEOUT_S})
        except MCPError as e:
            raise ClientError(e.error.message, e.error.code, e.error.data) from e

    async def events(self) -> Events:
        seen, self._events = self._events, Events()
        return seen


# --------------------------------------------------------------------------
# the TypeScript SDK (through ts_client.mjs)


class TsDriver:
    """The official TypeScript SDK client, one `node ts_client.mjs` process per connection.

    Declares sampling, elicitation (form mode: `{}`; both modes with
    "elicitation_url") and roots (when the host has roots), as `Host.declare`
    says: the capabilities its handlers answer.
    """

    kind = "ts"
    script = TS_DRIVER

    def __init__(self, target: Target, host: Host) -> None:
        self.target = target
        self.host = host
        self._proc: Process | None = None
        self._next_id = 0
        self._buffer = b""
        self.protocol_version = ""
        self.server_capabilities: dict[str, Any] = {}
        self.connected: dict[str, Any] = {}
        # Per callback invocation (as `events()` reports them): the id the SDK handed
        # the handler: the server's JSON-RPC request id, or (v2 SDK, 2026-07-28) the
        # `inputRequests` key of an `input_required` result it fulfils itself.
        self.callback_request_ids: list[Any] = []

    def _connect_extra(self) -> dict[str, Any]:
        return {}

    async def _send(self, op: dict[str, Any], timeout: float = REQUEST_TIMEOUT_S + 5) -> Any:
        assert self._proc is not None and self._proc.stdin is not None and self._proc.stdout is not None
        self._next_id += 1
        op = {"id": self._next_id, **op}
        await self._proc.stdin.send((json.dumps(op) + "\n").encode())
        with anyio.fail_after(timeout):
            while True:
                while b"\n" in self._buffer:
                    line, self._buffer = self._buffer.split(b"\n", 1)
                    if not line.strip():
                        continue
                    msg = json.loads(line)
                    if msg.get("id") != op["id"]:
                        raise AssertionError(f"ts_client.mjs answered out of order: {msg!r} to {op!r}")
                    if msg["ok"]:
                        return msg["result"]
                    err = msg["error"]
                    raise ClientError(err["message"], err.get("code"), err.get("data"))
                chunk = await self._proc.stdout.receive()
                self._buffer += chunk

    async def __aenter__(self) -> TsDriver:
        self._proc = await anyio.open_process(
            [node_bin(), str(self.script)],
            cwd=str(INTEROP_DIR),
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        target: dict[str, Any]
        if self.target.url:
            target = {"url": self.target.url}
        else:
            target = {"command": self.target.command, "args": self.target.args, "env": self.target.env}
        capabilities: dict[str, Any] = {}
        for cap in ("sampling", "elicitation"):
            if cap in self.host.declare:
                capabilities[cap] = {}
        if "elicitation_url" in self.host.declare:
            capabilities["elicitation"] = {"form": {}, "url": {}}
        if self.host.roots and "roots" in self.host.declare:
            capabilities["roots"] = {"listChanged": True}
        try:
            info = await self._send(
                {
                    "op": "connect",
                    "target": target,
                    "capabilities": capabilities,
                    "sampling": {"text": self.host.sampling_text, "model": "interop-fake-model"}
                    if "sampling" in capabilities
                    else None,
                    "elicitation": {"action": "accept", "content": self.host.elicitation_content}
                    if "elicitation" in capabilities
                    else None,
                    "roots": self.host.roots if "roots" in capabilities else None,
                    "timeoutMs": REQUEST_TIMEOUT_S * 1000,
                    **self._connect_extra(),
                }
            )
        except BaseException:
            await self._stop()
            raise
        self.connected = info
        self.protocol_version = info.get("protocolVersion") or ""
        self.server_capabilities = info.get("serverCapabilities") or {}
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            with anyio.move_on_after(10):
                await self._send({"op": "close"}, timeout=10)
        except Exception:  # noqa: BLE001 - closing is best effort; the process is stopped below
            pass
        await self._stop()

    async def _stop(self) -> None:
        proc = self._proc
        if proc is None:
            return
        self._proc = None
        if proc.stdin is not None:
            await proc.stdin.aclose()
        with anyio.move_on_after(5):
            await proc.wait()
        if proc.returncode is None:
            proc.kill()  # by its own PID
            with anyio.move_on_after(5):
                await proc.wait()

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self._send(
            {"op": "request", "method": method, "params": params or {}, "timeoutMs": REQUEST_TIMEOUT_S * 1000}
        )

    async def events(self) -> Events:
        raw = await self._send({"op": "events"})
        for kind in ("sampling", "elicitation", "roots"):
            self.callback_request_ids.extend(e.get("requestId") for e in raw[kind])
        return Events(
            logs=[(e["at"], e["params"]) for e in raw["logs"]],
            sampling=[e["params"] for e in raw["sampling"]],
            elicitation=[e["params"] for e in raw["elicitation"]],
            roots=[e["params"] for e in raw["roots"]],
        )


class Ts2Driver(TsDriver):
    """The official TypeScript SDK v2 client, one `node ts2_client.mjs` process per connection.

    `negotiation`: "legacy" (kind `ts2-legacy`, the SDK's default: `initialize`)
    or "auto" (kind `ts2-2026`: `server/discover` first, 2026-07-28 when the
    server answers it). Its handlers are the same for a server-to-client
    request and for an `input_required` result the SDK fulfils itself.
    """

    script = TS2_DRIVER

    def __init__(self, target: Target, host: Host, negotiation: str) -> None:
        super().__init__(target, host)
        assert negotiation in ("legacy", "auto"), negotiation
        self.negotiation = negotiation
        self.kind = "ts2-2026" if negotiation == "auto" else "ts2-legacy"

    def _connect_extra(self) -> dict[str, Any]:
        return {"negotiation": self.negotiation}

    @property
    def era(self) -> str | None:
        return self.connected.get("era")


def driver(kind: str, target: Target, host: Host, *, direct: bool) -> PyDriver | TsDriver:
    """A client of `kind` (CLIENT_KINDS, or `ts2-legacy` / `ts2-2026`) for `target`;
    `direct`: a backend, not the gateway."""
    if kind == "ts":
        return TsDriver(target, host)
    if kind in ("ts2-legacy", "ts2-2026"):
        return Ts2Driver(target, host, "auto" if kind == "ts2-2026" else "legacy")
    return PyDriver(kind, target, host, direct=direct)


# --------------------------------------------------------------------------
# small helpers over drivers' answers


async def call_tool(c: PyDriver | TsDriver, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """tools/call; a JSON-RPC error becomes {"error": {code, message, data}}."""
    try:
        return await c.request("tools/call", {"name": name, "arguments": arguments})
    except ClientError as e:
        return {"error": {"code": e.code, "message": e.message, "data": e.data}}


def texts(result: dict[str, Any]) -> list[str]:
    """The text blocks of a tool result."""
    return [b.get("text", "") for b in result.get("content", []) if b.get("type") == "text"]


def only(events: Events, kind: str) -> list[dict[str, Any]]:
    """The callback invocations of `kind` (sampling, elicitation, roots), asserting no other ran."""
    others = {k: getattr(events, k) for k in ("sampling", "elicitation", "roots") if k != kind and getattr(events, k)}
    assert not others, f"unexpected callbacks besides {kind}: {others}"
    return getattr(events, kind)


# --------------------------------------------------------------------------
# the MCP Inspector CLI


@dataclass
class InspectorRun:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    def result(self) -> dict[str, Any]:
        assert self.returncode == 0, f"inspector exited {self.returncode}: {self.argv}\n{self.stdout}\n{self.stderr}"
        return json.loads(self.stdout)["result"]


def inspector_config(path: Path, servers: dict[str, Target]) -> Path:
    """An `mcpServers` file for `mcp-inspector --cli --config FILE --server NAME`."""
    entries: dict[str, Any] = {}
    for name, t in servers.items():
        if t.url:
            entries[name] = {"type": "streamable-http", "url": t.url}
        else:
            entry: dict[str, Any] = {"type": "stdio", "command": t.command, "args": t.args}
            if t.env:
                entry["env"] = t.env
            entries[name] = entry
    path.write_text(json.dumps({"mcpServers": entries}, indent=2))
    return path


def inspector(config: Path, server: str, home: Path, *args: str, timeout: float = 60) -> InspectorRun:
    """One `mcp-inspector --cli` run (JSON output) against `server` of `config`.

    HOME and the Inspector's client config point into `home` (a test
    directory), so nothing is read from or written to the real home.
    """
    argv = [
        str(INSPECTOR_BIN),
        "--cli",
        "--config",
        str(config),
        "--server",
        server,
        "--format",
        "json",
        "--quiet",
        *args,
    ]
    env = dict(os.environ, HOME=str(home), MCP_CLIENT_CONFIG_PATH=str(home / "client.json"))
    env.pop("MCP_CATALOG_PATH", None)  # counts as --catalog, which --config excludes
    proc = subprocess.run(
        argv, cwd=str(home), env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout
    )
    return InspectorRun(argv=argv, returncode=proc.returncode, stdout=proc.stdout, stderr=proc.stderr)


def venv_script(name: str) -> str:
    """A console script installed in this interpreter's venv (mcp-server-time, mcp-server-fetch)."""
    path = Path(sys.prefix) / "bin" / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: scripts/test installs it from requirements.txt")
    return str(path)
