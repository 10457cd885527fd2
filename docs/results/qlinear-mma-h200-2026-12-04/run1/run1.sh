#!/bin/bash
# Device call 1 (2026-12-04): parity of qlinear_mma_4bit and qlinear_4bit on cuda and Vulkan,
# kiln bench of both (bf16, g64 at batch 1-8, g32 at batch 1), launch-bound variants of the
# multiply kernel through KILN_CUDA_PTX, torch's int4 GEMV peer, and one ncu profile.
cd "$(dirname "$0")"
O=$OUT; L=$O/log.txt
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
gunzip -f kiln.gz; chmod +x kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; } > $L 2>&1
P=../engine/artifacts/cuda/sm_90/qlinear_mma_4bit.ptx
echo "== ptxas" >> $L; ptxas -arch=sm_90 -v $P -o /dev/null 2>&1 | grep -E "Used|spill" >> $L
for mb in 2 3 6; do sed "s/^\.minnctapersm 4/.minnctapersm $mb/" $P > mb$mb.ptx; echo "mb$mb: $(ptxas -arch=sm_90 -v mb$mb.ptx -o /dev/null 2>&1 | grep -E 'Used' | head -1)" >> $L; done
timeout 120 ./kiln parity --backend cuda --kernel qlinear_mma_4bit,qlinear_4bit --json > $O/parity-cuda.json 2>$O/parity-cuda.err
echo "== parity cuda rc $? $(tail -n 1 $O/parity-cuda.err)" >> $L
echo "== bench" >> $L
timeout 150 ./kiln bench --backend cuda --kernel qlinear_mma_4bit,qlinear_4bit --dtype bf16 --shape "g64 ,g32 1x" --csv $O/bench.csv >> $L 2>&1
for mb in 2 3 6; do echo "== variant mb$mb" >> $L; KILN_CUDA_PTX=mb$mb.ptx timeout 40 ./kiln bench --backend cuda --kernel qlinear_mma_4bit --dtype bf16 --shape "g64 1x" >> $L 2>&1; done
echo "== peers" >> $L
timeout 90 python3 peers/torch_peers.py --only qgemv --json $O/peers.json >> $L 2>&1 </dev/null
echo "== ncu" >> $L
timeout 100 ncu -k regex:qlinear_mma_4bit_bf16 --launch-skip 3 --launch-count 1 --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis --section SchedulerStats ./kiln bench --backend cuda --kernel qlinear_mma_4bit --dtype bf16 --shape "g64 1x4096->128256" --runs 5 > $O/ncu.txt 2>&1
echo "ncu rc $?" >> $L
timeout 120 ./kiln parity --backend wgpu --kernel qlinear_mma_4bit,qlinear_4bit --json > $O/parity-wgpu.json 2>$O/parity-wgpu.err
echo "== parity wgpu rc $? $(tail -n 1 $O/parity-wgpu.err)" >> $L
date -u >> $L
