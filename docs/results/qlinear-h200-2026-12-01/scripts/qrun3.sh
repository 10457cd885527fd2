#!/bin/bash
# The qlinear/linear H200 run: parity on cuda (every kernel) and wgpu (the matrix kernels),
# kiln bench beside torch's int4 GEMV peer, ptxas -v of the committed qlinear PTX.
cd "$(dirname "$0")"
O=${OUT:-out}; mkdir -p $O
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
gunzip -kf kiln.gz; chmod +x kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; } > $O/gpu.txt 2>&1
for b in 4 8; do ptxas -arch=sm_90 -v ../engine/artifacts/cuda/sm_90/qlinear_${b}bit.ptx -o /dev/null; done > $O/ptxas.txt 2>&1
ptxas -arch=sm_90 -v ../engine/artifacts/cuda/sm_90/linear.ptx -o /dev/null >> $O/ptxas.txt 2>&1
Q=qlinear_2bit,qlinear_3bit,qlinear_4bit,qlinear_5bit,qlinear_6bit,qlinear_8bit
timeout 150 ./kiln parity --backend cuda --json > $O/parity-cuda.json 2>&1
timeout 120 ./kiln parity --backend wgpu --kernel $Q,linear --json > $O/parity-wgpu.json 2>&1
timeout 150 ./kiln bench --backend cuda --kernel qlinear_4bit,linear --dtype bf16 --shape 1x4096,1x14336,1x2048,8x4096,8x14336 --csv $O/bench.csv > $O/bench.txt 2>&1
python3 peers/torch_peers.py --only qgemv --json $O/peers.json > $O/peers.txt 2>&1 </dev/null
tail -3 $O/bench.txt; grep -c '"pass"\|pass' $O/parity-cuda.json
