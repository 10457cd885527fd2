#!/bin/bash
# One device call: parity of the linear kernels on cuda and Vulkan, kiln bench of qlinear_4bit
# (g64 at batch 1, 2, 4, 8; g32 at batch 1) and qlinear_8bit/2bit at batch 1, beside torch's
# int4 GEMV peer.
cd "$(dirname "$0")"
O=$OUT; L=$O/log.txt
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
gunzip -f kiln.gz; chmod +x kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; } > $L 2>&1
for b in 2 4 8; do echo "== ptxas qlinear_${b}bit"; ptxas -arch=sm_90 -v ../engine/artifacts/cuda/sm_90/qlinear_${b}bit.ptx -o /dev/null 2>&1 | grep -E "Used|spill" | head -2; done >> $L 2>&1
Q=qlinear_2bit,qlinear_3bit,qlinear_4bit,qlinear_5bit,qlinear_6bit,qlinear_8bit
timeout 150 ./kiln parity --backend cuda --kernel $Q,linear,embedding_affine --json > $O/parity-cuda.json 2>$O/parity-cuda.err
echo "== parity cuda rc $? $(tail -n 1 $O/parity-cuda.err)" >> $L
echo "== bench" >> $L
timeout 120 ./kiln bench --backend cuda --kernel qlinear_4bit --dtype bf16 --shape "g64 ,g32 1x" --csv $O/bench.csv >> $L 2>&1
timeout 40 ./kiln bench --backend cuda --kernel qlinear_4bit --dtype f16 --shape "g64 1x,g64 8x" --csv $O/bench-f16.csv >> $L 2>&1
echo "== peers" >> $L
timeout 90 python3 peers/torch_peers.py --only qgemv --json $O/peers.json >> $L 2>&1 </dev/null
timeout 170 ./kiln parity --backend wgpu --kernel $Q --json > $O/parity-wgpu.json 2>$O/parity-wgpu.err
echo "== parity wgpu rc $? $(tail -n 1 $O/parity-wgpu.err)" >> $L
date -u >> $L
