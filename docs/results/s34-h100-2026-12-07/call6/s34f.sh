#!/bin/bash
# Session 34, call 6: p/ = the commit that makes PDL with the late trigger the default on sm_90
# (no entry triggers its dependents; KILN_CUDA_PDL=0 serializes). Every kernel's CUDA parity
# with the default; Llama-3.1-8B decode and the small kernels, default against PDL=0, same
# binary, alternated twice.
cd "$(dirname "$0")"
W=/tmp/s34f; mkdir -p $W; L=$W/log.txt
trap 'tar czf $OUT/s34f.tgz -C $W .; cat $L' EXIT
mkdir -p /tmp/p; xz -dc p/kiln.xz > /tmp/p/kiln; chmod +x /tmp/p/kiln; P=/tmp/p/kiln
LIMIT=${LIMIT:-330}
{ date -u; cat p/rev.txt; nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv; } > $L 2>&1
step() {
  local name=$1 secs=$2 file=$3; shift 3
  if (( SECONDS + secs > LIMIT )); then echo "== $name skipped at ${SECONDS}s" >> $L; return; fi
  echo "== $name $(date -u +%T) (${SECONDS}s)" >> $L
  timeout $secs "$@" > $W/$file 2>&1
  echo "rc $? $(grep -h 'device (GPU)\|graph decode\|eager decode' $W/$file | cut -c1-70 | tr '\n' ' ') $(tail -n 1 $W/$file | cut -c1-50)" >> $L
  tar czf $OUT/s34f.tgz -C $W .
}
step "parity cuda all (default)" 100 parity-cuda-all.txt $P parity --backend cuda
for r in 1 2; do
step "decode default $r" 45 decode-default-$r.txt $P bench --decode --backend cuda --model llama-3.1-8b --batches 1
step "decode pdl0 $r" 45 decode-pdl0-$r.txt env KILN_CUDA_PDL=0 $P bench --decode --backend cuda --model llama-3.1-8b --batches 1
done
step "small default" 40 kernels-default.txt $P bench --backend cuda --kernel fused_add_rms_norm,fused_rope_qk_append,moe_combine,ssm_update
step "small pdl0" 40 kernels-pdl0.txt env KILN_CUDA_PDL=0 $P bench --backend cuda --kernel fused_add_rms_norm,fused_rope_qk_append,moe_combine,ssm_update
date -u >> $L
