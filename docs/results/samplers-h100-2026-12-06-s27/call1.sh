#!/bin/bash
# Session 27, call 1: #19's samplers from HEAD's release kiln (segmented rejection sampler,
# Gumbel 006ab77 vs the pre-006ab77 PTX), CUDA + Vulkan parity, WGSL libm through Vulkan,
# torch's sample and norm peers in the same call, ncu on the decode-shape add-RMSNorm, the
# one-row Gumbel and the segmented sampler's two kernels.
cd "$(dirname "$0")"
O=$OUT; L=$O/log.txt; mkdir -p $O/r
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/kc; for b in kiln wgsl_libm; do xz -dc $b.xz > /tmp/kc/$b; chmod +x /tmp/kc/$b; done
K=/tmp/kc/kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $L 2>&1
step() { echo "== $1 $(date -u +%T)" >> $L; }
S=rejection_segments,rejection_sample_segmented,rejection_sample,gumbel_max_sample,gumbel_max_merge
step "parity cuda + wgpu"
timeout 90 $K parity --backend cuda,wgpu --kernel $S > $O/r/parity.txt 2>&1
echo "rc $? $(tail -1 $O/r/parity.txt)" >> $L
step "bench cuda rejection kernels"
timeout 90 $K bench --backend cuda --kernel rejection_segments,rejection_sample_segmented,rejection_sample --csv $O/r/bench-rejection.csv > $O/r/bench-rejection.txt 2>&1
echo "rc $?" >> $L
for arm in new old; do
  step "bench cuda gumbel_max_sample $arm"
  if [ $arm = old ]; then export KILN_CUDA_PTX=old/gumbel_max_sample.ptx; else unset KILN_CUDA_PTX; fi
  timeout 50 $K bench --backend cuda --kernel gumbel_max_sample,gumbel_max_merge --csv $O/r/bench-gumbel-$arm.csv > $O/r/bench-gumbel-$arm.txt 2>&1
  echo "rc $?" >> $L
done
unset KILN_CUDA_PTX
step "bench cuda --samplers"
timeout 120 $K bench --backend cuda --samplers --csv $O/r/bench-samplers.csv > $O/r/bench-samplers.txt 2>&1
echo "rc $?" >> $L
step "bench cuda add-rms-norm"
timeout 60 $K bench --backend cuda --kernel fused_add_rms_norm --csv $O/r/bench-norm.csv > $O/r/bench-norm.txt 2>&1
echo "rc $?" >> $L
step "test wgsl_libm"
KILN_REQUIRE_BACKENDS=wgpu timeout 40 /tmp/kc/wgsl_libm --nocapture --test-threads 1 > $O/r/tests-libm.txt 2>&1
echo "rc $?" >> $L
step "torch peers sample,norm"
timeout 150 python3 peers/torch_peers.py --only sample,norm > $O/r/peers.txt 2>&1
echo "rc $?" >> $L
tar czf $O/out.tgz -C $O r
NCU=$(which ncu || ls /usr/local/cuda*/bin/ncu | head -1)
SEC="--section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis --section SchedulerStats"
step "ncu"
timeout 60 $NCU $SEC -k regex:fused_add_rms_norm_bf16 -c 2 $K bench --backend cuda --eager --kernel fused_add_rms_norm --dtype bf16 --shape "1x4096,1 x 4096" --runs 2 > $O/r/ncu-norm.txt 2>&1
echo "rc norm $?" >> $L
timeout 60 $NCU $SEC -k regex:triton -c 2 python3 peers/torch_peers.py --only norm > $O/r/ncu-norm-torch.txt 2>&1
echo "rc norm torch $?" >> $L
for k in rejection_segments rejection_sample_segmented; do
timeout 50 $NCU $SEC -k regex:${k}_f32 -c 1 $K bench --backend cuda --eager --kernel $k --dtype f32 --shape "1x128256" --runs 2 > $O/r/ncu-$k.txt 2>&1
echo "rc $k $?" >> $L; done
timeout 60 $NCU $SEC -k regex:"gumbel_max_sample_f32" -c 1 $K bench --backend cuda --eager --kernel gumbel_max_sample --dtype f32 --runs 2 > $O/r/ncu-gumbel.txt 2>&1
echo "rc gumbel $?" >> $L
date -u >> $L
cp $L $O/r/; tar czf $O/out.tgz -C $O r
cat $L
