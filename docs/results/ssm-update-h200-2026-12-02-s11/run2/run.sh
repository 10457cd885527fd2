#!/bin/bash
# Session 11 run 2: ssm_update with 64-row blocks of 128 threads (binary's launch geometry), variants
# through KILN_CUDA_PTX: 8 or 4 rows per wave at once, launch bounds 3/4/6 blocks per SM.
cd "$(dirname "$0")"
O=${OUT:-out}; mkdir -p $O
gunzip -kf kiln.gz; chmod +x kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; } > $O/gpu.txt 2>&1
V="v4g8m4 v4g8m3 v4g4m4 v4g4m6"
{ for v in $V; do echo "== parity $v"; KILN_CUDA_PTX=ssm-$v.ptx timeout 60 ./kiln parity --backend cuda --kernel ssm_update | tail -1; done; } > $O/parity.txt 2>&1
{ for v in $V; do echo "== ssm $v"; KILN_CUDA_PTX=ssm-$v.ptx timeout 60 ./kiln bench --backend cuda --kernel ssm_update --shape B8,B1; done; } > $O/bench.txt 2>&1
NCU=$(which ncu || ls /usr/local/cuda*/bin/ncu | head -1)
S="--section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis --section SchedulerStats --section InstructionStats"
for v in v4g8m4 v4g4m4; do KILN_CUDA_PTX=ssm-$v.ptx timeout 80 $NCU $S -k regex:ssm -s 1 -c 1 ./kiln bench --backend cuda --kernel ssm_update --dtype f32 --runs 2 --shape "nemotron-h B8" > $O/ncu-$v.txt 2>&1; done
cat $O/parity.txt; grep -E "==|B8" $O/bench.txt | cut -c1-30,90-
for v in v4g8m4 v4g4m4; do echo "== ncu $v"; grep -E "Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Eligible Warps|Executed Instructions  |Issued Warp|Warp Cycles Per Issued" $O/ncu-$v.txt; done
