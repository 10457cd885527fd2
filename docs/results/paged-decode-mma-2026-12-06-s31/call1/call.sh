#!/bin/bash
# Session 31's first device call (session 30's plan, outputs written straight to $OUT so a cut
# call still returns what ran): CUDA parity of the paged kernels (the tensor-core sweep's first
# run on hardware), the tensor-core sweep against the two-pass sweep (KILN_PAGED_MMA=0), torch
# SDPA beside them, the new bench shapes, ncu of 32K x 1 / x 8, Vulkan parity.
# devcarry/ holds this script, peers/ (../shared/peers), s31/kiln.xz (stripped release `kiln` of
# the commit under test) and s31/rev.txt; .gl/ the Vulkan loader debs.
# Run: bash devcarry/call.sh (carry ["devcarry", ".gl"]).
cd "$(dirname "$0")"
W=$OUT/s31; mkdir -p $W; L=$W/log.txt
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/k; xz -dc s31/kiln.xz > /tmp/k/kiln; chmod +x /tmp/k/kiln; K=/tmp/k/kiln
{ date -u; cat s31/rev.txt; nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv; } > $L 2>&1
step() { echo "== $1 $(date -u +%T)" >> $L; }
PK=paged_attention_decode,paged_attention_decode_v2_partial,paged_attention_merge_states
step "parity cuda paged"
timeout 90 $K parity --backend cuda --kernel $PK > $W/parity-cuda.txt 2>&1
echo "rc $? $(tail -n 1 $W/parity-cuda.txt)" >> $L
step "bench paged two-pass (KILN_PAGED_MMA=0)"
KILN_PAGED_MMA=0 timeout 80 $K bench --backend cuda --paged --arms v1,v2 --contexts 1024,4096,16384,32768 --batches 1,4,8 --dtype f16,bf16 > $W/paged-two-pass.csv 2>&1
echo "rc $?" >> $L
step "bench paged tensor-core"
timeout 80 $K bench --backend cuda --paged --arms v1,v2 --contexts 1024,4096,16384,32768 --batches 1,4,8 --dtype f16,bf16 > $W/paged-mma.csv 2>&1
echo "rc $?" >> $L
step "torch peers paged"
timeout 90 python3 peers/torch_peers.py --only paged > $W/peers-paged.txt 2>&1
echo "rc $?" >> $L
step "bench paged shapes"
timeout 90 $K bench --backend cuda --paged --arms v2 --no-crossover --contexts 4096,32768,131072 --batches 1,8 --gqa 32/8,32/4,64/8 --page-sizes 16,32 > $W/paged-shapes.csv 2>&1
echo "rc $?" >> $L
for bt in 1 8; do
step "ncu 32K x $bt"
timeout 60 ncu --clock-control none --kernel-name regex:paged --launch-skip 10 --launch-count 2 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis $K bench --backend cuda --paged --arms v2 --contexts 32768 --batches $bt --no-crossover > $W/ncu-32k-b$bt.txt 2>&1
echo "rc $?" >> $L
done
step "parity wgpu paged"
timeout 60 $K parity --backend wgpu --kernel $PK > $W/parity-wgpu.txt 2>&1
echo "rc $? $(tail -n 1 $W/parity-wgpu.txt)" >> $L
date -u >> $L
cat $L
