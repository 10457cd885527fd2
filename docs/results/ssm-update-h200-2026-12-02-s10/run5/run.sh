#!/bin/bash
# ssm_update run 5: the head's softplus through a division-free ln(1+x) polynomial instead of
# libm's log1pf, on the run-3 body (ssm-poly.ptx) and on run 4's resident-B/C body
# (ssm-resident-poly.ptx), both through KILN_CUDA_PTX against the embedded run-3 body; parity of
# each variant on cuda; bench; ncu of the faster.
cd "$(dirname "$0")"
O=${OUT:-out}; mkdir -p $O
gunzip -kf kiln.gz; chmod +x kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; } > $O/gpu.txt 2>&1
for v in poly resident-poly; do
  ptxas -arch=sm_90 -v ssm-$v.ptx -o /dev/null > $O/ptxas-$v.txt 2>&1
  KILN_CUDA_PTX=ssm-$v.ptx timeout 60 ./kiln parity --backend cuda --kernel ssm_update --json > $O/parity-cuda-$v.json 2>&1
done
timeout 60 ./kiln bench --backend cuda --kernel ssm_update --csv $O/bench-cuda.csv > $O/bench-cuda.txt 2>&1
for v in poly resident-poly; do
  KILN_CUDA_PTX=ssm-$v.ptx timeout 60 ./kiln bench --backend cuda --kernel ssm_update --csv $O/bench-cuda-$v.csv > $O/bench-cuda-$v.txt 2>&1
done
NCU=$(which ncu || ls /usr/local/cuda*/bin/ncu | head -1)
S="--section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis --section SchedulerStats --section InstructionStats"
KILN_CUDA_PTX=ssm-poly.ptx timeout 80 $NCU $S -k regex:ssm -s 1 -c 1 ./kiln bench --backend cuda --kernel ssm_update --dtype f32 --runs 2 --shape "nemotron-h B8" > $O/ncu-poly.txt 2>&1
for f in $O/parity-cuda-*.json; do echo $f; tail -n 1 $f; done
cut -c1-24,100- $O/bench-cuda.txt $O/bench-cuda-poly.txt $O/bench-cuda-resident-poly.txt
grep -E "Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Eligible Warps|Executed Instructions  |Issued Instructions  " $O/ncu-poly.txt
