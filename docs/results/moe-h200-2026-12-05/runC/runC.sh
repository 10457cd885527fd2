#!/bin/bash
# Device call C (2026-12-05, session 18): gather_qmm and the MoE kernels at main's merge
# (moe_down_sum from K >= 8): parity on cuda and Vulkan; gather_qmm bench rows (decode and the
# 512-token sorted prefill) and the one-token block, replayed.
cd "$(dirname "$0")"
O=$OUT; L=$O/log.txt
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
xz -d -f kiln.xz; chmod +x kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; } > $L 2>&1
M=gather_qmm_4bit,gather_qmm_6bit,gather_qmm_8bit,moe_gateup_4bit,moe_fc1_relu2_4bit,moe_down_4bit,moe_down_sum_4bit,moe_down_sum_6bit,moe_down_sum_8bit,moe_combine
timeout 100 ./kiln parity --backend cuda --kernel $M --json > $O/parity-cuda.json 2>$O/parity-cuda.err
echo "== parity cuda rc $? $(tail -n 1 $O/parity-cuda.err)" >> $L
echo "== gather_qmm bench replayed" >> $L
timeout 100 ./kiln bench --backend cuda --runs 20 --dtype bf16 --kernel gather_qmm_4bit --csv $O/bench-gather.csv >> $L 2>&1
echo "rc $?" >> $L
echo "== moe block replayed" >> $L
timeout 60 ./kiln bench --backend cuda --moe --rows-per-block 2,8 >> $L 2>&1
timeout 120 ./kiln parity --backend wgpu --kernel $M > /dev/null 2>$O/parity-wgpu.err
echo "== parity wgpu rc $? $(tail -n 1 $O/parity-wgpu.err)" >> $L
date -u >> $L
