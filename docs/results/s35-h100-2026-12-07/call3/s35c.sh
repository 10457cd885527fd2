#!/bin/bash
# Session 35, call 3: the wgsl_accuracy test with the flushing adapter's chain modelled per op
# (call 2's failing seed, then a fresh one) through NVIDIA's Vulkan; Gumbel's op with the split
# that fills one wave of resident blocks (64 rows: 12 splits) beside the kernel at 12/16/32.
cd "$(dirname "$0")"
W=/tmp/s35c; mkdir -p $W; L=$W/log.txt
trap 'tar czf $OUT/s35c.tgz -C $W .; cat $L' EXIT
for f in ../../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/n; xz -dc x35/kiln.xz > /tmp/n/kiln; chmod +x /tmp/n/kiln
xz -dc x35/wgsl_accuracy.xz > /tmp/n/wgsl_accuracy; chmod +x /tmp/n/wgsl_accuracy
LIMIT=${LIMIT:-200}
{ date -u; cat x35/rev.txt; nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total,driver_version --format=csv; } > $L 2>&1
step() {
  local name=$1 secs=$2 file=$3; shift 3
  if (( SECONDS + secs > LIMIT )); then echo "== $name skipped at ${SECONDS}s" >> $L; return; fi
  echo "== $name $(date -u +%T) (${SECONDS}s)" >> $L
  timeout $secs "$@" > $W/$file 2>&1
  echo "rc $? $(tail -n 1 $W/$file | cut -c1-160)" >> $L
  tar czf $OUT/s35c.tgz -C $W .
}
N=/tmp/n/kiln
step "wgsl_accuracy seed of call 2" 40 wgsl-accuracy-replay.txt env KILN_SEED=1796651772960275199 KILN_REQUIRE_BACKENDS=wgpu /tmp/n/wgsl_accuracy --nocapture --test-threads 1
step "wgsl_accuracy fresh" 40 wgsl-accuracy.txt env KILN_REQUIRE_BACKENDS=wgpu /tmp/n/wgsl_accuracy --nocapture --test-threads 1
step "samplers 1" 40 samplers-1.txt $N bench --backend cuda --samplers
step "gumbel kernels" 40 gumbel.txt $N bench --backend cuda --kernel gumbel_max_sample --dtype f32
step "samplers 2" 40 samplers-2.txt $N bench --backend cuda --samplers
step "parity gumbel" 40 parity-gumbel.txt $N parity --backend cuda --kernel gumbel_max_sample,gumbel_max_merge
date -u >> $L
