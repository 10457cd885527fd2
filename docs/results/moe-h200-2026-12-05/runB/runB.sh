#!/bin/bash
# Device call B (2026-12-05, session 18): moe_down_sum (down + K-sum in one launch) and the
# gate/up body with two units in flight: parity on cuda and Vulkan, the one-token block and
# its kernels replayed from CUDA graphs, a 4-slot down_sum variant, ncu on both kernels; the
# small kernels of issue 19 replayed.
cd "$(dirname "$0")"
O=$OUT; L=$O/log.txt
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
xz -d -f kiln.xz; chmod +x kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; } > $L 2>&1
A=../engine/artifacts/cuda/sm_90
echo "== ptxas" >> $L
for k in moe_gateup_4bit moe_down_sum_4bit moe_down_4bit moe_fc1_relu2_4bit; do echo "$k: $(ptxas -arch=sm_90 -v $A/$k.ptx -o /dev/null 2>&1 | grep -E 'Used|spill' | head -2 | tr '\n' ' ')" >> $L; done
echo "ds4 (4 slots at once): $(ptxas -arch=sm_90 -v ds4.ptx -o /dev/null 2>&1 | grep -E 'Used|spill' | head -2 | tr '\n' ' ')" >> $L
M=moe_route,moe_gateup_4bit,moe_gateup_8bit,moe_fc1_relu2_4bit,moe_fc1_relu2_8bit,moe_down_4bit,moe_down_6bit,moe_down_8bit,moe_combine,moe_down_sum_4bit,moe_down_sum_6bit,moe_down_sum_8bit
timeout 100 ./kiln parity --backend cuda --kernel $M --json > $O/parity-cuda.json 2>$O/parity-cuda.err
echo "== parity cuda rc $? $(tail -n 1 $O/parity-cuda.err)" >> $L
echo "== moe block replayed" >> $L
timeout 90 ./kiln bench --backend cuda --moe --rows-per-block 2,4,8,16 >> $L 2>&1
echo "== moe kernels replayed" >> $L
timeout 90 ./kiln bench --backend cuda --runs 30 --dtype bf16,f32 --kernel moe_gateup_4bit,moe_fc1_relu2_4bit,moe_down_4bit,moe_down_sum_4bit,moe_combine --csv $O/bench-moe.csv >> $L 2>&1
echo "== ds4 variant" >> $L
KILN_CUDA_PTX=ds4.ptx timeout 40 ./kiln bench --backend cuda --runs 30 --dtype bf16 --kernel moe_down_sum_4bit >> $L 2>&1
echo "== small kernels replayed (issue 19)" >> $L
timeout 90 ./kiln bench --backend cuda --runs 20 --kernel fused_add_rms_norm,gumbel_max_sample,rejection_sample,speculative_accept --csv $O/bench-small.csv > $O/bench-small.txt 2>&1
echo "rc $?" >> $L
echo "== ncu" >> $L
timeout 150 ncu -k regex:"moe_gateup_4bit_bf16|moe_down_sum_4bit_bf16" --launch-skip 4 --launch-count 2 --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis --section SchedulerStats ./kiln bench --backend cuda --eager --kernel moe_gateup_4bit,moe_down_sum_4bit --dtype bf16 --shape qwen3 --runs 3 > $O/ncu.txt 2>&1
echo "ncu rc $?" >> $L
timeout 120 ./kiln parity --backend wgpu --kernel $M --json > $O/parity-wgpu.json 2>$O/parity-wgpu.err
echo "== parity wgpu rc $? $(tail -n 1 $O/parity-wgpu.err)" >> $L
date -u >> $L
