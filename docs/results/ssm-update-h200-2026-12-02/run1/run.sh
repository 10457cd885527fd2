#!/bin/bash
# ssm_update run: parity on cuda (every kernel) and wgpu (ssm_update), the bench of ssm_update on
# cuda and through Vulkan, ptxas -v of its PTX, ncu of the Nemotron-H batch-8 launch.
cd "$(dirname "$0")"
O=${OUT:-out}; mkdir -p $O
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
gunzip -kf kiln.gz; chmod +x kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; } > $O/gpu.txt 2>&1
ptxas -arch=sm_90 -v ../engine/artifacts/cuda/sm_90/ssm_update.ptx -o /dev/null > $O/ptxas.txt 2>&1
timeout 150 ./kiln parity --backend cuda --json > $O/parity-cuda.json 2>&1
timeout 120 ./kiln parity --backend wgpu --kernel ssm_update --json > $O/parity-wgpu.json 2>&1
timeout 100 ./kiln bench --backend cuda --kernel ssm_update --csv $O/bench-cuda.csv > $O/bench-cuda.txt 2>&1
timeout 100 ./kiln bench --backend wgpu --kernel ssm_update --csv $O/bench-wgpu.csv > $O/bench-wgpu.txt 2>&1
NCU=$(which ncu || ls /usr/local/cuda*/bin/ncu | head -1)
S="--section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis"
timeout 80 $NCU $S -k regex:ssm -c 1 ./kiln bench --backend cuda --kernel ssm_update --dtype bf16 --runs 2 --shape "nemotron-h B8" > $O/ncu.txt 2>&1
tail -2 $O/parity-cuda.json $O/parity-wgpu.json; cat $O/bench-cuda.txt $O/bench-wgpu.txt; grep -i "registers\|spill" $O/ptxas.txt | head -6
