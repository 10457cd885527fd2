#!/bin/bash
# Session 36, call 1: Gumbel's step body (8 entries per thread, one wide load, the seed
# candidate before the wave maximum) against the committed body (KILN_CUDA_PTX) and a
# 5-blocks-per-SM bound of it; CUDA and Vulkan parity of the samplers; the op beside torch;
# the Vulkan adapter's plain read/copy kernels with and without wgpu's runtime checks, and
# two bandwidth kernels with kiln's modules unchecked.
cd "$(dirname "$0")"
W=/tmp/s36a; mkdir -p $W; L=$W/log.txt
trap 'tar czf $OUT/s36a.tgz -C $W .; cat $L' EXIT
for f in ../../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/n; xz -dc x36/kiln.xz > /tmp/n/kiln; chmod +x /tmp/n/kiln
LIMIT=${LIMIT:-420}
{ date -u; cat x36/rev.txt; nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total,driver_version --format=csv; } > $L 2>&1
step() {
  local name=$1 secs=$2 file=$3; shift 3
  if (( SECONDS + secs > LIMIT )); then echo "== $name skipped at ${SECONDS}s" >> $L; return; fi
  echo "== $name $(date -u +%T) (${SECONDS}s)" >> $L
  timeout $secs "$@" > $W/$file 2>&1
  echo "rc $? $(tail -n 1 $W/$file | cut -c1-160)" >> $L
  tar czf $OUT/s36a.tgz -C $W .
}
N=/tmp/n/kiln
G="bench --backend cuda --kernel gumbel_max_sample --dtype f32"
step "parity cuda samplers" 40 parity-cuda.txt $N parity --backend cuda --kernel gumbel_max_sample,gumbel_max_merge
for r in 1 2; do
step "gumbel new $r" 30 gumbel-new-$r.txt $N $G
step "gumbel old $r" 30 gumbel-old-$r.txt env KILN_CUDA_PTX=$PWD/x36/gumbel_old.ptx $N $G
step "gumbel min5 $r" 30 gumbel-min5-$r.txt env KILN_CUDA_PTX=$PWD/x36/gumbel_min5.ptx $N $G
done
step "gumbel new 16-bit" 30 gumbel-new-16.txt $N bench --backend cuda --kernel gumbel_max_sample --dtype f16,bf16
step "samplers" 60 samplers.txt $N bench --backend cuda --samplers
step "samplers min5" 60 samplers-min5.txt env KILN_CUDA_PTX=$PWD/x36/gumbel_min5.ptx $N bench --backend cuda --samplers
step "torch sample" 60 peers-sample.txt python3 ../peers/torch_peers.py --only sample
step "stream wgpu" 60 stream-wgpu.txt $N bench --backend wgpu --stream
step "stream cuda copy" 20 stream-cuda.txt $N bench --backend cuda --stream
step "parity wgpu samplers" 60 parity-wgpu.txt $N parity --backend wgpu --kernel gumbel_max_sample,gumbel_max_merge
A="bench --backend wgpu --kernel fused_add_rms_norm,fused_xielu --shape 4096x8192"
step "wgpu checked" 60 wgpu-checked.txt $N $A
step "wgpu unchecked" 60 wgpu-unchecked.txt env KILN_WGPU_UNCHECKED=1 $N $A
step "cuda same kernels" 30 cuda-norm-xielu.txt $N bench --backend cuda --kernel fused_add_rms_norm,fused_xielu --shape 4096x8192
step "ncu gumbel new" 80 ncu.log ncu --clock-control none --set full --import-source no --kernel-name regex:gumbel_max_sample_f32 --launch-skip 20 --launch-count 1 -o $W/full $N bench --backend cuda --kernel gumbel_max_sample --dtype f32 --shape "64x152064 T0.8 S8"
[ -f $W/full.ncu-rep ] && ncu --import $W/full.ncu-rep --page source --print-source sass --csv > $W/sass.csv 2>>$L && ncu --import $W/full.ncu-rep > $W/details.txt 2>>$L && xz -T4 $W/sass.csv && rm -f $W/full.ncu-rep
date -u >> $L
