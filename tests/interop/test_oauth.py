"""sluice as an OAuth 2.1 resource server, against an authorization server
no one here wrote: oauth2-mock-server (npm), on loopback, with real RS256
keys (tests/interop/oauth_server.mjs). The official Python SDK client runs
its whole OAuth flow against the gateway (401, protected resource
metadata, authorization server metadata, authorization code with PKCE,
token with the RFC 8707 resource) and calls a tool; tokens that are
expired, for another audience or issuer, unsigned, HMAC-signed, signed by
an unknown key or short of a scope are each refused with their status.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from harness import Gateway, node_bin, start_gateway, stop_gateway, toml_str

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent
SCOPE = "mcp:tools"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}


@dataclass
class AuthServer:
    proc: subprocess.Popen[str]
    issuer: str
    control: str

    def mint(self, claims: dict | None = None, expires_in: int = 3600, kid: str | None = None) -> str:
        spec = {"claims": claims or {}, "expiresIn": expires_in}
        if kid:
            spec["kid"] = kid
        return self._post("/mint", spec)["token"]

    def rotate(self) -> str:
        return self._post("/rotate", {})["kid"]

    def _post(self, path: str, body: dict) -> dict:
        req = urllib.request.Request(self.control + path, data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())


def start_auth_server() -> AuthServer:
    proc = subprocess.Popen(
        [node_bin(), str(HERE / "oauth_server.mjs")],
        cwd=HERE,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(30)
    if not line or not line[0].startswith("oauth issuer "):
        proc.kill()
        pytest.fail(f"the authorization server did not start: {line!r} {proc.stderr.read()[-2000:]}")
    _, _, issuer, _, control = line[0].split()
    return AuthServer(proc=proc, issuer=issuer, control=control)


def stop_auth_server(server: AuthServer) -> None:
    if server.proc.poll() is None:
        os.kill(server.proc.pid, signal.SIGTERM)
        try:
            server.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.proc.kill()


@pytest.fixture
def auth_server() -> Iterator[AuthServer]:
    server = start_auth_server()
    yield server
    stop_auth_server(server)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def recorder(sluice_bin) -> Iterator[str]:
    """An HTTP MCP backend (our fault-injection fixture, `ok` mode) whose
    `/seen` lists the headers of every request it got."""
    binary = Path(sluice_bin).parent / "examples" / "faulty_backend"
    proc = subprocess.Popen(
        [str(binary), "--transport", "http", "--listen", "127.0.0.1:0", "--mode", "ok", "--max-lifetime", "300"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, FIXTURE_LOG="off"),
        start_new_session=True,
    )
    line = proc.stdout.readline().strip()
    assert line.startswith("faulty_backend listening on "), line
    yield "http://" + line.rsplit(" ", 1)[1]
    proc.kill()
    proc.wait(timeout=10)


@pytest.fixture
def gateway(sluice_bin, tmp_path, auth_server, recorder) -> Iterator[tuple[Gateway, str]]:
    port = free_port()
    audience = f"http://127.0.0.1:{port}/mcp"
    config = (
        "[auth]\n"
        f"oauth = {{ issuer = {toml_str(auth_server.issuer)}, audience = {toml_str(audience)}, "
        f"required_scopes = [{toml_str(SCOPE)}] }}\n"
        f"[backends.demo]\ncommand = {toml_str(str(sluice_bin))}\nargs = [\"demo-server\"]\n"
        f"[backends.web]\ntransport = \"http\"\nurl = {toml_str(recorder + '/mcp')}\n"
    )
    gw = start_gateway(sluice_bin, tmp_path, config, listen=f"127.0.0.1:{port}")
    yield gw, audience
    stop_gateway(gw)


def post(url: str, token: str | None, body: dict = INIT) -> httpx2.Response:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return httpx2.post(url, headers=headers, json=body, timeout=10)


def good_claims(audience: str) -> dict:
    return {"aud": audience, "sub": "alice", "scope": SCOPE}


def b64(data: dict | bytes) -> str:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


async def test_metadata_and_the_challenge_point_clients_to_the_issuer(gateway, auth_server):
    gw, audience = gateway
    for path in ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"]:
        r = httpx2.get(gw.base_url + path, timeout=10)
        assert r.status_code == 200, (path, r.text)
        doc = r.json()
        assert doc["resource"] == audience
        assert doc["authorization_servers"] == [auth_server.issuer]
        assert doc["scopes_supported"] == [SCOPE]
        assert doc["bearer_methods_supported"] == ["header"]
    assert httpx2.get(gw.base_url + "/.well-known/oauth-protected-resource/elsewhere").status_code == 404

    r = post(gw.mcp_url, None)
    assert r.status_code == 401
    challenge = r.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="http://{gw.addr}/.well-known/oauth-protected-resource/mcp"' in challenge
    assert f'scope="{SCOPE}"' in challenge
    assert "error=" not in challenge  # no token was presented


async def test_each_bad_token_is_refused_with_its_status(gateway, auth_server):
    gw, audience = gateway
    ok = auth_server.mint(good_claims(audience))
    r = post(gw.mcp_url, ok)
    assert r.status_code == 200, r.text
    assert r.headers.get("mcp-session-id")

    unsigned = f"{b64({'alg': 'none', 'typ': 'JWT'})}.{b64(dict(good_claims(audience), iss=auth_server.issuer, exp=int(time.time()) + 600))}."
    header, payload, _ = ok.split(".")
    hmac_header = b64({"alg": "HS256", "typ": "JWT", "kid": json.loads(base64.urlsafe_b64decode(header + "=="))["kid"]})
    hs256 = f"{hmac_header}.{payload}."
    hs256 += b64(hmac.new(b"guessed", hs256[:-1].encode(), hashlib.sha256).digest())
    bad = {
        "expired": auth_server.mint(good_claims(audience), expires_in=-300),
        "not yet valid": auth_server.mint(dict(good_claims(audience), nbf=int(time.time()) + 3600)),
        "another audience": auth_server.mint(dict(good_claims(audience), aud="https://elsewhere.example/mcp")),
        "no audience": auth_server.mint(dict(good_claims(audience), aud=None)),
        "another issuer": auth_server.mint(dict(good_claims(audience), iss="https://evil.example")),
        "no subject": auth_server.mint(dict(good_claims(audience), sub=None)),
        "alg none": unsigned,
        "HMAC": hs256,
        "tampered": f"{header}.{b64(dict(good_claims(audience), sub='mallory', iss=auth_server.issuer, exp=int(time.time()) + 600))}.{ok.split('.')[2]}",
        "garbage": "not-a-jwt",
    }
    for why, token in bad.items():
        r = post(gw.mcp_url, token)
        assert r.status_code == 401, (why, r.status_code, r.text)
        assert 'error="invalid_token"' in r.headers["www-authenticate"], why
        assert r.json()["error"]["message"].startswith("Unauthorized"), why
        # The refusal never echoes the token.
        assert token not in r.text and token not in r.headers["www-authenticate"], why

    # A valid token without the required scope: 403, and the scope to ask for.
    r = post(gw.mcp_url, auth_server.mint(dict(good_claims(audience), scope="other")))
    assert r.status_code == 403, r.text
    challenge = r.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge and f'scope="{SCOPE}"' in challenge
    assert "resource_metadata=" in challenge
    # `scp` as a list is read as well.
    r = post(gw.mcp_url, auth_server.mint(dict(good_claims(audience), scope=None, scp=[SCOPE])))
    assert r.status_code == 200, r.text


async def test_a_remembered_token_still_expires(gateway, auth_server):
    """A token checked once is remembered (no second signature check), but
    its times are judged at every request: one accepted within the 30 s
    leeway past its `exp` is refused once the leeway is over."""
    gw, audience = gateway
    late = auth_server.mint(good_claims(audience), expires_in=-24)
    assert post(gw.mcp_url, late).status_code == 200
    # Waits for time itself, by the token's own clock: past `exp` + 30 s.
    payload = late.split(".")[1]
    exp = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["exp"]
    await anyio.sleep(max(0.0, exp + 31 - time.time()))
    r = post(gw.mcp_url, late)
    assert r.status_code == 401, r.text
    assert 'error="invalid_token"' in r.headers["www-authenticate"]


async def test_a_session_belongs_to_its_subject(gateway, auth_server):
    gw, audience = gateway
    alice = auth_server.mint(good_claims(audience))
    bob = auth_server.mint(dict(good_claims(audience), sub="bob"))
    r = post(gw.mcp_url, alice)
    sid = r.headers["mcp-session-id"]
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-session-id": sid,
    }
    r = httpx2.post(gw.mcp_url, headers=dict(headers, authorization=f"Bearer {alice}"), json=ping)
    assert r.status_code == 200, r.text
    r = httpx2.post(gw.mcp_url, headers=dict(headers, authorization=f"Bearer {bob}"), json=ping)
    assert r.status_code == 404, r.text
    # A new token for the same subject (as after a refresh) keeps the session.
    again = auth_server.mint(dict(good_claims(audience), jti="second"))
    r = httpx2.post(gw.mcp_url, headers=dict(headers, authorization=f"Bearer {again}"), json=ping)
    assert r.status_code == 200, r.text


async def test_a_rotated_key_is_fetched_and_a_made_up_one_refused(gateway, auth_server):
    gw, audience = gateway
    assert post(gw.mcp_url, auth_server.mint(good_claims(audience))).status_code == 200
    new_kid = auth_server.rotate()
    rotated = auth_server.mint(good_claims(audience), kid=new_kid)
    # The gateway fetches the keys again for an unknown key id, at most
    # once every 5 s: within a few seconds the new key is accepted. Each
    # try is what makes it fetch; between tries this waits for time itself.
    deadline = time.monotonic() + 15
    status = None
    while time.monotonic() < deadline:
        status = post(gw.mcp_url, rotated).status_code
        if status == 200:
            break
        await anyio.sleep(1)
    assert status == 200
    # A key id the issuer never published is refused.
    header, payload, signature = rotated.split(".")
    made_up = b64(dict(json.loads(base64.urlsafe_b64decode(header + "==")), kid="made-up"))
    assert post(gw.mcp_url, f"{made_up}.{payload}.{signature}").status_code == 401
    log = gw.stderr_tail()
    assert "issuer signing keys fetched" in log


async def test_a_namespace_may_need_more_scopes(sluice_bin, tmp_path, auth_server):
    port = free_port()
    audience = f"http://127.0.0.1:{port}/mcp"
    demo = f"command = {toml_str(str(sluice_bin))}\nargs = [\"demo-server\"]\n"
    config = (
        "[auth]\n"
        f"oauth = {{ issuer = {toml_str(auth_server.issuer)}, audience = {toml_str(audience)}, "
        f"required_scopes = [{toml_str(SCOPE)}] }}\n"
        f"[backends.demo]\n{demo}"
        "[namespaces.default]\nbackends = [\"demo\"]\n"
        "[namespaces.admin]\nbackends = [\"demo\"]\nrequire_scopes = [\"mcp:admin\"]\n"
    )
    gw = start_gateway(sluice_bin, tmp_path, config, listen=f"127.0.0.1:{port}")
    try:
        admin = gw.ns_url("admin")
        doc = httpx2.get(gw.base_url + "/.well-known/oauth-protected-resource/ns/admin/mcp", timeout=10).json()
        assert doc["resource"] == admin
        assert doc["scopes_supported"] == [SCOPE, "mcp:admin"]
        tools_only = auth_server.mint(good_claims(audience))
        assert post(gw.mcp_url, tools_only).status_code == 200
        r = post(admin, tools_only)
        assert r.status_code == 403, r.text
        assert f'scope="{SCOPE} mcp:admin"' in r.headers["www-authenticate"]
        assert "/.well-known/oauth-protected-resource/ns/admin/mcp" in r.headers["www-authenticate"]
        both = auth_server.mint(dict(good_claims(audience), scope=f"{SCOPE} mcp:admin"))
        assert post(admin, both).status_code == 200
        # A token for the namespace's own resource URL (RFC 8707) is accepted
        # there, and only there.
        own = auth_server.mint(dict(good_claims(admin), scope=f"{SCOPE} mcp:admin"))
        assert post(admin, own).status_code == 200
        assert post(gw.mcp_url, own).status_code == 401
    finally:
        stop_gateway(gw)


async def test_a_tool_needing_a_scope_is_absent_without_it(sluice_bin, tmp_path, auth_server):
    """`[namespaces.NAME] tool_scopes`: hidden from lists and refused on call
    for a token without the scope; a static token is not scoped."""
    port = free_port()
    audience = f"http://127.0.0.1:{port}/mcp"
    config = (
        "[auth]\nbearer_tokens_env = \"STATIC\"\n"
        f"oauth = {{ issuer = {toml_str(auth_server.issuer)}, audience = {toml_str(audience)} }}\n"
        f"[backends.demo]\ncommand = {toml_str(str(sluice_bin))}\nargs = [\"demo-server\"]\n"
        "[namespaces.default]\nbackends = [\"demo\"]\n"
        "tool_scopes = { \"demo__add\" = [\"mcp:math\"], \"demo__s*\" = [\"mcp:slow\"] }\n"
    )
    gw = start_gateway(sluice_bin, tmp_path, config, listen=f"127.0.0.1:{port}", env={"STATIC": "operator-token"})

    def session(token: str) -> dict[str, str]:
        r = post(gw.mcp_url, token)
        assert r.status_code == 200, r.text
        return {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-session-id": r.headers["mcp-session-id"],
            "authorization": f"Bearer {token}",
        }

    def tools(headers: dict[str, str]) -> set[str]:
        r = httpx2.post(gw.mcp_url, headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        return {t["name"] for t in r.json()["result"]["tools"]}

    def add(headers: dict[str, str], name: str = "demo__add") -> dict:
        call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": name, "arguments": {"a": 1, "b": 2}}}
        return httpx2.post(gw.mcp_url, headers=headers, json=call).json()

    try:
        everything = tools(session("operator-token"))
        assert {"demo__add", "demo__sleep_ms", "demo__echo"} <= everything
        plain = session(auth_server.mint(dict(good_claims(audience), scope="")))
        assert tools(plain) == everything - {"demo__add", "demo__sleep_ms"}
        refused = add(plain)
        assert refused["error"]["message"] == "Unknown tool: demo__add", refused
        # Patterns match the gateway's names case-sensitively; a case variant
        # is no name the gateway lists, so the gateway itself refuses it
        # (the backend's own refusal would name `ADD`).
        for variant in ("demo__ADD", "demo__Add"):
            refused = add(plain, variant)
            assert refused["error"] == {"code": -32602, "message": f"Unknown tool: {variant}"}, refused
        math = session(auth_server.mint(dict(good_claims(audience), scope="mcp:math")))
        assert tools(math) == everything - {"demo__sleep_ms"}
        assert add(math)["result"]["content"][0]["text"] == "3"
    finally:
        stop_gateway(gw)


async def test_a_backend_gets_the_gateways_own_token_never_the_clients(sluice_bin, tmp_path, auth_server, recorder):
    """`[backends.NAME] oauth`: the client credentials grant, refreshed."""
    port = free_port()
    audience = f"http://127.0.0.1:{port}/mcp"
    backend_resource = "https://backend.example/mcp"
    config = (
        "[auth]\n"
        f"oauth = {{ issuer = {toml_str(auth_server.issuer)}, audience = {toml_str(audience)} }}\n"
        f"[backends.web]\ntransport = \"http\"\nurl = {toml_str(recorder + '/mcp')}\n"
        f"oauth = {{ token_url = {toml_str(auth_server.issuer + '/token')}, client_id = \"sluice gw\", "
        f"client_secret_env = \"GW_SECRET\", scopes = [\"backend:read\"], resource = {toml_str(backend_resource)} }}\n"
    )
    gw = start_gateway(sluice_bin, tmp_path, config, listen=f"127.0.0.1:{port}", env={"GW_SECRET": "s3cret:&="})
    try:
        client_token = auth_server.mint(dict(good_claims(audience), scope=None))
        r = post(gw.mcp_url, client_token)
        assert r.status_code == 200, r.text
        sid = r.headers["mcp-session-id"]
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-session-id": sid,
            "authorization": f"Bearer {client_token}",
        }
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "web__echo", "arguments": {"text": "x"}}}
        seen_tokens: set[str] = set()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(seen_tokens) < 2:
            r = httpx2.post(gw.mcp_url, headers=headers, json=call, timeout=10)
            assert r.status_code == 200, r.text
            for req in httpx2.get(recorder + "/seen", timeout=10).json():
                value = req["headers"].get("authorization", "")
                assert client_token not in value
                if value.startswith("Bearer "):
                    seen_tokens.add(value[len("Bearer "):])
            # Waits for time itself: the gateway's token lives 6 s.
            await anyio.sleep(1)
        # Every backend request carried a token, and it was refreshed (6 s life).
        assert len(seen_tokens) >= 2, seen_tokens
        for token in seen_tokens:
            claims = jwt_claims(token)
            assert claims["iss"] == auth_server.issuer
            assert claims["aud"] == backend_resource
            assert claims["scope"] == "backend:read"
            # client_secret_basic, form-encoded: the id survives its space.
            assert claims["sub"] == "sluice gw"
        assert "s3cret" not in gw.stderr_tail()
    finally:
        stop_gateway(gw)


def jwt_claims(token: str) -> dict:
    return json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))


async def test_a_backend_sees_the_user_through_an_exchanged_token(sluice_bin, tmp_path, auth_server, recorder):
    """`oauth.exchange`: each client's call carries a token the authorization
    server exchanged for the client's (RFC 8693): the user's `sub`, the
    backend's audience, the gateway as the actor. One exchange per client
    token, however many calls; the gateway's own requests keep its own
    token; a static token, which cannot be exchanged, gets an error and
    reaches nothing."""
    port = free_port()
    audience = f"http://127.0.0.1:{port}/mcp"
    backend_resource = "https://backend.example/mcp"
    config = (
        "[auth]\nbearer_tokens_env = \"TOKENS\"\n"
        f"oauth = {{ issuer = {toml_str(auth_server.issuer)}, audience = {toml_str(audience)} }}\n"
        f"[backends.web]\ntransport = \"http\"\nurl = {toml_str(recorder + '/mcp')}\n"
        f"oauth = {{ token_url = {toml_str(auth_server.control + '/token')}, client_id = \"sluice gw\", "
        f"client_secret_env = \"GW_SECRET\", resource = {toml_str(backend_resource)}, "
        "exchange = { scopes = [\"backend:user\"] } }\n"
    )
    gw = start_gateway(
        sluice_bin, tmp_path, config, listen=f"127.0.0.1:{port}", env={"GW_SECRET": "s3cret", "TOKENS": "static-one"}
    )
    try:
        tokens = {who: auth_server.mint({"aud": audience, "sub": who}) for who in ("alice", "bob")}
        tokens["static"] = "static-one"
        results = {}
        for who, token in tokens.items():
            r = post(gw.mcp_url, token)
            assert r.status_code == 200, r.text
            headers = {
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
                "mcp-session-id": r.headers["mcp-session-id"],
                "authorization": f"Bearer {token}",
            }
            results[who] = []
            for i in range(3):
                call = {"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
                        "params": {"name": "web__echo", "arguments": {"text": f"{who}{i}"}}}
                r = httpx2.post(gw.mcp_url, headers=headers, json=call, timeout=10)
                assert r.status_code == 200, r.text
                results[who].append(r.json() if r.headers["content-type"].startswith("application/json") else r.text)
        for who in ("alice", "bob"):
            for i, answer in enumerate(results[who]):
                assert answer["result"]["content"][0]["text"] == f"{who}{i}", answer
        for answer in results["static"]:
            assert "error" in answer, answer
            assert "cannot be called for this client" in answer["error"]["message"], answer
            assert "static-one" not in json.dumps(answer)

        seen = httpx2.get(recorder + "/seen", timeout=10).json()
        by_sub: dict[str, list[dict]] = {}
        for req in seen:
            value = req["headers"].get("authorization", "")
            for raw in tokens.values():
                assert raw not in value, "a client's own token reached the backend"
            assert value.startswith("Bearer "), req
            claims = jwt_claims(value[len("Bearer "):])
            assert claims["iss"] == auth_server.issuer
            assert claims["aud"] == backend_resource
            by_sub.setdefault(claims["sub"], []).append(claims)
        # Three calls each, in the user's name, the gateway acting.
        for who in ("alice", "bob"):
            assert len(by_sub.get(who, [])) == 3, {k: len(v) for k, v in by_sub.items()}
            assert all(c["act"] == {"sub": "sluice gw"} and c["scope"] == "backend:user" for c in by_sub[who])
        # Everything else (initialize, lists) is the gateway's own.
        assert set(by_sub) == {"alice", "bob", "sluice gw"}, set(by_sub)
        assert not any(r.get("act") for r in by_sub["sluice gw"])
        # One exchange per client token: the rest came from the cache.
        made = httpx2.get(auth_server.control + "/exchanges", timeout=10).json()
        assert sorted(e["sub"] for e in made) == ["alice", "bob"], made
        assert "s3cret" not in gw.stderr_tail()
    finally:
        stop_gateway(gw)


class MemoryStorage(TokenStorage):
    """A client registered with the authorization server beforehand."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client = OAuthClientInformationFull(
            client_id="sluice-test-client",
            redirect_uris=["http://127.0.0.1:9/callback"],
            token_endpoint_auth_method="none",
            grant_types=["authorization_code", "refresh_token"],
        )

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def test_the_python_sdk_client_completes_its_oauth_flow(gateway, auth_server, recorder):
    """401 -> metadata -> authorize (PKCE) -> token -> initialize and a call."""
    gw, audience = gateway
    redirect: dict[str, str] = {}

    async def open_browser(url: str) -> None:
        # The mock authorization server approves at once: follow it by hand.
        async with httpx2.AsyncClient() as http:
            r = await http.get(url, follow_redirects=False)
        assert r.status_code in (302, 303), r.text
        redirect["location"] = r.headers["location"]

    async def callback() -> AuthorizationCodeResult:
        query = httpx2.URL(redirect["location"]).params
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))

    storage = MemoryStorage()
    provider = OAuthClientProvider(
        server_url=audience,
        client_metadata=OAuthClientMetadata(
            client_name="sluice-test", redirect_uris=["http://127.0.0.1:9/callback"], scope=SCOPE
        ),
        storage=storage,
        redirect_handler=open_browser,
        callback_handler=callback,
    )
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        with anyio.fail_after(60):
            async with Client(streamable_http_client(audience, http_client=http), mode="legacy") as client:
                result = await client.call_tool("demo__add", {"a": 2, "b": 3})
    assert result.content[0].text == "5"
    # No token passthrough: the HTTP backend never saw the client's token.
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        with anyio.fail_after(60):
            async with Client(streamable_http_client(audience, http_client=http), mode="legacy") as client:
                echoed = await client.call_tool("web__echo", {"text": "hi"})
    assert echoed.content[0].text == "hi"
    seen = httpx2.get(recorder + "/seen", timeout=10).json()
    assert any(r["method"] == "POST" for r in seen)
    assert all("authorization" not in r["headers"] for r in seen), seen
    assert storage.tokens.access_token not in json.dumps(seen)
    # The token it got names the gateway as its audience (RFC 8707).
    assert storage.tokens is not None
    claims = jwt_claims(storage.tokens.access_token)
    assert claims["aud"] == audience


def test_the_typescript_sdk_client_completes_its_oauth_flow(gateway, auth_server, recorder):
    """The same flow, by the official TypeScript SDK client (ts_oauth_client.mjs)."""
    gw, audience = gateway
    out = subprocess.run(
        [node_bin(), str(HERE / "ts_oauth_client.mjs"), audience, SCOPE],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["text"] == "5", got
    # The 401 sent it to authorize (its connect then failed), the code
    # became a token, and the second connect went through with it.
    assert got["steps"] == ["authorize", "unauthorized", "tokens"], got
    params = got["authorizeParams"]
    assert params["code_challenge_method"] == "S256" and params["code_challenge"], params
    assert params["resource"] == audience, params
    claims = jwt_claims(got["token"])
    assert claims["aud"] == audience and SCOPE in claims["scope"].split(), claims
    # The gateway's log names neither the token nor its subject's id.
    assert got["token"] not in gw.stderr_tail()
