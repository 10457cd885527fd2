#!/bin/bash
# Session 31's second device call (trimmed to the device time left): CUDA parity of the new
# merge and the prefetching sweep, the grid with torch SDPA beside it, A/B against the
# committed partial of c46140c (base) and the unbounded build (v_nb) through KILN_CUDA_PTX,
# ncu at 4K x 1, bf16, Vulkan parity and speed. All in one tarball ($OUT takes 8 files).
# devcarry/: this script, peers/, s31/kiln.xz + rev.txt, var/*.ptx; .gl/ the Vulkan loaders.
cd "$(dirname "$0")"
W=/tmp/s31b; mkdir -p $W; L=$W/log.txt
trap 'tar czf $OUT/call2.tgz -C $W .; cat $L' EXIT
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/k; xz -dc s31/kiln.xz > /tmp/k/kiln; chmod +x /tmp/k/kiln; K=/tmp/k/kiln
{ date -u; cat s31/rev.txt; nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv; } > $L 2>&1
step() { echo "== $1 $(date -u +%T)" >> $L; tar czf $OUT/call2.tgz -C $W .; }
PK=paged_attention_decode,paged_attention_decode_v2_partial,paged_attention_merge_states
G="--contexts 4096,16384,32768 --batches 1,4,8"
step "bench paged f16 (built in: V prefetch, bound 3)"
timeout 40 $K bench --backend cuda --paged --arms v2 --no-crossover $G > $W/paged-f16.csv 2>&1
echo "rc $?" >> $L
step "torch peers paged"
timeout 40 python3 peers/torch_peers.py --only paged > $W/peers-paged.txt 2>&1
echo "rc $?" >> $L
for v in base v_nb; do
step "variant $v"
KILN_CUDA_PTX=var/$v.ptx timeout 30 $K bench --backend cuda --paged --arms v2 --no-crossover $G > $W/variant-$v.csv 2>&1
echo "rc $?" >> $L
done
step "parity cuda paged"
timeout 70 $K parity --backend cuda --kernel $PK > $W/parity-cuda.txt 2>&1
echo "rc $? $(tail -n 1 $W/parity-cuda.txt)" >> $L
step "ncu 4096 x 1"
timeout 30 ncu --clock-control none --kernel-name regex:paged --launch-skip 10 --launch-count 2 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats $K bench --backend cuda --paged --arms v2 --contexts 4096 --batches 1 --no-crossover > $W/ncu-4096-b1.txt 2>&1
echo "rc $?" >> $L
step "bench paged bf16"
timeout 30 $K bench --backend cuda --paged --arms v2 --no-crossover --dtype bf16 $G > $W/paged-bf16.csv 2>&1
echo "rc $?" >> $L
step "parity wgpu paged"
timeout 40 $K parity --backend wgpu --kernel $PK > $W/parity-wgpu.txt 2>&1
echo "rc $? $(tail -n 1 $W/parity-wgpu.txt)" >> $L
step "bench wgpu paged"
timeout 40 $K bench --backend wgpu --paged --arms v2 --no-crossover --contexts 4096,32768 --batches 1,8 > $W/wgpu.csv 2>&1
echo "rc $?" >> $L
date -u >> $L
