#!/bin/bash
# Device call 1 (2026-12-05, session 21): main's kiln (rev.txt). #21: kiln bench --decode through
# cuda at the four model families, batches 1/4/8 (hybrids 1/8), pp512/tg128. Stashes for call 2
# the first part of the xz'd SmolLM2 GGUF (one call's carry is smaller than the file) and the
# Vulkan loader.
cd "$(dirname "$0")"
O=$OUT; L=$O/log.txt
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/kc && cp mA /tmp/kc/ && xz -dc kiln.xz > /tmp/kc/kiln && chmod +x /tmp/kc/kiln && cp rev.txt /tmp/kc/
K=/tmp/kc/kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm,memory.total --format=csv; } > $L 2>&1
C=$(cut -c1-12 rev.txt)
$K devices >> $L 2>&1
for run in "llama-3.1-8b 1,4,8 170" "qwen3-30b-a3b 1,4,8 200" "granite-4.0-h-tiny,nemotron-3-nano-30b-a3b 1,8 150"; do
  set -- $run
  echo "== decode cuda $1 batches $2" >> $L
  KILN_COMMIT=$C timeout $3 $K bench --decode --backend cuda --model $1 --batches $2 --csv $O/decode-cuda-${1%%,*}.csv >> $L 2>&1
  echo "rc $?" >> $L
done
date -u >> $L
