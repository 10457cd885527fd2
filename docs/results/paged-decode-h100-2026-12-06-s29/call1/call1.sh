#!/bin/bash
# Session 29, device call 1: paged decode v2 with the two-pass sweep (new kiln) against the
# kiln of main before it (base), torch SDPA flash decoding in the same call, parity of the
# paged kernels through CUDA and Vulkan, PTX variants of the partial kernel (KILN_CUDA_PTX).
cd "$(dirname "$0")"
O=$OUT; W=/tmp/s29; mkdir -p $W; L=$W/log.txt
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
for v in s29/var-*.ptx; do
  [ -f "$v" ] || continue; n=$(basename $v .ptx)
  step "bench $n"
  KILN_CUDA_PTX=$v timeout 60 $K bench --backend cuda --paged --arms v2 --contexts 4096,32768 --batches 1,8 --no-crossover > $W/paged-$n.csv 2>&1
  echo "rc $?" >> $L
  ptxas -arch=sm_90 -v $v -o /dev/null > $W/ptxas-$n.txt 2>&1
done
step "torch peers paged"
timeout 150 python3 peers/torch_peers.py --only paged > $W/peers-paged.txt 2>&1
echo "rc $?" >> $L
step "parity wgpu paged + qlinear_mma"
timeout 200 $K parity --backend wgpu --kernel paged_attention_decode,paged_attention_decode_v2_partial,paged_attention_merge_states,qlinear_mma_4bit > $W/parity-wgpu.txt 2>&1
echo "rc $? $(tail -n 1 $W/parity-wgpu.txt)" >> $L
step "bench paged wgpu"
timeout 100 $K bench --backend wgpu --paged --arms v2 --contexts 4096,32768 --batches 1,8 --no-crossover > $W/paged-wgpu.csv 2>&1
echo "rc $?" >> $L
date -u >> $L
tar czf $O/out.tgz -C $W .
cat $L
