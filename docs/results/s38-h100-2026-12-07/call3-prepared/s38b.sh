#!/bin/bash
# Session 38 call 3: qlinear_mma_4bit's one-row step (embedded: a ring of 4 steps; x38b/d2: of
# 2) — CUDA parity, the one-row Llama shapes beside qlinear_4bit, an ncu of the gate/up shape,
# and Llama-3.1-8B decode with bf16 activations dispatching every one-row projection to it.
cd "$(dirname "$0")"
W=/tmp/s38b; mkdir -p $W; L=$W/log.txt
trap 'tar czf $OUT/s38b.tgz -C $W .; cat $L' EXIT
for f in ../../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/n; xz -dc x38b/kiln.xz > /tmp/n/kiln; chmod +x /tmp/n/kiln
LIMIT=${LIMIT:-400}
{ date -u; cat x38b/rev.txt; nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total,driver_version --format=csv; } > $L 2>&1
step() {
  local name=$1 secs=$2 file=$3; shift 3
  if (( SECONDS + secs > LIMIT )); then echo "== $name skipped at ${SECONDS}s" >> $L; return; fi
  echo "== $name $(date -u +%T) (${SECONDS}s)" >> $L
  timeout $secs "$@" > $W/$file 2>&1
  echo "rc $? $(tail -n 1 $W/$file | cut -c1-160)" >> $L
  tar czf $OUT/s38b.tgz -C $W .
}
N=/tmp/n/kiln
Q="bench --backend cuda --kernel qlinear_mma_4bit --dtype bf16,f16 --shape g64 1x"
step "parity cuda mma" 120 parity-mma.txt $N parity --backend cuda --kernel qlinear_mma_4bit
step "bench d4 1" 60 mma-d4-1.txt $N $Q
step "bench d2 1" 60 mma-d2-1.txt env KILN_CUDA_PTX=$PWD/x38b/qlinear_mma_4bit_d2.ptx $N $Q
step "bench q4" 60 q4.txt $N bench --backend cuda --kernel qlinear_4bit --dtype bf16 --shape "g64 1x"
step "decode llama bf16" 70 decode-llama-bf16.txt $N bench --decode --backend cuda --model llama-3.1-8b --batches 1 --act-dtype bf16
step "bench d4 2" 60 mma-d4-2.txt $N $Q
step "bench d2 2" 60 mma-d2-2.txt env KILN_CUDA_PTX=$PWD/x38b/qlinear_mma_4bit_d2.ptx $N $Q
step "ncu d4 28672" 60 ncu-28672.log ncu --clock-control none --set full --import-source no --kernel-name regex:qlinear_mma_4bit_bf16 --launch-skip 10 --launch-count 1 -o $W/full $N bench --backend cuda --kernel qlinear_mma_4bit --dtype bf16 --shape "g64 1x4096->28672"
[ -f $W/full.ncu-rep ] && ncu --import $W/full.ncu-rep > $W/details-28672.txt 2>>$L && ncu --import $W/full.ncu-rep --page source --print-source sass --csv > $W/sass-28672.csv 2>>$L && xz -T4 $W/sass-28672.csv && rm -f $W/full.ncu-rep
date -u >> $L
