#!/bin/bash
# Session 34, call 3: PTX variants through KILN_CUDA_PTX in a/'s binary (214c930), each checked
# by CUDA parity of its kernel, then timed interleaved with the embedded module, twice.
# qlinear_4bit: q4_d4 (one or two rows of x keep 4 units of codes + their scale/bias words in
# flight per lane), q4_d2 (2 units). ssm_update: ssm_new (every load issued before any decode,
# no bounds-check branches between them), ssm_new5 (the same at 5 blocks/SM).
cd "$(dirname "$0")"
W=/tmp/s34c; mkdir -p $W; L=$W/log.txt
trap 'tar czf $OUT/s34c.tgz -C $W .; cat $L' EXIT
mkdir -p /tmp/a; xz -dc a/kiln.xz > /tmp/a/kiln; chmod +x /tmp/a/kiln
A=/tmp/a/kiln; X=$PWD/ptx
LIMIT=${LIMIT:-420}
{ date -u; cat a/rev.txt; nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv; } > $L 2>&1
step() {
  local name=$1 secs=$2 file=$3; shift 3
  if (( SECONDS + secs > LIMIT )); then echo "== $name skipped at ${SECONDS}s" >> $L; return; fi
  echo "== $name $(date -u +%T) (${SECONDS}s)" >> $L
  timeout $secs "$@" > $W/$file 2>&1
  echo "rc $? $(tail -n 1 $W/$file | cut -c1-150)" >> $L
  tar czf $OUT/s34c.tgz -C $W .
}
step "jit + parity q4 embedded" 70 parity-q4-emb.txt $A parity --backend cuda --kernel qlinear_4bit
for v in q4_d4 q4_d2; do
step "parity $v" 40 parity-$v.txt env KILN_CUDA_PTX=$X/$v.ptx $A parity --backend cuda --kernel qlinear_4bit
done
for v in ssm_new ssm_new5; do
step "parity $v" 40 parity-$v.txt env KILN_CUDA_PTX=$X/$v.ptx $A parity --backend cuda --kernel ssm_update
done
Q="--kernel qlinear_4bit --dtype f32,bf16 --shape g64 1x,g64 2x"
for r in 1 2; do
step "q4 emb $r" 50 q4-emb-$r.txt $A bench --backend cuda $Q
for v in q4_d4 q4_d2; do
step "$v $r" 50 $v-$r.txt env KILN_CUDA_PTX=$X/$v.ptx $A bench --backend cuda $Q
done
step "ssm emb $r" 25 ssm-emb-$r.txt $A bench --backend cuda --kernel ssm_update --dtype f32,bf16
for v in ssm_new ssm_new5; do
step "$v $r" 25 $v-$r.txt env KILN_CUDA_PTX=$X/$v.ptx $A bench --backend cuda --kernel ssm_update --dtype f32,bf16
done
done
step "decode emb" 50 decode-emb.txt $A bench --decode --backend cuda --model llama-3.1-8b --batches 1
step "decode q4_d4" 50 decode-q4_d4.txt env KILN_CUDA_PTX=$X/q4_d4.ptx $A bench --decode --backend cuda --model llama-3.1-8b --batches 1
date -u >> $L
