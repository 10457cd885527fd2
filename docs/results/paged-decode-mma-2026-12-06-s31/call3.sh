#!/bin/bash
# Planned for session 32 (session 31's device time ran out before it): ncu's full set (stall sampling by SASS line) of the committed
# partial and merge at 4K x 1 and 32K x 1 (drop KILN_CUDA_PTX when the binary is HEAD's).
cd "$(dirname "$0")"
W=/tmp/s31c; mkdir -p $W; L=$W/log.txt
trap 'tar czf $OUT/call3.tgz -C $W .; cat $L' EXIT
mkdir -p /tmp/k; xz -dc s31/kiln.xz > /tmp/k/kiln; chmod +x /tmp/k/kiln; K=/tmp/k/kiln
{ date -u; cat s31/rev.txt; nvidia-smi --query-gpu=name --format=csv; } > $L 2>&1
for c in 4096 32768; do
echo "== ncu full $c x 1 $(date -u +%T)" >> $L
KILN_CUDA_PTX=var/base.ptx timeout 80 ncu --clock-control none --set full --import-source no --kernel-name regex:paged --launch-skip 10 --launch-count 2 -o $W/full-$c $K bench --backend cuda --paged --arms v2 --contexts $c --batches 1 --no-crossover > $W/ncu-$c.log 2>&1
echo "rc $?" >> $L
ncu --import $W/full-$c.ncu-rep --page source --print-source sass --csv > $W/sass-$c.csv 2>>$L
ncu --import $W/full-$c.ncu-rep > $W/details-$c.txt 2>>$L
done
date -u >> $L
