#!/bin/bash
# Session 36, call 2: Gumbel's peeled body (v2: seed only on the first step, steps past the
# split repeat its first, one threshold per step) against v1 (embedded) and the committed
# body; the samplers op timed back to back over rotated inputs beside torch; the adapter's
# stream kernels with the 4-way copy; every kernel's Vulkan parity with kiln's modules
# compiled without wgpu's runtime checks; ncu of v2.
cd "$(dirname "$0")"
W=/tmp/s36b; mkdir -p $W; L=$W/log.txt
trap 'tar czf $OUT/s36b.tgz -C $W .; cat $L' EXIT
for f in ../../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/n; xz -dc x36/kiln.xz > /tmp/n/kiln; chmod +x /tmp/n/kiln
LIMIT=${LIMIT:-480}
{ date -u; cat x36/rev.txt; nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total,driver_version --format=csv; } > $L 2>&1
step() {
  local name=$1 secs=$2 file=$3; shift 3
  if (( SECONDS + secs > LIMIT )); then echo "== $name skipped at ${SECONDS}s" >> $L; return; fi
  echo "== $name $(date -u +%T) (${SECONDS}s)" >> $L
  timeout $secs "$@" > $W/$file 2>&1
  echo "rc $? $(tail -n 1 $W/$file | cut -c1-160)" >> $L
  tar czf $OUT/s36b.tgz -C $W .
}
N=/tmp/n/kiln
V2=KILN_CUDA_PTX=$PWD/x36/gumbel_v2.ptx
G="bench --backend cuda --kernel gumbel_max_sample --dtype f32"
step "parity cuda samplers v2" 40 parity-cuda-v2.txt env $V2 $N parity --backend cuda --kernel gumbel_max_sample,gumbel_max_merge
for r in 1 2; do
step "gumbel v2 $r" 30 gumbel-v2-$r.txt env $V2 $N $G
step "gumbel v1 $r" 30 gumbel-v1-$r.txt $N $G
step "gumbel old $r" 30 gumbel-old-$r.txt env KILN_CUDA_PTX=$PWD/x36/gumbel_old.ptx $N $G
done
step "gumbel v2 16-bit" 40 gumbel-v2-16.txt env $V2 $N bench --backend cuda --kernel gumbel_max_sample --dtype f16,bf16
step "samplers v2" 90 samplers-v2.txt env $V2 $N bench --backend cuda --samplers
step "samplers old" 90 samplers-old.txt env KILN_CUDA_PTX=$PWD/x36/gumbel_old.ptx $N bench --backend cuda --samplers
step "torch sample" 60 peers-sample.txt python3 ../peers/torch_peers.py --only sample
step "stream wgpu" 60 stream-wgpu.txt $N bench --backend wgpu --stream
step "parity wgpu unchecked" 150 parity-wgpu-unchecked.txt env KILN_WGPU_UNCHECKED=1 $N parity --backend wgpu
step "ncu gumbel v2" 80 ncu.log env $V2 ncu --clock-control none --set full --import-source no --kernel-name regex:gumbel_max_sample_f32 --launch-skip 20 --launch-count 1 -o $W/full $N bench --backend cuda --kernel gumbel_max_sample --dtype f32 --shape "64x152064 T0.8 S8"
[ -f $W/full.ncu-rep ] && ncu --import $W/full.ncu-rep --page source --print-source sass --csv > $W/sass.csv 2>>$L && ncu --import $W/full.ncu-rep > $W/details.txt 2>>$L && xz -T4 $W/sass.csv && rm -f $W/full.ncu-rep
date -u >> $L
