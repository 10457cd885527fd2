#!/bin/bash
# Session 34, call 4: n/ = this session's ssm_update (every load before any decode, 5 blocks/SM)
# against a/ (214c930): #17's kernels' CUDA and Vulkan parity with n, every kernel's CUDA parity,
# ssm_update twice interleaved; then qlinear_4bit PTX variants (q4_d4, q4_d2) in n's binary.
cd "$(dirname "$0")"
W=/tmp/s34d; mkdir -p $W; L=$W/log.txt
trap 'tar czf $OUT/s34d.tgz -C $W .; cat $L' EXIT
for f in ../../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
for v in a n; do mkdir -p /tmp/$v; xz -dc $v/kiln.xz > /tmp/$v/kiln; chmod +x /tmp/$v/kiln; done
N=/tmp/n/kiln; A=/tmp/a/kiln; X=$PWD/ptx
LIMIT=${LIMIT:-540}
{ date -u; cat a/rev.txt n/rev.txt; nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv; } > $L 2>&1
step() {
  local name=$1 secs=$2 file=$3; shift 3
  if (( SECONDS + secs > LIMIT )); then echo "== $name skipped at ${SECONDS}s" >> $L; return; fi
  echo "== $name $(date -u +%T) (${SECONDS}s)" >> $L
  timeout $secs "$@" > $W/$file 2>&1
  echo "rc $? $(tail -n 1 $W/$file | cut -c1-150)" >> $L
  tar czf $OUT/s34d.tgz -C $W .
}
S=ssm_update,causal_conv1d_update,gated_rms_norm,mamba1_selective_scan,bitlinear,gated_delta_step
step "parity cuda ssm family (n)" 90 parity-cuda-ssm.txt $N parity --backend cuda --kernel $S
step "parity wgpu ssm family (n)" 90 parity-wgpu-ssm.txt $N parity --backend wgpu --kernel $S
step "ssm a 1" 70 ssm-a-1.txt $A bench --backend cuda --kernel ssm_update --dtype f32,bf16
for r in 1 2; do
step "ssm n $r" 30 ssm-n-$r.txt $N bench --backend cuda --kernel ssm_update --dtype f32,bf16
[ $r = 2 ] && step "ssm a 2" 30 ssm-a-2.txt $A bench --backend cuda --kernel ssm_update --dtype f32,bf16
done
for r in 1 2; do
step "q4 emb $r" 50 q4-emb-$r.txt $N bench --backend cuda --kernel qlinear_4bit --dtype f32,bf16 --shape "g64 1x,g64 2x"
for v in q4_d4 q4_d2; do
step "$v $r" 50 $v-$r.txt env KILN_CUDA_PTX=$X/$v.ptx $N bench --backend cuda --kernel qlinear_4bit --dtype f32,bf16 --shape "g64 1x,g64 2x"
done
done
step "parity cuda all (n)" 120 parity-cuda-all.txt $N parity --backend cuda
step "decode hybrid n" 100 decode-hybrid-n.txt $N bench --decode --backend cuda --model granite-4.0-h-tiny,nemotron-3-nano-30b-a3b --batches 1
step "decode hybrid a" 100 decode-hybrid-a.txt $A bench --decode --backend cuda --model granite-4.0-h-tiny,nemotron-3-nano-30b-a3b --batches 1
date -u >> $L
