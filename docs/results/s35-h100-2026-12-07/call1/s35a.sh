#!/bin/bash
# Session 35, call 1: fused_xielu with packed 16-bit ops and a quick expm1 (libm's steps only
# near a rounding midpoint of T), against the committed kernel (old PTX) and the same pairs with
# libm's branchless steps for every element; CUDA and Vulkan parity (every finite 16-bit value
# exact on CUDA); add-RMSNorm at the decode shape beside torch.compile.
cd "$(dirname "$0")"
W=/tmp/s35a; mkdir -p $W; L=$W/log.txt
trap 'tar czf $OUT/s35a.tgz -C $W .; cat $L' EXIT
for f in ../../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/n; xz -dc x35/kiln.xz > /tmp/n/kiln; chmod +x /tmp/n/kiln
LIMIT=${LIMIT:-560}
{ date -u; cat x35/rev.txt; nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total,driver_version --format=csv; } > $L 2>&1
step() {
  local name=$1 secs=$2 file=$3; shift 3
  if (( SECONDS + secs > LIMIT )); then echo "== $name skipped at ${SECONDS}s" >> $L; return; fi
  echo "== $name $(date -u +%T) (${SECONDS}s)" >> $L
  timeout $secs "$@" > $W/$file 2>&1
  echo "rc $? $(tail -n 1 $W/$file | cut -c1-160)" >> $L
  tar czf $OUT/s35a.tgz -C $W .
}
N=/tmp/n/kiln
X="--kernel fused_xielu --shape 4096x8192"
step "parity cuda xielu" 90 parity-cuda.txt $N parity --backend cuda --kernel fused_xielu
step "xielu new 1" 60 xielu-new-1.txt $N bench --backend cuda $X
step "xielu old 1" 60 xielu-old-1.txt env KILN_CUDA_PTX=$PWD/x35/xielu_old.ptx $N bench --backend cuda $X
step "xielu branchless 1" 60 xielu-branchless-1.txt env KILN_CUDA_PTX=$PWD/x35/xielu_branchless.ptx $N bench --backend cuda $X
step "xielu new 2" 60 xielu-new-2.txt $N bench --backend cuda $X
step "xielu old 2" 60 xielu-old-2.txt env KILN_CUDA_PTX=$PWD/x35/xielu_old.ptx $N bench --backend cuda $X
step "xielu branchless 2" 60 xielu-branchless-2.txt env KILN_CUDA_PTX=$PWD/x35/xielu_branchless.ptx $N bench --backend cuda $X
step "parity wgpu xielu" 120 parity-wgpu.txt $N parity --backend wgpu --kernel fused_xielu
step "xielu wgpu" 90 xielu-wgpu.txt $N bench --backend wgpu $X
step "norm" 60 norm.txt $N bench --backend cuda --kernel fused_add_rms_norm
step "torch norm" 60 peers-norm.txt python3 ../peers/torch_peers.py --only norm
date -u >> $L
