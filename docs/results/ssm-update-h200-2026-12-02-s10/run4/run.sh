#!/bin/bash
# ssm_update run 4: the resident-B/C body (devcarry/ssm-resident.ptx through KILN_CUDA_PTX: groups
# of 8 lanes per row, each lane's B and C runs in registers) against the embedded run-3 body;
# parity on cuda and wgpu (Vulkan) of the new mixer kernels and ssm_update; bench; ncu.
cd "$(dirname "$0")"
O=${OUT:-out}; mkdir -p $O
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
gunzip -kf kiln.gz; chmod +x kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; } > $O/gpu.txt 2>&1
ptxas -arch=sm_90 -v ssm-resident.ptx -o /dev/null > $O/ptxas-resident.txt 2>&1
K=causal_conv1d_update,gated_rms_norm,ssm_update
timeout 120 ./kiln parity --backend cuda --kernel $K --json > $O/parity-cuda.json 2>&1
KILN_CUDA_PTX=ssm-resident.ptx timeout 60 ./kiln parity --backend cuda --kernel ssm_update --json > $O/parity-cuda-resident.json 2>&1
timeout 120 ./kiln parity --backend wgpu --kernel $K --json > $O/parity-wgpu.json 2>&1
timeout 80 ./kiln bench --backend cuda --kernel $K --csv $O/bench-cuda.csv > $O/bench-cuda.txt 2>&1
KILN_CUDA_PTX=ssm-resident.ptx timeout 80 ./kiln bench --backend cuda --kernel ssm_update --csv $O/bench-cuda-resident.csv > $O/bench-cuda-resident.txt 2>&1
NCU=$(which ncu || ls /usr/local/cuda*/bin/ncu | head -1)
S="--section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis --section SchedulerStats"
KILN_CUDA_PTX=ssm-resident.ptx timeout 80 $NCU $S -k regex:ssm -s 1 -c 1 ./kiln bench --backend cuda --kernel ssm_update --dtype f32 --runs 2 --shape "nemotron-h B8" > $O/ncu-resident.txt 2>&1
for f in $O/parity-cuda.json $O/parity-cuda-resident.json $O/parity-wgpu.json; do tail -n 2 $f; done
cut -c1-24,100- $O/bench-cuda.txt $O/bench-cuda-resident.txt; grep -i "registers\|spill" $O/ptxas-resident.txt | head -4
grep -E "Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|Eligible Warps" $O/ncu-resident.txt
