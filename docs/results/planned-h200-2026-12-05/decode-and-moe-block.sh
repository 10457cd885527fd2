#!/bin/bash
# Planned device call (session 19 had no device): main's kiln (strip + xz into devcarry/kiln.xz,
# commit in rev.txt). #21: kiln bench --decode at Llama-3.1-8B and Qwen3-30B-A3B shapes through
# cuda (eager and per-position CUDA graphs) and Vulkan, and compare; #16: moe_act and moe_block's
# kernels' parity on cuda and Vulkan, the MoE block rows.
cd "$(dirname "$0")"
O=$OUT; L=$O/log.txt
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
xz -d -f kiln.xz; chmod +x kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; } > $L 2>&1
C=$(cut -c1-12 rev.txt)
echo "== decode cuda" >> $L
KILN_COMMIT=$C timeout 240 ./kiln bench --decode --backend cuda --model llama-3.1-8b,qwen3-30b-a3b --csv $O/decode-cuda.csv >> $L 2>&1
echo "rc $?" >> $L
M=moe_act,moe_route,moe_gateup_4bit,moe_down_sum_4bit,moe_combine,gather_qmm_4bit
timeout 60 ./kiln parity --backend cuda --kernel $M > /dev/null 2>$O/parity-cuda.err
echo "== parity cuda rc $? $(tail -n 1 $O/parity-cuda.err)" >> $L
echo "== decode vulkan" >> $L
KILN_COMMIT=$C timeout 200 ./kiln bench --decode --backend wgpu --model llama-3.1-8b --layers 8 --csv $O/decode-vulkan.csv >> $L 2>&1
echo "rc $?" >> $L
timeout 60 ./kiln parity --backend wgpu --kernel $M > /dev/null 2>$O/parity-wgpu.err
echo "== parity wgpu rc $? $(tail -n 1 $O/parity-wgpu.err)" >> $L
date -u >> $L
