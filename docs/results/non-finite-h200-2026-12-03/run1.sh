#!/bin/bash
# One device call: parity of the kernels this change touched on cuda and Vulkan, the validation
# tests (case 3) on every backend, then new-vs-old PTX timings in the same process family.
cd "$(dirname "$0")"
gunzip -f kiln.gz validation.gz 2>/dev/null; chmod +x kiln validation
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv
K=paged_attention_decode,paged_attention_decode_v2_partial,paged_attention_merge_states,fused_add_rms_norm,gated_rms_norm,rejection_sample,speculative_accept
./kiln parity --backend cuda,wgpu --kernel $K > $OUT/parity.txt 2>&1; echo "rc $?" >> $OUT/parity.txt
tail -5 $OUT/parity.txt
KILN_REQUIRE_BACKENDS=cpu,sim,cuda,wgpu ./validation --test-threads 2 > $OUT/validation.txt 2>&1; echo "rc $?" >> $OUT/validation.txt
tail -5 $OUT/validation.txt
P="--backend cuda --paged --contexts 4096,32768 --batches 1,8 --no-crossover"
for r in 1 2; do
  ./kiln bench $P --arms v2 > $OUT/paged_v2_new_$r.txt 2>&1
  KILN_CUDA_PTX=old_paged_attention_decode_v2_partial.ptx ./kiln bench $P --arms v2 > $OUT/paged_v2_old_$r.txt 2>&1
done
P1="--backend cuda --paged --contexts 4096 --batches 1,8 --no-crossover --arms v1"
./kiln bench $P1 > $OUT/paged_v1_new.txt 2>&1
KILN_CUDA_PTX=old_paged_attention_decode.ptx ./kiln bench $P1 > $OUT/paged_v1_old.txt 2>&1
N="--backend cuda --kernel fused_add_rms_norm"
./kiln bench $N > $OUT/norm_new.txt 2>&1
KILN_CUDA_PTX=old_fused_add_rms_norm.ptx ./kiln bench $N > $OUT/norm_old.txt 2>&1
date -u
