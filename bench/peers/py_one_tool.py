"""A one-tool MCP server on the official Python SDK (mcp 2.3.0), over
Streamable HTTP, for sluice's benchmark.

    python py_one_tool.py [--stateless] [--idle-timeout SECONDS] [--json-response]

Tool: `echo {text}` returns the text. Listens on 127.0.0.1 only, on a port
the kernel picks, and prints one line once it accepts connections:

    py_one_tool listening on 127.0.0.1:PORT

Stateful (the default) keeps one SDK session per `initialize`, evicted
after --idle-timeout seconds without a request (the SDK default is 30 min;
the benchmark passes the same short TTL it gives sluice) and refused past
the SDK's default cap of 10,000 live sessions. --stateless serves every
request on its own (`stateless_http=True`): no session id is issued.
Logging is at WARNING so that no line is written per request.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

import uvicorn
from mcp.server.mcpserver import MCPServer


def build(args: argparse.Namespace):
    server = MCPServer("py-one-tool", log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        """Returns the text it is given."""
        return text

    return server.streamable_http_app(
        stateless_http=args.stateless,
        json_response=args.json_response,
        session_idle_timeout=None if args.stateless else args.idle_timeout,
        host="127.0.0.1",
    )


async def serve(args: argparse.Namespace) -> None:
    app = build(args)
    # uvicorn binds (port 0: the kernel picks): its sockets come from
    # getaddrinfo with proto=IPPROTO_TCP, which asyncio needs before it sets
    # TCP_NODELAY on accepted connections (a bare socket() has proto 0, and
    # its replies would then wait out the client's delayed ACK).
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", access_log=False, lifespan="on")
    server = uvicorn.Server(config)

    async def announce() -> None:
        while not server.started:
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        print(f"py_one_tool listening on 127.0.0.1:{port}", flush=True)

    task = asyncio.create_task(announce())
    await server.serve()
    task.cancel()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stateless", action="store_true", help="stateless_http=True (no sessions)")
    parser.add_argument("--idle-timeout", type=float, default=1800.0, help="session idle timeout, seconds")
    parser.add_argument("--json-response", action="store_true", help="JSON replies instead of SSE")
    args = parser.parse_args()
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
