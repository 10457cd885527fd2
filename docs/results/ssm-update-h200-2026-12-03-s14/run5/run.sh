#!/bin/bash
# Session 14 run 5: upper bound of a loop-free R 8 group body (one run per lane and row, one group
# per wave, no state checks, 32-bit offsets): bench shapes only (their Dh and Ds fit that case).
cd "$(dirname "$0")"
O=${OUT:-out}; mkdir -p $O
gunzip -kf kiln.gz; chmod +x kiln
for v in ptx/*.ptx; do
  n=$(basename $v .ptx)
  KILN_CUDA_PTX=$v timeout 90 ./kiln bench --backend cuda --kernel ssm_update --dtype f32,bf16 > $O/bench-$n.txt 2>&1
  echo "== $n"; head -n 1 $O/bench-$n.txt | cut -c1-120
  grep " B[18] " $O/bench-$n.txt | awk '{print $2, $3, $4, $(NF-2), $NF}'
done
