#!/bin/bash
# Session 27, call 2: the segmented sampler after the sort's index math and paired sums, against
# HEAD's PTX of each kernel in the same binary; parity; the norm's SASS and stall sources.
cd "$(dirname "$0")"
O=$OUT; L=$O/log.txt; mkdir -p $O/r
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/kc; for b in kiln; do xz -dc $b.xz > /tmp/kc/$b; chmod +x /tmp/kc/$b; done
K=/tmp/kc/kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $L 2>&1
step() { echo "== $1 $(date -u +%T)" >> $L; }
S=rejection_segments,rejection_sample_segmented,rejection_sample
step "parity cuda + wgpu"
timeout 90 $K parity --backend cuda,wgpu --kernel $S > $O/r/parity.txt 2>&1
echo "rc $? $(tail -1 $O/r/parity.txt)" >> $L
for k in rejection_segments rejection_sample_segmented; do
  for arm in new old; do
    step "bench cuda $k $arm"
    if [ $arm = old ]; then export KILN_CUDA_PTX=old2/$k.ptx; else unset KILN_CUDA_PTX; fi
    timeout 60 $K bench --backend cuda --kernel $k --shape 128256 --csv $O/r/bench-$k-$arm.csv > $O/r/bench-$k-$arm.txt 2>&1
    echo "rc $?" >> $L
  done
done
unset KILN_CUDA_PTX
step "bench cuda --samplers"
timeout 120 $K bench --backend cuda --samplers --csv $O/r/bench-samplers.csv > $O/r/bench-samplers.txt 2>&1
echo "rc $?" >> $L
tar czf $O/out.tgz -C $O r
step "sass + ncu norm"
NCU=$(which ncu || ls /usr/local/cuda*/bin/ncu | head -1)
PTXAS=$(which ptxas || ls /usr/local/cuda*/bin/ptxas | head -1)
CUOBJ=$(which cuobjdump || ls /usr/local/cuda*/bin/cuobjdump | head -1)
$PTXAS -arch=sm_90 -O3 old2/fused_add_rms_norm.ptx -o /tmp/norm.cubin > $O/r/ptxas.txt 2>&1 && $CUOBJ -sass /tmp/norm.cubin > $O/r/norm.sass 2>&1
echo "rc sass $?" >> $L
timeout 90 $NCU --section WarpStateStats --section SourceCounters --section InstructionStats -k regex:fused_add_rms_norm_bf16 -c 1 $K bench --backend cuda --eager --kernel fused_add_rms_norm --dtype bf16 --shape "1x4096" --runs 2 > $O/r/ncu-norm-src.txt 2>&1
echo "rc ncu $?" >> $L
timeout 90 $NCU --section WarpStateStats --section SourceCounters --section InstructionStats -k regex:triton -c 1 python3 peers/torch_peers.py --only norm > $O/r/ncu-norm-torch-src.txt 2>&1
echo "rc ncu torch $?" >> $L
date -u >> $L
cp $L $O/r/; tar czf $O/out.tgz -C $O r
cat $L
