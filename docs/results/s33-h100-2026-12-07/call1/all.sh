#!/bin/bash
# Session 33: the three planned calls (docs/results/planned-2026-12-07) in one, most-wanted
# first, each step skipped when it would not end before the call's limit.
cd "$(dirname "$0")"
W=/tmp/s33; mkdir -p $W; L=$W/log.txt
trap 'tar czf $OUT/s33.tgz -C $W .; cat $L' EXIT
for f in ../../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
for v in base new; do mkdir -p /tmp/$v; xz -dc $v/kiln.xz > /tmp/$v/kiln; chmod +x /tmp/$v/kiln; done
K=/tmp/new/kiln; B=/tmp/base/kiln
LIMIT=${LIMIT:-560}
{ date -u; cat base/rev.txt new/rev.txt; nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv; } > $L 2>&1
# step NAME SECONDS FILE CMD...: runs CMD under a timeout of SECONDS if that fits before LIMIT.
step() {
  local name=$1 secs=$2 file=$3; shift 3
  if (( SECONDS + secs > LIMIT )); then echo "== $name skipped at ${SECONDS}s" >> $L; return; fi
  echo "== $name $(date -u +%T) (${SECONDS}s)" >> $L
  timeout $secs "$@" > $W/$file 2>&1
  echo "rc $? $(tail -n 1 $W/$file | cut -c1-160)" >> $L
  tar czf $OUT/s33.tgz -C $W .
}
PK=paged_attention_decode,paged_attention_decode_v2_partial,paged_attention_merge_states
step "ssm base 1" 60 ssm-base-1.txt $B bench --backend cuda --kernel ssm_update --dtype f32,bf16
step "ssm new 1" 60 ssm-new-1.txt $K bench --backend cuda --kernel ssm_update --dtype f32,bf16
[ 1 ] && step "ssm base 2" 60 ssm-base-2.txt $B bench --backend cuda --kernel ssm_update --dtype f32,bf16
step "ssm new 2" 60 ssm-new-2.txt $K bench --backend cuda --kernel ssm_update --dtype f32,bf16
for pdl in 1 0 1 0; do
step "paged pdl=$pdl" 60 paged-pdl$pdl-$SECONDS.csv env KILN_CUDA_PDL=$pdl $K bench --backend cuda --paged --arms v2 --no-crossover --contexts 4096,16384,32768 --batches 1,4,8
done
step "torch peers paged" 40 peers-paged.txt python3 ../peers/torch_peers.py --only paged
for pdl in 1 0; do
step "decode llama pdl=$pdl" 90 decode-pdl$pdl.txt env KILN_CUDA_PDL=$pdl $K bench --decode --backend cuda --model llama-3.1-8b --batches 1
done
step "parity cuda all pdl=1" 150 parity-cuda.txt env KILN_CUDA_PDL=1 $K parity --backend cuda
for pdl in 1 0; do
step "small pdl=$pdl" 50 kernels-pdl$pdl.txt env KILN_CUDA_PDL=$pdl $K bench --backend cuda --kernel fused_add_rms_norm,fused_rope_qk_append,moe_combine
done
for t in 132 264 792; do
step "target blocks $t" 30 target-$t.csv env KILN_PAGED_V2_TARGET_BLOCKS=$t $K bench --backend cuda --paged --arms v2 --no-crossover --contexts 4096,16384,32768 --batches 1
done
for p in 2 4 8 16; do
step "pages per chunk $p" 30 ppc-$p.csv env KILN_PAGED_V2_PAGES_PER_CHUNK=$p $K bench --backend cuda --paged --arms v2 --no-crossover --contexts 4096,16384 --batches 1
done
step "parity wgpu ssm+paged" 60 parity-wgpu.txt $K parity --backend wgpu --kernel ssm_update,$PK
for cb in 4096:1 32768:1; do
c=${cb%:*}; bt=${cb#*:}
step "ncu full $c x $bt" 90 ncu-$c-$bt.log ncu --clock-control none --set full --import-source no --kernel-name regex:paged --launch-skip 10 --launch-count 2 -o $W/full-$c-$bt $K bench --backend cuda --paged --arms v2 --contexts $c --batches $bt --no-crossover
[ -f $W/full-$c-$bt.ncu-rep ] && ncu --import $W/full-$c-$bt.ncu-rep --page source --print-source sass --csv > $W/sass-$c-$bt.csv 2>>$L && ncu --import $W/full-$c-$bt.ncu-rep > $W/details-$c-$bt.txt 2>>$L && rm -f $W/full-$c-$bt.ncu-rep
done
step "ncu ssm new" 60 ncu-ssm.txt ncu --clock-control none --kernel-name regex:ssm_update --launch-skip 20 --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats $K bench --backend cuda --kernel ssm_update --dtype f32
date -u >> $L
