#!/bin/bash
# Session 33, call 2. old/: release kiln of d9c5a54 (committed straight-line ssm_update, PDL
# entries trigger dependents at their first instruction). a/: the reordered ssm_update (state
# loads before x's widening and before the head's prologue). b/: a/ with every sm_90 entry's
# griddepcontrol.launch_dependents removed (dependents launch at each block's exit; the wait
# stays). Each step is skipped if it would not end before LIMIT.
cd "$(dirname "$0")"
W=/tmp/s33b; mkdir -p $W; L=$W/log.txt
trap 'tar czf $OUT/call2.tgz -C $W .; cat $L' EXIT
for f in ../../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
for v in ${VARIANTS:-old a b}; do mkdir -p /tmp/$v; xz -dc $v/kiln.xz > /tmp/$v/kiln; chmod +x /tmp/$v/kiln; done
LIMIT=${LIMIT:-560}
{ date -u; cat old/rev.txt a/rev.txt b/rev.txt; nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv; } > $L 2>&1
step() {
  local name=$1 secs=$2 file=$3; shift 3
  if (( SECONDS + secs > LIMIT )); then echo "== $name skipped at ${SECONDS}s" >> $L; return; fi
  echo "== $name $(date -u +%T) (${SECONDS}s)" >> $L
  timeout $secs "$@" > $W/$file 2>&1
  echo "rc $? $(tail -n 1 $W/$file | cut -c1-160)" >> $L
  tar czf $OUT/call2.tgz -C $W .
}
for r in 1 2; do
for v in old a; do
step "ssm $v $r" 60 ssm-$v-$r.txt /tmp/$v/kiln bench --backend cuda --kernel ssm_update --dtype f32,bf16
done
done
S=ssm_update,causal_conv1d_update,gated_rms_norm,mamba1_selective_scan,bitlinear,gated_delta_step
step "parity cuda ssm family (a)" 60 parity-cuda-ssm.txt /tmp/a/kiln parity --backend cuda --kernel $S
step "parity wgpu ssm family (a)" 90 parity-wgpu-ssm.txt /tmp/a/kiln parity --backend wgpu --kernel $S
for pdl in 1 0; do
for v in a b; do
step "decode llama $v pdl=$pdl" 60 decode-$v-pdl$pdl.txt env KILN_CUDA_PDL=$pdl /tmp/$v/kiln bench --decode --backend cuda --model llama-3.1-8b --batches 1
done
done
step "parity cuda all (b, pdl=1)" 60 parity-cuda-b-pdl1.txt env KILN_CUDA_PDL=1 /tmp/b/kiln parity --backend cuda
step "small b pdl=1" 45 kernels-b-pdl1.txt env KILN_CUDA_PDL=1 /tmp/b/kiln bench --backend cuda --kernel fused_add_rms_norm,fused_rope_qk_append,moe_combine
step "small a pdl=0" 45 kernels-a-pdl0.txt env KILN_CUDA_PDL=0 /tmp/a/kiln bench --backend cuda --kernel fused_add_rms_norm,fused_rope_qk_append,moe_combine
step "ncu ssm (a)" 40 ncu-ssm.txt ncu --clock-control none --kernel-name regex:ssm_update --launch-skip 20 --launch-count 1 --section SpeedOfLight --section WarpStateStats /tmp/a/kiln bench --backend cuda --kernel ssm_update --dtype bf16 --shape "nemotron-h B8"
step "parity wgpu all (a)" 150 parity-wgpu.txt /tmp/a/kiln parity --backend wgpu
step "decode hybrid (a)" 100 decode-hybrid.txt /tmp/a/kiln bench --decode --backend cuda --model granite-4.0-h-tiny,nemotron-3-nano-30b-a3b --batches 1,8
date -u >> $L
