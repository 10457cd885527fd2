#!/bin/bash
# Device call (planned in session 26, 2026-12-06; no device time was left that session): #19's
# samplers in one process each — the segmented rejection sampler (rejection_segments +
# rejection_sample_segmented) beside the one-block rejection_sample, Gumbel HEAD vs the
# pre-006ab77 PTX through KILN_CUDA_PTX — their CUDA and Vulkan parity, the WGSL libm test
# through NVIDIA's Vulkan, and torch's sampling peers in the same call.
cd "$(dirname "$0")"
O=$OUT; L=$O/log.txt
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/kc; for b in kiln wgsl_libm; do xz -dc $b.xz > /tmp/kc/$b; chmod +x /tmp/kc/$b; done
K=/tmp/kc/kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $L 2>&1
step() { echo "== $1 $(date -u +%T)" >> $L; }
S=rejection_segments,rejection_sample_segmented,rejection_sample,gumbel_max_sample,gumbel_max_merge
step "parity cuda + wgpu"
timeout 90 $K parity --backend cuda,wgpu --kernel $S > $O/parity.txt 2>&1
echo "rc $? $(tail -1 $O/parity.txt)" >> $L
for k in rejection_segments rejection_sample_segmented rejection_sample; do
  step "bench cuda $k"
  timeout 60 $K bench --backend cuda --kernel $k --csv $O/bench-$k.csv >> $O/bench.txt 2>&1
  echo "rc $?" >> $L
done
for arm in new old; do
  step "bench cuda gumbel_max_sample $arm"
  if [ $arm = old ]; then export KILN_CUDA_PTX=old/gumbel_max_sample.ptx; else unset KILN_CUDA_PTX; fi
  timeout 50 $K bench --backend cuda --kernel gumbel_max_sample --csv $O/bench-gumbel-$arm.csv >> $O/bench.txt 2>&1
  echo "rc $?" >> $L
done
unset KILN_CUDA_PTX
step "bench cuda --samplers"
timeout 120 $K bench --backend cuda --samplers --csv $O/bench-samplers.csv >> $O/bench.txt 2>&1
echo "rc $?" >> $L
step "test wgsl_libm"
KILN_REQUIRE_BACKENDS=wgpu timeout 40 /tmp/kc/wgsl_libm --nocapture --test-threads 1 > $O/tests-libm.txt 2>&1
echo "rc $?" >> $L
step "torch peers sample"
timeout 120 python3 peers/torch_peers.py --only sample > $O/peers-sample.txt 2>&1
echo "rc $?" >> $L
date -u >> $L
cat $L
