#!/bin/bash
# Device call 7 (2026-12-05, session 19): qlinear_mma_4bit v4 (branch qlinear-mma-v4, 5da707a),
# unmeasured since session 16: ptxas, parity on cuda, kiln bench replayed (bf16 g64 batch 1, 2,
# 4, 8; g32 batch 1), the one-pass variant, torch's int4 GEMV in the same call, parity on Vulkan.
cd "$(dirname "$0")"  # run from devcarry/: binaries and peers beside it
O=$OUT; L=$O/log.txt
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
xz -d -f kiln-v4.xz; chmod +x kiln-v4
{ date -u; echo "rev $(cat rev-v4.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; } > $L 2>&1
P=ptx-v4/qlinear_mma_4bit.ptx
echo "== ptxas" >> $L; ptxas -arch=sm_90 -v $P -o /dev/null 2>&1 | grep -E "Used|spill" >> $L
timeout 100 ./kiln-v4 parity --backend cuda --kernel qlinear_mma_4bit,qlinear_4bit --json > $O/parity-cuda.json 2>$O/parity-cuda.err
echo "== parity cuda rc $? $(tail -n 1 $O/parity-cuda.err)" >> $L
echo "== bench v4 (replayed)" >> $L
timeout 150 ./kiln-v4 bench --backend cuda --kernel qlinear_mma_4bit,qlinear_4bit --dtype bf16 --csv $O/bench.csv >> $L 2>&1
echo "rc $?" >> $L
echo "== peers" >> $L
timeout 90 python3 peers/torch_peers.py --only qgemv --json $O/peers.json >> $L 2>&1 </dev/null
timeout 100 ./kiln-v4 parity --backend wgpu --kernel qlinear_mma_4bit --json > $O/parity-wgpu.json 2>$O/parity-wgpu.err
echo "== parity wgpu rc $? $(tail -n 1 $O/parity-wgpu.err)" >> $L
echo "== ssm_update replayed" >> $L
timeout 60 ./kiln-v4 bench --backend cuda --kernel ssm_update --csv $O/bench-ssm.csv >> $L 2>&1
date -u >> $L
