#!/bin/bash
# Device call 3 (2026-12-04): qlinear_mma_4bit v4 (a block streams several row groups as one
# sequence of rounds; first words asked for before x is staged; 32 KB panels), and a variant with one pass per sweep (p1.ptx): parity on cuda and Vulkan, kiln
# bench (bf16, g64 batch 1, 2, 4, 8, g32 batch 1) and a launch-bound variant, torch's peer.
cd "$(dirname "$0")"
O=$OUT; L=$O/log.txt
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
gunzip -f kiln.gz; chmod +x kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; } > $L 2>&1
P=../engine/artifacts/cuda/sm_90/qlinear_mma_4bit.ptx
echo "== ptxas" >> $L; ptxas -arch=sm_90 -v $P -o /dev/null 2>&1 | grep -E "Used|spill" >> $L
for mb in 4 6; do sed "s/^\.minnctapersm 5/.minnctapersm $mb/" $P > mb$mb.ptx; echo "mb$mb: $(ptxas -arch=sm_90 -v mb$mb.ptx -o /dev/null 2>&1 | grep -E 'Used|spill' | head -2 | tr '\n' ' ')" >> $L; done
timeout 100 ./kiln parity --backend cuda --kernel qlinear_mma_4bit --json > $O/parity-cuda.json 2>$O/parity-cuda.err
echo "== parity cuda rc $? $(tail -n 1 $O/parity-cuda.err)" >> $L
echo "== bench" >> $L
timeout 120 ./kiln bench --backend cuda --kernel qlinear_mma_4bit --dtype bf16 --shape "g64 ,g32 1x" --csv $O/bench.csv >> $L 2>&1
for v in mb4 mb6 p1; do echo "== variant $v" >> $L; KILN_CUDA_PTX=$v.ptx timeout 40 ./kiln bench --backend cuda --kernel qlinear_mma_4bit --dtype bf16 --shape "g64 1x,g64 8x" >> $L 2>&1; done
echo "== peers" >> $L
timeout 90 python3 peers/torch_peers.py --only qgemv --json $O/peers.json >> $L 2>&1 </dev/null
timeout 100 ./kiln parity --backend wgpu --kernel qlinear_mma_4bit --json > $O/parity-wgpu.json 2>$O/parity-wgpu.err
echo "== parity wgpu rc $? $(tail -n 1 $O/parity-wgpu.err)" >> $L
date -u >> $L
