#!/usr/bin/env python3
"""The summary of `bench/run --sessions` (stdlib only).

    sessions.py summary --results DIR --out FILE

Reads the JSON results of the four parts (sealed vs table ids, resume after
a restart, cluster replica vs one node, RSS of idle sealed sessions) and
writes one markdown page with the absolute figures and the ratios. Exit 1
when a check failed: a failed request anywhere, a resumed count that is not
the number of ids presented, sessions still in memory after the eviction.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def load(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def num(v: float | None, digits: int = 0) -> str:
    return "–" if v is None else f"{v:,.{digits}f}"


def ratio(a: float | None, b: float | None) -> str:
    """a / b, as `× 1.23`."""
    if a is None or b is None or b == 0:
        return "–"
    return f"× {a / b:.2f}"


def mib(kib: float | None) -> str:
    return "–" if kib is None else f"{kib / 1024:,.1f} MiB"


def med(vals: list[float]) -> float | None:
    vals = sorted(vals)
    if not vals:
        return None
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2


def mark(ok: bool) -> str:
    return "ok" if ok else "**FAILED**"


def table(head: list[str], rows: list[list[str]]) -> str:
    out = "| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n"
    return out + "".join("| " + " | ".join(r) + " |\n" for r in rows)


class Checks:
    def __init__(self) -> None:
        self.failed: list[str] = []

    def check(self, ok: bool, what: str) -> str:
        if not ok:
            self.failed.append(what)
        return mark(ok)


# ------------------------------------------------------------------ parts


def best_init(d: Path, target: str) -> tuple[dict | None, list[dict], int]:
    """The init-rate round with the most initialize/s, every round, errors."""
    runs = [load(p) for p in sorted(d.glob(f"sluice-sessions-init-{target}-*.json"))]
    runs = [r for r in runs if r]
    errors = sum(r["errors"] for r in runs)
    rounds = [r["result"] for r in runs]
    best = max(rounds, key=lambda r: r["initialize_per_s"], default=None)
    return best, rounds, errors


def forward_series(d: Path) -> dict[str, dict]:
    """The forwarding run's series by target name (sessions-targets.json
    names the --url arguments in order)."""
    f = load(d / "sluice-sessions-forward.json")
    names = load(d / "sessions-targets.json") or []
    if not f:
        return {}
    if f["kind"] == "forward":  # one target only
        series = [{"url": f["url"], "errors": f["errors"], "result": f["result"]}]
    else:
        series = f["result"]
    return dict(zip(names, series))


def by_concurrency(series: dict | None) -> dict[int, dict]:
    return {r["concurrency"]: r for r in series["result"]} if series else {}


def forward_rows(names: list[str], series: list[dict | None], base: int) -> list[list[str]]:
    """Rows of forwarding figures, one column per series and a ratio column
    per series against series[base]."""
    levels = sorted({c for s in series for c in by_concurrency(s)})
    rows = []
    figures = [
        ("tools/call/s", "throughput_rps", 0),
        ("p50 latency (µs)", ("latency", "p50_us"), 0),
        ("p99 latency (µs)", ("latency", "p99_us"), 0),
        ("gateway CPU per call (µs)", "server_own_cpu_us_per_request", 1),
        ("gateway + demo backend CPU per call (µs)", "server_cpu_us_per_request", 1),
    ]
    def median(r: dict | None, key: str) -> float | None:
        return med([x[key] for x in (r or {}).get("rounds") or [] if x.get(key) is not None])
    for c in levels:
        runs = [by_concurrency(s).get(c) for s in series]
        for label, key, digits in figures[:1] + [("tools/call/s, median of rounds", "throughput_rps", 0)] + figures[1:4] + [
                ("gateway CPU per call (µs), median of rounds", "server_own_cpu_us_per_request", 1)] + figures[4:]:
            def get(r: dict | None) -> float | None:
                if r is None:
                    return None
                if label.endswith("median of rounds"):
                    return median(r, key)
                if isinstance(key, tuple):
                    return r[key[0]][key[1]]
                return r.get(key)
            vals = [get(r) for r in runs]
            row = [f"c={c}: {label}"] + [num(v, digits) for v in vals]
            row += [ratio(v, vals[base]) for i, v in enumerate(vals) if i != base]
            rows.append(row)
    return rows


def rounds_note(series: list[dict | None], names: list[str]) -> str:
    parts = []
    for name, s in zip(names, series):
        if not s:
            continue
        for r in s["result"]:
            rs = r.get("rounds") or []
            if rs:
                parts.append(f"{name} c={r['concurrency']}: "
                             + " / ".join(f"{x['throughput_rps']:,.0f}" for x in rs))
    return "; ".join(parts)


def part1(d: Path, checks: Checks) -> list[str]:
    series = forward_series(d)
    table_s, sealed_s = series.get("table"), series.get("sealed")
    out = ["## 1. Sealed ids vs table ids (one gateway, stdio demo backend)", ""]
    it, it_rounds, it_err = best_init(d, "table")
    ise, ise_rounds, ise_err = best_init(d, "sealed")
    mt, ms = med([r["initialize_per_s"] for r in it_rounds]), med([r["initialize_per_s"] for r in ise_rounds])
    rows = [
        ["initialize/s (c=16)", num(it and it["initialize_per_s"]), num(ise and ise["initialize_per_s"]),
         ratio(ise and ise["initialize_per_s"], it and it["initialize_per_s"])],
        ["initialize/s, median of rounds", num(mt), num(ms), ratio(ms, mt)],
        ["initialize p50 / p99 (µs)",
         f"{num(it and it['latency']['p50_us'])} / {num(it and it['latency']['p99_us'])}",
         f"{num(ise and ise['latency']['p50_us'])} / {num(ise and ise['latency']['p99_us'])}",
         ratio(ise and ise["latency"]["p50_us"], it and it["latency"]["p50_us"]) + " (p50)"],
        ["gateway CPU per initialize (µs)", num(it and it["server_own_cpu_us_per_initialize"], 1),
         num(ise and ise["server_own_cpu_us_per_initialize"], 1),
         ratio(ise and ise["server_own_cpu_us_per_initialize"], it and it["server_own_cpu_us_per_initialize"])],
    ]
    rows += forward_rows(["table", "sealed"], [table_s, sealed_s], 0)
    errors = it_err + ise_err + sum(s["errors"] for s in (table_s, sealed_s) if s)
    out += [table(["", "table", "sealed", "sealed / table"], rows)]
    out += [f"Failed requests (initialize and forwarding, every round): {errors:,} "
            f"{checks.check(errors == 0 and bool(table_s) and bool(sealed_s) and bool(it) and bool(ise), 'part 1: failed requests or missing results')}.",
            ""]
    out += [f"initialize/s of each round: table "
            + " / ".join(f"{r['initialize_per_s']:,.0f}" for r in it_rounds)
            + "; sealed " + " / ".join(f"{r['initialize_per_s']:,.0f}" for r in ise_rounds) + ".",
            f"tools/call/s of each round: {rounds_note([table_s, sealed_s], ['table', 'sealed'])}.", ""]
    # Memory, from the init-rate runs (sessions stay: idle TTL 30 min).
    mem = []
    for name, rounds in (("table", it_rounds), ("sealed", ise_rounds)):
        opened = sum(r["initializes"] for r in rounds)
        if rounds and opened and rounds[0].get("before") and rounds[-1].get("after"):
            grow = rounds[-1]["after"]["rss_kib"] - rounds[0]["before"]["rss_kib"]
            mem.append(f"{name} {grow / opened:.2f} KiB per session ({opened:,} sessions, "
                       f"{mib(rounds[0]['before']['rss_kib'])} → {mib(rounds[-1]['after']['rss_kib'])})")
    if mem:
        out += ["Live idle sessions these runs left in memory (RSS of gateway + backend, "
                "first round's start to last round's end): " + "; ".join(mem) + ".", ""]
    return out


def part2(d: Path, checks: Checks) -> list[str]:
    out = ["## 2. Resume after a restart (sealed ids)", ""]
    op = load(d / "sluice-sessions-open-restart.json")
    rs = load(d / "sluice-sessions-resume-restart.json")
    again = load(d / "sluice-sessions-resume-again.json")
    timing = load(d / "sessions-restart-timing.json") or {}
    if not (op and rs):
        checks.failed.append("part 2: missing results")
        return out + ["(no result)", ""]
    o, r = op["result"], rs["result"]
    a = again["result"] if again else None
    restarted = r["resumed_delta"].get("restart", 0)
    rows = [
        ["sessions opened before the restart",
         f"{o['opened']:,} of {o['count']:,} in {o['duration_s']:.1f} s ({o['sessions_per_s']:,.0f}/s, "
         f"initialize + notifications/initialized), errors {o['errors']:,} {checks.check(o['errors'] == 0 and o['opened'] == o['count'], 'part 2: open')}"],
        ["gateway stopped (SIGTERM, by PID)", f"in {num(timing.get('stop_s'), 2)} s"],
        ["started again (same key, new port)", f"listening in {num(timing.get('start_s'), 2)} s"],
        ["ids presented once each",
         f"{r['presented']:,}, {r['concurrency']} connections, one `{r['method']}` each"],
        ["answered / failed",
         f"{r['ok']:,} / {r['errors']:,} {checks.check(r['errors'] == 0 and r['ok'] == r['presented'], 'part 2: failed resumes')}"],
        ["`sluice_client_sessions_resumed_total{cause=\"restart\"}` added",
         f"{restarted:,.0f} (other causes: "
         + (", ".join(f"{k} {v:,.0f}" for k, v in r["resumed_delta"].items() if k != "restart") or "none")
         + f") {checks.check(restarted == r['presented'], 'part 2: resumed count')}"],
        ["sessions live after the pass", num(r.get("live_after"))],
    ]
    out += [table(["figure", "value"], rows)]
    head = ["", "first request after the restart (resumed)", "same ids again (in memory)", "resumed / in memory"]
    def fig(x: dict | None, k: str, digits: int = 0) -> float | None:
        if x is None:
            return None
        return x["latency"][k] if k.endswith("_us") else x.get(k)
    rows = []
    for label, k, digits in [("sessions/s", "sessions_per_s", 0), ("p50 latency (µs)", "p50_us", 0),
                             ("p99 latency (µs)", "p99_us", 0),
                             ("gateway CPU per request (µs)", "server_own_cpu_us_per_session", 1),
                             ("gateway + demo backend CPU per request (µs)", "server_cpu_us_per_session", 1)]:
        rows.append([label, num(fig(r, k), digits), num(fig(a, k), digits), ratio(fig(r, k), fig(a, k))])
    out += ["", table(head, rows)]
    if a is not None:
        out += [f"The second pass (every session now in memory again) failed {a['errors']:,} "
                f"{checks.check(a['errors'] == 0, 'part 2: second pass')} and resumed "
                f"{sum(a['resumed_delta'].values()):,.0f}.", ""]
    return out


def part3(d: Path, checks: Checks) -> list[str]:
    series = forward_series(d)
    one, rep = series.get("sealed"), series.get("cluster")
    out = ["## 3. Cluster mode (one of two replicas, Redis on loopback) vs one node (both sealed ids)", ""]
    ise, _, ise_err = best_init(d, "sealed")
    icl, icl_rounds, icl_err = best_init(d, "cluster")
    _, ise_rounds, _ = best_init(d, "sealed")
    ms, mc = med([r["initialize_per_s"] for r in ise_rounds]), med([r["initialize_per_s"] for r in icl_rounds])
    rows = [
        ["initialize/s (c=16)", num(ise and ise["initialize_per_s"]), num(icl and icl["initialize_per_s"]),
         ratio(icl and icl["initialize_per_s"], ise and ise["initialize_per_s"])],
        ["initialize/s, median of rounds", num(ms), num(mc), ratio(mc, ms)],
        ["initialize p50 / p99 (µs)",
         f"{num(ise and ise['latency']['p50_us'])} / {num(ise and ise['latency']['p99_us'])}",
         f"{num(icl and icl['latency']['p50_us'])} / {num(icl and icl['latency']['p99_us'])}",
         ratio(icl and icl["latency"]["p50_us"], ise and ise["latency"]["p50_us"]) + " (p50)"],
        ["gateway CPU per initialize (µs)", num(ise and ise["server_own_cpu_us_per_initialize"], 1),
         num(icl and icl["server_own_cpu_us_per_initialize"], 1),
         ratio(icl and icl["server_own_cpu_us_per_initialize"], ise and ise["server_own_cpu_us_per_initialize"])],
    ]
    redis_init = [load(p) for p in sorted(d.glob("sessions-redis-init-cluster-*.json"))]
    best_i = max(range(len(icl_rounds)), key=lambda i: icl_rounds[i]["initialize_per_s"], default=None)
    if best_i is not None and best_i < len(redis_init) and redis_init[best_i] and icl:
        rc = redis_init[best_i]["redis_cpu_s"]
        rows.append(["Redis CPU per initialize (µs)", "–", num(rc * 1e6 / icl["initializes"], 1), ""])
    rows += forward_rows(["one node", "cluster"], [one, rep], 0)
    out += [table(["", "one node (sealed)", "cluster replica", "cluster / one node"], rows)]
    rf = load(d / "sessions-redis-forward.json")
    if rf and rep:
        out += [f"Redis used {rf['redis_cpu_s']:.2f} s of CPU over the whole forwarding run "
                f"({rf['wall_s']:.0f} s, every round and level of all three targets, warm-ups and "
                f"each virtual user's initialize included; only the replica's traffic reaches it).", ""]
    out += ["No `[auth]` here: the anonymous principal is not counted in Redis (the cap across "
            "replicas is kept per bearer token), so an `initialize` makes no Redis call; nor does a "
            "call on a session the replica holds in memory. Redis's CPU is its own user+system time.", ""]
    errors = icl_err + (rep["errors"] if rep else 0)
    out += [f"Failed requests on the replica (initialize and forwarding, every round): {errors:,} "
            f"{checks.check(errors == 0 and bool(rep) and bool(icl), 'part 3: failed requests or missing results')}.",
            f"tools/call/s of each round: {rounds_note([one, rep], ['one node', 'cluster'])}.", ""]
    return out


def part4(d: Path, checks: Checks) -> list[str]:
    out = ["## 4. Memory of idle sealed sessions, in memory and after the idle eviction", ""]
    op = load(d / "sluice-sessions-open-evict.json")
    snap = load(d / "sessions-evict-opened.json")
    ev = load(d / "sessions-evict-evicted.json")
    back = load(d / "sluice-sessions-resume-evicted.json")
    if not (op and ev):
        checks.failed.append("part 4: missing results")
        return out + ["(no result)", ""]
    o = op["result"]
    before = (o.get("memory_before") or {}).get("rss_kib")
    after_open = (o.get("memory_after") or {}).get("rss_kib")
    after_evict = (ev.get("gateway_memory") or {}).get("rss_kib")
    n = o["opened"]
    live_open = snap["metrics"].get("sluice_client_sessions_live") if snap else None
    live_evict = ev["zero"].get("sluice_client_sessions_live")
    def per(x: float | None) -> str:
        if x is None or before is None or not n:
            return "–"
        return f"{(x - before) / n:.3f} KiB"
    rows = [
        ["sessions opened (initialize + notifications/initialized, then idle)",
         f"{n:,} in {o['duration_s']:.1f} s, errors {o['errors']:,} {checks.check(o['errors'] == 0 and n == o['count'], 'part 4: open')}"],
        ["gateway RSS before (after 200 warm-up sessions, left idle too)", mib(before)],
        ["gateway RSS with them in memory", f"{mib(after_open)} (sessions live, warm-up included: {num(live_open)})"],
        [f"gateway RSS after the idle eviction ({ev['waited_s']:.0f} s later)",
         f"{mib(after_evict)} (sessions live: {num(live_evict)} {checks.check(live_evict == 0, 'part 4: sessions still live')})"],
        ["**per session, in memory**", f"**{per(after_open)}**"],
        ["**per session, after eviction**", f"**{per(after_evict)}**"],
    ]
    if back:
        b = back["result"]
        ev_n = b["resumed_delta"].get("evicted", 0)
        rows.append(["old ids presented after the eviction",
                     f"{b['presented']:,} (one `{b['method']}` each): {b['ok']:,} answered, {b['errors']:,} failed, "
                     f"`resumed_total{{cause=\"evicted\"}}` +{ev_n:,.0f} "
                     + checks.check(b["errors"] == 0 and b["ok"] == b["presented"] and ev_n == b["presented"],
                                    "part 4: evicted ids not resumed")])
    else:
        checks.failed.append("part 4: no resume after eviction")
    gm = ev.get("gateway_memory") or {}
    if gm:
        rows.append(["gateway after eviction, by mapping",
                     f"heap {mib(gm['heap_kib'])}, other anonymous {mib(gm['anon_kib'])}, files {mib(gm['file_kib'])}"])
    out += [table(["figure", "value"], rows)]
    out += ["", "Per session: (gateway RSS − RSS before) ÷ sessions opened, the gateway process alone "
            "(smaps); the idle TTL is short so that the eviction comes soon.", ""]
    return out


def cmd_summary(a: argparse.Namespace) -> int:
    d = Path(a.results)
    meta = load(d / "meta.json") or {}
    checks = Checks()
    out = ["# sluice: what sealed session ids and cluster mode cost", ""]
    if meta:
        m, v = meta.get("machine", {}), meta.get("versions", {})
        out += [f"{meta.get('date', '')} · sluice {v.get('sluice', '?')} ({meta.get('build', '')} build) · "
                f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores, {m.get('memory_gib', '?')} GiB · "
                f"{meta.get('sizes', '')}", ""]
    out += ["Every gateway serves the built-in stdio demo backend (`sluice demo-server`, shared); "
            "calls are `tools/call` of `demo__echo` with `{\"text\":\"hello\"}`. The load generator "
            "runs on one thread (one keep-alive connection per virtual user) on the same machine. "
            "Forwarding and initialize: the targets alternate within each round; the round with the most "
            "requests/s is reported (its latency and CPU), with the median of the rounds below it: on 2 "
            "cores shared by gateway, backend and load generator, rounds of one target differ by up to "
            "a third. Forwarding: one session per virtual user. *Gateway CPU* is the gateway process's own user+system "
            "time (/proc/PID/stat) over the measured window divided by the requests completed in it; "
            "*gateway + demo backend* adds its child.", ""]
    out += part1(d, checks)
    out += part2(d, checks)
    out += part3(d, checks)
    out += part4(d, checks)
    if checks.failed:
        out += ["**Checks failed:** " + "; ".join(checks.failed), ""]
    Path(a.out).write_text("\n".join(out))
    for f in checks.failed:
        print(f"sessions.py: check failed: {f}", file=sys.stderr)
    return 1 if checks.failed else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("summary")
    m.add_argument("--results", required=True)
    m.add_argument("--out", required=True)
    a = p.parse_args()
    return {"summary": cmd_summary}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
