#!/bin/bash
# Planned in session 32 (no device time was left to it) for the next session: parity of HEAD's paged kernels (the merge's last form), the
# batch grid with torch SDPA beside it, a sweep of the planner's round size at batch 1, and
# ncu's full set (SASS-line stalls) of the partial and the merge at 4K x 1, 32K x 1, 32K x 8.
cd "$(dirname "$0")"
W=/tmp/paged; mkdir -p $W; L=$W/log.txt
trap 'tar czf $OUT/paged.tgz -C $W .; cat $L' EXIT
for f in ../../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/k; xz -dc kiln.xz > /tmp/k/kiln; chmod +x /tmp/k/kiln; K=/tmp/k/kiln
{ date -u; cat rev.txt; nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv; } > $L 2>&1
step() { echo "== $1 $(date -u +%T)" >> $L; tar czf $OUT/paged.tgz -C $W .; }
PK=paged_attention_decode,paged_attention_decode_v2_partial,paged_attention_merge_states
G="--contexts 4096,16384,32768 --batches 1,4,8"
step "parity cuda paged"
timeout 70 $K parity --backend cuda --kernel $PK > $W/parity-cuda.txt 2>&1
echo "rc $? $(tail -n 1 $W/parity-cuda.txt)" >> $L
step "bench paged f16"
timeout 40 $K bench --backend cuda --paged --arms v2 --no-crossover $G > $W/paged-f16.csv 2>&1
echo "rc $?" >> $L
step "torch peers paged"
timeout 40 python3 ../peers/torch_peers.py --only paged > $W/peers-paged.txt 2>&1
echo "rc $?" >> $L
for t in 132 264 528 792 1056; do
step "target blocks $t"
KILN_PAGED_V2_TARGET_BLOCKS=$t timeout 25 $K bench --backend cuda --paged --arms v2 --no-crossover --contexts 4096,16384,32768 --batches 1 > $W/target-$t.csv 2>&1
echo "rc $?" >> $L
done
for cb in 4096:1 32768:1 32768:8; do
c=${cb%:*}; bt=${cb#*:}
step "ncu full $c x $bt"
timeout 100 ncu --clock-control none --set full --import-source no --kernel-name regex:paged --launch-skip 10 --launch-count 2 -o $W/full-$c-$bt $K bench --backend cuda --paged --arms v2 --contexts $c --batches $bt --no-crossover > $W/ncu-$c-$bt.log 2>&1
echo "rc $?" >> $L
ncu --import $W/full-$c-$bt.ncu-rep --page source --print-source sass --csv > $W/sass-$c-$bt.csv 2>>$L
ncu --import $W/full-$c-$bt.ncu-rep > $W/details-$c-$bt.txt 2>>$L
done
step "parity wgpu paged"
timeout 40 $K parity --backend wgpu --kernel $PK > $W/parity-wgpu.txt 2>&1
echo "rc $? $(tail -n 1 $W/parity-wgpu.txt)" >> $L
date -u >> $L
