#!/bin/bash
# Device call 1 (2026-12-05, session 23): kiln at rev.txt (+ the working tree's changes named
# in the results doc). #19: the WGSL prelude's per-element tests, RoPE and xIELU through
# NVIDIA's Vulkan with kernel code's f32 `/` correctly rounded; parity of every kernel through
# Vulkan; the division's cost (KILN_WGSL_DIR=wgsl_nodiv: the same WGSL translated with the
# device's `/`, same binary, same call); the samplers' and RoPE/add3 model-shape rows through
# cuda with torch's sampling peers; the device-aware Gumbel split. #21: the decode table.
cd "$(dirname "$0")"
O=$OUT; L=$O/log-${1:-a}.txt
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/kc; for b in kiln wgsl_libm wgsl_accuracy wgpu_submissions samplers; do xz -dc $b.xz > /tmp/kc/$b; chmod +x /tmp/kc/$b; done
tar xJf wgsl_nodiv.tar.xz -C /tmp/kc
K=/tmp/kc/kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm,memory.total --format=csv; } > $L 2>&1
C=$(head -1 rev.txt | cut -c1-12)
$K devices >> $L 2>&1
PART=${1:-a}
if [ $PART = a ]; then
for t in wgsl_libm wgsl_accuracy wgpu_submissions; do
  echo "== test $t $(date -u +%T)" >> $L
  KILN_REQUIRE_BACKENDS=wgpu timeout 120 /tmp/kc/$t --nocapture --test-threads 1 >> $O/tests.txt 2>&1
  echo "rc $?" >> $L
done
echo "== test samplers gumbel (cuda, wgpu) $(date -u +%T)" >> $L
KILN_REQUIRE_BACKENDS=cuda,wgpu timeout 120 /tmp/kc/samplers gumbel --nocapture --test-threads 1 >> $O/tests.txt 2>&1
echo "rc $?" >> $L
echo "== parity wgpu $(date -u +%T)" >> $L
timeout 300 $K parity --backend wgpu > $O/parity-wgpu.txt 2>&1
echo "rc $? $(tail -2 $O/parity-wgpu.txt | tr '\n' ' ')" >> $L
KS=fused_silu_mul,gumbel_max_sample,fused_rope_qk_append
for arm in div nodiv; do
  echo "== bench wgpu $arm $(date -u +%T)" >> $L
  if [ $arm = nodiv ]; then export KILN_WGSL_DIR=/tmp/kc/wgsl_nodiv; else unset KILN_WGSL_DIR; fi
  timeout 150 $K bench --backend wgpu --kernel $KS --dtype f32 --runs 20 --csv $O/bench-wgpu-$arm.csv >> $O/bench-wgpu.txt 2>&1
  echo "rc $?" >> $L
done
unset KILN_WGSL_DIR
else
echo "== bench cuda samplers, rope, add3 $(date -u +%T)" >> $L
timeout 200 $K bench --backend cuda --kernel gumbel_max_sample,gumbel_max_merge,rejection_sample,speculative_accept,fused_rope_qk_append,fused_add3_layer_norm --csv $O/bench-cuda.csv > $O/bench-cuda.txt 2>&1
echo "rc $?" >> $L
echo "== torch peers sample,norm $(date -u +%T)" >> $L
timeout 150 python3 peers/torch_peers.py --only sample,norm > $O/peers.txt 2>&1
echo "rc $?" >> $L
for run in "llama-3.1-8b 1,8 150" "qwen3-30b-a3b 1,4 150"; do
  set -- $run
  echo "== decode cuda $1 batches $2 $(date -u +%T)" >> $L
  KILN_COMMIT=$C timeout $3 $K bench --decode --backend cuda --model $1 --batches $2 --csv $O/decode-cuda.csv >> $O/decode-cuda.txt 2>&1
  echo "rc $?" >> $L
done
fi
date -u >> $L
