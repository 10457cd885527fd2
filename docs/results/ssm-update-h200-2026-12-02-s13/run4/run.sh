#!/bin/bash
# Session 13 run 4: which part of kiln's ssm_update shape costs the time — the same update in
# CUDA C with kiln's row-pair loop, with and without per-access checks, beside the straight-line
# R-row body with and without them.
cd "$(dirname "$0")"
O=${OUT:-out}; mkdir -p $O
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $O/gpu.txt 2>&1
nvcc -O3 -arch=sm_90 -Xptxas -v -o ssmx/ssmx ssmx/ssmx.cu > $O/nvcc.txt 2>&1 || { cat $O/nvcc.txt; exit 1; }
{ ./ssmx/ssmx 8 64 8; ./ssmx/ssmx 8 48 1; } > $O/ssmx.txt 2>&1
cat $O/ssmx.txt; grep -A2 "Compiling entry" $O/nvcc.txt | grep -o "entry function '[^']*'\|Used [0-9]* registers\|[0-9]* bytes spill stores"
