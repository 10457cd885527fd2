#!/bin/bash
# Device call 2 (2026-12-05, session 21), right after call 1 on the same machine: the SmolLM2
# GGUF rejoined from call 1's half and this one. #21: kiln generate on cuda and Vulkan, the
# logit trace against transformers (first reference prompt, 32 greedy tokens vs the cpu) on
# both, the GGUF's decode bench on both, Llama-8B decode through Vulkan; #16: moe parity.
cd "$(dirname "$0")"
O=$OUT; L=$O/log.txt
ldconfig -p | grep -q libvulkan || echo "no Vulkan loader (call 1 unpacks it)"
K=/tmp/kc/kiln; M=/tmp/kc/smol.gguf
cat /tmp/kc/mA mB | xz -dc > $M
xz -dc decode_trace.xz > /tmp/kc/decode_trace; chmod +x /tmp/kc/decode_trace
{ date -u; echo "rev $(cat rev.txt)"; sha256sum $M; } > $L 2>&1
C=$(cut -c1-12 rev.txt)
for b in cuda wgpu; do
  echo "== generate $b" >> $L
  timeout 60 $K generate --model $M --prompt "The capital of France is" --max-tokens 32 --backend $b >> $L 2>&1
  echo "rc $?" >> $L
  timeout 60 $K generate --model $M --chat --prompt "What is the capital of France?" --max-tokens 48 --backend $b >> $L 2>&1
  echo "rc $?" >> $L
done
echo "== trace" >> $L
KILN_TEST_MODEL=$M KILN_DECODE_TRACE=$PWD/trace0 KILN_DECODE_GPU_TOKENS=32 KILN_REQUIRE_BACKENDS=cuda,wgpu KILN_REQUIRE_MODEL=1 \
  timeout 150 /tmp/kc/decode_trace agrees --nocapture --test-threads 1 > $O/trace.txt 2>&1
echo "rc $?" >> $L
echo "== decode smollm2 cuda" >> $L
KILN_COMMIT=$C timeout 90 $K bench --decode --backend cuda --model $M --batches 1,4,8 --csv $O/decode-smollm2-cuda.csv > $O/decode-smollm2.txt 2>&1
echo "rc $?" >> $L
echo "== decode smollm2 wgpu" >> $L
KILN_COMMIT=$C timeout 90 $K bench --decode --backend wgpu --model $M --batches 1 --csv $O/decode-smollm2-wgpu.csv >> $O/decode-smollm2.txt 2>&1
echo "rc $?" >> $L
echo "== decode llama vulkan (8 layers)" >> $L
KILN_COMMIT=$C timeout 150 $K bench --decode --backend wgpu --model llama-3.1-8b --layers 8 --csv $O/decode-vulkan.csv > $O/decode-vulkan.txt 2>&1
echo "rc $?" >> $L
P=moe_act,moe_route,moe_gateup_4bit,moe_down_sum_4bit,moe_combine,gather_qmm_4bit
for b in cuda wgpu; do
  timeout 60 $K parity --backend $b --kernel $P > /dev/null 2>/tmp/kc/parity-$b.err
  echo "== parity $b rc $? $(tail -n 1 /tmp/kc/parity-$b.err)" >> $L
done
date -u >> $L
