"""Byte-weighted % of copy over one Llama-3.1-8B decode layer as issued (fused q/k/v
4096->6144, o 4096->4096, fused gate+up 4096->28672, down 14336->4096) plus the LM head
4096->128256, from a `kiln bench --csv` file: total bytes / total median time / copy.
usage: python3 weighted.py bench.csv [kernel ...]"""
import csv, sys
SHAPES = ["4096->6144", "4096->4096", "4096->28672", "14336->4096", "4096->128256"]
rows = list(csv.DictReader(open(sys.argv[1])))
kernels = sys.argv[2:] or sorted({r["kernel"] for r in rows})
for k in kernels:
    for g in ("g64", "g32"):
        for m in (1, 2, 4, 8):
            sel = [r for r in rows if r["kernel"] == k and r["shape"].startswith(f"{g} {m}x")
                   and r["shape"].split("x", 1)[1] in SHAPES]
            if len(sel) != len(SHAPES):
                continue
            b = sum(int(r["bytes"]) for r in sel)
            t = sum(float(r["median_us"]) for r in sel)
            copy = float(sel[0]["copy_gbps"])
            print(f"{k:18} {g} B{m}: {t:8.1f} us  {b / t / 1e3:7.1f} GB/s  {100 * b / t / 1e3 / copy:5.1f}% of copy")
