#!/bin/bash
# Device call 2 (2026-12-05, session 23): div_ieee exact in every case (no device `/`), xIELU's
# products kept unfused (Block::unfused). The WGSL per-element tests again, parity through
# Vulkan, and the cost of the division and of the unfused products in one call
# (KILN_WGSL_DIR=wgsl_nodiv: the WGSL of call 1's second arm, the device's `/`, no unfused).
cd "$(dirname "$0")"
O=$OUT; L=$O/log.txt
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/kc; for b in kiln wgsl_libm wgsl_accuracy; do xz -dc $b.xz > /tmp/kc/$b; chmod +x /tmp/kc/$b; done
tar xJf wgsl_nodiv.tar.xz -C /tmp/kc
K=/tmp/kc/kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $L 2>&1
for t in wgsl_libm wgsl_accuracy; do
  echo "== test $t $(date -u +%T)" >> $L
  KILN_REQUIRE_BACKENDS=wgpu timeout 120 /tmp/kc/$t --nocapture --test-threads 1 >> $O/tests.txt 2>&1
  echo "rc $?" >> $L
done
echo "== parity wgpu $(date -u +%T)" >> $L
timeout 300 $K parity --backend wgpu > $O/parity-wgpu.txt 2>&1
echo "rc $? $(tail -1 $O/parity-wgpu.txt)" >> $L
for arm in div nodiv; do
  echo "== bench wgpu $arm $(date -u +%T)" >> $L
  if [ $arm = nodiv ]; then export KILN_WGSL_DIR=/tmp/kc/wgsl_nodiv; else unset KILN_WGSL_DIR; fi
  timeout 100 $K bench --backend wgpu --kernel fused_silu_mul,gumbel_max_sample,fused_rope_qk_append,fused_xielu --dtype f32 --runs 20 --csv $O/bench-wgpu-$arm.csv >> $O/bench-wgpu.txt 2>&1
  echo "rc $?" >> $L
done
date -u >> $L
