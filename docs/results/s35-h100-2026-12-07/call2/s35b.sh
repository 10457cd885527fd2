#!/bin/bash
# Session 35, call 2: a7ce3b2's xIELU through Vulkan against the WGSL before it (same binary,
# KILN_WGSL_DIR), the per-element WGSL accuracy tests through NVIDIA's Vulkan, the samplers beside
# torch, and ncu of gumbel_max_sample at 64x152064 S16 and 1x152064 S64 (source-level stalls).
cd "$(dirname "$0")"
W=/tmp/s35b; mkdir -p $W; L=$W/log.txt
trap 'tar czf $OUT/s35b.tgz -C $W .; cat $L' EXIT
for f in ../../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/n; xz -dc x35/kiln.xz > /tmp/n/kiln; chmod +x /tmp/n/kiln
for t in wgsl_accuracy wgsl_libm; do xz -dc x35/$t.xz > /tmp/n/$t; chmod +x /tmp/n/$t; done
LIMIT=${LIMIT:-200}
{ date -u; cat x35/rev.txt; nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total,driver_version --format=csv; } > $L 2>&1
step() {
  local name=$1 secs=$2 file=$3; shift 3
  if (( SECONDS + secs > LIMIT )); then echo "== $name skipped at ${SECONDS}s" >> $L; return; fi
  echo "== $name $(date -u +%T) (${SECONDS}s)" >> $L
  timeout $secs "$@" > $W/$file 2>&1
  echo "rc $? $(tail -n 1 $W/$file | cut -c1-160)" >> $L
  tar czf $OUT/s35b.tgz -C $W .
}
N=/tmp/n/kiln
X="--kernel fused_xielu --shape 4096x8192"
step "wgsl_accuracy" 60 wgsl-accuracy.txt env KILN_REQUIRE_BACKENDS=wgpu /tmp/n/wgsl_accuracy --nocapture --test-threads 1
step "wgsl_libm" 40 wgsl-libm.txt env KILN_REQUIRE_BACKENDS=wgpu /tmp/n/wgsl_libm --nocapture --test-threads 1
step "xielu wgpu new" 40 xielu-wgpu-new-1.txt $N bench --backend wgpu $X
step "xielu wgpu old" 40 xielu-wgpu-old-1.txt env KILN_WGSL_DIR=$PWD/x35/wgsl_old $N bench --backend wgpu $X
for s in "64x152064 T0.8 S16"; do
tag=$(echo $s | cut -d' ' -f1)
step "ncu gumbel $tag" 80 ncu-$tag.log ncu --clock-control none --set full --import-source no --kernel-name regex:gumbel_max_sample_f32 --launch-skip 20 --launch-count 1 -o $W/full-$tag $N bench --backend cuda --kernel gumbel_max_sample --dtype f32 --shape "$s"
[ -f $W/full-$tag.ncu-rep ] && ncu --import $W/full-$tag.ncu-rep --page source --print-source sass --csv > $W/sass-$tag.csv 2>>$L && ncu --import $W/full-$tag.ncu-rep > $W/details-$tag.txt 2>>$L && xz -T4 $W/sass-$tag.csv && rm -f $W/full-$tag.ncu-rep
done
step "samplers" 90 samplers.txt $N bench --backend cuda --samplers
step "gumbel kernels" 60 gumbel.txt $N bench --backend cuda --kernel gumbel_max_sample,gumbel_max_merge
step "torch sample" 60 peers-sample.txt python3 ../peers/torch_peers.py --only sample
date -u >> $L
