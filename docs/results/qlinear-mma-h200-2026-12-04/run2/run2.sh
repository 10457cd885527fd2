#!/bin/bash
# Device call 2 (2026-12-04): qlinear_mma_4bit with x staged in shared memory: parity on cuda
# and Vulkan, kiln bench beside qlinear_4bit (bf16, g64 batch 1-8, g32 batch 1), launch-bound
# variants through KILN_CUDA_PTX, torch's int4 GEMV peer, ncu on the LM head and 4096->4096.
cd "$(dirname "$0")"
O=$OUT; L=$O/log.txt
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
gunzip -f kiln.gz; chmod +x kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; } > $L 2>&1
P=../engine/artifacts/cuda/sm_90/qlinear_mma_4bit.ptx
echo "== ptxas" >> $L; ptxas -arch=sm_90 -v $P -o /dev/null 2>&1 | grep -E "Used|spill" >> $L
for mb in 4 6 8; do sed "s/^\.minnctapersm 5/.minnctapersm $mb/" $P > mb$mb.ptx; echo "mb$mb: $(ptxas -arch=sm_90 -v mb$mb.ptx -o /dev/null 2>&1 | grep -E 'Used|spill' | head -2 | tr '\n' ' ')" >> $L; done
timeout 120 ./kiln parity --backend cuda --kernel qlinear_mma_4bit,qlinear_4bit --json > $O/parity-cuda.json 2>$O/parity-cuda.err
echo "== parity cuda rc $? $(tail -n 1 $O/parity-cuda.err)" >> $L
echo "== bench" >> $L
timeout 150 ./kiln bench --backend cuda --kernel qlinear_mma_4bit,qlinear_4bit --dtype bf16 --shape "g64 ,g32 1x" --csv $O/bench.csv >> $L 2>&1
for mb in 4 6 8; do echo "== variant mb$mb" >> $L; KILN_CUDA_PTX=mb$mb.ptx timeout 40 ./kiln bench --backend cuda --kernel qlinear_mma_4bit --dtype bf16 --shape "g64 1x,g64 8x" >> $L 2>&1; done
echo "== peers" >> $L
timeout 90 python3 peers/torch_peers.py --only qgemv --json $O/peers.json >> $L 2>&1 </dev/null
echo "== ncu" >> $L
timeout 120 ncu -k regex:qlinear_mma_4bit_bf16 --launch-skip 3 --launch-count 1 --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis --section SchedulerStats ./kiln bench --backend cuda --kernel qlinear_mma_4bit --dtype bf16 --shape "g64 1x4096->128256,g64 1x4096->4096" --runs 5 > $O/ncu.txt 2>&1
echo "ncu rc $?" >> $L
timeout 120 ./kiln parity --backend wgpu --kernel qlinear_mma_4bit --json > $O/parity-wgpu.json 2>$O/parity-wgpu.err
echo "== parity wgpu rc $? $(tail -n 1 $O/parity-wgpu.err)" >> $L
date -u >> $L
