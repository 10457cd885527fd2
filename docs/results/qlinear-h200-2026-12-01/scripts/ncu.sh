#!/bin/bash
cd "$(dirname "$0")"
O=${OUT:-out}; mkdir -p $O
gunzip -kf kiln.gz; chmod +x kiln
NCU=$(which ncu || ls /usr/local/cuda*/bin/ncu | head -1)
S="--section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats --section MemoryWorkloadAnalysis --section InstructionStats --section ComputeWorkloadAnalysis"
KILN_CUDA_PTX=q4-m1.ptx timeout 200 $NCU $S -k regex:qlinear -c 1 ./kiln bench --backend cuda --kernel qlinear_4bit --dtype bf16 --runs 2 --shape "g64 1x4096->128256" > $O/ncu-q4m1.txt 2>&1
timeout 150 $NCU $S -k regex:linear_bf16 -c 1 ./kiln bench --backend cuda --kernel linear --dtype bf16 --runs 2 --shape "1x4096->128256" > $O/ncu-linear.txt 2>&1
ls -la $O
