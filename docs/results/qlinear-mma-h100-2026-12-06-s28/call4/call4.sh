#!/bin/bash
# Device call 4 (session 28): the committed tree's release kiln (artifacts embedded, no
# KILN_CUDA_PTX): parity of qlinear_mma_4bit and qlinear_4bit through CUDA and Vulkan, and
# kiln bench of both at bf16 g64 B1/B8; variant e (x of a step past the split read at step 0
# instead of zeroed) through KILN_CUDA_PTX.
cd "$(dirname "$0")"
O=$OUT; W=/tmp/c4; mkdir -p $W; L=$W/log.txt
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/k4; xz -dc kiln.xz > /tmp/k4/kiln; chmod +x /tmp/k4/kiln; K=/tmp/k4/kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name --format=csv; } > $L 2>&1
step() { echo "== $1 $(date -u +%T)" >> $L; }
step "parity cuda"
timeout 150 $K parity --backend cuda --kernel qlinear_mma_4bit,qlinear_4bit > $W/parity-cuda.txt 2>&1
echo "rc $? $(tail -n 1 $W/parity-cuda.txt)" >> $L
step "parity wgpu"
timeout 200 $K parity --backend wgpu --kernel qlinear_mma_4bit > $W/parity-wgpu.txt 2>&1
echo "rc $? $(tail -n 1 $W/parity-wgpu.txt)" >> $L
step "bench"
timeout 150 $K bench --backend cuda --kernel qlinear_mma_4bit,qlinear_4bit --dtype bf16 --shape "g64 1x,g64 8x" --csv $W/bench.csv > $W/bench.txt 2>&1
echo "rc $?" >> $L
if [ -f s28/e.ptx ]; then
step "bench variant e"
KILN_CUDA_PTX=s28/e.ptx timeout 120 $K bench --backend cuda --kernel qlinear_mma_4bit --dtype bf16 --shape "g64 1x,g64 8x,g32 1x" --csv $W/bench-e.csv > $W/bench-e.txt 2>&1
echo "rc $?" >> $L
step "parity cuda e"
KILN_CUDA_PTX=s28/e.ptx timeout 120 $K parity --backend cuda --kernel qlinear_mma_4bit > $W/parity-cuda-e.txt 2>&1
echo "rc $? $(tail -n 1 $W/parity-cuda-e.txt)" >> $L
fi
date -u >> $L
tar czf $O/out.tgz -C $W .
cat $L
