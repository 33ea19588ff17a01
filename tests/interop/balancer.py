"""A round-robin HTTP load balancer on 127.0.0.1, for the cluster tests.

It stands for whatever an operator puts in front of sluice replicas: no
session stickiness, every request to the next replica in turn, responses
(SSE included) streamed back as they come. `remove(url)` takes a replica
out of the rotation, as a load balancer's health check would after it
died, and `add(url)` puts one in (a replica restarted on a new port). A
request that finds its replica gone gets 502, as from a real one.

Runs uvicorn (a dependency of the MCP SDK) on its own thread and loop.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import threading
from collections.abc import AsyncIterator

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

# Not forwarded: they describe one hop, not the message.
HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host", "content-length"}


class Balancer:
    def __init__(self, upstreams: list[str]) -> None:
        self._upstreams = list(upstreams)
        self._lock = threading.Lock()
        self._turn = itertools.count()
        # (replica, request body) of every POST, in order.
        self.log: list[tuple[str, str]] = []
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self._sock = sock
        self._client: httpx.AsyncClient | None = None
        app = Starlette(routes=[Route("/{path:path}", self._forward, methods=["GET", "POST", "DELETE"])])
        config = uvicorn.Config(app, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        while not self._server.started:
            self._thread.join(0.02)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def remove(self, upstream: str) -> None:
        with self._lock:
            self._upstreams.remove(upstream)

    def add(self, upstream: str) -> None:
        with self._lock:
            self._upstreams.append(upstream)

    def _next(self) -> str:
        with self._lock:
            return self._upstreams[next(self._turn) % len(self._upstreams)]

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        # No pooling across requests: each goes where its turn says.
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(60, connect=5), limits=httpx.Limits(max_keepalive_connections=0))
        try:
            await self._server.serve(sockets=[self._sock])
        finally:
            await self._client.aclose()

    async def _forward(self, request: Request) -> Response:
        assert self._client is not None
        upstream = self._next()
        content = await request.body()
        if request.method == "POST":
            with self._lock:
                self.log.append((upstream, content.decode(errors="replace")))
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP}
        url = upstream + request.url.path + (f"?{request.url.query}" if request.url.query else "")
        out = self._client.build_request(request.method, url, headers=headers, content=content)
        try:
            resp = await self._client.send(out, stream=True)
        except httpx.HTTPError as e:
            return Response(f"balancer: {upstream} failed: {type(e).__name__}", status_code=502)

        async def body() -> AsyncIterator[bytes]:
            try:
                async for chunk in resp.aiter_raw():
                    yield chunk
            except httpx.HTTPError:
                return  # the replica died mid-response: the client sees the stream end
            finally:
                await resp.aclose()

        kept = {k: v for k, v in resp.headers.items() if k.lower() not in HOP}
        return StreamingResponse(body(), status_code=resp.status_code, headers=kept)

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)
