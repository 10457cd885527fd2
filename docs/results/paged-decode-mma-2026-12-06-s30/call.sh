#!/bin/bash
# The device call this session could not make (planned for the next): the tensor-core sweep
# (KILN_PAGED_MMA unset) against the two-pass sweep (KILN_PAGED_MMA=0) in one process family
# on one warm GPU, torch SDPA beside them, ncu of the partial and merge kernels, the new bench
# shapes, and parity of the paged kernels through CUDA and Vulkan.
# Layout as in session 29: devcarry/ holds this script, peers/ (../shared/peers) and
# s30/kiln.xz (a stripped release `kiln` of the commit under test) and s30/rev.txt; .gl/ the
# Vulkan loader debs. Run: bash devcarry/call.sh (carry ["devcarry", ".gl"]).
cd "$(dirname "$0")"
O=$OUT; W=/tmp/s30; mkdir -p $W; L=$W/log.txt
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/k; xz -dc s30/kiln.xz > /tmp/k/kiln; chmod +x /tmp/k/kiln; K=/tmp/k/kiln
{ date -u; cat s30/rev.txt; nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv; } > $L 2>&1
step() { echo "== $1 $(date -u +%T)" >> $L; }
step "parity cuda paged"
timeout 150 $K parity --backend cuda --kernel paged_attention_decode,paged_attention_decode_v2_partial,paged_attention_merge_states > $W/parity-cuda.txt 2>&1
echo "rc $? $(tail -n 1 $W/parity-cuda.txt)" >> $L
step "bench paged two-pass (KILN_PAGED_MMA=0)"
KILN_PAGED_MMA=0 timeout 150 $K bench --backend cuda --paged --arms v1,v2 --contexts 1024,4096,16384,32768 --batches 1,4,8 --dtype f16,bf16 > $W/paged-two-pass.csv 2>&1
echo "rc $?" >> $L
step "bench paged tensor-core"
timeout 150 $K bench --backend cuda --paged --arms v1,v2 --contexts 1024,4096,16384,32768 --batches 1,4,8 --dtype f16,bf16 > $W/paged-mma.csv 2>&1
echo "rc $?" >> $L
step "bench paged shapes"
timeout 200 $K bench --backend cuda --paged --arms v2 --no-crossover --contexts 4096,32768,131072 --batches 1,8 --gqa 32/8,32/4,64/8 --page-sizes 16,32 > $W/paged-shapes.csv 2>&1
echo "rc $?" >> $L
step "torch peers paged"
timeout 150 python3 peers/torch_peers.py --only paged > $W/peers-paged.txt 2>&1
echo "rc $?" >> $L
for bt in 1 8; do
step "ncu 32K x $bt"
timeout 100 ncu --clock-control none --kernel-name regex:paged --launch-skip 10 --launch-count 2 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis $K bench --backend cuda --paged --arms v2 --contexts 32768 --batches $bt --no-crossover > $W/ncu-32k-b$bt.txt 2>&1
echo "rc $?" >> $L
done
step "parity wgpu paged"
timeout 150 $K parity --backend wgpu --kernel paged_attention_decode,paged_attention_decode_v2_partial,paged_attention_merge_states > $W/parity-wgpu.txt 2>&1
echo "rc $? $(tail -n 1 $W/parity-wgpu.txt)" >> $L
date -u >> $L
tar czf $O/out.tgz -C $W .
cat $L
