#!/bin/bash
# Device call 1 (2026-12-06, session 24). kiln at rev.txt + the working tree. New vs old in one
# process each (old = HEAD's PTX of one kernel through KILN_CUDA_PTX, same binary):
# #19 Gumbel (Philox on the wide multiply, bounded entries skip the exact noise), add-RMSNorm
# (first chunks kept in registers, weights loaded before the reduction), the samplers' rows;
# #15/#21 qlinear_4bit's wide loads unchecked on GPUs, and decode with it. Torch's peers in the
# same call. Vulkan: the WGSL per-element tests (div_ieee, xIELU unfused) and parity.
cd "$(dirname "$0")"
O=$OUT; L=$O/log.txt
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/kc; for b in kiln wgsl_libm wgsl_accuracy samplers; do xz -dc $b.xz > /tmp/kc/$b; chmod +x /tmp/kc/$b; done
K=/tmp/kc/kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm,memory.total --format=csv; } > $L 2>&1
C=$(head -1 rev.txt | cut -c1-12)
$K devices >> $L 2>&1
step() { echo "== $1 $(date -u +%T)" >> $L; }
for t in wgsl_libm wgsl_accuracy; do
  step "test $t"
  KILN_REQUIRE_BACKENDS=wgpu timeout 120 /tmp/kc/$t --nocapture --test-threads 1 >> $O/tests.txt 2>&1
  echo "rc $?" >> $L
done
step "test samplers gumbel,philox,mulhilo (cuda, wgpu)"
KILN_REQUIRE_BACKENDS=cuda,wgpu timeout 150 /tmp/kc/samplers gumbel philox mulhilo --nocapture --test-threads 1 >> $O/tests.txt 2>&1
echo "rc $?" >> $L
KS=gumbel_max_sample,gumbel_max_merge,fused_add_rms_norm,qlinear_4bit,qlinear_8bit,rejection_sample,speculative_accept,fused_rope_qk_append,fused_xielu
for b in cuda wgpu; do
  step "parity $b"
  timeout 240 $K parity --backend $b --kernel $KS > $O/parity-$b.txt 2>&1
  echo "rc $? $(tail -1 $O/parity-$b.txt)" >> $L
done
for arm in new old; do
  for k in gumbel_max_sample fused_add_rms_norm; do
    step "bench cuda $k $arm"
    if [ $arm = old ]; then export KILN_CUDA_PTX=old/$k.ptx; else unset KILN_CUDA_PTX; fi
    timeout 100 $K bench --backend cuda --kernel $k --csv $O/bench-$k-$arm.csv >> $O/bench.txt 2>&1
    echo "rc $?" >> $L
  done
  step "bench cuda qlinear_4bit $arm"
  if [ $arm = old ]; then export KILN_CUDA_PTX=old/qlinear_4bit.ptx; else unset KILN_CUDA_PTX; fi
  timeout 120 $K bench --backend cuda --kernel qlinear_4bit --dtype bf16 --shape "g64 " --csv $O/bench-qlinear_4bit-$arm.csv >> $O/bench.txt 2>&1
  echo "rc $?" >> $L
  step "decode cuda llama-3.1-8b b1 $arm"
  KILN_COMMIT=$C timeout 100 $K bench --decode --backend cuda --model llama-3.1-8b --batches 1 --csv $O/decode-$arm.csv >> $O/decode.txt 2>&1
  echo "rc $?" >> $L
done
unset KILN_CUDA_PTX
step "bench cuda rejection, speculative, merge"
timeout 120 $K bench --backend cuda --kernel rejection_sample,speculative_accept,gumbel_max_merge --csv $O/bench-samplers.csv >> $O/bench.txt 2>&1
echo "rc $?" >> $L
step "torch peers sample,norm,qgemv"
timeout 150 python3 peers/torch_peers.py --only sample,norm,qgemv > $O/peers.txt 2>&1
echo "rc $?" >> $L
date -u >> $L
