#!/bin/bash
# Device call 2 (session 28): qlinear_mma_4bit v5 with 16-byte scale blocks (ptx4) through
# KILN_CUDA_PTX: ptxas, parity on cuda, kiln bench bf16 g64/g32 B1/B8, ncu on the LM head.
cd "$(dirname "$0")"
O=$OUT; L=$O/log.txt
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/kc; [ -x /tmp/kc/kiln ] || { xz -dc kiln.xz > /tmp/kc/kiln; chmod +x /tmp/kc/kiln; }; K=/tmp/kc/kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,clocks.max.memory,clocks.max.sm --format=csv; } > $L 2>&1
step() { echo "== $1 $(date -u +%T)" >> $L; }
for v in a c d; do
P=s28/$v.ptx
step "ptxas $v"; ptxas -arch=sm_90 -v $P -o /dev/null 2>&1 | grep -E "Used|spill" | head -2 >> $L
step "parity cuda mma $v"
KILN_CUDA_PTX=$P timeout 120 $K parity --backend cuda --kernel qlinear_mma_4bit > $O/parity-cuda-$v.txt 2>&1
echo "rc $? $(tail -n 1 $O/parity-cuda-$v.txt)" >> $L
step "bench mma $v"
KILN_CUDA_PTX=$P timeout 200 $K bench --backend cuda --kernel qlinear_mma_4bit --dtype bf16 --shape "g64 1x,g64 8x,g32 1x" --csv $O/bench-mma-$v.csv > $O/bench-mma-$v.txt 2>&1
echo "rc $?" >> $L
done
P=s28/a.ptx
step "bench fma"
timeout 120 $K bench --backend cuda --kernel qlinear_4bit --dtype bf16 --shape "g64 1x,g64 8x,g32 1x" --csv $O/bench-fma.csv > $O/bench-fma.txt 2>&1
echo "rc $?" >> $L
step peers
timeout 90 python3 peers/torch_peers.py --only qgemv > $O/peers.txt 2>&1 </dev/null
echo "rc $?" >> $L
step ncu
KILN_CUDA_PTX=$P timeout 150 ncu -k regex:qlinear_mma_4bit_bf16 --launch-skip 3 --launch-count 1 --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats --section MemoryWorkloadAnalysis $K bench --backend cuda --kernel qlinear_mma_4bit --dtype bf16 --shape "g64 1x4096->128256" --runs 5 --eager > $O/ncu-lmhead.txt 2>&1
echo "rc $?" >> $L
date -u >> $L
cat $L
