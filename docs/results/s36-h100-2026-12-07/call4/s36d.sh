#!/bin/bash
# Session 36, call 4: Gumbel v4 (v3 with the first step's seed selected, not branched to) against
# v1 (embedded) and the committed body; parity of v4 on CUDA and of its WGSL through Vulkan;
# the samplers op back to back beside torch; the adapter's stream kernels (read, write, copy);
# ncu of v4.
cd "$(dirname "$0")"
W=/tmp/s36d; mkdir -p $W; L=$W/log.txt
trap 'tar czf $OUT/s36d.tgz -C $W .; cat $L' EXIT
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
  tar czf $OUT/s36d.tgz -C $W .
}
N=/tmp/n/kiln
V4=KILN_CUDA_PTX=$PWD/x36/gumbel_v4.ptx
OLD=KILN_CUDA_PTX=$PWD/x36/gumbel_old.ptx
G="bench --backend cuda --kernel gumbel_max_sample --dtype f32"
step "parity cuda v4" 90 parity-cuda-v4.txt env $V4 $N parity --backend cuda --kernel gumbel_max_sample,gumbel_max_merge
step "parity wgpu v4" 60 parity-wgpu.txt $N parity --backend wgpu --kernel gumbel_max_sample,gumbel_max_merge
for r in 1 2; do
step "gumbel v4 $r" 30 gumbel-v4-$r.txt env $V4 $N $G
step "gumbel v1 $r" 30 gumbel-v1-$r.txt $N $G
done
step "gumbel old" 30 gumbel-old.txt env $OLD $N $G
step "gumbel v4 16-bit" 50 gumbel-v4-16.txt env $V4 $N bench --backend cuda --kernel gumbel_max_sample,gumbel_max_merge --dtype f16,bf16
step "samplers v4" 90 samplers-v4.txt env $V4 $N bench --backend cuda --samplers
step "torch sample" 60 peers-sample.txt python3 ../peers/torch_peers.py --only sample
step "stream wgpu" 80 stream-wgpu.txt $N bench --backend wgpu --stream
step "ncu gumbel v4" 80 ncu.log env $V4 ncu --clock-control none --set full --import-source no --kernel-name regex:gumbel_max_sample_f32 --launch-skip 20 --launch-count 1 -o $W/full $N bench --backend cuda --kernel gumbel_max_sample --dtype f32 --shape "64x152064 T0.8 S8"
[ -f $W/full.ncu-rep ] && ncu --import $W/full.ncu-rep --page source --print-source sass --csv > $W/sass.csv 2>>$L && ncu --import $W/full.ncu-rep > $W/details.txt 2>>$L && xz -T4 $W/sass.csv && rm -f $W/full.ncu-rep
date -u >> $L
