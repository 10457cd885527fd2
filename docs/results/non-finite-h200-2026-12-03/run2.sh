#!/bin/bash
cd "$(dirname "$0")"
gunzip -f kiln.gz validation.gz 2>/dev/null; chmod +x kiln validation
for f in ../.gl/*.deb; do dpkg -x $f /; done; ldconfig
./kiln devices 2>&1 | grep -i wgpu | head -3
if ! ./kiln devices 2>&1 | grep -qi "wgpu.*present\|Vulkan"; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
  ./kiln devices 2>&1 | grep -i wgpu | head -3
fi
K=paged_attention_decode,paged_attention_decode_v2_partial,paged_attention_merge_states,fused_add_rms_norm,gated_rms_norm,rejection_sample,speculative_accept
{
./kiln parity --backend cuda,wgpu --kernel $K 2>&1; echo "parity rc $?"
KILN_REQUIRE_BACKENDS=cpu,sim,cuda,wgpu ./validation --test-threads 2 2>&1; echo "validation rc $?"
} > $OUT/device2.txt
grep -E "rc |test result|passed|failed|FAIL" $OUT/device2.txt | tail -20
P="--backend cuda --paged --contexts 4096,32768 --batches 1,8 --no-crossover --arms v2"
{
for r in 1 2; do
  echo "== new $r"; ./kiln bench $P 2>&1
  echo "== old $r"; KILN_CUDA_PTX=old_paged_attention_decode_v2_partial.ptx ./kiln bench $P 2>&1
done
} > $OUT/paged_v2_final.txt
grep -E "^==|^cuda" $OUT/paged_v2_final.txt | cut -d, -f3-5,12,15
