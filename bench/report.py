#!/usr/bin/env python3
"""Turns bench/run's JSON results into RESULTS.md and PNG plots.

    report.py meta   --mode M --build B --root DIR --sizes TEXT --out FILE
    report.py report --results DIR --markdown FILE [--plots DIR | --no-plots]
    report.py split  --multi FILE --names A,B --dir DIR

`meta` records the machine, the date and the versions at run time (stdlib
only). `report` reads DIR/*.json (one file per loadgen run, named by
bench/run) and writes the tables, the targets (met / not met) and, unless
--no-plots, rss.png, throughput.png and latency.png (matplotlib, imported
only then). A hand-written bench/analysis.md, when present, is appended.
"""

from __future__ import annotations

import argparse
import datetime as dt
import collections
import glob
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

# ------------------------------------------------------------------ names

SERVERS = {
    "sluice-table": "sluice (session table, shared stdio backend)",
    "sluice-stateless": 'sluice (`sessions = "stateless"`)',
    "everything": "server-everything (streamableHttp, TS SDK)",
    "py-stateful": "Python SDK one-tool server (stateful)",
    "py-stateless": "Python SDK one-tool server (stateless_http)",
    "supergateway-stateful": "supergateway --stateful (stdio child per session)",
    "supergateway-stateless": "supergateway stateless (stdio child per request)",
    "mcp-proxy-stateful": "mcp-proxy (stateful)",
    "mcp-proxy-stateless": "mcp-proxy --stateless",
    "agentgateway": "agentgateway (stateful, stdio child per session)",
}

FORWARD = {
    "http": [
        ("http-direct", "fast backend, direct (physical limit)"),
        ("http-sluice", "through sluice"),
        ("http-sluice-traced", "through sluice, `[tracing]` on (every request sampled, OTLP to a local sink)"),
        ("http-sluice-stealing", "through sluice, `SLUICE_RUNTIME=work-stealing` (tokio's multi-thread runtime)"),
        ("http-relay", "through a bare TCP relay (`relay`: no HTTP, no JSON; the floor of a hop)"),
        ("http-agentgateway", "through agentgateway (stateful, its defaults but access logs off)"),
    ],
    "stdio": [
        ("stdio-direct", "`sluice demo-server` over its own stdin/stdout (physical limit)"),
        ("stdio-sluice", "through sluice (shared stdio backend)"),
        ("stdio-supergateway-stateful", "through supergateway --stateful"),
        ("stdio-supergateway-stateless", "through supergateway (stateless)"),
        ("stdio-mcp-proxy-stateful", "through mcp-proxy (stateful)"),
        ("stdio-mcp-proxy-stateless", "through mcp-proxy --stateless"),
        ("stdio-agentgateway", "through agentgateway (stateful: a child per session)"),
    ],
}


def run_text(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else "?"
    except (OSError, subprocess.SubprocessError):
        return "not found"


def pkg_version(path: Path) -> str:
    try:
        return json.loads(path.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return "not installed"


def dist_version(venv: Path, name: str) -> str:
    found = glob.glob(str(venv / "lib" / "python*" / "site-packages" / f"{name}-*.dist-info"))
    if not found:
        return "not installed"
    return Path(found[0]).name[len(name) + 1 : -len(".dist-info")]


def cmd_meta(args: argparse.Namespace) -> int:
    root = Path(args.root)
    work = root / "bench" / ".work"
    nm = work / "node" / "node_modules"
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_kib = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    except OSError:
        pass
    rev = run_text(["git", "-C", str(root), "rev-parse", "--short", "HEAD"])
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "src"],
                           capture_output=True, text=True).stdout.strip()
    perf_hw = run_text(["sh", "-c", "perf stat -x, -e instructions true 2>&1 | head -n1"])
    meta = {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": args.mode,
        "build": args.build,
        "sizes": args.sizes,
        "machine": {
            "cpu": cpu,
            "cores": os.cpu_count(),
            "memory_gib": round(mem_kib / 1024 / 1024, 1),
            "kernel": platform.release(),
            "perf_hardware_counters": "not supported" not in perf_hw and perf_hw != "not found",
        },
        "versions": {
            "sluice": f"{rev}{' (+ uncommitted changes in src/)' if dirty else ''}",
            "rustc": run_text(["rustc", "--version"]),
            "node": run_text(["node", "--version"]),
            "python": platform.python_version(),
            "@modelcontextprotocol/server-everything": pkg_version(nm / "@modelcontextprotocol/server-everything/package.json"),
            "supergateway": pkg_version(nm / "supergateway/package.json"),
            "supergateway's @modelcontextprotocol/sdk": pkg_version(
                nm / "supergateway/node_modules/@modelcontextprotocol/sdk/package.json"
            )
            if (nm / "supergateway/node_modules/@modelcontextprotocol/sdk").exists()
            else pkg_version(nm / "@modelcontextprotocol/sdk/package.json"),
            "mcp (Python SDK, one-tool peer)": dist_version(work / "venv", "mcp"),
            "mcp-proxy": dist_version(work / "mcp-proxy-venv", "mcp_proxy"),
            "mcp (under mcp-proxy)": dist_version(work / "mcp-proxy-venv", "mcp"),
            "matplotlib": dist_version(work / "venv", "matplotlib"),
        },
    }
    if args.agentgateway:
        # `-V` says "unknown" for a build outside a git checkout; the caller may name it.
        meta["versions"]["agentgateway"] = args.agentgateway_version or run_text([args.agentgateway, "-V"])
    Path(args.out).write_text(json.dumps(meta, indent=2) + "\n")
    return 0


# ------------------------------------------------------------------ helpers


def load(results: Path, name: str) -> dict | None:
    p = results / f"{name}.json"
    if not p.exists():
        return None
    return json.loads(p.read_text())


def fmt(v: float | None, digits: int = 0, unit: str = "") -> str:
    if v is None:
        return "–"
    if digits == 0:
        return f"{v:,.0f}{unit}"
    return f"{v:,.{digits}f}{unit}"


def us(v: float | None) -> str:
    if v is None:
        return "–"
    if v >= 10_000:
        return f"{v / 1000:,.1f} ms"
    if v >= 1000:
        return f"{v / 1000:,.2f} ms"
    return f"{v:,.0f} µs"


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def mark(ok: bool | None) -> str:
    return "–" if ok is None else ("**met**" if ok else "**not met**")


def table(headers: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def by_c(doc: dict | None) -> dict[int, dict]:
    if not doc:
        return {}
    return {r["concurrency"]: r for r in doc["result"]}


def probe_text(p: dict | None) -> str:
    if not p:
        return "–"
    s = str(p.get("status") or p.get("outcome"))
    if p.get("rpc_error_code") is not None:
        s += f" ({p['rpc_error_code']})"
    return s


# ------------------------------------------------------------------ sections


def abandoned_section(results: Path) -> tuple[str, dict]:
    rows = []
    found = {}
    for key, label in SERVERS.items():
        doc = load(results, f"abandon-{key}")
        if not doc:
            continue
        r = doc["result"]
        found[key] = r
        b1 = r["batches"][0]
        b2 = r["batches"][1] if len(r["batches"]) > 1 else None
        procs = max(c["processes"] for c in b1["checkpoints"])
        rows.append(
            [
                label,
                str(r["count"]),
                fmt(r.get("cold_rss_kib", b1["start"]["rss_kib"]) / 1024, 1),
                fmt(b1["start"]["rss_kib"] / 1024, 1),
                fmt(b1["peak_rss_kib"] / 1024, 1),
                fmt(r["kib_per_session"], 2),
                fmt(r["kib_per_session_slope"], 2),
                fmt(r["after_drain_ratio"], 3),
                fmt(r["batch2_peak_ratio"], 3),
                probe_text(r.get("stale_id")),
                probe_text(r.get("unknown_id")),
                fmt(b1["sessions_per_s"]),
                str(procs),
                str(doc["errors"]),
            ]
        )
    if not rows:
        return "", found
    text = table(
        [
            "server",
            "sessions / batch",
            "cold MiB",
            "batch-1 start MiB",
            "batch-1 peak MiB",
            "KiB / session",
            "KiB / session (slope)",
            "after drain ÷ batch-1 start",
            "batch-2 peak ÷ batch-1 peak",
            "stale id →",
            "never-issued id →",
            "sessions / s",
            "processes",
            "errors",
        ],
        rows,
    )
    return text, found


def forward_rows(results: Path, kind: str) -> tuple[list[list[str]], dict]:
    docs = {key: by_c(load(results, f"forward-{key}")) for key, _ in FORWARD[kind]}
    direct = docs[FORWARD[kind][0][0]]
    rows = []
    for key, label in FORWARD[kind]:
        for c, r in sorted(docs[key].items()):
            d = direct.get(c)
            lat, dlat = r["latency"], (d["latency"] if d else None)
            rows.append(
                [
                    label,
                    str(c),
                    fmt(r["throughput_rps"]),
                    fmt(ratio(r["throughput_rps"], d["throughput_rps"] if d else None), 3),
                    us(lat["p50_us"]),
                    us(lat["p99_us"]),
                    us(lat["p999_us"]),
                    us(lat["p50_us"] - dlat["p50_us"]) if dlat and key != FORWARD[kind][0][0] else "–",
                    us(lat["p99_us"] - dlat["p99_us"]) if dlat and key != FORWARD[kind][0][0] else "–",
                    fmt(r.get("server_cpu_us_per_request"), 1),
                    fmt(r.get("server_own_sys_cpu_us_per_request"), 1),
                    fmt(r.get("server_ctx_switches_per_request"), 2),
                    str(r.get("server_processes") or "–"),
                    " / ".join(f"{x['throughput_rps'] / 1000:,.1f}k" for x in r.get("rounds", [])) or "1",
                    str(r["errors"]),
                ]
            )
    return rows, docs


FORWARD_HEADERS = [
    "path",
    "concurrency",
    "req/s",
    "÷ direct",
    "p50",
    "p99",
    "p99.9",
    "added p50",
    "added p99",
    "server CPU µs/req",
    "of it the kernel's (own process)",
    "ctx switches/req",
    "processes",
    "rounds (req/s)",
    "errors",
]


def wrk_runs(results: Path) -> dict[str, dict[int, dict]]:
    """The best round (highest throughput) of each wrk run, by name and level."""
    best: dict[str, dict[int, dict]] = {}
    for f in sorted(results.glob("wrk-*.json")):
        d = json.loads(f.read_text())
        runs = best.setdefault(d["name"], {})
        c = d["concurrency"]
        d.setdefault("rounds", [])
        prev = runs.get(c)
        rounds = (prev["rounds"] if prev else []) + [d["throughput_rps"]]
        if prev is None or d["throughput_rps"] > prev["throughput_rps"]:
            runs[c] = d
        runs[c]["rounds"] = rounds
    return best


def wrk_section(wrk: dict, fwd_http: dict) -> str:
    direct, sl = wrk.get("http-direct", {}), wrk.get("http-sluice", {})
    if not direct or not sl:
        return "_not run (wrk not installed)_"
    gateways = [("through sluice", "http-sluice"), ("through agentgateway", "http-agentgateway")]
    lg_direct = fwd_http.get("http-direct", {})
    rows = []
    notes = []
    for c in sorted(set(direct) & set(sl)):
        d = direct[c]
        rows.append(wrk_row("fast backend, direct", c, d, d, None, None))
        for label, key in gateways:
            x = wrk.get(key, {}).get(c)
            if x is None:
                continue
            add = x["p50_us"] - d["p50_us"]
            lg_d, lg_x = lg_direct.get(c), fwd_http.get(key, {}).get(c)
            lg_add = lg_x["latency"]["p50_us"] - lg_d["latency"]["p50_us"] if lg_d and lg_x else None
            agree = ratio(max(add, lg_add), min(add, lg_add)) if lg_add is not None and min(add, lg_add) > 0 else None
            if key == "http-sluice" and agree is not None and agree > 2:
                notes.append(c)
            rows.append(wrk_row(label, c, x, d, add, lg_add))
    text = table(
        ["path", "connections", "wrk threads", "req/s", "÷ direct", "p50", "p99", "added p50 (wrk)",
         "added p50 (loadgen)", "server CPU µs/req", "rounds (req/s)", "errors"],
        rows,
    )
    if notes:
        text += (
            "\n\nAt " + ", ".join(f"{c}" for c in notes) + " connection(s) wrk's and loadgen's added p50 for sluice "
            "differ by more than 2×: see the analysis below."
        )
    return text


def wrk_row(label: str, c: int, x: dict, direct: dict, add: float | None, lg_add: float | None) -> list[str]:
    return [
        label,
        str(c),
        str(x["threads"]),
        fmt(x["throughput_rps"]),
        fmt(ratio(x["throughput_rps"], direct["throughput_rps"]), 3),
        us(x["p50_us"]),
        us(x["p99_us"]),
        "–" if add is None else us(add),
        "–" if lg_add is None else us(lg_add),
        fmt(x["server_cpu_us_per_request"], 1),
        " / ".join(f"{v / 1000:,.1f}k" for v in x["rounds"]),
        str(x["bad_responses"] + x["socket_errors"]),
    ]


def vs_agentgateway(fwd_http: dict, wrk: dict) -> list[str]:
    """The issue-10 row against agentgateway: sluice's calls/s and CPU per call as multiples of its."""
    want = "throughput ≥ 2×, CPU per call ≤ ½"
    parts, oks = [], []
    for c in (2, 64):
        for src, runs in (("loadgen", fwd_http), ("wrk", wrk)):
            s_, a_ = runs.get("http-sluice", {}).get(c), runs.get("http-agentgateway", {}).get(c)
            if not s_ or not a_ or not a_.get("server_cpu_us_per_request"):
                continue
            thr = s_["throughput_rps"] / a_["throughput_rps"]
            cpu = s_["server_cpu_us_per_request"] / a_["server_cpu_us_per_request"]
            parts.append(f"{c} conn. ({src}): {thr:.2f}× its calls/s at {cpu:.2f}× its CPU per call")
            oks.append(thr >= 2 and cpu <= 0.5)
    if not parts:
        return ["vs agentgateway (fast HTTP backend)", want,
                "not measured in this run: agentgateway is on no registry this machine reaches; "
                "`AGENTGATEWAY=$(bench/peers/build-agentgateway) bench/run --quick` builds and measures it",
                "–"]
    return ["vs agentgateway (fast HTTP backend)", want, "; ".join(parts), mark(all(oks))]


def hop_floor_rows(direct: dict, sl: dict, relay: dict) -> list[list[str]]:
    """Info rows: a bare relay's CPU per call against the backend's and sluice's, split into user and kernel time."""
    rows = []
    for c in (16, 64):
        d, r, s_ = direct.get(c), relay.get(c), sl.get(c)
        if not (d and r and s_) or not all(x.get("server_own_sys_cpu_us_per_request") is not None for x in (d, r, s_)):
            continue

        def split(x: dict) -> str:
            total, sys_ = x["server_own_cpu_us_per_request"], x["server_own_sys_cpu_us_per_request"]
            return f"{fmt(total, 1)} µs (user {fmt(total - sys_, 1)}, kernel {fmt(sys_, 1)})"

        cpu = lambda x: x["server_own_cpu_us_per_request"]  # noqa: E731
        rows.append([f"the floor of a hop, {c} connections: backend / bare relay / sluice", "",
                     f"{split(d)} / {split(r)} / {split(s_)}: the relay {cpu(r) / cpu(d):.2f}× the backend's, "
                     f"sluice {cpu(s_) / cpu(r):.2f}× the relay's", "info"])
    return rows


def served_rows(direct: dict, sl: dict, relay: dict) -> list[list[str]]:
    """The backend's own CPU per call in the same rounds: alone, and while
    it serves the relay's and sluice's calls (the same contention)."""
    rows = []
    for c in (16, 64):
        d, r, s = direct.get(c, {}), relay.get(c, {}), sl.get(c, {})
        alone, via_relay, via_sluice = (x.get("backend_cpu_us_per_request") for x in (d, r, s))
        ours = s.get("server_cpu_us_per_request")
        if None in (alone, via_relay, via_sluice, ours):
            continue
        rows.append([f"the backend's own CPU per call in the same rounds, {c} connections: alone / serving the relay / serving sluice", "",
                     f"{fmt(alone, 1)} / {fmt(via_relay, 1)} / {fmt(via_sluice, 1)} µs: sluice's {fmt(ours, 1)} µs "
                     f"is {ours / via_sluice:.1f}× what the backend spent serving the same calls", "info"])
    return rows


def issue10_targets(fwd_http: dict, fwd_stdio: dict, wrk: dict, churn: dict) -> str:
    """Issue 10's targets, judged from this run."""
    rows = []
    direct, sl = fwd_http.get("http-direct", {}), fwd_http.get("http-sluice", {})
    for c in (16, 64):
        d, r = direct.get(c), sl.get(c)
        if d and r and d.get("server_cpu_us_per_request") and r.get("server_cpu_us_per_request"):
            x = r["server_cpu_us_per_request"] / d["server_cpu_us_per_request"]
            rows.append([f"gateway CPU per forwarded `tools/call`, fast HTTP backend, {c} connections", "≤ 2× the backend's own",
                         f"{fmt(r['server_cpu_us_per_request'], 1)} vs {fmt(d['server_cpu_us_per_request'], 1)} µs: {x:.1f}×", mark(x <= 2)])
    prof = load(Path(churn.get("results", ".")), "profile/profile") if churn.get("results") else None
    if prof and (prof.get("callgrind") or {}).get("requests") and (prof.get("floor") or {}).get("requests"):
        a = prof["callgrind"]["instructions"] / prof["callgrind"]["requests"]
        b = prof["floor"]["instructions"] / prof["floor"]["requests"]
        rows.append(["the same in instructions (callgrind, 16 connections)", "≤ 2× the backend's",
                     f"{a:,.0f} vs {b:,.0f}: {a / b:.1f}×", mark(a / b <= 2)])
        la, lb = (prof["callgrind"].get("locked") or {}), (prof["floor"].get("locked") or {})
        if la.get("per_request") is not None and lb.get("per_request") is not None:
            rows.append(["locked (atomic read-modify-write) instructions per call (callgrind, 16 connections)", "",
                         f"{la['per_request']:,.1f} vs the backend's {lb['per_request']:,.1f}", "info"])
    rows += hop_floor_rows(direct, sl, fwd_http.get("http-relay", {}))
    rows += served_rows(direct, sl, fwd_http.get("http-relay", {}))
    st = fwd_stdio.get("stdio-sluice", {})
    if st:
        c = max(st)
        v, own = st[c].get("server_cpu_us_per_request"), st[c].get("server_own_cpu_us_per_request")
        split = f" (sluice's own {fmt(own, 1)}, the child {fmt(v - own, 1)})" if v is not None and own is not None else ""
        rows.append([f"stdio path, CPU per request (gateway + demo child, {c} connections)", "≤ 10 µs", f"{fmt(v, 1)} µs{split}", mark(None if v is None else v <= 10)])
    if direct.get(64) and sl.get(64):
        r = sl[64]["throughput_rps"] / direct[64]["throughput_rps"]
        rows.append(["throughput through sluice, 64 connections", "≥ 45% of direct", f"{r * 100:.1f}%", mark(r >= 0.45)])
    rows.append(vs_agentgateway(fwd_http, wrk))
    ag = fwd_stdio.get("stdio-agentgateway", {})
    if st and ag:
        c = max(set(st) & set(ag))
        a, b = st[c], ag[c]
        rows.append([f"stdio path vs agentgateway, {c} connections", "",
                     f"{a['throughput_rps'] / b['throughput_rps']:.2f}× its calls/s at "
                     f"{a['server_cpu_us_per_request'] / b['server_cpu_us_per_request']:.2f}× its CPU per call "
                     f"(children included: {a.get('server_processes', '?')} processes against {b.get('server_processes', '?')})", "info"])
    for c, want in ((1, 50), (2, 100)):
        d, r = direct.get(c), sl.get(c)
        parts, oks = [], []
        if d and r:
            add = r["latency"]["p50_us"] - d["latency"]["p50_us"]
            parts.append(f"{us(add)} (loadgen)")
            oks.append(add <= want)
        wd, ws = wrk.get("http-direct", {}).get(c), wrk.get("http-sluice", {}).get(c)
        if wd and ws:
            add = ws["p50_us"] - wd["p50_us"]
            parts.append(f"{us(add)} (wrk)")
            oks.append(add <= want)
        if parts:
            rows.append([f"added p50, {c} connection{'s' if c > 1 else ''}", f"≤ {want} µs", "; ".join(parts), mark(all(oks))])
    stealing = fwd_http.get("http-sluice-stealing", {})
    for c in sorted(set(sl) & set(stealing)):
        a, b = sl[c], stealing[c]
        ctx = (a.get("server_ctx_switches_per_request"), b.get("server_ctx_switches_per_request"))
        rows.append([f"runtime, {c} connection{'s' if c > 1 else ''}: per-core (the default) vs work-stealing", "",
                     f"CPU {fmt(a.get('server_cpu_us_per_request'), 1)} vs {fmt(b.get('server_cpu_us_per_request'), 1)} µs per call; "
                     f"p50 {us(a['latency']['p50_us'])} vs {us(b['latency']['p50_us'])}; "
                     f"{fmt(a['throughput_rps'])} vs {fmt(b['throughput_rps'])} calls/s; "
                     f"{fmt(ctx[0], 2)} vs {fmt(ctx[1], 2)} context switches per call", "info"])
    cg_idle = churn.get("cg_idle") or []
    if len(cg_idle) >= 2 and all(x["requests"] for x in cg_idle):
        lo, hi = cg_idle[0], cg_idle[-1]
        a, b = lo["instructions"] / lo["requests"], hi["instructions"] / hi["requests"]
        rows.append([f"cost with {hi['live']:,} vs {lo['live']:,} live sessions (callgrind)", "within 10%", f"× {b / a:.3f}", mark(b / a <= 1.10)])
    idle = churn.get("idle")
    if idle and idle.get("kib_per_live_session") is not None:
        k = idle["kib_per_live_session"]
        rows.append(["memory per idle session", "≤ 0.5 KiB", f"{fmt(k, 2)} KiB", mark(k <= 0.5)])
    return table(["target", "wanted", "measured (this run)", "met?"], rows)


def churn_section(results: Path) -> tuple[str, dict]:
    parts = []
    out: dict = {}
    prof = results / "profile" / "profile.json"
    if prof.exists():
        out["cg_idle"] = json.loads(prof.read_text()).get("idle") or []
    init = load(results, "churn-init-rate-sluice")
    if init:
        r = init["result"]
        out["init"] = r
        parts.append(
            table(
                ["server", "concurrency", "initialize / s", "p50", "p99", "server CPU µs / initialize", "errors"],
                [
                    [
                        "sluice (session table)",
                        str(r["concurrency"]),
                        fmt(r["initialize_per_s"]),
                        us(r["latency"]["p50_us"]),
                        us(r["latency"]["p99_us"]),
                        fmt(r.get("server_cpu_us_per_initialize"), 1),
                        str(r["errors"]),
                    ]
                ],
            )
        )
    idle = load(results, "churn-idle-cost-sluice")
    if idle:
        r = idle["result"]
        out["idle"] = r
        rows = []
        for lvl in r["levels"]:
            for run in lvl["runs"]:
                rows.append(
                    [
                        f"{lvl['live']:,}",
                        str(run["concurrency"]),
                        fmt(run["throughput_rps"]),
                        us(run["latency"]["p50_us"]),
                        us(run["latency"]["p99_us"]),
                        fmt(run.get("server_cpu_us_per_request"), 1),
                        fmt((lvl.get("rss") or {}).get("rss_kib", 0) / 1024, 1),
                        f"{lvl['open_s']:.1f} s",
                        str(run["errors"] + lvl["open_errors"]),
                    ]
                )
        parts.append(
            table(
                [
                    "live idle sessions",
                    "concurrency (one session)",
                    "req/s",
                    "p50",
                    "p99",
                    "server CPU µs/req",
                    "RSS MiB",
                    "time to open them",
                    "errors",
                ],
                rows,
            )
        )
        if out.get("cg_idle"):
            parts.append(
                "The same question without the noise of two shared cores: sluice under callgrind "
                "(`bench/profile`), counters zeroed once the sessions are open, then `tools/call` at concurrency 16:\n\n"
                + table(
                    ["live idle sessions", "requests", "instructions / request"],
                    [[f"{x['live']:,}", f"{x['requests']:,}", fmt(x["instructions"] / x["requests"] if x["requests"] else None)] for x in out["cg_idle"]],
                )
            )
        if r.get("kib_per_live_session") is not None:
            parts.append(
                f"RSS per live idle session between the two levels: **{r['kib_per_live_session']:.2f} KiB** "
                "(sessions opened with `initialize` only; the backend is shared)."
            )
    return "\n\n".join(parts), out


def targets(abandon: dict, fwd_http: dict, fwd_stdio: dict, churn: dict) -> str:
    rows = []
    table_run = abandon.get("sluice-table")
    idle = churn.get("idle")
    kib_live = idle.get("kib_per_live_session") if idle else None
    kib_batch = table_run["kib_per_session"] if table_run else None
    kib = kib_live if kib_live is not None else kib_batch
    basis = (
        f"{fmt(kib_live, 2)} KiB with {idle['levels'][-1]['live']:,} live sessions; {fmt(kib_batch, 2)} KiB over the abandoned batch"
        if kib_live is not None
        else f"{fmt(kib_batch, 2)} KiB over the abandoned batch"
    )
    rows.append(["abandoned sessions: retained per live session (shared backends)", "≤ 1 KiB", basis, mark(None if kib is None else kib <= 1.0)])
    for key in ("sluice-table", "sluice-stateless"):
        r = abandon.get(key)
        if not r:
            continue
        name = "table" if key == "sluice-table" else "stateless"
        a, b = r["after_drain_ratio"], r["batch2_peak_ratio"]
        rows.append([f"abandoned ({name}): RSS after the drain", "≤ batch-1 start + 5%", f"× {fmt(a, 3)}", mark(None if a is None else a <= 1.05)])
        rows.append([f"abandoned ({name}): batch-2 peak", "≤ batch-1 peak + 5%", f"× {fmt(b, 3)}", mark(None if b is None else b <= 1.05)])
    d1, s1 = fwd_http.get("http-direct", {}).get(1), fwd_http.get("http-sluice", {}).get(1)
    if d1 and s1:
        add50 = s1["latency"]["p50_us"] - d1["latency"]["p50_us"]
        add99 = s1["latency"]["p99_us"] - d1["latency"]["p99_us"]
        rows.append(["forwarding, fast HTTP backend: added p50 (concurrency 1)", "≤ 100 µs", us(add50), mark(add50 <= 100)])
        rows.append(["forwarding, fast HTTP backend: added p99 (concurrency 1)", "≤ 1 ms", us(add99), mark(add99 <= 1000)])
    top = max(fwd_http.get("http-direct", {}) or {0: None})
    d64, s64 = fwd_http.get("http-direct", {}).get(top), fwd_http.get("http-sluice", {}).get(top)
    if d64 and s64:
        r = s64["throughput_rps"] / d64["throughput_rps"]
        rows.append([f"forwarding, fast HTTP backend: throughput at concurrency {top}", "≥ 80% of direct", f"{r * 100:.0f}%", mark(r >= 0.8)])
    sl = fwd_stdio.get("stdio-sluice", {})
    for peer in ("stdio-supergateway-stateful", "stdio-supergateway-stateless", "stdio-mcp-proxy-stateful", "stdio-mcp-proxy-stateless"):
        p = fwd_stdio.get(peer, {})
        if not p or not sl:
            continue
        c = max(set(p) & set(sl))
        r = ratio(sl[c]["throughput_rps"], p[c]["throughput_rps"])
        name = peer.removeprefix("stdio-")
        rows.append([f"forwarding, same stdio server: sluice vs {name} (concurrency {c})", "≥ 10×", f"{fmt(r, 1)}×", mark(None if r is None else r >= 10)])
    init = churn.get("init")
    if init:
        v = init["initialize_per_s"]
        rows.append(["churn: initialize rate", "≥ 10,000 / s", f"{v:,.0f} / s", mark(v >= 10_000)])
    cg_idle = churn.get("cg_idle") or []
    if len(cg_idle) >= 2 and all(x["requests"] for x in cg_idle):
        lo, hi = cg_idle[0], cg_idle[-1]
        a, b = lo["instructions"] / lo["requests"], hi["instructions"] / hi["requests"]
        rows.append(
            [
                f"churn: cost per request with {hi['live']:,} vs {lo['live']:,} live sessions "
                "(callgrind instructions per forwarded request)",
                "within 10%",
                f"{b:,.0f} vs {a:,.0f}: × {b / a:.3f}",
                mark(b / a <= 1.10),
            ]
        )
    if idle and len(idle["levels"]) >= 2:
        lo, hi = idle["levels"][0], idle["levels"][-1]
        for run_lo, run_hi in zip(lo["runs"], hi["runs"]):
            c = run_lo["concurrency"]
            a, b = run_lo.get("server_cpu_us_per_request"), run_hi.get("server_cpu_us_per_request")
            t = ratio(run_lo["throughput_rps"], run_hi["throughput_rps"])
            rows.append(
                [
                    f"churn (wall clock, informative): {hi['live']:,} vs {lo['live']:,} live sessions, concurrency {c}",
                    "within 10%",
                    f"CPU/request × {fmt(ratio(b, a), 3)}; time/request (1/throughput) × {fmt(t, 3)}; "
                    f"p50 × {fmt(ratio(run_hi['latency']['p50_us'], run_lo['latency']['p50_us']), 3)}",
                    "info",
                ]
            )
    return table(["target", "wanted", "measured", "met?"], rows)


CG_LINE = re.compile(r"^\s*([\d,]+)\s+\(\s*([\d.]+)%\)\s+(<\s+|\*\s+|>\s+)?(.*?)(?:\s+\(([\d,]+)x\))?(?:\s+\[(.*)\])?\s*$")
CRATE_RE = re.compile(r"/index\.crates\.io-[^/]+/([^/]+?)-\d+\.\d+\.\d+[^/]*/")
MALLOC = {"malloc", "free", "cfree", "realloc", "calloc", "_int_malloc", "_int_free", "_int_realloc",
          "malloc_consolidate", "unlink_chunk.constprop.0", "__libc_malloc", "__libc_free", "tcache_init",
          "_int_free_merge_chunk", "_int_free_create_chunk", "_int_free_maybe_consolidate"}


def cg_parse(path: Path) -> list[tuple[int, str, str, str, str]]:
    """(instructions, marker, file, function, object) for each cost line of callgrind_annotate output."""
    out = []
    started = False
    for line in path.read_text(errors="replace").splitlines():
        if "file:function" in line:
            started = True
            continue
        if not started or "PROGRAM TOTALS" in line:
            continue
        m = CG_LINE.match(line)
        if not m:
            continue
        ir = int(m.group(1).replace(",", ""))
        file, _, fn = m.group(4).partition(":")
        out.append((ir, (m.group(3) or "").strip(), file, fn, m.group(6) or ""))
    return out


def crate_of_symbol(fn: str) -> str:
    """The crate a Rust symbol belongs to: its first path segment; for
    `<T as Trait>::f` with a generic T, the trait's crate."""
    name = re.sub(r"^(?:[<&*]|mut |dyn )+", "", fn)
    m = re.match(r"^[A-Z][A-Za-z0-9]{0,2} as (.*)$", name)
    if m:
        name = re.sub(r"^(?:[<&*]|mut |dyn )+", "", m.group(1))
    head = re.split(r"::|<| ", name, maxsplit=1)[0]
    return head or "?"


def category(file: str, fn: str, obj: str) -> str:
    if "libc.so" in obj or file.startswith("./"):
        if fn in MALLOC or "malloc" in file or fn.endswith("free"):
            return "glibc malloc/free"
        if fn.startswith("__mem") or fn.startswith("__str"):
            return "glibc memcpy/memmove/memcmp"
        return "glibc (other)"
    if "sip.rs" in file or "hash_one" in fn:
        return "SipHash (std HashMap default hasher)"
    crate = crate_of_symbol(fn)
    if crate == "sluice":
        return "sluice (own code)"
    if crate in ("core", "alloc", "std", "__rustc"):
        m = CRATE_RE.search(file)
        return f"{m.group(1)} (via std)" if m else "Rust std/core/alloc"
    return crate.replace("_", "-") if crate != "?" else "other"


def short(fn: str, width: int = 110) -> str:
    fn = fn.replace("{{closure}}", "{closure}")
    return fn if len(fn) <= width else fn[: width - 1] + "…"


def callgrind_summary(pdir: Path, requests: int, total: int) -> str:
    per = lambda ir: ir / requests if requests else 0.0  # noqa: E731
    rows = cg_parse(pdir / "callgrind-self.txt")
    # Frames on a thread's stack when the counters were zeroed (its start,
    # `main`, a runtime's loop) are listed with the whole thread's cost, the
    # same figure for each frame of the chain: they are not self costs.
    # With the per-core runtime the main thread is one such chain, the
    # workers another.
    # A frame of the chain may carry a little more than the rest (the runtime
    # loop's own instructions after the zeroing): within 1% of a chain's
    # figure is the chain too.
    big = collections.Counter(e[0] for e in rows if e[0] >= 0.05 * total)
    chains = {ir for ir, n in big.items() if n >= 2}
    roots = {ir for ir in big if any(abs(ir - c) <= 0.01 * total for c in chains)}
    self_rows = [e for e in rows if e[0] < 0.999 * total and e[0] not in roots]
    # Self cost by crate / category.
    cats: dict[str, int] = {}
    for ir, _, file, fn, obj in self_rows:
        cats[category(file, fn, obj)] = cats.get(category(file, fn, obj), 0) + ir
    cat_rows = [[k, fmt(per(v)), f"{100 * v / total:.1f}%"] for k, v in sorted(cats.items(), key=lambda kv: -kv[1])[:16]]
    # Top functions by self cost (the same function may appear under several files: summed).
    by_fn: dict[str, int] = {}
    for ir, _, file, fn, obj in self_rows:
        by_fn[fn] = by_fn.get(fn, 0) + ir
    top_self = [[f"`{short(k)}`", fmt(per(v)), f"{100 * v / total:.1f}%"] for k, v in sorted(by_fn.items(), key=lambda kv: -kv[1])[:20]]
    # Inclusive cost of sluice's own functions (max over the files it is listed under).
    incl: dict[str, int] = {}
    for ir, _, file, fn, obj in cg_parse(pdir / "callgrind-inclusive.txt"):
        if "sluice::" in fn and ir < 0.999 * total and ir not in roots:
            incl[fn] = max(incl.get(fn, 0), ir)
    top_incl = [[f"`{short(k)}`", fmt(per(v)), f"{100 * v / total:.1f}%"] for k, v in sorted(incl.items(), key=lambda kv: -kv[1])[:22]]
    # Who calls memcpy.
    callers: dict[str, int] = {}
    block: list[tuple[int, str, str, str, str]] = []
    cp = pdir / "callgrind-callers.txt"
    if cp.exists():
        for e in cg_parse(cp):
            if e[1] == "*":
                if e[3].startswith("__memcpy") or e[3].startswith("__memmove"):
                    for ir, mark_, file, fn, obj in block:
                        callers[fn] = callers.get(fn, 0) + ir
                block = []
            elif e[1] == "<":
                block.append(e)
            else:
                block = []
    top_callers = [[f"`{short(k)}`", fmt(per(v)), f"{100 * v / total:.1f}%"] for k, v in sorted(callers.items(), key=lambda kv: -kv[1])[:8]]
    parts = [
        "Self cost by crate (instructions a request spends in each, whoever called it):",
        table(["where", "instructions / request", "share"], cat_rows),
        "Top functions by self cost:",
        table(["function", "instructions / request", "share"], top_self),
        "sluice's own functions by inclusive cost (the function and everything it calls):",
        table(["function", "instructions / request", "share"], top_incl),
    ]
    if top_callers:
        parts += ["Callers of memcpy (what the copying is):", table(["caller", "instructions / request", "share"], top_callers)]
    return "\n\n".join(parts)


PERF_LINE = re.compile(r"^\s*([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(.*?)\s*(?:-\s+-)?\s*$")


def perf_summary(pdir: Path) -> str:
    rows = []
    for line in (pdir / "perf-symbols.txt").read_text(errors="replace").splitlines():
        m = PERF_LINE.match(line)
        if m:
            rows.append((float(m.group(1)), m.group(2), m.group(4)))
    cats: dict[str, float] = {}
    for pct, dso, sym in rows:
        if dso.startswith("[kernel"):
            c = "kernel (TCP, scheduler, syscalls)"
        elif "libc" in dso:
            base = sym.split("@")[0]
            c = "glibc malloc/free" if base in MALLOC else ("glibc memcpy/memmove/memcmp" if base.startswith("__mem") else "glibc (other)")
        elif dso == "sluice":
            head = sym.lstrip("<").split("::")[0].split(" ")[0]
            c = f"sluice binary: {head}"
        else:
            c = dso
        cats[c] = cats.get(c, 0.0) + pct
    dso_text = "\n".join(l.strip() for l in (pdir / "perf-dso.txt").read_text().splitlines()[:8])
    cat_rows = [[k, f"{v:.1f}%"] for k, v in sorted(cats.items(), key=lambda kv: -kv[1])[:14]]
    sym_rows = [[f"{p:.2f}%", d, f"`{short(s, 100)}`"] for p, d, s in rows[:25]]
    return "\n\n".join(
        [
            "By shared object:\n\n```\n" + dso_text + "\n```",
            "By category (symbols above 0.2%; the sluice binary grouped by the crate a symbol starts with):",
            table(["where", "share of samples"], cat_rows),
            "Top symbols (self):",
            table(["share", "object", "symbol"], sym_rows),
        ]
    )


def strace_summary(pdir: Path, runs: dict) -> str:
    cols = [k for k in ("sluice", "backend") if k in runs and runs[k].get("requests")]
    counts: dict[str, dict[str, float]] = {}
    for k in cols:
        n = runs[k]["requests"]
        for line in (pdir / runs[k]["file"]).read_text(errors="replace").splitlines():
            f = line.split()
            if len(f) >= 5 and f[3].isdigit() and f[-1] not in ("total",):
                counts.setdefault(f[-1], {})[k] = int(f[3]) / n
    rows = sorted(counts.items(), key=lambda kv: -kv[1].get("sluice", 0))
    rows = [[f"`{name}`"] + [fmt(v.get(k), 2) for k in cols] for name, v in rows if max(v.values()) >= 0.01]
    names = {"sluice": "sluice", "backend": "fast backend alone"}
    return table(["system call"] + [f"{names[k]} (per request)" for k in cols], rows)


def profile_section(results: Path) -> str:
    pdir = results / "profile"
    meta_p = pdir / "profile.json"
    if not meta_p.exists():
        return "No profile was taken in this run (`bench/run --no-profile`, or the smoke mode)."
    meta = json.loads(meta_p.read_text())
    parts = [
        f"sluice forwarding `tools/call` to the fast HTTP backend at concurrency {meta['concurrency']} "
        f"for {meta['duration']} (`bench/profile`; raw files in `bench/.work/results/{results.name}/profile/`)."
    ]
    if meta["perf"]["ok"]:
        parts.append(
            f"### perf (`perf record -e cpu-clock`, a software clock; {meta['perf']['requests']:,} requests)\n\n"
            + perf_summary(pdir)
        )
    else:
        parts.append("perf sampling was not available.")
    cg = meta["callgrind"]
    if cg["ok"] and cg["requests"]:
        parts.append(
            f"### callgrind ({cg['requests']:,} requests under valgrind, counters zeroed after a warm-up; "
            f"{cg['instructions']:,} instructions: **{cg['instructions'] / cg['requests']:,.0f} instructions per "
            "forwarded request** in user space, kernel excluded)\n\n" + callgrind_summary(pdir, cg["requests"], cg["instructions"])
        )
        floor = meta.get("floor")
        if floor and floor.get("requests"):
            per_floor = floor["instructions"] / floor["requests"]
            parts.append(
                f"For scale, the fast backend alone under the same load: **{per_floor:,.0f} instructions per request** "
                f"(one HTTP/1.1 exchange served, hyper, nothing else). A gateway serves one exchange and makes one, "
                f"so about {2 * per_floor:,.0f} is the floor for a hop; sluice spends "
                f"{cg['instructions'] / cg['requests'] / per_floor:,.1f}× the backend's cost."
            )
        locked = cg.get("locked") or {}
        if locked.get("per_request") is not None:
            floor_locked = ((floor or {}).get("locked") or {}).get("per_request")
            scale = f"; the fast backend alone {floor_locked:,.1f}" if floor_locked is not None else ""
            sites_p = pdir / "locked-sites.txt"
            sites = sites_p.read_text().splitlines()[1:26] if sites_p.exists() else []
            parts.append(
                f"Locked instructions (every atomic read-modify-write: a lock taken or released, an `Arc` or "
                f"waker cloned or dropped) per request: **{locked['per_request']:,.1f}**{scale} "
                "(`bench/locked.py`: callgrind's count of each instruction, matched against `objdump -d`). "
                "By the line of sluice's own code that reached them (a library's name in brackets where none did):\n\n"
                "```\n" + "\n".join(sites) + "\n```"
            )
    if meta.get("strace"):
        parts.append(
            "### strace (`strace -c -f` for 2 s at the same concurrency: system calls per request)\n\n"
            + strace_summary(pdir, meta["strace"])
        )
    return "\n\n".join(parts)


# ------------------------------------------------------------------ plots


def plots(results: Path, out: Path, abandon: dict, fwd: dict) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    # RSS over the abandoned-sessions run: batch 1, drain, batch 2 on one axis.
    if abandon:
        fig, axes = plt.subplots(1, 2, figsize=(13, 5))
        for ax, keys, logy in (
            (axes[0], list(abandon), True),
            (axes[1], [k for k in abandon if k.startswith("sluice")], False),
        ):
            for key in keys:
                r = abandon[key]
                xs, ys = [], []
                b1 = r["batches"][0]
                n = max(r["count"], 1)
                for c in b1["checkpoints"]:
                    xs.append(c["sessions"] / n)
                    ys.append(c["rss_kib"] / 1024)
                if r.get("drain"):
                    d = r["drain"]
                    for s in d["samples"]:
                        xs.append(1 + 0.5 * s["t_s"] / max(d["duration_s"], 1e-9))
                        ys.append(s["rss_kib"] / 1024)
                if len(r["batches"]) > 1:
                    for c in r["batches"][1]["checkpoints"]:
                        xs.append(1.5 + c["sessions"] / n)
                        ys.append(c["rss_kib"] / 1024)
                ax.plot(xs, ys, marker=".", label=key)
            for x in (1, 1.5):
                ax.axvline(x, color="grey", lw=0.5, ls="--")
            ax.set_xticks([0, 0.5, 1, 1.25, 1.5, 2, 2.5])
            ax.set_xticklabels(["b1 0", "b1 N/2", "b1 N", "drain", "b2 0", "b2 N/2", "b2 N"])
            ax.set_ylabel("RSS of the process tree (MiB)")
            if logy:
                ax.set_yscale("log")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        axes[0].set_title("Abandoned sessions: all servers (log scale)")
        axes[1].set_title("Abandoned sessions: sluice")
        fig.tight_layout()
        fig.savefig(out / "rss.png", dpi=110)
        plt.close(fig)
        made.append("rss.png")

    # Throughput by concurrency, both backends.
    series = [(k, lbl) for kind in ("http", "stdio") for k, lbl in FORWARD[kind] if fwd.get(k)]
    if series:
        conc = sorted({c for k, _ in series for c in fwd[k]})
        fig, ax = plt.subplots(figsize=(12, 5))
        width = 0.8 / len(series)
        for i, (k, _) in enumerate(series):
            vals = [fwd[k].get(c, {}).get("throughput_rps", 0) for c in conc]
            ax.bar([j + i * width for j in range(len(conc))], vals, width, label=k)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(conc))])
        ax.set_xticklabels([f"concurrency {c}" for c in conc])
        ax.set_yscale("log")
        ax.set_ylabel("tools/call per second (log scale)")
        ax.set_title("Forwarding throughput (loadgen and servers share 2 cores)")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        fig.savefig(out / "throughput.png", dpi=110)
        plt.close(fig)
        made.append("throughput.png")

        # Latency percentiles per server, one panel per concurrency.
        fig, axes = plt.subplots(1, len(conc), figsize=(5 * len(conc), 5), squeeze=False)
        for ax, c in zip(axes[0], conc):
            names = [k for k, _ in series if c in fwd[k]]
            for i, (q, lbl) in enumerate((("p50_us", "p50"), ("p99_us", "p99"), ("p999_us", "p99.9"))):
                ax.bar(
                    [j + i * 0.27 for j in range(len(names))],
                    [fwd[k][c]["latency"][q] for k in names],
                    0.27,
                    label=lbl,
                )
            ax.set_xticks([j + 0.27 for j in range(len(names))])
            ax.set_xticklabels(names, rotation=60, ha="right", fontsize=7)
            ax.set_yscale("log")
            ax.set_ylabel("latency (µs, log scale)")
            ax.set_title(f"concurrency {c}")
            ax.grid(axis="y", alpha=0.3)
            ax.legend(fontsize=7)
        fig.suptitle("tools/call latency percentiles")
        fig.tight_layout()
        fig.savefig(out / "latency.png", dpi=110)
        plt.close(fig)
        made.append("latency.png")
    return made


# ------------------------------------------------------------------ report


def cmd_report(args: argparse.Namespace) -> int:
    results = Path(args.results)
    meta = load(results, "meta") or {}
    abandon_text, abandon = abandoned_section(results)
    conc = next(iter(abandon.values()))["concurrency"] if abandon else "?"
    warm = next(iter(abandon.values())).get("warmup_sessions", 0) if abandon else "?"
    http_rows, fwd_http = forward_rows(results, "http")
    stdio_rows, fwd_stdio = forward_rows(results, "stdio")
    churn_text, churn = churn_section(results)
    churn["results"] = str(results)
    wrk = wrk_runs(results)
    fwd = {**fwd_http, **fwd_stdio}
    made = []
    if not args.no_plots and args.plots:
        made = plots(results, Path(args.plots), abandon, fwd)

    m = meta.get("machine", {})
    lines = [
        "# sluice benchmark results",
        "",
        f"Generated by `bench/run --{meta.get('mode', '?')}` on {meta.get('date', '?')} "
        f"({meta.get('build', '?')} build; sizes: {meta.get('sizes', '?')}). Raw JSON: `bench/.work/results/{meta.get('mode', '?')}/`.",
        "",
        f"**Machine:** {m.get('cpu', '?')}, {m.get('cores', '?')} cores, {m.get('memory_gib', '?')} GiB, "
        f"Linux {m.get('kernel', '?')}; hardware performance counters: "
        f"{'available' if m.get('perf_hardware_counters') else 'not supported (perf uses the cpu-clock software event)'}.",
        "",
        "**Read with care:** the load generator (one thread), the server under test and its backend all run on the "
        "same 2 cores and compete for them. A direct run has two processes on two cores; a run through a gateway "
        "has three. Throughput ratios therefore understate what a gateway does on a machine of its own; the "
        "*server CPU µs/req* column (user+system time of the server's whole process tree, children included, "
        "divided by the requests it served) is the measure that does not depend on that contention.",
        "",
        "**Versions:** " + "; ".join(f"{k} {str(v).removeprefix(k + ' ')}" for k, v in meta.get("versions", {}).items()),
        "",
        "## Targets",
        "",
        targets(abandon, fwd_http, fwd_stdio, churn),
        "",
        "Added latency is judged at concurrency 1 (at higher concurrency it is queueing on two shared cores); "
        "the ≥ 10× comparison at the highest concurrency both ran.",
        "",
        "### Issue 10: forwarding at the physical limit",
        "",
        issue10_targets(fwd_http, fwd_stdio, wrk, churn),
        "",
        "## Abandoned sessions",
        "",
        f"The field reports' method: a batch of N sessions, each `initialize` + `notifications/initialized` + "
        f"`tools/list` on {conc} keep-alive connections, never a DELETE; RSS of the server's whole process tree "
        f"(children included) at checkpoints, batch 1's start read after a warm-up of {warm} sessions that end with DELETE (one-time "
        "start-up costs are not per-session growth; *cold* is the RSS before it); the clients disconnect and the server idles for a drain longer than "
        "its idle TTL; a batch-1 session id is presented (*stale id*), then an id that was never issued (a client "
        "from before a restart); then a second identical batch. Servers with an idle TTL get the same one as sluice "
        "(sluice `session_idle_ttl`, the Python SDK's `session_idle_timeout`, supergateway's `--sessionTimeout`); "
        "server-everything and mcp-proxy have none. *KiB / session* is (batch-1 end − batch-1 start) ÷ N; the "
        "slope is a least-squares fit over the checkpoints. A stale id answered 200 means the session is still "
        "live; the spec wants 404 for an ended one; – means the server issued no session id to go stale.",
        "",
        abandon_text or "_not run_",
        "",
    ]
    if "rss.png" in made:
        lines += ["![RSS over the abandoned-sessions run](rss.png)", ""]
    lines += [
        "## Forwarding",
        "",
        "Closed-loop `tools/call` of an echo tool: every virtual user has its own keep-alive connection and its "
        "own session (`initialize` + `notifications/initialized` first), then calls back to back. Percentiles "
        "from an HDR histogram of every measured call; *added* = this path minus the direct path at the same "
        "concurrency. sluice and the direct paths run several rounds (direct and sluice alternating for the HTTP "
        "backend, agentgateway in the same rounds when measured) and the round with the highest throughput is "
        "shown, all rounds listed; the other peers run once.",
        "",
        "### Fast HTTP backend",
        "",
        "`bench/loadgen/src/bin/fast_backend.rs`: hyper, stateless, JSON replies, one thread.",
        "",
        table(FORWARD_HEADERS, http_rows) if http_rows else "_not run_",
        "",
        "### The same with wrk",
        "",
        "A second load generator that shares no code with ours: `wrk` (Debian's) with `bench/wrk.lua`, "
        "`tools/call` of echo on one session over every connection (1 thread for 1 connection, else 2), every "
        "response checked for HTTP 200 and a JSON-RPC result; direct and through sluice (and agentgateway, when "
        "measured) alternating, best round "
        "shown. *Server CPU* from the server's own utime+stime around the run (10 ms ticks).",
        "",
        wrk_section(wrk, fwd_http),
        "",
        "### stdio backend (`sluice demo-server`)",
        "",
        "The direct row is the load generator writing JSON-RPC lines to the server's stdin with that many "
        "requests in flight (no HTTP at all). The gateways all front the same command.",
        "",
        table(FORWARD_HEADERS, stdio_rows) if stdio_rows else "_not run_",
        "",
    ]
    if "throughput.png" in made:
        lines += ["![throughput by concurrency](throughput.png)", "", "![latency percentiles](latency.png)", ""]
    lines += [
        "## Churn",
        "",
        "`initialize` alone (it is what creates a session) from 16 connections; then the cost of `tools/call` on "
        "one more session while the table holds few or many live idle sessions (opened without DELETE, 30 min TTL), "
        "to the fast HTTP backend.",
        "",
        churn_text or "_not run_",
        "",
        "## Profile",
        "",
        profile_section(results),
        "",
    ]
    analysis = Path(__file__).resolve().parent / "analysis.md"
    if analysis.exists() and meta.get("mode") != "smoke":
        lines += [analysis.read_text().rstrip(), ""]
    Path(args.markdown).write_text("\n".join(lines))
    print(f"report.py: wrote {args.markdown}" + (f" and {', '.join(made)}" if made else ""), file=sys.stderr)
    return 0


def cmd_split(args: argparse.Namespace) -> int:
    """A `forward-multi` result (several URLs in one loadgen run) into one
    `forward` file per URL, named as given."""
    doc = json.loads(Path(args.multi).read_text())
    names = args.names.split(",")
    if doc.get("kind") != "forward-multi" or len(doc["result"]) != len(names):
        print(f"report.py split: {args.multi} is not a forward-multi result for {len(names)} URLs", file=sys.stderr)
        return 1
    for name, series in zip(names, doc["result"]):
        out = {"kind": "forward", "url": series["url"], "errors": series["errors"], "result": series["result"]}
        (Path(args.dir) / f"{name}.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("split")
    sp.add_argument("--multi", required=True)
    sp.add_argument("--names", required=True)
    sp.add_argument("--dir", required=True)
    m = sub.add_parser("meta")
    m.add_argument("--mode", required=True)
    m.add_argument("--build", required=True)
    m.add_argument("--root", required=True)
    m.add_argument("--sizes", default="")
    m.add_argument("--agentgateway", default="", help="the agentgateway binary measured, if any")
    m.add_argument("--agentgateway-version", default="", help="its version, where the binary cannot tell")
    m.add_argument("--out", required=True)
    r = sub.add_parser("report")
    r.add_argument("--results", required=True)
    r.add_argument("--markdown", required=True)
    r.add_argument("--plots")
    r.add_argument("--no-plots", action="store_true")
    args = p.parse_args()
    return {"meta": cmd_meta, "report": cmd_report, "split": cmd_split}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
