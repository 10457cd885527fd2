#!/bin/bash
# Session 34, call 5: PDL with the late trigger (b: 214c930 with every sm_90 entry's
# griddepcontrol.launch_dependents removed) against a without PDL, a second time: Llama-3.1-8B
# decode (graph and eager) alternated twice; every kernel's CUDA parity with b and PDL on; the
# small kernels with b (PDL on) and a (off).
cd "$(dirname "$0")"
W=/tmp/s34e; mkdir -p $W; L=$W/log.txt
trap 'tar czf $OUT/s34e.tgz -C $W .; cat $L' EXIT
for v in a b; do mkdir -p /tmp/$v; xz -dc $v/kiln.xz > /tmp/$v/kiln; chmod +x /tmp/$v/kiln; done
LIMIT=${LIMIT:-400}
{ date -u; cat a/rev.txt b/rev.txt; nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv; } > $L 2>&1
step() {
  local name=$1 secs=$2 file=$3; shift 3
  if (( SECONDS + secs > LIMIT )); then echo "== $name skipped at ${SECONDS}s" >> $L; return; fi
  echo "== $name $(date -u +%T) (${SECONDS}s)" >> $L
  timeout $secs "$@" > $W/$file 2>&1
  echo "rc $? $(grep -h 'graph decode\|eager decode' $W/$file | cut -c1-80 | tr '\n' ' ') $(tail -n 1 $W/$file | cut -c1-60)" >> $L
  tar czf $OUT/s34e.tgz -C $W .
}
for r in 1 2; do
step "decode a pdl0 $r" 70 decode-a-pdl0-$r.txt env KILN_CUDA_PDL=0 /tmp/a/kiln bench --decode --backend cuda --model llama-3.1-8b --batches 1
step "decode b pdl1 $r" 70 decode-b-pdl1-$r.txt env KILN_CUDA_PDL=1 /tmp/b/kiln bench --decode --backend cuda --model llama-3.1-8b --batches 1
done
step "parity cuda all (b, pdl=1)" 90 parity-cuda-b-pdl1.txt env KILN_CUDA_PDL=1 /tmp/b/kiln parity --backend cuda
step "small b pdl=1" 45 kernels-b-pdl1.txt env KILN_CUDA_PDL=1 /tmp/b/kiln bench --backend cuda --kernel fused_add_rms_norm,fused_rope_qk_append,moe_combine
step "small a pdl=0" 45 kernels-a-pdl0.txt env KILN_CUDA_PDL=0 /tmp/a/kiln bench --backend cuda --kernel fused_add_rms_norm,fused_rope_qk_append,moe_combine
step "decode hybrid b pdl1" 100 decode-hybrid-b-pdl1.txt env KILN_CUDA_PDL=1 /tmp/b/kiln bench --decode --backend cuda --model granite-4.0-h-tiny --batches 1,8
date -u >> $L
