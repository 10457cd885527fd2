#!/bin/bash
# Device call A (2026-12-05, session 18): kiln timed as CUDA-graph replays beside eager
# launches; MoE parity on cuda and Vulkan; the one-token MoE block; torch's peers.
cd "$(dirname "$0")"
O=$OUT; L=$O/log.txt
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
gunzip -f kiln.gz; chmod +x kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; } > $L 2>&1
M=moe_route,moe_gateup_4bit,moe_gateup_8bit,moe_fc1_relu2_4bit,moe_fc1_relu2_8bit,moe_down_4bit,moe_down_6bit,moe_down_8bit,moe_combine
timeout 100 ./kiln parity --backend cuda --kernel $M --json > $O/parity-cuda.json 2>$O/parity-cuda.err
echo "== parity cuda rc $? $(tail -n 1 $O/parity-cuda.err)" >> $L
echo "== moe block replayed, rows per block 1,2,4,8,16" >> $L
timeout 100 ./kiln bench --backend cuda --moe --rows-per-block 1,2,4,8,16 >> $L 2>&1
echo "== moe block eager" >> $L
timeout 60 ./kiln bench --backend cuda --moe --eager >> $L 2>&1
echo "== bench replayed (all kernels)" >> $L
timeout 200 ./kiln bench --backend cuda --runs 20 --csv $O/bench-replayed.csv > $O/bench-replayed.txt 2>&1
echo "rc $?" >> $L
echo "== bench eager (small kernels)" >> $L
timeout 60 ./kiln bench --backend cuda --runs 20 --eager --kernel fused_add_rms_norm,gumbel_max_sample,moe_gateup_4bit,moe_down_4bit,moe_combine,moe_route,ssm_update --csv $O/bench-eager.csv > $O/bench-eager.txt 2>&1
echo "rc $?" >> $L
echo "== peers" >> $L
timeout 120 python3 peers/torch_peers.py --only qgemv,norm,sample --json $O/peers.json >> $L 2>&1 </dev/null
timeout 120 ./kiln parity --backend wgpu --kernel $M --json > $O/parity-wgpu.json 2>$O/parity-wgpu.err
echo "== parity wgpu rc $? $(tail -n 1 $O/parity-wgpu.err)" >> $L
date -u >> $L
