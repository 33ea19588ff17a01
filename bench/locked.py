#!/usr/bin/env python3
"""Locked instructions per request, from a callgrind profile.

A locked instruction (`lock`-prefixed, or `xchg` with memory) is every
atomic read-modify-write on x86: each take and release of a lock, each
`Arc` clone and drop, each waker clone. perf put about a third of
sluice's own user time right after one (bench/analysis.md), so their
count is a figure of its own beside the instruction count.

callgrind with `--dump-instr=yes` gives each instruction's execution
count; this matches them against `objdump -d` of each object and sums the
locked ones, by the source line of the innermost frame in the project's
own code (`addr2line -i`), so a site in tokio or std is named by the
sluice line that reached it when inlined there.

    bench/locked.py CALLGRIND_OUT REQUESTS [--root SRC_DIR] [--top N] [--sites FILE]

Prints one JSON document: {"requests", "locked", "per_request",
"objects": {object: per_request}}; with --sites, the top sites to FILE.
"""

import argparse
import bisect
import collections
import json
import re
import subprocess
import sys
from pathlib import Path


def costs(path: Path) -> dict:
    """{(object, address): instructions executed there}, self cost only."""
    out: dict = collections.Counter()
    names: dict = {}
    obj = ""
    pos = 0
    call_line = False
    for line in path.open(errors="replace"):
        c = line[:1]
        if not c or c in "#\n":
            continue
        if line.startswith("calls="):
            call_line = True  # the next cost line is the call's inclusive cost
            continue
        if c in "0123456789+-*":
            parts = line.split()
            p = parts[0]
            if p.startswith("0x"):
                pos = int(p, 16)
            elif p[0] == "+":
                pos += int(p[1:], 0)
            elif p[0] == "-":
                pos -= int(p[1:], 0)
            elif p != "*":
                pos = int(p)
            if call_line:
                call_line = False
                continue
            if len(parts) >= 3:  # positions: instr line; then Ir
                out[(obj, pos)] += int(parts[2])
            continue
        m = re.match(r"^(c?ob)=\((\d+)\)(?: (.*))?", line)
        if m:
            kind, key, name = m.groups()
            if name:
                names[key] = name.strip()
            if kind == "ob":
                obj = names.get(key, "")
    return out


def locked_addresses(obj: str) -> set:
    """Addresses of the locked instructions in an object (as callgrind names them)."""
    try:
        dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", obj],
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return set()
    found = set()
    for line in dis.splitlines():
        m = re.match(r"^\s+([0-9a-f]+):\s+(\S+)\s*(.*)", line)
        if not m:
            continue
        mnemonic, operands = m.group(2), m.group(3)
        # `xchg %ax,%ax` is a two-byte no-op; xchg with memory is locked.
        if mnemonic == "lock" or (mnemonic.startswith("xchg") and "(" in operands):
            found.add(int(m.group(1), 16))
    return found


def sites(obj: str, addresses: list, root: str) -> dict:
    """{address: 'file:line function'} of the innermost frame under `root`."""
    if not addresses:
        return {}
    out = subprocess.run(["addr2line", "-a", "-f", "-C", "-i", "-e", obj] + [hex(a) for a in addresses],
                         capture_output=True, text=True).stdout.splitlines()
    named, current, frames = {}, None, []

    def close():
        if current is None:
            return
        pairs = list(zip(frames[0::2], frames[1::2]))
        own = [(fn, loc) for fn, loc in pairs if root in loc]
        fn, loc = (own or pairs or [("?", "?")])[0]
        loc = loc.split(root, 1)[-1].lstrip("/") if root in loc else "(" + Path(loc.split(":")[0]).name + ")"
        named[current] = f"{loc}  {fn.split('::{{closure}}')[0][-60:]}"

    for line in out:
        if re.fullmatch(r"0x[0-9a-f]+", line):
            close()
            current, frames = int(line, 16), []
        else:
            frames.append(line)
    close()
    return named


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("callgrind_out", type=Path)
    ap.add_argument("requests", type=int)
    ap.add_argument("--root", default="/src/", help="source paths of the project's own code contain this")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--sites", type=Path)
    args = ap.parse_args()
    per_addr = costs(args.callgrind_out)
    by_obj: dict = collections.defaultdict(dict)
    for (obj, addr), n in per_addr.items():
        by_obj[obj][addr] = n
    total, objects, hot = 0, {}, []
    for obj, counts in by_obj.items():
        if not obj or "vgpreload" in obj or not Path(obj).exists():
            continue
        locked = locked_addresses(obj)
        n = 0
        for addr, count in counts.items():
            if addr in locked:
                n += count
                hot.append((count, obj, addr))
        if n:
            objects[obj] = n / max(args.requests, 1)
            total += n
    doc = {
        "requests": args.requests,
        "locked": total,
        "per_request": total / max(args.requests, 1),
        "objects": objects,
    }
    if args.sites:
        hot.sort(reverse=True)
        by_site: dict = collections.Counter()
        for obj in {o for _, o, _ in hot}:
            addrs = [a for _, o, a in hot if o == obj]
            named = sites(obj, addrs, args.root)
            for count, o, a in hot:
                if o == obj:
                    by_site[named.get(a, hex(a))] += count
        lines = [f"{n / max(args.requests, 1):6.2f}  {site}" for site, n in by_site.most_common(args.top)]
        args.sites.write_text("locked instructions per request, by site\n" + "\n".join(lines) + "\n")
    json.dump(doc, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
