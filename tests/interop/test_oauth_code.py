"""The gateway as each principal's OAuth client of a backend (issue 50,
`oauth.flow = "authorization_code"`), end to end against peers no one here
wrote: oidc-provider (tests/interop/oidc_server.mjs) as the authorization
server, the TypeScript SDK's server behind its bearer middleware
(tests/interop/protected_backend.mjs) as the backend, oauth_browser.py as
each person's browser, and the official Python SDK client as each
person's MCP client, authenticated to the gateway by a static token.

alice calls `protected__whoami` and is told, as the tool's error, where to
connect; her browser opens that URL, logs in as alice and consents; her
retry answers her subject. bob likewise gets his own. A used start URL, a
forged state and a callback replayed in another browser are refused with
a 400 page and give nobody a grant; an expired access token is refreshed
without the caller seeing it; `/oauth/connections` shows no token; a
deleted connection asks again.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from harness import Gateway, LinePeer, node_bin, start_gateway, start_line_peer, stop_gateway, stop_line_peer, toml_str
from oauth_browser import Browser

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent
ACCESS_TTL_S = 3
TOKENS = {"alice": "tok-alice-0123456789", "bob": "tok-bob-0123456789"}
START = re.compile(r"(http://127\.0\.0\.1:\d+/oauth/start/[0-9a-f]+)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Setup:
    gw: Gateway
    callback: str


@contextmanager
def oauth_peers(tmp_path: Path, token_log: Path | None = None) -> Iterator[LinePeer]:
    """oidc-provider and the protected backend, started and stopped; yields the backend.
    `token_log`: where the authorization server writes every token it issues."""
    env = {"OIDC_TOKEN_LOG": str(token_log)} if token_log else None
    auth: LinePeer = start_line_peer(
        [node_bin(), str(HERE / "oidc_server.mjs"), str(ACCESS_TTL_S)], "oidc_server listening on", tmp_path, "oidc", cwd=HERE, env=env
    )
    try:
        backend: LinePeer = start_line_peer(
            [node_bin(), str(HERE / "protected_backend.mjs"), auth.base_url],
            "protected_backend listening on",
            tmp_path,
            "backend",
            cwd=HERE,
        )
        try:
            yield backend
        finally:
            stop_line_peer(backend)
    finally:
        stop_line_peer(auth)


@pytest.fixture
def setup(sluice_bin: Path, tmp_path: Path) -> Iterator[Setup]:
    with oauth_peers(tmp_path) as backend:
        port = free_port()
        public = f"http://127.0.0.1:{port}"
        config = (
            f"[server]\npublic_url = {toml_str(public)}\n"
            '[auth]\nbearer_tokens_env = "GW_TOKENS"\n'
            f'[backends.protected]\ntransport = "http"\nurl = {toml_str(backend.mcp_url)}\n'
            'oauth = { flow = "authorization_code" }\n'
        )
        env = {"GW_TOKENS": ",".join(f"{k}={v}" for k, v in TOKENS.items()), "SLUICE_LOG": "info,sluice::audit=info"}
        gw = start_gateway(sluice_bin, tmp_path, config, listen=f"127.0.0.1:{port}", env=env)
        try:
            yield Setup(gw=gw, callback=f"{public}/oauth/callback")
        finally:
            stop_gateway(gw)


async def whoami(gw: Gateway, who: str) -> tuple[bool, str]:
    """(is an error, text) of `protected__whoami` as `who`, by the Python SDK client."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKENS[who]}"}, timeout=30) as http:
        with anyio.fail_after(60):
            async with Client(streamable_http_client(gw.mcp_url, http_client=http), mode="legacy") as client:
                result = await client.call_tool("protected__whoami", {})
    error = getattr(result, "is_error", None)
    if error is None:
        error = getattr(result, "isError", False)
    return bool(error), result.content[0].text


async def start_url(gw: Gateway, who: str) -> str:
    error, text = await whoami(gw, who)
    assert error, text
    assert "protected" in text and "retry" in text, text
    found = START.search(text)
    assert found, text
    return found.group(1)


def connect(s: Setup, start: str, login: str, browser: Browser | None = None) -> tuple[int, str]:
    """The person's browser: start URL, login, consent, callback; the callback's (status, page)."""
    browser = browser or Browser()
    back = browser.consent(start, login, s.callback)
    status, _, page = browser.request(back)
    return status, page


def connections(gw: Gateway, who: str) -> httpx2.Response:
    return httpx2.get(gw.base_url + "/oauth/connections", headers={"Authorization": f"Bearer {TOKENS[who]}"}, timeout=10)


async def test_each_principal_connects_and_acts_as_itself(setup: Setup) -> None:
    gw = setup.gw

    # alice: told where to connect, connects, is herself.
    alice_start = await start_url(gw, "alice")
    status, page = connect(setup, alice_start, "alice")
    assert status == 200 and "Connected to protected" in page, page
    assert await whoami(gw, "alice") == (False, "sub: alice")

    # A used start URL: refused, with a plain page saying so.
    status, _, page = Browser().request(alice_start)
    assert status == 400 and "already been used" in page, page

    # bob is still not connected: his calls ask him to.
    bob_start = await start_url(gw, "bob")
    assert bob_start != alice_start

    # bob's flow, its callback replayed in another browser (no flow cookie):
    # refused, and nobody gets a grant from it.
    mine = Browser()
    back = mine.consent(bob_start, "bob", setup.callback)
    status, _, page = Browser().request(back)
    assert status == 400 and "not issued by this gateway for this browser" in page, page
    error, _ = await whoami(gw, "bob")
    assert error, "a callback in another browser gave bob a grant"

    # A forged state: refused.
    status, _, page = mine.request(setup.callback + "?code=x&state=f1.forged")
    assert status == 400, page

    # In bob's own browser the same callback connects bob, as bob.
    status, _, page = mine.request(back)
    assert status == 200, page
    assert await whoami(gw, "bob") == (False, "sub: bob")
    assert await whoami(gw, "alice") == (False, "sub: alice"), "bob's grant is not alice's"

    # Expired access tokens are refreshed before the call, unseen by it.
    time.sleep(ACCESS_TTL_S + 1.5)
    assert await whoami(gw, "alice") == (False, "sub: alice")
    assert "oauth grant refreshed" in gw.stderr_tail(100_000)

    # /oauth/connections: the caller's own, never a token.
    r = connections(gw, "alice")
    assert r.status_code == 200, r.text
    (conn,) = r.json()["connections"]
    assert conn["backend"] == "protected" and conn["connected"] is True, conn
    assert "eyJ" not in r.text and "token" not in r.text.replace("refreshable", ""), r.text
    assert httpx2.get(gw.base_url + "/oauth/connections", timeout=10).status_code == 401

    metrics = gw.metrics()
    assert metrics.value("sluice_oauth_grants", backend="protected") == 2
    assert metrics.value("sluice_oauth_flows_total", backend="protected", result="connected") == 2
    assert metrics.value("sluice_oauth_flows_total", backend="unknown", result="used") == 1
    assert metrics.value("sluice_oauth_flows_total", backend="unknown", result="other_browser") == 2

    # A deleted connection: revoked, forgotten; the next call asks again.
    url = gw.base_url + "/oauth/connections/protected"
    alice_auth = {"Authorization": f"Bearer {TOKENS['alice']}"}
    assert httpx2.delete(url, headers=alice_auth, timeout=10).status_code == 204
    assert httpx2.delete(url, headers=alice_auth, timeout=10).status_code == 404
    await start_url(gw, "alice")
    assert await whoami(gw, "bob") == (False, "sub: bob"), "alice's disconnect left bob's grant"
    (conn,) = connections(gw, "alice").json()["connections"]
    assert conn["connected"] is False and START.match(conn["start_url"]), conn

    # The start URL /oauth/connections gives connects too.
    status, page = connect(setup, conn["start_url"], "alice")
    assert status == 200, page
    assert await whoami(gw, "alice") == (False, "sub: alice")
    log = gw.stderr_tail(1_000_000)
    assert "oauth connected" in log and "oauth disconnected" in log


async def test_a_client_that_takes_url_elicitation_is_sent_the_start_url_as_one(setup: Setup) -> None:
    """2025-11-25: a client that declared `elicitation.url` gets JSON-RPC
    error -32042 naming the start URL (its user opens it), not a tool error."""
    from mcp.shared.exceptions import MCPError, UrlElicitationRequiredError

    async def elicit(*_args, **_kwargs):  # noqa: ANN002, ANN003 - never asked here
        raise AssertionError("the gateway asks nothing in-band")

    gw = setup.gw
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKENS['alice']}"}, timeout=30) as http:
        with anyio.fail_after(60):
            async with Client(
                streamable_http_client(gw.mcp_url, http_client=http), mode="legacy", elicitation_callback=elicit
            ) as client:
                with pytest.raises(MCPError) as raised:
                    await client.call_tool("protected__whoami", {})
                assert raised.value.code == -32042, raised.value.error
                (asked,) = UrlElicitationRequiredError.from_error(raised.value.error).elicitations
                assert asked.mode == "url" and START.match(asked.url), asked
                status, page = connect(setup, asked.url, "alice")
                assert status == 200, page
                result = await client.call_tool("protected__whoami", {})
    assert result.content[0].text == "sub: alice"
