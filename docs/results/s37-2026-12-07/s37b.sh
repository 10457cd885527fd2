#!/bin/bash
# Prepared in session 37 (no device was lent): x37/kiln.xz is a stripped release `kiln` built
# from main, x37/gumbel_<v>.ptx the variants' PTX (docs/results/s37-2026-12-07.md says how).
# Gumbel v5/v6b (v6b: a wave stops after its last step; *_min4: LaunchBound {256, 4}) against
# the committed body (v4, embedded): CUDA parity, the kernel at 1/8/64 rows twice each, ncu at
# 64×152064 S8 and 1×152064 S64, the samplers op back to back; Llama-3.1-8B decode with f32
# and bf16 activations (`--act-dtype`); the stream kernels through CUDA (x37/stream.cu) and
# through Vulkan.
cd "$(dirname "$0")"
W=/tmp/s37b; mkdir -p $W; L=$W/log.txt
trap 'tar czf $OUT/s37b.tgz -C $W .; cat $L' EXIT
for f in ../../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/n; xz -dc x37/kiln.xz > /tmp/n/kiln; chmod +x /tmp/n/kiln
LIMIT=${LIMIT:-540}
{ date -u; cat x37/rev.txt; nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total,driver_version --format=csv; } > $L 2>&1
step() {
  local name=$1 secs=$2 file=$3; shift 3
  if (( SECONDS + secs > LIMIT )); then echo "== $name skipped at ${SECONDS}s" >> $L; return; fi
  echo "== $name $(date -u +%T) (${SECONDS}s)" >> $L
  timeout $secs "$@" > $W/$file 2>&1
  echo "rc $? $(tail -n 1 $W/$file | cut -c1-160)" >> $L
  tar czf $OUT/s37b.tgz -C $W .
}
N=/tmp/n/kiln
P=$PWD/x37
G="bench --backend cuda --kernel gumbel_max_sample --dtype f32"
step "parity cuda v6b_min4" 120 parity-cuda-v6b_min4.txt env KILN_CUDA_PTX=$P/gumbel_v6b_min4.ptx $N parity --backend cuda --kernel gumbel_max_sample,gumbel_max_merge
for r in 1 2; do
  for v in v5_min4 v6b_min4 v6b; do
    step "gumbel $v $r" 25 gumbel-$v-$r.txt env KILN_CUDA_PTX=$P/gumbel_$v.ptx $N $G
  done
  step "gumbel v4 $r" 25 gumbel-v4-$r.txt $N $G
done
step "decode llama f32" 70 decode-llama-f32.txt $N bench --decode --backend cuda --model llama-3.1-8b --batches 1 --act-dtype f32
step "decode llama bf16" 70 decode-llama-bf16.txt $N bench --decode --backend cuda --model llama-3.1-8b --batches 1 --act-dtype bf16
for s in "64x152064 T0.8 S8" "1x152064 T0.8 S64"; do
  t=$(echo $s | cut -d' ' -f1)
  step "ncu v6b_min4 $t" 60 ncu-$t.log env KILN_CUDA_PTX=$P/gumbel_v6b_min4.ptx ncu --clock-control none --set full --import-source no --kernel-name regex:gumbel_max_sample_f32 --launch-skip 20 --launch-count 1 -o $W/full-$t $N $G --shape "$s"
  [ -f $W/full-$t.ncu-rep ] && ncu --import $W/full-$t.ncu-rep --page source --print-source sass --csv > $W/sass-$t.csv 2>>$L && ncu --import $W/full-$t.ncu-rep > $W/details-$t.txt 2>>$L && xz -T4 $W/sass-$t.csv && rm -f $W/full-$t.ncu-rep
done
step "samplers v6b_min4" 50 samplers-v6b_min4.txt env KILN_CUDA_PTX=$P/gumbel_v6b_min4.ptx $N bench --backend cuda --samplers
step "nvcc stream" 40 nvcc.txt nvcc -O3 -arch=sm_90 -o /tmp/n/stream x37/stream.cu
step "stream cuda" 30 stream-cuda.txt /tmp/n/stream
step "stream wgpu" 70 stream-wgpu.txt $N bench --backend wgpu --stream
step "samplers v4" 50 samplers-v4.txt $N bench --backend cuda --samplers
date -u >> $L
