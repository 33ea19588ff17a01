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
deleted connection asks again. Clients that take URL elicitation are asked
in their era's way (2025-11-25: -32042, then the completion notification;
2026-07-28, by the TypeScript SDK v2 client: an input request whose
accepted retry is held until the browser has connected). An authorization
server that fetches Client ID Metadata Documents knows the gateway by its
own document's URL.
"""

from __future__ import annotations

import re
import socket
import sys
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
from real_clients import Host, Target, Ts2Driver

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent
ACCESS_TTL_S = 3
TOKENS = {"alice": "tok-alice-0123456789", "bob": "tok-bob-0123456789"}
START = re.compile(r"(http://127\.0\.0\.1:\d+/oauth/start/[0-9a-f]+)")
START_ANY = re.compile(r"(https?://127\.0\.0\.1:\d+/oauth/start/[0-9a-f]+)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Setup:
    gw: Gateway
    callback: str


@contextmanager
def oauth_peers(
    tmp_path: Path, token_log: Path | None = None, *, access_ttl_s: int = ACCESS_TTL_S, auth_env: dict[str, str] | None = None
) -> Iterator[LinePeer]:
    """oidc-provider and the protected backend, started and stopped; yields the backend.
    `token_log`: where the authorization server writes every token it issues;
    `auth_env`: more of its environment."""
    env = {**({"OIDC_TOKEN_LOG": str(token_log)} if token_log else {}), **(auth_env or {})}
    auth: LinePeer = start_line_peer(
        [node_bin(), str(HERE / "oidc_server.mjs"), str(access_ttl_s)],
        "oidc_server listening on",
        tmp_path,
        "oidc",
        cwd=HERE,
        env=env,
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


@contextmanager
def flow_gateway(
    sluice_bin: Path, tmp_path: Path, access_ttl_s: int, *, tls: tuple[Path, Path] | None = None, auth_env: dict[str, str] | None = None
) -> Iterator[Setup]:
    """The peers and a gateway with the code flow for the backend; `tls`:
    (cert, key) of the gateway's own listener, its `public_url` then https."""
    with oauth_peers(tmp_path, access_ttl_s=access_ttl_s, auth_env=auth_env) as backend:
        port = free_port()
        public = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
        listener = f"tls = {{ cert_file = {toml_str(str(tls[0]))}, key_file = {toml_str(str(tls[1]))} }}\n" if tls else ""
        config = (
            f"[server]\npublic_url = {toml_str(public)}\n{listener}"
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


@pytest.fixture
def setup(sluice_bin: Path, tmp_path: Path) -> Iterator[Setup]:
    with flow_gateway(sluice_bin, tmp_path, ACCESS_TTL_S) as s:
        yield s


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
    error -32042 naming the start URL (its user opens it), not a tool error;
    once the browser has connected, the session is told by
    `notifications/elicitation/complete` with the elicitation's id."""
    from mcp import types
    from mcp.shared.exceptions import MCPError, UrlElicitationRequiredError

    async def elicit(*_args, **_kwargs):  # noqa: ANN002, ANN003 - never asked here
        raise AssertionError("the gateway asks nothing in-band")

    completed: list[str] = []
    told = anyio.Event()

    async def on_message(message: object) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, types.ElicitCompleteNotification):
            completed.append(root.params.elicitation_id)
            told.set()

    gw = setup.gw
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKENS['alice']}"}, timeout=30) as http:
        with anyio.fail_after(60):
            async with Client(
                streamable_http_client(gw.mcp_url, http_client=http),
                mode="legacy",
                elicitation_callback=elicit,
                message_handler=on_message,
            ) as client:
                with pytest.raises(MCPError) as raised:
                    await client.call_tool("protected__whoami", {})
                assert raised.value.code == -32042, raised.value.error
                (asked,) = UrlElicitationRequiredError.from_error(raised.value.error).elicitations
                assert asked.mode == "url" and START.match(asked.url), asked
                assert not completed, "told complete before the browser connected"
                status, page = connect(setup, asked.url, "alice")
                assert status == 200, page
                # The notification travels the session's GET stream: waited for, not slept on.
                with anyio.fail_after(10):
                    await told.wait()
                assert completed == [asked.elicitation_id], completed
                result = await client.call_tool("protected__whoami", {})
    assert result.content[0].text == "sub: alice"


class _Browsing(Ts2Driver):
    """The TypeScript SDK v2 client on 2026-07-28 as `who`, whose host opens a
    URL elicitation in a browser that consents as `who` (oauth_browser.py,
    started and not waited for) and answers `action` at once."""

    def __init__(self, s: Setup, who: str, action: str) -> None:
        super().__init__(Target(url=s.gw.mcp_url), Host(declare=("elicitation_url",)), "auto")
        self.extra = {
            "negotiation": "auto",
            "headers": {"Authorization": f"Bearer {TOKENS[who]}"},
            "openUrl": [sys.executable, str(HERE / "oauth_browser.py"), who, s.callback],
            "elicitation": {"action": action},
        }

    def _connect_extra(self) -> dict[str, object]:
        return self.extra


async def test_a_2026_client_is_asked_by_input_request_and_its_retry_waits_for_the_connection(setup: Setup) -> None:
    """2026-07-28 (no -32042, no completion notification): the call of a client
    that declared `elicitation.url` ends `input_required`, asking a URL-mode
    elicitation of the start URL. Its host opens the URL and accepts at once; the
    SDK's retry is held by the gateway until the browser's callback has connected
    alice, then goes on: one `callTool` answers alice's subject."""
    async with _Browsing(setup, "alice", "accept") as client:
        assert client.era == "modern", client.connected
        result = await client.request("tools/call", {"name": "protected__whoami", "arguments": {}})
        seen = await client.events()
    assert result["content"][0]["text"] == "sub: alice", result
    (asked,) = seen.elicitation
    assert asked["mode"] == "url" and START.fullmatch(asked["url"]), asked
    assert "protected" in asked["message"], asked


async def test_a_2026_client_that_declines_gets_the_tools_error(setup: Setup) -> None:
    """Declined: the retry is not held, and the call ends as the tool's error
    naming the backend; nobody connected."""
    async with _Browsing(setup, "bob", "decline") as client:
        result = await client.request("tools/call", {"name": "protected__whoami", "arguments": {}})
    assert result.get("isError") is True, result
    assert "Not connected to protected" in result["content"][0]["text"], result
    assert connections(setup.gw, "bob").json()["connections"][0]["connected"] is False


async def test_where_the_server_takes_client_metadata_documents_the_gateway_is_known_by_its_own(
    sluice_bin: Path, tmp_path: Path
) -> None:
    """An authorization server that fetches Client ID Metadata Documents
    (oidc-provider, that feature on and registration off) and a gateway whose
    `public_url` is https (its own TLS listener; the server trusts the test
    CA): the gateway's `client_id` is its document's URL,
    `{public_url}/.well-known/oauth-client/protected`, which the server
    fetches from it, and alice connects and acts as herself. The document
    names the callback and holds no secret; an unknown backend has none."""
    from test_tls import make_pki

    ca, cert, key = make_pki(tmp_path)
    auth_env = {"OIDC_CLIENT_METADATA": "1", "NODE_EXTRA_CA_CERTS": str(ca)}
    with flow_gateway(sluice_bin, tmp_path, 60, tls=(cert, key), auth_env=auth_env) as s:
        public = s.callback.removesuffix("/oauth/callback")
        await _connect_by_client_metadata(s.gw, public, str(ca))


async def _connect_by_client_metadata(gw: Gateway, public: str, ca: str) -> None:
    import ssl
    import urllib.parse

    trust = ssl.create_default_context(cafile=ca)
    document_url = f"{public}/.well-known/oauth-client/protected"
    document = httpx2.get(document_url, verify=trust, timeout=10)
    assert document.status_code == 200, document.text
    doc = document.json()
    assert doc["client_id"] == document_url, doc
    assert doc["redirect_uris"] == [f"{public}/oauth/callback"], doc
    assert doc["token_endpoint_auth_method"] == "none" and "client_secret" not in doc, doc
    assert httpx2.get(f"{public}/.well-known/oauth-client/nope", verify=trust, timeout=10).status_code == 404

    headers = {"Authorization": f"Bearer {TOKENS['alice']}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30, verify=trust) as http:
        with anyio.fail_after(60):
            async with Client(streamable_http_client(gw.mcp_url, http_client=http), mode="legacy") as client:
                first = await client.call_tool("protected__whoami", {})
                found = START_ANY.search(first.content[0].text)
                assert first.is_error and found, first
                browser = Browser(cafile=ca)
                status, authorize, _ = browser.request(found.group(1))
                assert status == 302, (status, authorize)
                asked = urllib.parse.parse_qs(urllib.parse.urlsplit(authorize).query)
                assert asked["client_id"] == [document_url], asked
                back = browser.consent(authorize, "alice", f"{public}/oauth/callback")
                status, _, page = browser.request(back)
                assert status == 200, page
                result = await client.call_tool("protected__whoami", {})
    assert result.content[0].text == "sub: alice", result


async def test_prompts_and_resources_ask_to_connect_as_tools_do(setup: Setup) -> None:
    """Connected before anyone's session with the backend has opened, alice's
    first lists show what it offers (her link opens to learn it). A prompt or
    a resource of the backend, asked for by a principal without a grant, says
    where to connect as its tools do: JSON-RPC error -32042 to a client that
    takes URL elicitation, else an error whose text names the start URL (there
    is no tool result to carry it). Connected, each answers the principal's
    own subject."""
    from mcp.shared.exceptions import MCPError, UrlElicitationRequiredError

    gw = setup.gw
    status, page = connect(setup, await start_url(gw, "alice"), "alice")
    assert status == 200, page

    async def elicit(*_args, **_kwargs):  # noqa: ANN002, ANN003 - never asked here
        raise AssertionError("the gateway asks nothing in-band")

    def session(who: str, http: httpx2.AsyncClient, url_elicitation: bool) -> Client:
        extra = {"elicitation_callback": elicit} if url_elicitation else {}
        return Client(streamable_http_client(gw.mcp_url, http_client=http), mode="legacy", **extra)

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKENS['alice']}"}, timeout=30) as http:
        with anyio.fail_after(60):
            async with session("alice", http, False) as alice:
                listed = (await alice.list_resources()).resources
                (uri,) = [str(r.uri) for r in listed if "whoami" in str(r.uri)]
                mine = await alice.get_prompt("protected__whoami", {})
    assert mine.messages[0].content.text == "sub: alice", mine

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKENS['bob']}"}, timeout=30) as http:
        with anyio.fail_after(60):
            async with session("bob", http, False) as bob:
                with pytest.raises(MCPError) as refused:
                    await bob.get_prompt("protected__whoami", {})
                assert refused.value.code == -32602, refused.value.error
                found = START.search(refused.value.error.message)
                assert found and "protected" in refused.value.error.message, refused.value.error
            async with session("bob", http, True) as bob:
                with pytest.raises(MCPError) as asked:
                    await bob.read_resource(uri)
                assert asked.value.code == -32042, asked.value.error
                (elicitation,) = UrlElicitationRequiredError.from_error(asked.value.error).elicitations
                status, page = connect(setup, elicitation.url, "bob")
                assert status == 200, page
                prompt = await bob.get_prompt("protected__whoami", {})
                read = await bob.read_resource(uri)
    assert prompt.messages[0].content.text == "sub: bob", prompt
    assert read.contents[0].text == "sub: bob", read
