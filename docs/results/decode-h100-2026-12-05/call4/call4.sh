#!/bin/bash
# Device call 4 (2026-12-05, session 21): kiln of rev.txt (each position recorded over its own
# attention plan). #21: decode through cuda where call 3 faulted (Llama-3.1-8B, Nemotron-3-Nano),
# Qwen3-30B-A3B batch 1; Vulkan A/B in one call: 8fb64a2 (a submission per launch) against
# rev.txt (a step per submission), Llama-3.1-8B's first 8 layers, pp64/tg32.
cd "$(dirname "$0")"
O=$OUT; L=$O/log.txt
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/kc; for b in kiln kiln-8fb64a2; do xz -dc $b.xz > /tmp/kc/$b; chmod +x /tmp/kc/$b; done
K=/tmp/kc/kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm,memory.total --format=csv; } > $L 2>&1
C=$(cut -c1-12 rev.txt)
for run in "llama-3.1-8b 1,8 120" "nemotron-3-nano-30b-a3b 1,8 150" "qwen3-30b-a3b 1 80"; do
  set -- $run
  echo "== decode cuda $1 batches $2" >> $L
  KILN_COMMIT=$C timeout $3 $K bench --decode --backend cuda --model $1 --batches $2 --csv $O/decode-cuda.csv >> $O/decode-cuda.txt 2>&1
  echo "rc $?" >> $L
done
for k in kiln-8fb64a2 kiln; do
  echo "== vulkan A/B $k" >> $L
  KILN_COMMIT=$C timeout 70 /tmp/kc/$k bench --decode --backend wgpu --model llama-3.1-8b --layers 8 --prompt-tokens 64 --decode-tokens 32 >> $O/decode-vulkan-ab.txt 2>&1
  echo "rc $?" >> $L
done
date -u >> $L
