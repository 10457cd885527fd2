#!/bin/bash
# Session 13 run 3: how fast a hand-written CUDA update goes at ssm_update's bench shapes, beside
# a copy of the same bytes and kiln's ssm_update, in one process per program.
cd "$(dirname "$0")"
O=${OUT:-out}; mkdir -p $O
gunzip -kf kiln.gz; chmod +x kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; } > $O/gpu.txt 2>&1
nvcc -O3 -arch=sm_90 -Xptxas -v -o ssmx/ssmx ssmx/ssmx.cu > $O/nvcc.txt 2>&1
{
./ssmx/ssmx 8 64 8
./ssmx/ssmx 1 64 8
./ssmx/ssmx 8 48 1
} > $O/ssmx.txt 2>&1
timeout 90 ./kiln bench --backend cuda --kernel ssm_update > $O/bench.txt 2>&1
cat $O/ssmx.txt $O/bench.txt; grep -i "registers\|spill" $O/nvcc.txt | head -20
