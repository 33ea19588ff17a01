"""The authorization code flow across replicas (issue 50, `[cluster]`): two
sluice replicas sharing a real `redis-server` and SLUICE_SESSION_KEY, the
same peers as test_oauth_code.py (oidc-provider as the authorization
server, the TypeScript SDK's protected server as the backend, a browser
played by oauth_browser.py, the official Python SDK as each person's MCP
client).

alice's start URL comes from replica 1 and is opened on replica 2; the
authorization server sends her browser back to the callback on replica 1
(the public URL); her calls through replica 2 then carry her subject, and
replica 2 counts the grant Redis holds. bob is still asked to connect, on
either replica; his start URL, from replica 2, is opened on replica 1 and
his callback lands on replica 2. Both replicas are restarted (same Redis,
same key): alice's and bob's grants still work, nobody is asked again, and
the access tokens have expired meanwhile, so the grants are refreshed
(refresh tokens rotate: one replica's refresh at a time). Every key and
value under `sluice:` in Redis is read: no access or refresh token the
authorization server ever issued is there in clear. A DELETE of alice's
connection on replica 1 makes replica 2 ask her again.
"""

from __future__ import annotations

import re
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx2
import pytest

from harness import Gateway, start_gateway, stop_gateway, toml_str
from oauth_browser import Browser
from test_cluster import redis_url  # noqa: F401 - the fixture: a redis-server of our own
from test_oauth_code import ACCESS_TTL_S, START, TOKENS, oauth_peers, whoami

pytestmark = pytest.mark.anyio



def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Replicas:
    ports: list[int]
    config: str
    env: dict[str, str]
    tmp_path: Path
    sluice_bin: Path
    gws: list[Gateway]
    redis_url: str
    token_log: Path

    @property
    def public(self) -> str:
        return f"http://127.0.0.1:{self.ports[0]}"

    def start(self, round_: int) -> None:
        self.gws = []
        for i, port in enumerate(self.ports):
            workdir = self.tmp_path / f"replica{i}-{round_}"
            workdir.mkdir()
            gw = start_gateway(self.sluice_bin, workdir, self.config, listen=f"127.0.0.1:{port}", env=self.env)
            self.gws.append(gw)
        for gw in self.gws:
            deadline = time.monotonic() + 15
            while gw.metrics().total("sluice_cluster_up") != 1:
                assert time.monotonic() < deadline, "a replica did not reach redis within 15 s"
                time.sleep(0.1)

    def stop(self) -> list[str]:
        problems = []
        for gw in self.gws:
            if gw.proc.poll() is None:
                problems += stop_gateway(gw)
        return problems


@pytest.fixture
def replicas(sluice_bin: Path, tmp_path: Path, redis_url: str) -> Iterator[Replicas]:  # noqa: F811 - the fixture
    token_log = tmp_path / "issued-tokens.txt"
    with oauth_peers(tmp_path, token_log) as backend:
        key = subprocess.run([str(sluice_bin), "keygen"], check=True, capture_output=True, text=True).stdout.strip()
        ports = [free_port(), free_port()]
        # Both replicas announce one public URL (a load balancer's, in
        # production): here replica 1's, where the callback lands.
        config = (
            f'[server]\npublic_url = {toml_str(f"http://127.0.0.1:{ports[0]}")}\nsession_ids = "sealed"\n'
            '[auth]\nbearer_tokens_env = "GW_TOKENS"\n'
            f"[cluster]\nredis_url = {toml_str(redis_url)}\n"
            f'[backends.protected]\ntransport = "http"\nurl = {toml_str(backend.mcp_url)}\n'
            'oauth = { flow = "authorization_code" }\n'
        )
        env = {
            "GW_TOKENS": ",".join(f"{k}={v}" for k, v in TOKENS.items()),
            "SLUICE_SESSION_KEY": key,
            "SLUICE_LOG": "info,sluice::audit=info",
        }
        r = Replicas(ports, config, env, tmp_path, sluice_bin, [], redis_url, token_log)
        r.start(0)
        try:
            yield r
        finally:
            problems = r.stop()
        assert not problems, problems


def on(gw: Gateway, url: str) -> str:
    """`url` (a start or callback URL) as served by replica `gw`."""
    return re.sub(r"^http://127\.0\.0\.1:\d+", gw.base_url, url)


async def asked_to_connect(gw: Gateway, who: str) -> str:
    error, text = await whoami(gw, who)
    assert error, f"{who} was not asked to connect: {text}"
    found = START.search(text)
    assert found, text
    return found.group(1)


def consent(start: str, login: str, callback_on: Gateway, public: str) -> tuple[int, str]:
    """A browser opens `start`, logs in, consents; the callback goes to `callback_on`."""
    browser = Browser()
    back = browser.consent(start, login, public + "/oauth/callback")
    status, _, page = browser.request(on(callback_on, back))
    return status, page


def redis(url: str, *args: str) -> str:
    return subprocess.run(["redis-cli", "-u", url, "--raw", *args], check=True, capture_output=True, text=True, timeout=10).stdout


def redis_dump(url: str) -> dict[str, str]:
    """Every key under `sluice:` and everything it holds, as text."""
    out = {}
    for key in redis(url, "--scan", "--pattern", "sluice:*").split():
        kind = redis(url, "TYPE", key).strip()
        read = {
            "string": ["GET", key],
            "hash": ["HGETALL", key],
            "zset": ["ZRANGE", key, "0", "-1", "WITHSCORES"],
            "set": ["SMEMBERS", key],
            "list": ["LRANGE", key, "0", "-1"],
        }.get(kind)
        out[key] = redis(url, *read) if read else f"({kind})"
    return out


async def test_grants_are_shared_by_replicas_survive_restarts_and_are_sealed_in_redis(replicas: Replicas) -> None:
    r = replicas
    one, two = r.gws

    # alice: the link from replica 1, opened on replica 2, the callback on replica 1.
    start = await asked_to_connect(one, "alice")
    assert start.startswith(r.public + "/oauth/start/"), start
    assert await asked_to_connect(one, "alice") == start, "asking twice gives the same link"
    status, page = consent(on(two, start), "alice", one, r.public)
    assert status == 200 and "Connected to protected" in page, page
    # Replica 2 made nothing and holds no copy: it counts what Redis holds.
    assert two.metrics().value("sluice_oauth_grants", backend="protected") == 1
    # Used on replica 2: refused on replica 1 too.
    status, _, page = Browser().request(start)
    assert status == 400 and "already been used" in page, page

    # alice's calls through replica 2 carry her subject.
    assert await whoami(two, "alice") == (False, "sub: alice")
    assert await whoami(one, "alice") == (False, "sub: alice")

    # bob does not get alice's grant, on either replica.
    bob_start = await asked_to_connect(two, "bob")
    await asked_to_connect(one, "bob")
    # His link from replica 2 opened on replica 1, the callback on replica 2.
    status, page = consent(on(one, bob_start), "bob", two, r.public)
    assert status == 200, page
    assert one.metrics().value("sluice_oauth_grants", backend="protected") == 2
    assert await whoami(one, "bob") == (False, "sub: bob")
    assert await whoami(two, "alice") == (False, "sub: alice")

    # Both replicas restarted, same Redis and key: nobody is asked again,
    # and tokens expired meanwhile are refreshed (one replica at a time).
    assert not r.stop()
    time.sleep(ACCESS_TTL_S + 1)
    r.start(1)
    one, two = r.gws
    # Both replicas at once, several calls each: the expired grants are
    # refreshed once each (the refresh token rotates: a second refresh with
    # the same one would be refused, and the grant dropped).
    results: list[tuple[bool, str]] = []

    async def call(gw: Gateway, who: str) -> None:
        results.append(await whoami(gw, who))

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            for gw in (one, two):
                tg.start_soon(call, gw, "alice")
    assert results == [(False, "sub: alice")] * 6, results
    for gw in (two, one, two):
        assert await whoami(gw, "alice") == (False, "sub: alice")
        assert await whoami(gw, "bob") == (False, "sub: bob")
    logs = one.stderr_tail(1_000_000) + two.stderr_tail(1_000_000)
    assert "oauth grant refreshed" in logs, logs[-3000:]
    assert "refresh failed" not in logs, logs[-3000:]

    # Redis holds the grants, and no token in clear.
    dump = redis_dump(r.redis_url)
    assert "sluice:oauth:grants:protected" in dump, sorted(dump)
    issued = [t for t in r.token_log.read_text().split() if t]
    assert len(issued) >= 4, issued
    for key, value in dump.items():
        for token in issued:
            assert token not in value and token not in key, f"a token in clear in redis at {key}"

    # alice disconnects on replica 1: replica 2 asks her again; bob is left as he was.
    url = one.base_url + "/oauth/connections/protected"
    alice = {"Authorization": f"Bearer {TOKENS['alice']}"}
    assert httpx2.delete(url, headers=alice, timeout=10).status_code == 204
    again = await asked_to_connect(two, "alice")
    assert again != start
    assert await whoami(two, "bob") == (False, "sub: bob")
    conns = httpx2.get(two.base_url + "/oauth/connections", headers=alice, timeout=10).json()["connections"]
    assert conns[0]["connected"] is False, conns
    assert two.metrics().value("sluice_oauth_grants", backend="protected") == 1
