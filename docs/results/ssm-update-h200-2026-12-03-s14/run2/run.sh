#!/bin/bash
# Session 14 run 1: ssm_update's straight-line group body (WAVE_ROWS rows per wave, loads first),
# PTX variants through KILN_CUDA_PTX beside the embedded module, in one device call.
cd "$(dirname "$0")"
O=${OUT:-out}; mkdir -p $O
gunzip -kf kiln.gz; chmod +x kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; } > $O/gpu.txt 2>&1
for v in ptx/*.ptx; do
  n=$(basename $v .ptx)
  ptxas -arch=sm_90 -v $v -o /dev/null > $O/ptxas-$n.txt 2>&1
  KILN_CUDA_PTX=$v timeout 60 ./kiln parity --backend cuda --kernel ssm_update > $O/parity-$n.txt 2>&1
  echo "== $n parity rc=$? $(tail -n 1 $O/parity-$n.txt)"
  grep -A3 "ssm_update_f32.$" $O/ptxas-$n.txt | grep -o "[0-9]* bytes stack.*\|Used [0-9]* reg.*" | head -2
  KILN_CUDA_PTX=$v timeout 90 ./kiln bench --backend cuda --kernel ssm_update --dtype f32,bf16 > $O/bench-$n.txt 2>&1
  grep " B[18] " $O/bench-$n.txt | awk "{print \$2, \$3, \$4, \$(NF-2), \$NF}"
done
