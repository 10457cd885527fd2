#!/bin/bash
# Session 34, call 2: ssm_update f32 against bf16 under ncu (full set, SASS stall samples at
# Nemotron-H B8), and launch-bound variants of the committed PTX (.minnctapersm 6 = as
# embedded, 7, 8: one wave of 1024 blocks at 8) through KILN_CUDA_PTX, interleaved, twice.
cd "$(dirname "$0")"
W=/tmp/s34b; mkdir -p $W; L=$W/log.txt
trap 'tar czf $OUT/s34b.tgz -C $W .; cat $L' EXIT
mkdir -p /tmp/a; xz -dc a/kiln.xz > /tmp/a/kiln; chmod +x /tmp/a/kiln
A=/tmp/a/kiln
LIMIT=${LIMIT:-400}
{ date -u; cat a/rev.txt; nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv; } > $L 2>&1
step() {
  local name=$1 secs=$2 file=$3; shift 3
  if (( SECONDS + secs > LIMIT )); then echo "== $name skipped at ${SECONDS}s" >> $L; return; fi
  echo "== $name $(date -u +%T) (${SECONDS}s)" >> $L
  timeout $secs "$@" > $W/$file 2>&1
  echo "rc $? $(grep 'nemotron-h B8' $W/$file | awk '{print $2, $(NF-2), $NF}' | tr '\n' ' ')" >> $L
  tar czf $OUT/s34b.tgz -C $W .
}
step "ssm embedded" 70 ssm-emb-1.txt $A bench --backend cuda --kernel ssm_update --dtype f32,bf16
for r in 1 2; do for v in 6 7 8; do
step "ssm ptx $v r$r" 30 ssm-$v-$r.txt env KILN_CUDA_PTX=$PWD/ptx/ssm$v.ptx $A bench --backend cuda --kernel ssm_update --dtype f32,bf16
done; done
for d in f32 bf16; do
step "ncu $d" 80 ncu-$d.log ncu --clock-control none --set full --import-source no --kernel-name regex:ssm_update --launch-skip 30 --launch-count 1 -o $W/full-$d $A bench --backend cuda --kernel ssm_update --dtype $d --shape "nemotron-h B8"
[ -f $W/full-$d.ncu-rep ] && ncu --import $W/full-$d.ncu-rep --page source --print-source sass --csv > $W/sass-$d.csv 2>>$L && ncu --import $W/full-$d.ncu-rep > $W/details-$d.txt 2>>$L && xz -T4 $W/sass-$d.csv && rm -f $W/full-$d.ncu-rep
done
date -u >> $L
