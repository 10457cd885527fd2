#!/bin/bash
# Session 14 run 3: the CUDA C update and a copy of the state with the state rotated over copies
# (from DRAM, as kiln bench times), beside kiln bench of the committed and the group body.
cd "$(dirname "$0")"
O=${OUT:-out}; mkdir -p $O
gunzip -kf kiln.gz; chmod +x kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; } > $O/gpu.txt 2>&1
nvcc -O3 -arch=sm_90 -Xptxas -v -o ssmx/ssmx ssmx/ssmx.cu > $O/nvcc.txt 2>&1
{
./ssmx/ssmx 8 64 8 1
./ssmx/ssmx 8 64 8 6
./ssmx/ssmx 1 64 8 6
./ssmx/ssmx 8 48 1 6
} > $O/ssmx.txt 2>&1
cat $O/ssmx.txt
timeout 90 ./kiln bench --backend cuda --kernel ssm_update --dtype f32 > $O/bench-old128.txt 2>&1
KILN_CUDA_PTX=ptx/a4n_b3.ptx timeout 90 ./kiln bench --backend cuda --kernel ssm_update --dtype f32 > $O/bench-a4n_b3.txt 2>&1
for f in old128 a4n_b3; do echo "== kiln $f"; head -n 1 $O/bench-$f.txt; grep " B[18] " $O/bench-$f.txt | awk '{print $2, $3, $4, $(NF-4), $(NF-3), $(NF-2), $NF}'; done
