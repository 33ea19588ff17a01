#!/usr/bin/env python3
"""The end-state checks and the summary of `bench/run --soak` (stdlib only).

    soak.py settle  --metrics-url URL --pid PID [--zero SERIES]... --timeout S
                    [--min-wait S] [--expect-children N] [--expect-labels a,b]
                    --out FILE
    soak.py summary --results DIR --out FILE

`settle` polls the gateway's /metrics (once a second, at most --timeout s)
until every --zero series reads 0 and its children are as expected (N
children, their SOAK_BACKEND labels exactly the given ones, no zombie) and
at least --min-wait s have passed, then writes what it saw (series, children, RSS of the process tree) as JSON; exit
1 when the state was not reached. `summary` turns the soak's JSON results
into a short markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request
from pathlib import Path

LABEL = "SOAK_BACKEND"


# ------------------------------------------------------------------ /proc


def stat(pid: int) -> tuple[str, int] | None:
    """(state, ppid) of a process, None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = raw[raw.rfind(")") + 2 :].split()
    return rest[0], int(rest[1])


def label(pid: int) -> str | None:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    for kv in env.split(b"\0"):
        if kv.startswith(LABEL.encode() + b"="):
            return kv.split(b"=", 1)[1].decode(errors="replace")
    return None


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def memory(pid: int) -> dict | None:
    """Resident KiB of one process by kind of mapping (as loadgen's
    procs::memory): the brk heap, other anonymous, file-backed."""
    m = {"rss_kib": 0, "heap_kib": 0, "anon_kib": 0, "file_kib": 0}
    kind = "anon_kib"
    try:
        lines = Path(f"/proc/{pid}/smaps").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        f = line.split()
        if not f:
            continue
        if "-" in f[0] and f[0][0] in "0123456789abcdef" and not f[0].endswith(":"):
            path = f[5] if len(f) > 5 else ""
            kind = "heap_kib" if path == "[heap]" else "anon_kib" if path == "" or path.startswith("[") else "file_kib"
        elif f[0] == "Rss:":
            m["rss_kib"] += int(f[1])
            m[kind] += int(f[1])
    return m


def processes() -> dict[int, tuple[str, int]]:
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            s = stat(int(name))
            if s:
                out[int(name)] = s
    return out


def descendants(root: int) -> list[dict]:
    """Every descendant: pid, parent, state, SOAK_BACKEND label, RSS."""
    procs = processes()
    kids: dict[int, list[int]] = {}
    for pid, (_, ppid) in procs.items():
        kids.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        p = todo.pop()
        for k in sorted(kids.get(p, [])):
            state = procs[k][0]
            found.append(
                {
                    "pid": k,
                    "ppid": p,
                    "state": state,
                    "label": None if state == "Z" else label(k),
                    "rss_kib": rss_kib(k),
                }
            )
            todo.append(k)
    return found


# ------------------------------------------------------------------ metrics


def scrape(url: str) -> dict[str, float]:
    """sluice_* and process_* samples (no histogram buckets), by series."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if not line.startswith(("sluice_", "process_")):
            continue
        series, _, value = line.rpartition(" ")
        if series.split("{")[0].endswith("_bucket"):
            continue
        try:
            out[series] = float(value)
        except ValueError:
            pass
    return out


def cmd_settle(a: argparse.Namespace) -> int:
    want_labels = sorted(a.expect_labels.split(",")) if a.expect_labels else None
    t0 = time.monotonic()
    while True:
        error = None
        try:
            metrics = scrape(a.metrics_url)
        except OSError as e:
            metrics, error = {}, str(e)
        zero = {s: metrics.get(s) for s in a.zero}
        tree = descendants(a.pid)
        children = [p for p in tree if p["ppid"] == a.pid]
        zombies = [p for p in tree if p["state"] == "Z"]
        checks = {f"{s} == 0": v == 0 for s, v in zero.items()}
        checks["metrics readable"] = error is None
        if a.expect_children is not None:
            checks[f"{a.expect_children} children"] = len(children) == a.expect_children
        if want_labels is not None:
            got = sorted(str(p["label"]) for p in children)
            checks[f"children are {','.join(want_labels)}"] = got == want_labels
        checks["no zombie"] = not zombies
        waited = time.monotonic() - t0
        if (all(checks.values()) and waited >= a.min_wait) or waited >= max(a.timeout, a.min_wait):
            break
        time.sleep(1)
    rss = rss_kib(a.pid) + sum(p["rss_kib"] for p in tree if p["state"] != "Z")
    result = {
        "ok": all(checks.values()),
        "waited_s": round(waited, 1),
        "checks": checks,
        "zero": zero,
        "children": children,
        "descendants": tree,
        "rss_kib": rss,
        "gateway_rss_kib": rss_kib(a.pid),
        "gateway_memory": memory(a.pid),
        "metrics": metrics,
        "metrics_error": error,
    }
    Path(a.out).write_text(json.dumps(result, indent=2) + "\n")
    state = "reached" if result["ok"] else "NOT reached"
    failed = [k for k, v in checks.items() if not v]
    print(
        f"soak.py: end state {state} after {waited:.0f} s: {len(children)} children "
        f"{[p['label'] for p in children]}, {len(zombies)} zombies, "
        f"{', '.join(f'{s}={v}' for s, v in zero.items())}, RSS {rss / 1024:.1f} MiB"
        + (f"; failed: {failed}" if failed else ""),
        file=sys.stderr,
    )
    return 0 if result["ok"] else 1


# ------------------------------------------------------------------ summary


def load(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def mib(kib: float | None) -> str:
    return "–" if kib is None else f"{kib / 1024:,.1f} MiB"


def mark(ok: bool) -> str:
    return "ok" if ok else "**FAILED**"


def abandon_rows(run: dict, end: dict | None) -> list[tuple[str, str]]:
    r = run["result"]
    b = r["batches"]
    b1 = b[0]
    rows = [
        ("sessions", f"{r['count']:,} × {len(b)} batches, {r['concurrency']} connections, "
                     f"warm-up {r['warmup_sessions']} (ended with DELETE)"),
        ("sessions ok", " / ".join(f"{x['sessions_ok']:,}" for x in b)
         + " (" + " / ".join(f"{x['sessions_per_s']:,.0f}/s" for x in b) + ")"),
        ("failed requests", f"{run['errors']:,}"),
        ("RSS cold (fresh server)", mib(r["cold_rss_kib"])),
        ("RSS batch-1 start", mib(b1["start"]["rss_kib"])),
        ("RSS batch-1 peak", mib(b1["peak_rss_kib"])),
        ("RSS batch-1 end", mib(b1["end_rss_kib"])),
        ("per session (end − start) ÷ N", f"{r['kib_per_session']:.3f} KiB "
                                          f"(slope {r['kib_per_session_slope']:.3f} KiB)"),
    ]
    d = r.get("drain")
    if d:
        rows.append((f"RSS after the drain ({d['duration_s']:.0f} s)",
                     f"{mib(d['after_rss_kib'])} (× {r['after_drain_ratio']:.3f} of batch-1 start)"))
    sad = r.get("server_after_drain")
    if sad is not None:
        if "Ok" in sad:
            m = sad["Ok"]
            live = m.get("sluice_client_sessions_live")
            closed = {k.split('reason="')[1].rstrip('"}'): int(v) for k, v in m.items()
                      if k.startswith("sluice_client_sessions_closed_total{")}
            rows.append(("server: sessions live after the drain",
                         f"{live:.0f} {mark(live == 0)}" if live is not None else "– **FAILED**"))
            rows.append(("server: sessions opened / closed by reason",
                         f"{m.get('sluice_client_sessions_opened_total', 0):,.0f} / "
                         + ", ".join(f"{k} {v:,}" for k, v in sorted(closed.items()))))
        else:
            rows.append(("server: sessions live after the drain", f"unreadable: {sad.get('Err')} **FAILED**"))
    if r.get("stale_id"):
        rows.append(("stale batch-1 id after the drain", f"HTTP {r['stale_id']['status']}"))
    if len(b) > 1:
        rows.append(("RSS batch-2 peak", f"{mib(b[1]['peak_rss_kib'])} "
                                         f"(× {r['batch2_peak_ratio']:.3f} of batch-1 peak)"))
    if end:
        live = end["zero"].get("sluice_client_sessions_live")
        rows.append((f"after batch 2 drained ({end['waited_s']:.0f} s)",
                     f"sessions live {live if live is None else int(live)}, "
                     f"RSS {mib(end['rss_kib'])}, {len(end['children'])} child, "
                     f"{sum(p['state'] == 'Z' for p in end['descendants'])} zombies "
                     f"{mark(end['ok'])}"))
    def breakdown(m: dict | None) -> str:
        if not m:
            return "–"
        return (f"{mib(m['rss_kib'])} (heap {mib(m['heap_kib'])}, other anonymous "
                f"{mib(m['anon_kib'])}, files {mib(m['file_kib'])})")
    gw = []
    if d and d.get("after_server_memory"):
        gw.append(f"after the drain {breakdown(d['after_server_memory'])}")
    if end and end.get("gateway_memory"):
        gw.append(f"after batch 2 drained {breakdown(end['gateway_memory'])}")
    if gw:
        rows.append(("the gateway process alone (no child)", "; ".join(gw)))
    return rows


def mixed_rows(run: dict, end: dict | None) -> list[tuple[str, str]]:
    r = run["result"]
    q = r["requests"]
    kills = r["kills_per_backend"]
    rows = [
        ("duration", f"{r['duration_s']:.0f} s, {r['concurrency']} clients, seed {r['seed']}"),
        ("requests", f"{q['requests']:,} ({q['ok']:,} ok, {q['failed']:,} failed)"),
        ("by kind (requests / failed)", "; ".join(
            f"{k} {c['requests']:,}/{c['failed']:,}" for k, c in r["by_kind"].items())),
        ("by backend (requests / failed)", "; ".join(
            f"{k} {c['requests']:,}/{c['failed']:,}" for k, c in r["by_backend"].items())),
        ("sessions opened / deleted / abandoned",
         f"{r['sessions']['opened']:,} / {r['sessions']['deleted']:,} / {r['sessions']['abandoned']:,} "
         f"({r['sessions']['abandoned_with_connection']:,} with their connection)"),
        ("kills (SIGKILL)", f"{sum(kills.values())}: " + ", ".join(f"{k} {v}" for k, v in kills.items())
         + (f" ({r['kill_misses']} found nothing)" if r["kill_misses"] else "")),
        ("failures explained (in flight on a killed backend)", f"{r['explained_failures']:,}"),
        ("failures unexplained", f"{r['unexplained_failures']:,} {mark(r['unexplained_failures'] == 0)}"),
    ]
    if r["unexplained_failures"]:
        rows += [
            ("unexplained by backend", ", ".join(f"{k} {v:,}" for k, v in r.get("unexplained_by_backend", {}).items())),
            ("unexplained by error", ", ".join(f"{k} {v:,}" for k, v in r["unexplained_by_error"].items())),
            ("unexplained, started ≤ 2 s after a kill of their backend",
             f"{r['unexplained_within_2s_after_kill']:,}"),
        ]
    rows += [
        ("RSS min / max over the run", f"{mib(r['rss_min_kib'])} / {mib(r['rss_max_kib'])}"),
        ("most processes per backend", ", ".join(
            f"{k} {v}" for k, v in r["max_processes_per_backend"].items())),
    ]
    if end:
        z = end["zero"]
        c = z.get('sluice_backend_sessions_live{backend="c"}')
        live = z.get("sluice_client_sessions_live")
        checks = end["checks"]
        rows += [
            (f"end: c backend sessions live (after {end['waited_s']:.0f} s)",
             f"{c if c is None else int(c)} {mark(c == 0)}"),
            ("end: client sessions live", f"{live if live is None else int(live)} {mark(live == 0)}"),
            ("end: gateway children",
             f"{len(end['children'])} ({', '.join(str(p['label']) for p in end['children'])}), "
             f"{sum(p['state'] == 'Z' for p in end['descendants'])} zombies "
             f"{mark(all(v for k, v in checks.items() if 'children' in k or 'zombie' in k))}"),
            ("end: RSS", mib(end["rss_kib"])),
        ]
    return rows


def table(rows: list[tuple[str, str]]) -> str:
    return "| figure | value |\n|---|---|\n" + "".join(f"| {k} | {v} |\n" for k, v in rows)


def cmd_summary(a: argparse.Namespace) -> int:
    d = Path(a.results)
    meta = load(d / "meta.json") or {}
    out = ["# sluice soak", ""]
    if meta:
        m, v = meta.get("machine", {}), meta.get("versions", {})
        out += [f"{meta.get('date', '')} · sluice {v.get('sluice', '?')} ({meta.get('build', '')} build) · "
                f"{m.get('cores', '?')} cores, {m.get('memory_gib', '?')} GiB · {meta.get('sizes', '')}", ""]
    ab, ab_end = load(d / "soak-abandon-sluice.json"), load(d / "soak-abandon-end.json")
    out += ["## a) abandoned sessions through the table", ""]
    out += [table(abandon_rows(ab, ab_end)) if ab else "(no result)\n"]
    mx, mx_end = load(d / "soak-mixed-sluice.json"), load(d / "soak-mixed-end.json")
    out += ["## b) mixed traffic, backends killed at random", ""]
    out += [table(mixed_rows(mx, mx_end)) if mx else "(no result)\n"]
    if mx and mx["result"]["unexplained_samples"]:
        out += ["Unexplained failures (first 20):", ""]
        for s in mx["result"]["unexplained_samples"]:
            since = s["since_kill_of_backend_s"]
            out.append(f"- {s['start_s']:.3f}–{s['end_s']:.3f} s {s['kind']} "
                       f"(backend {s['backend'] or '–'}"
                       + (f", started {since * 1e3:.3f} ms after a killed process of it died"
                          if since is not None else "")
                       + f"): `{s['error']}`")
        out.append("")
    Path(a.out).write_text("\n".join(out))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("settle")
    s.add_argument("--metrics-url", required=True)
    s.add_argument("--pid", type=int, required=True)
    s.add_argument("--zero", action="append", default=[])
    s.add_argument("--timeout", type=float, default=60)
    s.add_argument("--min-wait", type=float, default=0)
    s.add_argument("--expect-children", type=int)
    s.add_argument("--expect-labels")
    s.add_argument("--out", required=True)
    m = sub.add_parser("summary")
    m.add_argument("--results", required=True)
    m.add_argument("--out", required=True)
    a = p.parse_args()
    return {"settle": cmd_settle, "summary": cmd_summary}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
