#!/bin/bash
# Session 34, call 1 (an H200): #17's last line (ssm_update bench twice + the family's CUDA and
# Vulkan parity with a/ = 214c930), then H200 baselines: qlinear B1/B8 beside torch's tinygemm,
# paged decode beside torch SDPA, Llama-3.1-8B decode, PDL late trigger (b/). Each step is
# skipped if it would not end before LIMIT.
cd "$(dirname "$0")"
W=/tmp/s34a; mkdir -p $W; L=$W/log.txt
trap 'tar czf $OUT/s34a.tgz -C $W .; cat $L' EXIT
for f in ../../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
for v in ${VARIANTS:-a old b}; do mkdir -p /tmp/$v; xz -dc $v/kiln.xz > /tmp/$v/kiln; chmod +x /tmp/$v/kiln; done
LIMIT=${LIMIT:-560}
{ date -u; cat old/rev.txt a/rev.txt b/rev.txt; nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total,driver_version --format=csv; } > $L 2>&1
step() {
  local name=$1 secs=$2 file=$3; shift 3
  if (( SECONDS + secs > LIMIT )); then echo "== $name skipped at ${SECONDS}s" >> $L; return; fi
  echo "== $name $(date -u +%T) (${SECONDS}s)" >> $L
  timeout $secs "$@" > $W/$file 2>&1
  echo "rc $? $(tail -n 1 $W/$file | cut -c1-160)" >> $L
  tar czf $OUT/s34a.tgz -C $W .
}
A=/tmp/a/kiln
step "ssm a 1" 70 ssm-a-1.txt $A bench --backend cuda --kernel ssm_update --dtype f32,bf16
step "ssm old 1" 70 ssm-old-1.txt /tmp/old/kiln bench --backend cuda --kernel ssm_update --dtype f32,bf16
step "ssm a 2" 40 ssm-a-2.txt $A bench --backend cuda --kernel ssm_update --dtype f32,bf16
S=ssm_update,causal_conv1d_update,gated_rms_norm,mamba1_selective_scan,bitlinear,gated_delta_step
step "parity cuda ssm family" 60 parity-cuda-ssm.txt $A parity --backend cuda --kernel $S
step "parity wgpu ssm family" 90 parity-wgpu-ssm.txt $A parity --backend wgpu --kernel $S
step "qlinear" 60 qlinear.txt $A bench --backend cuda --kernel qlinear_4bit,qlinear_mma_4bit --dtype bf16 --shape "g64 1x,g64 8x"
step "torch qgemv" 45 peers-qgemv.txt python3 ../peers/torch_peers.py --only qgemv
step "paged" 60 paged.csv $A bench --backend cuda --paged --arms v2 --no-crossover --contexts 4096,16384,32768 --batches 1,4,8
step "torch paged" 45 peers-paged.txt python3 ../peers/torch_peers.py --only paged
step "decode llama a pdl0" 60 decode-a-pdl0.txt env KILN_CUDA_PDL=0 $A bench --decode --backend cuda --model llama-3.1-8b --batches 1
step "decode llama b pdl1" 90 decode-b-pdl1.txt env KILN_CUDA_PDL=1 /tmp/b/kiln bench --decode --backend cuda --model llama-3.1-8b --batches 1
step "decode llama a pdl1" 60 decode-a-pdl1.txt env KILN_CUDA_PDL=1 $A bench --decode --backend cuda --model llama-3.1-8b --batches 1
date -u >> $L
