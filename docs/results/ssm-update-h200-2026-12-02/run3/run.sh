#!/bin/bash
# ssm_update run 3 (two pairs of rows per wave, 32-row blocks of 256 threads, 2^x prologue): parity on
# cuda (every kernel) and wgpu (ssm_update), the bench on cuda (the build's PTX, then the
# 4-blocks/SM variant through KILN_CUDA_PTX) and through Vulkan, ncu of Nemotron-H batch 8.
cd "$(dirname "$0")"
O=${OUT:-out}; mkdir -p $O
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
gunzip -kf kiln.gz; chmod +x kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; } > $O/gpu.txt 2>&1
ptxas -arch=sm_90 -v ../engine/artifacts/cuda/sm_90/ssm_update.ptx -o /dev/null > $O/ptxas.txt 2>&1
timeout 150 ./kiln parity --backend cuda --json > $O/parity-cuda.json 2>&1
timeout 100 ./kiln parity --backend wgpu --kernel ssm_update --json > $O/parity-wgpu.json 2>&1
timeout 80 ./kiln bench --backend cuda --kernel ssm_update --csv $O/bench-cuda.csv > $O/bench-cuda.txt 2>&1
KILN_CUDA_PTX=ssm-b4.ptx timeout 80 ./kiln bench --backend cuda --kernel ssm_update --csv $O/bench-cuda-b4.csv > $O/bench-cuda-b4.txt 2>&1
timeout 100 ./kiln bench --backend wgpu --kernel ssm_update --csv $O/bench-wgpu.csv > $O/bench-wgpu.txt 2>&1
NCU=$(which ncu || ls /usr/local/cuda*/bin/ncu | head -1)
S="--section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis --section SchedulerStats"
timeout 80 $NCU $S -k regex:ssm -s 1 -c 1 ./kiln bench --backend cuda --kernel ssm_update --dtype bf16 --runs 2 --shape "nemotron-h B8" > $O/ncu.txt 2>&1
for f in $O/parity-cuda.json $O/parity-wgpu.json; do tail -n 2 $f; done
cut -c1-24,100- $O/bench-cuda.txt $O/bench-cuda-b4.txt $O/bench-wgpu.txt; grep -i "registers\|spill" $O/ptxas.txt | head -4
grep -E "Duration|DRAM Throughput|Achieved Occupancy|Registers Per" $O/ncu.txt
