#!/bin/bash
# Session 27, call 5: the committed state — call 4's binary (u32 sort indices, sqrt_rn, norm
# blocks) with rejection_sample_segmented's binary search back (its PTX from
# `cargo xtask kernels --ptx-to`, loaded through KILN_CUDA_PTX): parity, the two kernels, the
# sampling ops, torch's sampling peers in the same call.
cd "$(dirname "$0")"
O=$OUT; L=$O/log.txt; mkdir -p $O/r
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/kc; xz -dc kiln.xz > /tmp/kc/kiln; chmod +x /tmp/kc/kiln; K=/tmp/kc/kiln
{ date -u; echo "rev $(cat rev.txt) + var/rejection_sample_segmented.ptx (binary search)"; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $L 2>&1
step() { echo "== $1 $(date -u +%T)" >> $L; }
for arm in var embedded; do
  if [ $arm = var ]; then export KILN_CUDA_PTX=var/rejection_sample_segmented.ptx; else unset KILN_CUDA_PTX; fi
  step "parity cuda $arm"
  timeout 60 $K parity --backend cuda --kernel rejection_segments,rejection_sample_segmented > $O/r/parity-$arm.txt 2>&1
  echo "rc $? $(tail -1 $O/r/parity-$arm.txt)" >> $L
  step "bench cuda segmented $arm"
  timeout 60 $K bench --backend cuda --kernel rejection_segments,rejection_sample_segmented --shape 128256 --csv $O/r/bench-seg-$arm.csv > $O/r/bench-seg-$arm.txt 2>&1
  echo "rc $?" >> $L
  step "bench cuda --samplers $arm"
  timeout 60 $K bench --backend cuda --samplers --csv $O/r/bench-samplers-$arm.csv > $O/r/bench-samplers-$arm.txt 2>&1
  echo "rc $?" >> $L
done
unset KILN_CUDA_PTX
step "torch peers sample"
timeout 100 python3 peers/torch_peers.py --only sample > $O/r/peers.txt 2>&1
echo "rc $?" >> $L
date -u >> $L
cp $L $O/r/; tar czf $O/out.tgz -C $O r
cat $L
