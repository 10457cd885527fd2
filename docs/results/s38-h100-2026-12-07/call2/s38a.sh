#!/bin/bash
# Session 38 call 2: the one-row mma GEMV design study (x38/qgemv.cu) beside kiln's qlinear
# kernels and torch's tinygemm at the same shapes; the Vulkan stream kernels with 4-byte
# variants; the committed-to-be Gumbel (v5 + launch bound, embedded) parity and rows; Llama
# decode with each step's graph uploaded when it is recorded.
cd "$(dirname "$0")"
W=/tmp/s38a; mkdir -p $W; L=$W/log.txt
trap 'tar czf $OUT/s38a.tgz -C $W .; cat $L' EXIT
for f in ../../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/n; xz -dc x38/kiln.xz > /tmp/n/kiln; chmod +x /tmp/n/kiln
LIMIT=${LIMIT:-560}
{ date -u; cat x38/rev.txt; nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total,driver_version --format=csv; } > $L 2>&1
step() {
  local name=$1 secs=$2 file=$3; shift 3
  if (( SECONDS + secs > LIMIT )); then echo "== $name skipped at ${SECONDS}s" >> $L; return; fi
  echo "== $name $(date -u +%T) (${SECONDS}s)" >> $L
  timeout $secs "$@" > $W/$file 2>&1
  echo "rc $? $(tail -n 1 $W/$file | cut -c1-160)" >> $L
  tar czf $OUT/s38a.tgz -C $W .
}
N=/tmp/n/kiln
step "nvcc qgemv" 90 nvcc-qgemv.txt nvcc -O3 -arch=sm_90 -Xptxas -v -o /tmp/n/qgemv x38/qgemv.cu
step "qgemv 1" 90 qgemv-1.txt /tmp/n/qgemv
step "kiln qlinear bf16 1x" 120 qlinear.txt $N bench --backend cuda --kernel qlinear_4bit,qlinear_mma_4bit --dtype bf16 --shape "g64 1x"
step "peers qgemv" 120 peers-qgemv.txt python3 ../peers/torch_peers.py --only qgemv
step "qgemv 2" 90 qgemv-2.txt /tmp/n/qgemv
step "decode llama bf16" 70 decode-llama-bf16.txt $N bench --decode --backend cuda --model llama-3.1-8b --batches 1 --act-dtype bf16
step "decode llama f32" 70 decode-llama-f32.txt $N bench --decode --backend cuda --model llama-3.1-8b --batches 1 --act-dtype f32
step "stream wgpu" 90 stream-wgpu.txt $N bench --backend wgpu --stream
step "parity cuda gumbel" 90 parity-gumbel.txt $N parity --backend cuda --kernel gumbel_max_sample,gumbel_max_merge
step "gumbel" 30 gumbel.txt $N bench --backend cuda --kernel gumbel_max_sample --dtype f32
step "samplers" 50 samplers.txt $N bench --backend cuda --samplers
date -u >> $L
