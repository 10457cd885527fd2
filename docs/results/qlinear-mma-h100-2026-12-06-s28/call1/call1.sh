#!/bin/bash
# Device call 1 (2026-12-06, session 28): qlinear_mma_4bit v5 (one group per multiply, a ring of
# steps in flight, x from global memory, K split over a block's sets for short N) through
# KILN_CUDA_PTX beside the committed qlinear_4bit: ptxas, parity on cuda, kiln bench (bf16,
# g64 and g32, batch 1-8), torch's int4 GEMV peer in the same call, ncu on two shapes.
cd "$(dirname "$0")"
O=$OUT; L=$O/log.txt
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/kc; xz -dc kiln.xz > /tmp/kc/kiln; chmod +x /tmp/kc/kiln; K=/tmp/kc/kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; } > $L 2>&1
step() { echo "== $1 $(date -u +%T)" >> $L; }
P=s28/qlinear_mma_4bit.ptx
step ptxas; ptxas -arch=sm_90 -v $P -o /dev/null 2>&1 | grep -E "Used|spill|entry" >> $L
step "parity cuda mma"
KILN_CUDA_PTX=$P timeout 120 $K parity --backend cuda --kernel qlinear_mma_4bit > $O/parity-cuda.txt 2>&1
echo "rc $? $(tail -n 1 $O/parity-cuda.txt)" >> $L
step "bench mma"
KILN_CUDA_PTX=$P timeout 200 $K bench --backend cuda --kernel qlinear_mma_4bit --dtype bf16 --csv $O/bench-mma.csv > $O/bench-mma.txt 2>&1
echo "rc $?" >> $L
step "bench fma"
timeout 120 $K bench --backend cuda --kernel qlinear_4bit --dtype bf16 --shape "g64 1x,g64 8x,g32 1x" --csv $O/bench-fma.csv > $O/bench-fma.txt 2>&1
echo "rc $?" >> $L
step peers
timeout 90 python3 peers/torch_peers.py --only qgemv > $O/peers.txt 2>&1 </dev/null
echo "rc $?" >> $L
step ncu
KILN_CUDA_PTX=$P timeout 150 ncu -k regex:qlinear_mma_4bit_bf16 --launch-skip 3 --launch-count 1 --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats --section MemoryWorkloadAnalysis $K bench --backend cuda --kernel qlinear_mma_4bit --dtype bf16 --shape "g64 1x4096->128256" --runs 5 --eager > $O/ncu-lmhead.txt 2>&1
echo "rc $?" >> $L
KILN_CUDA_PTX=$P timeout 100 ncu -k regex:qlinear_mma_4bit_bf16 --launch-skip 3 --launch-count 1 --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats $K bench --backend cuda --kernel qlinear_mma_4bit --dtype bf16 --shape "g64 1x4096->4096" --runs 5 --eager > $O/ncu-4096.txt 2>&1
echo "rc $?" >> $L
date -u >> $L
cat $L
