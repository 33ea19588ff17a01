"""Issue 8: real clients against three sluice replicas behind a round-robin
load balancer (balancer.py, no stickiness), sharing a real `redis-server`.

Each client (the official Python SDK in legacy mode, the official
TypeScript SDK) initializes once, and every later request lands on the
next replica in turn: calls to a shared stdio backend, calls to a
per-session HTTP backend (whose counter must count on across replicas:
one backend session for the client session), a sampling question
from a shared HTTP backend (examples/stateful_backend.rs) whose answer the
client POSTs through a different replica than the one that relayed it, and,
after one replica is SIGKILLed and taken out of the rotation, more calls on
the same session. The balancer's log proves the routing: one `initialize`
in all, and the answer on another replica than its question.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from balancer import Balancer
from harness import Gateway, start_gateway, stop_gateway, toml_str
from real_clients import Host, Target, driver

pytestmark = pytest.mark.anyio

TEST_TIMEOUT_S = 90
REPLICAS = 3

# The pipe to the wrapper goes by fd 3: an asynchronous list's stdin is /dev/null.
REDIS_WRAPPER = """exec 3<&0
redis-server --port "$1" --bind 127.0.0.1 --save "" --appendonly no --loglevel warning 3<&- &
r=$!
(cat <&3 >/dev/null; kill "$r" 2>/dev/null) &
wait "$r"
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(7) == b"+PONG\r\n"
    except OSError:
        return False


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A redis-server of our own; it ends (by its PID, in the wrapper) when our pipe closes."""
    port = free_port()
    proc = subprocess.Popen(
        ["sh", "-c", REDIS_WRAPPER, "sh", str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 10
    while not ping(port):
        assert time.monotonic() < deadline, "redis-server did not answer PING within 10 s"
        time.sleep(0.05)
    yield f"redis://127.0.0.1:{port}"
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=10)


@dataclass
class Cluster:
    replicas: list[Gateway]
    balancer: Balancer

    @property
    def url(self) -> str:
        return self.balancer.url + "/mcp"


@pytest.fixture
def cluster(sluice_bin: Path, tmp_path: Path, redis_url: str, stateful_url: str) -> Iterator[Cluster]:
    key = subprocess.run([str(sluice_bin), "keygen"], check=True, capture_output=True, text=True).stdout.strip()
    config = f"""
[server]
session_ids = "sealed"

[cluster]
redis_url = {toml_str(redis_url)}

[backends.demo]
transport = "stdio"
command = {toml_str(str(sluice_bin))}
args = ["demo-server"]

[backends.web]
transport = "http"
url = {toml_str(stateful_url)}

[backends.mine]
transport = "http"
url = {toml_str(stateful_url)}
isolation = "per-session"
"""
    replicas = []
    for i in range(REPLICAS):
        workdir = tmp_path / f"replica{i}"
        workdir.mkdir()
        gw = start_gateway(sluice_bin, workdir, config, env={"SLUICE_SESSION_KEY": key})
        gw.wait_ready()
        replicas.append(gw)
    for gw in replicas:
        deadline = time.monotonic() + 15
        while gw.metrics().total("sluice_cluster_up") != 1:
            assert time.monotonic() < deadline, "a replica did not reach redis within 15 s"
            time.sleep(0.1)
    balancer = Balancer([gw.base_url for gw in replicas])
    yield Cluster(replicas=replicas, balancer=balancer)
    balancer.close()
    problems = []
    for gw in replicas:
        if gw.proc.poll() is None:
            problems += stop_gateway(gw)
    assert not problems, problems


def text_of(result: dict) -> str:
    return "".join(c.get("text", "") for c in result.get("content", []))


@pytest.mark.parametrize("kind", ["py-legacy", "ts"])
async def test_a_client_across_replicas_and_a_replica_killed(cluster: Cluster, kind: str) -> None:
    """One session, every request on the next replica: calls, lists, a sampling answer through
    another replica than its question's, and the same session on after a replica dies."""
    host = Host(sampling_text=f"SAMPLED-ACROSS-REPLICAS-{kind}", declare=("sampling",))
    log = cluster.balancer.log
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with driver(kind, Target(url=cluster.url), host, direct=False) as c:
            for i in range(2 * REPLICAS):
                r = await c.request("tools/call", {"name": "demo__echo", "arguments": {"text": f"{kind}-{i}"}})
                assert text_of(r) == f"{kind}-{i}", r
            # A per-session backend: one backend session, whichever replica serves the call.
            for i in range(1, 2 * REPLICAS + 1):
                r = await c.request("tools/call", {"name": "mine__counter", "arguments": {}})
                assert text_of(r) == str(i), f"counter {text_of(r)} at call {i}: {r}"
            tools = {t["name"] for t in (await c.request("tools/list"))["tools"]}
            assert {"demo__echo", "web__ask"} <= tools, tools

            r = await c.request("tools/call", {"name": "web__ask", "arguments": {}})
            assert host.sampling_text in text_of(r), r
            asked = [u for u, body in log if '"web__ask"' in body]
            answered = [u for u, body in log if host.sampling_text in body and '"result"' in body]
            assert len(asked) == 1 and len(answered) == 1, log
            assert asked[0] != answered[0], "the answer went to the replica that asked: nothing crossed"

            victim = cluster.replicas[0]
            os.kill(victim.pid, signal.SIGKILL)
            victim.proc.wait(timeout=10)
            cluster.balancer.remove(victim.base_url)
            for i in range(2 * REPLICAS):
                r = await c.request("tools/call", {"name": "demo__echo", "arguments": {"text": f"after-{i}"}})
                assert text_of(r) == f"after-{i}", r

    initializes = [u for u, body in log if '"method":"initialize"' in body.replace(" ", "")]
    assert len(initializes) == 1, f"the client initialized {len(initializes)} times"
    used = {u for u, _ in log}
    assert used == {gw.base_url for gw in cluster.replicas}, f"requests reached {sorted(used)}"
    resumed = sum(
        gw.metrics().total("sluice_client_sessions_resumed_total")
        for gw in cluster.replicas[1:]
    )
    assert resumed >= 1, "no replica rebuilt the session from its id"
