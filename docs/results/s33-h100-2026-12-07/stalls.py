#!/usr/bin/env python3
"""Summarise an ncu `--page source --print-source sass --csv` export (optionally .xz).

usage: stalls.py SASS.csv[.xz] [TOP]

Per kernel: warp-stall samples by reason, the TOP instructions by samples, and the runs of
consecutive instructions executed equally often (a loop body, a prologue) that hold at least
1% of the executed warp instructions, with instructions per warp.
"""
import collections
import csv
import io
import lzma
import sys

path = sys.argv[1]
top_n = int(sys.argv[2]) if len(sys.argv) > 2 else 15
text = lzma.open(path, "rt") if path.endswith(".xz") else open(path)
kern, rows, hdr = None, collections.defaultdict(list), {}
for r in csv.reader(io.StringIO(text.read())):
    if not r:
        continue
    if r[0] == "Kernel Name":
        kern = r[1]
        continue
    if r[0] == "Address":
        hdr[kern] = r
        continue
    rows[kern].append(r)

for k, rs in rows.items():
    h = hdr[k]
    samp = h.index("Warp Stall Sampling (All Samples)")
    ex = h.index("Instructions Executed")
    reasons = [j for j, n in enumerate(h) if n.startswith("stall_") and "Not Issued" not in n]
    num = lambda r, j: float(r[j] or 0)
    total = sum(num(r, samp) for r in rs) or 1.0
    executed = sum(num(r, ex) for r in rs)
    base = int(rs[0][0], 16)
    print(f"== {k}: {total:.0f} samples, {executed:.0f} warp instructions executed")
    by = collections.Counter()
    for r in rs:
        for j in reasons:
            by[h[j][6:]] += num(r, j)
    print("  stalls: " + ", ".join(f"{n} {v / total * 100:.0f}%" for n, v in by.most_common(8)))
    for r in sorted(rs, key=lambda r: -num(r, samp))[:top_n]:
        two = sorted(((num(r, j), h[j][6:]) for j in reasons), reverse=True)[:2]
        print(f"  {int(r[0], 16) - base:#07x} {num(r, samp) / total * 100:5.1f}%  "
              f"{r[1].strip()[:56]:56} {two[0][1]}, {two[1][1]}")
    runs = []
    for r in rs:
        n, a = num(r, ex), int(r[0], 16) - base
        if runs and runs[-1][2] == n:
            runs[-1][1] = a
            runs[-1][3] += 1
            runs[-1][4] += num(r, samp)
        else:
            runs.append([a, a, n, 1, num(r, samp)])
    print("  runs (first-last, executions per instruction x instructions, share, samples):")
    for a, b, n, c, s in runs:
        if n * c > executed * 0.01:
            print(f"  {a:#07x}-{b:#07x} {n:8.0f} x {c:4d} {n * c / executed * 100:5.1f}%  {s:5.0f}")
