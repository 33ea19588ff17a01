"""The peers of the authorization code flow with the gateway as the OAuth
client (issue 50), checked on their own: oidc-provider (npm) as the
authorization server (tests/interop/oidc_server.mjs) and the TypeScript
SDK's server behind its bearer middleware as the protected backend
(tests/interop/protected_backend.mjs), driven here by hand the way the MCP
authorization spec (2025-11-25) has a client go, with oauth_browser.py as
the person: 401 and its `resource_metadata`, RFC 9728 metadata, the
server's metadata (RFC 8414, and OpenID discovery alike), dynamic registration, the code with PKCE and the RFC 8707 resource, alice
and bob each with their own subject, an expired access token refused and
refreshed, a revoked grant no longer refreshable.

These are the steps the gateway's own flow must take against the same two
peers; a change in either package that breaks them fails here first.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness import LinePeer, node_bin, start_line_peer, stop_line_peer
from oauth_browser import Browser

HERE = Path(__file__).resolve().parent
ACCESS_TTL_S = 3
REDIRECT = "http://127.0.0.1:9/oauth/callback"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
WHOAMI = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "whoami", "arguments": {}}}


@dataclass
class Peers:
    issuer: str
    backend: str  # the MCP endpoint, the RFC 8707 resource


@pytest.fixture
def peers(tmp_path: Path) -> Iterator[Peers]:
    auth: LinePeer = start_line_peer(
        [node_bin(), str(HERE / "oidc_server.mjs"), str(ACCESS_TTL_S)], "oidc_server listening on", tmp_path, "oidc", cwd=HERE
    )
    try:
        issuer = auth.base_url
        backend: LinePeer = start_line_peer(
            [node_bin(), str(HERE / "protected_backend.mjs"), issuer], "protected_backend listening on", tmp_path, "backend", cwd=HERE
        )
        try:
            yield Peers(issuer=issuer, backend=backend.mcp_url)
        finally:
            stop_line_peer(backend)
    finally:
        stop_line_peer(auth)


def http(url: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, data=body, headers=headers or {}, method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def mcp(backend: str, message: dict, token: str | None) -> tuple[int, dict[str, str], bytes]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return http(backend, json.dumps(message).encode(), headers)


def whoami(backend: str, token: str) -> str:
    status, _, body = mcp(backend, WHOAMI, token)
    assert status == 200, body
    return json.loads(body)["result"]["content"][0]["text"]


def form(url: str, fields: dict[str, str]) -> tuple[int, dict]:
    status, _, body = http(url, urllib.parse.urlencode(fields).encode(), {"Content-Type": "application/x-www-form-urlencoded"})
    return status, json.loads(body or b"{}")


def discover(peers: Peers) -> dict:
    """The spec's discovery, from the 401 on: the server's metadata."""
    status, headers, _ = mcp(peers.backend, INIT, None)
    assert status == 401
    challenge = headers["WWW-Authenticate"]
    assert challenge.startswith("Bearer ")
    prm_url = challenge.split('resource_metadata="')[1].split('"')[0]
    assert prm_url == peers.backend.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    status, _, body = http(prm_url)
    assert status == 200
    prm = json.loads(body)
    assert prm["resource"] == peers.backend
    (server,) = prm["authorization_servers"]
    assert server == peers.issuer
    status, _, body = http(f"{server}/.well-known/oauth-authorization-server")
    assert status == 200, "RFC 8414's URL, the first the spec has a client try"
    meta = json.loads(body)
    status, _, body = http(f"{server}/.well-known/openid-configuration")
    assert status == 200
    assert json.loads(body)["token_endpoint"] == meta["token_endpoint"]
    assert meta["issuer"] == server
    assert "S256" in meta["code_challenge_methods_supported"]
    return meta


def register(meta: dict) -> str:
    status, _, body = http(
        meta["registration_endpoint"],
        json.dumps(
            {
                "client_name": "sluice",
                "redirect_uris": [REDIRECT],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
                "application_type": "web",
            }
        ).encode(),
        {"Content-Type": "application/json"},
    )
    assert status == 201, body
    return json.loads(body)["client_id"]


def connect(meta: dict, client_id: str, backend: str, login: str) -> dict:
    verifier = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    state = secrets.token_urlsafe(16)
    query = urllib.parse.urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": REDIRECT,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": state,
            "resource": backend,
            "scope": "mcp:tools",
        }
    )
    back = Browser().consent(f"{meta['authorization_endpoint']}?{query}", login, REDIRECT)
    params = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(back).query))
    assert params.get("state") == state, params
    assert "code" in params, params
    status, tokens = form(
        meta["token_endpoint"],
        {
            "grant_type": "authorization_code",
            "code": params["code"],
            "redirect_uri": REDIRECT,
            "code_verifier": verifier,
            "resource": backend,
            "client_id": client_id,
        },
    )
    assert status == 200, tokens
    assert tokens["token_type"].lower() == "bearer"
    assert tokens.get("refresh_token"), tokens
    return tokens


def test_two_people_each_act_as_themselves_and_expired_tokens_are_refreshed(peers: Peers) -> None:
    meta = discover(peers)
    client_id = register(meta)
    alice = connect(meta, client_id, peers.backend, "alice")
    bob = connect(meta, client_id, peers.backend, "bob")
    assert whoami(peers.backend, alice["access_token"]) == "sub: alice"
    assert whoami(peers.backend, bob["access_token"]) == "sub: bob"

    time.sleep(ACCESS_TTL_S + 1.5)
    status, headers, _ = mcp(peers.backend, WHOAMI, alice["access_token"])
    assert status == 401, "an expired access token is refused"
    assert "resource_metadata=" in headers["WWW-Authenticate"]
    status, fresh = form(
        meta["token_endpoint"],
        {
            "grant_type": "refresh_token",
            "refresh_token": alice["refresh_token"],
            "resource": peers.backend,
            "client_id": client_id,
        },
    )
    assert status == 200, fresh
    assert whoami(peers.backend, fresh["access_token"]) == "sub: alice"

    # Revoked (RFC 7009), a grant can no longer be refreshed.
    refresh = fresh.get("refresh_token", alice["refresh_token"])
    status, _ = form(
        meta["revocation_endpoint"], {"token": refresh, "token_type_hint": "refresh_token", "client_id": client_id}
    )
    assert status == 200
    status, refused = form(
        meta["token_endpoint"],
        {"grant_type": "refresh_token", "refresh_token": refresh, "resource": peers.backend, "client_id": client_id},
    )
    assert status == 400 and refused["error"] == "invalid_grant", refused


def test_a_token_for_another_resource_is_refused(peers: Peers) -> None:
    meta = discover(peers)
    client_id = register(meta)
    elsewhere = connect(meta, client_id, "http://127.0.0.1:9/other", "alice")
    status, _, body = mcp(peers.backend, WHOAMI, elsewhere["access_token"])
    assert status == 401, body
