#!/bin/bash
# Session 29, device call 3: the two-pass sweep, K and V widened once per slice, the 32-wide
# merge (new kiln) against main before this session (base), torch SDPA in the same
# call, ncu of the partial and merge kernels, the launch-bound variant, parity (CUDA, Vulkan).
cd "$(dirname "$0")"
O=$OUT; W=/tmp/s29c; mkdir -p $W; L=$W/log.txt
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/k; xz -dc s29/kiln-base.xz > /tmp/k/base; xz -dc s29/kiln.xz > /tmp/k/new; chmod +x /tmp/k/*
B=/tmp/k/base; K=/tmp/k/new
{ date -u; cat s29/rev.txt; nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv; } > $L 2>&1
step() { echo "== $1 $(date -u +%T)" >> $L; }
step "parity cuda paged (new)"
timeout 120 $K parity --backend cuda --kernel paged_attention_decode,paged_attention_decode_v2_partial,paged_attention_merge_states > $W/parity-cuda.txt 2>&1
echo "rc $? $(tail -n 1 $W/parity-cuda.txt)" >> $L
step "bench paged base"
timeout 120 $B bench --backend cuda --paged --arms v2 --contexts 4096,16384,32768 --batches 1,4,8 --no-crossover > $W/paged-base.csv 2>&1
echo "rc $?" >> $L
step "bench paged new"
timeout 150 $K bench --backend cuda --paged --arms v1,v2 --contexts 1024,4096,16384,32768 --batches 1,4,8 > $W/paged-new.csv 2>&1
echo "rc $?" >> $L
for v in s29/var3-*.ptx; do
  [ -f "$v" ] || continue; n=$(basename $v .ptx)
  step "bench $n"
  KILN_CUDA_PTX=$v timeout 60 $K bench --backend cuda --paged --arms v2 --contexts 4096,32768 --batches 1,8 --no-crossover > $W/paged-$n.csv 2>&1
  echo "rc $?" >> $L
done
step "torch peers paged"
timeout 150 python3 peers/torch_peers.py --only paged > $W/peers-paged.txt 2>&1
echo "rc $?" >> $L
for bt in 1 8; do
step "ncu 32K x $bt"
timeout 120 ncu --clock-control none --kernel-name regex:paged --launch-skip 10 --launch-count 2 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis $K bench --backend cuda --paged --arms v2 --contexts 32768 --batches $bt --no-crossover > $W/ncu-32k-b$bt.txt 2>&1
echo "rc $?" >> $L
done
step "parity wgpu paged"
timeout 150 $K parity --backend wgpu --kernel paged_attention_decode,paged_attention_decode_v2_partial,paged_attention_merge_states > $W/parity-wgpu.txt 2>&1
echo "rc $? $(tail -n 1 $W/parity-wgpu.txt)" >> $L
date -u >> $L
tar czf $O/out.tgz -C $W .
cat $L
