#!/bin/bash
# Session 27, call 3: base (call 2's build: sort index by bits, paired sums) against new (the
# 8-ary searches, the hardware square root, add-RMSNorm blocks to 512) in one call: the norms,
# the segmented sampler, the sampling ops, Llama-3.1-8B decode; parity of every changed kernel;
# torch's norm and sample peers; ncu of the new sort and norm.
cd "$(dirname "$0")"
O=$OUT; L=$O/log.txt; mkdir -p $O/r
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/kc; xz -dc kiln.xz > /tmp/kc/new; xz -dc kiln-base.xz > /tmp/kc/base; chmod +x /tmp/kc/*
{ date -u; echo "new rev $(cat rev.txt)"; echo "base rev $(cat rev-base.txt)"; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $L 2>&1
step() { echo "== $1 $(date -u +%T)" >> $L; }
S=fused_add_rms_norm,fused_add3_layer_norm,gated_rms_norm,paged_attention_decode,rejection_segments,rejection_sample_segmented,rejection_sample
step "parity cuda + wgpu (new)"
timeout 120 /tmp/kc/new parity --backend cuda,wgpu --kernel $S > $O/r/parity.txt 2>&1
echo "rc $? $(tail -1 $O/r/parity.txt)" >> $L
for arm in base new; do
  K=/tmp/kc/$arm
  step "bench cuda norms $arm"
  timeout 60 $K bench --backend cuda --kernel fused_add_rms_norm,fused_add3_layer_norm --csv $O/r/bench-norms-$arm.csv > $O/r/bench-norms-$arm.txt 2>&1
  echo "rc $?" >> $L
  step "bench cuda segmented $arm"
  timeout 60 $K bench --backend cuda --kernel rejection_segments,rejection_sample_segmented --shape 128256 --csv $O/r/bench-seg-$arm.csv > $O/r/bench-seg-$arm.txt 2>&1
  echo "rc $?" >> $L
  step "bench cuda --samplers $arm"
  timeout 60 $K bench --backend cuda --samplers --csv $O/r/bench-samplers-$arm.csv > $O/r/bench-samplers-$arm.txt 2>&1
  echo "rc $?" >> $L
  step "decode llama-3.1-8b $arm"
  timeout 90 $K bench --backend cuda --decode --model llama-3.1-8b --csv $O/r/decode-$arm.csv > $O/r/decode-$arm.txt 2>&1
  echo "rc $?" >> $L
done
step "torch peers norm,sample"
timeout 150 python3 peers/torch_peers.py --only norm,sample > $O/r/peers.txt 2>&1
echo "rc $?" >> $L
tar czf $O/out.tgz -C $O r
NCU=$(which ncu || ls /usr/local/cuda*/bin/ncu | head -1)
SEC="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section InstructionStats --section Occupancy --section LaunchStats"
step "ncu"
timeout 60 $NCU $SEC -k regex:fused_add_rms_norm_bf16 -c 1 /tmp/kc/new bench --backend cuda --eager --kernel fused_add_rms_norm --dtype bf16 --shape "1x4096" --runs 2 > $O/r/ncu-norm.txt 2>&1
echo "rc ncu norm $?" >> $L
timeout 60 $NCU $SEC -k regex:rejection_segments_f32 -c 1 /tmp/kc/new bench --backend cuda --eager --kernel rejection_segments --dtype f32 --shape "1x128256" --runs 2 > $O/r/ncu-segments.txt 2>&1
echo "rc ncu segments $?" >> $L
timeout 60 $NCU $SEC -k regex:rejection_sample_segmented_f32 -c 1 /tmp/kc/new bench --backend cuda --eager --kernel rejection_sample_segmented --dtype f32 --shape "1x128256 seg 512 top-p" --runs 2 > $O/r/ncu-sample.txt 2>&1
echo "rc ncu sample $?" >> $L
date -u >> $L
cp $L $O/r/; tar czf $O/out.tgz -C $O r
cat $L
