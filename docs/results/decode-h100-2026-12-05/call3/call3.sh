#!/bin/bash
# Device call 3 (2026-12-05, session 21): kiln with the step's attention planned on the device
# (v2 where the dispatch picks it), the shared expert's routing on the device, GPU time per
# step from a replayed step, wgpu's one submission per step (rev.txt + the working tree's
# changes, see the results doc). #21: decode through cuda (Llama-3.1-8B, the hybrids at batch
# 8 again) and Vulkan; #19: the WGSL prelude's per-element ulp table, RoPE and xIELU on the
# adapter; the submission test on Vulkan.
cd "$(dirname "$0")"
O=$OUT; L=$O/log.txt
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/kc; for b in kiln wgsl_libm wgsl_accuracy wgpu_submissions; do xz -dc $b.xz > /tmp/kc/$b; chmod +x /tmp/kc/$b; done
K=/tmp/kc/kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm,memory.total --format=csv; } > $L 2>&1
C=$(cut -c1-12 rev.txt)
for run in "llama-3.1-8b 1,8 130" "granite-4.0-h-tiny,nemotron-3-nano-30b-a3b 1,8 200"; do
  set -- $run
  echo "== decode cuda $1 batches $2" >> $L
  KILN_COMMIT=$C timeout $3 $K bench --decode --backend cuda --model $1 --batches $2 --csv $O/decode-cuda-${1%%,*}.csv >> $O/decode-cuda.txt 2>&1
  echo "rc $?" >> $L
done
echo "== decode vulkan llama 8 layers" >> $L
KILN_COMMIT=$C timeout 120 $K bench --decode --backend wgpu --model llama-3.1-8b --layers 8 --csv $O/decode-vulkan.csv > $O/decode-vulkan.txt 2>&1
echo "rc $?" >> $L
for t in wgsl_libm wgsl_accuracy wgpu_submissions; do
  echo "== test $t" >> $L
  KILN_REQUIRE_BACKENDS=wgpu timeout 90 /tmp/kc/$t --nocapture --test-threads 1 >> $O/tests.txt 2>&1
  echo "rc $?" >> $L
done
date -u >> $L
