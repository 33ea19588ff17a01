"""`sluice probe` (issue 12, part 1) against servers nobody here wrote, and
against sluice itself. The test asserts the verdicts (and the evidence they
rest on), never timings.

* server-everything (streamableHttp, the TypeScript SDK's example): the
  field reports' two symptoms, sessions kept while idle (memory grows with
  every abandoned session) and 400 for an id it does not hold. Sessions
  still served after the wait are inconclusive, not a leak: no wait can
  tell a long idle timeout from none.
* the official Python SDK, stateful with a 2 s idle timeout: clean; and
  stateless: no session checks apply.
* sluice itself: clean with a 2 s idle TTL, and at its defaults (a 30 min
  TTL, longer than the wait) the same verdicts whichever way its memory is
  read: no "leak suspected" for a wait shorter than the TTL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness import REPO_ROOT, NodePeer, demo_backend

PY_ONE_TOOL = REPO_ROOT / "bench" / "peers" / "py_one_tool.py"


def probe(sluice_bin: Path, url: str, *args: str) -> dict:
    proc = subprocess.run(
        [str(sluice_bin), "probe", url, "--json", *args],
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, f"probe exited {proc.returncode}: {proc.stderr}"
    return json.loads(proc.stdout)


def verdicts(report: dict) -> dict[str, str]:
    return {c["name"]: c["verdict"] for c in report["checks"]}


def evidence(report: dict, name: str) -> str:
    return next(c["evidence"] for c in report["checks"] if c["name"] == name)


@pytest.fixture
def py_server(tmp_path: Path):
    """The one-tool Python SDK server of the benchmark; yields a starter."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> tuple[str, int]:
        proc = subprocess.Popen(
            [sys.executable, str(PY_ONE_TOOL), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=tmp_path,
        )
        started.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        prefix = "py_one_tool listening on "
        assert line.startswith(prefix), line
        return f"http://{line[len(prefix):]}/mcp", proc.pid

    yield start
    for proc in started:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_probe_finds_the_leak_and_the_400_in_server_everything(sluice_bin: Path, everything_http: NodePeer) -> None:
    report = probe(
        sluice_bin, everything_http.mcp_url, "--sessions", "60", "--pid", str(everything_http.proc.pid), "--wait", "3s"
    )
    v = verdicts(report)
    assert report["legacy"] and report["stateful"], report
    assert v["unknown id"] == "spec_deviation", report
    assert "answered 400" in evidence(report, "unknown id"), report
    assert v["idle expiry"] == "inconclusive", report
    assert "cannot tell" in evidence(report, "idle expiry"), report
    assert v["memory per session"] == "inconclusive", report
    assert "held while the sessions sit idle" in evidence(report, "memory per session"), report
    assert report["kib_per_session"] > 10, report
    assert report["sessions_opened"] == 60, report


def test_probe_finds_the_python_sdk_clean(sluice_bin: Path, py_server) -> None:
    url, pid = py_server("--idle-timeout", "2")
    report = probe(sluice_bin, url, "--sessions", "200", "--pid", str(pid), "--wait", "4s")
    v = verdicts(report)
    assert v["unknown id"] == "ok" and "404" in evidence(report, "unknown id"), report
    assert v["delete"] == "ok", report
    assert v["idle expiry"] == "ok", report
    assert v["memory per session"] == "ok", report
    assert report["modern"], report


def test_probe_of_a_stateless_python_sdk_server_skips_session_checks(sluice_bin: Path, py_server) -> None:
    url, pid = py_server("--stateless")
    report = probe(sluice_bin, url, "--sessions", "20", "--pid", str(pid))
    v = verdicts(report)
    assert not report["stateful"], report
    assert v["unknown id"] == v["delete"] == v["idle expiry"] == "not_applicable", report


def test_probe_finds_sluice_clean(sluice_bin: Path, gateway_factory) -> None:
    gw = gateway_factory(f'[server]\nsession_idle_ttl = "2s"\n{demo_backend(sluice_bin)}')
    report = probe(sluice_bin, gw.mcp_url, "--sessions", "200", "--metrics", f"{gw.base_url}/metrics", "--wait", "4s")
    v = verdicts(report)
    assert all(x == "ok" for x in v.values()), report
    assert report["modern"] and report["stateful"], report
    assert "-32001" in evidence(report, "unknown id"), report


def test_probe_of_sluice_at_its_defaults_is_stable(sluice_bin: Path, gateway_factory) -> None:
    """Its idle TTL (30 min) is longer than the wait: the expiry is
    inconclusive and nothing is a leak; the memory verdict is the same read
    from the process tree and from its metrics."""
    gw = gateway_factory(demo_backend(sluice_bin))
    by_pid = probe(sluice_bin, gw.mcp_url, "--pid", str(gw.pid), "--wait", "2s")
    by_metrics = probe(sluice_bin, gw.mcp_url, "--metrics", f"{gw.base_url}/metrics", "--wait", "2s")
    for report in (by_pid, by_metrics):
        v = verdicts(report)
        assert "leak_suspected" not in v.values(), report
        assert v["memory per session"] == "ok", report
        assert v["idle expiry"] == "inconclusive", report
        assert v["unknown id"] == v["delete"] == "ok", report


def test_probe_stops_cleanly_on_ctrl_c(sluice_bin: Path, everything_http: NodePeer) -> None:
    """SIGINT during the idle wait: it prints what it has, and exits 0."""
    proc = subprocess.Popen(
        [str(sluice_bin), "probe", everything_http.mcp_url, "--json", "--sessions", "5", "--wait", "10m"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    # Off a terminal the probe says on stderr as each step begins.
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line.startswith("sluice probe: waiting idle"):
            break
    else:
        pytest.fail(f"the probe never began its wait: {seen}")
    os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    report = json.loads(out)
    assert report["interrupted"], report
    assert verdicts(report)["unknown id"] == "spec_deviation", report
