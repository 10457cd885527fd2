#!/bin/bash
# Device call 5 (2026-12-05, session 21): how many launches wgpu should hold before it submits,
# measured through Vulkan in one call: 8fb64a2 (a submission per launch) and rev.txt's kiln at
# KILN_WGPU_HELD 1, 8, 32 and 4096 (the whole step), Llama-3.1-8B's first 8 layers, pp64/tg32.
cd "$(dirname "$0")"
O=$OUT; L=$O/log.txt
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/kc; for b in kiln kiln-8fb64a2; do xz -dc $b.xz > /tmp/kc/$b; chmod +x /tmp/kc/$b; done
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $L 2>&1
C=$(cut -c1-12 rev.txt)
run() { echo "== $1 held ${2:-n/a}" >> $L; KILN_WGPU_HELD=$2 KILN_COMMIT=$C timeout 60 /tmp/kc/$1 bench --decode --backend wgpu --model llama-3.1-8b --layers 8 --prompt-tokens 64 --decode-tokens 32 > /tmp/kc/out.txt 2>&1; echo "rc $?" >> $L; grep -E "^# (eager|device)" /tmp/kc/out.txt >> $L; cat /tmp/kc/out.txt >> $O/decode-vulkan-held.txt; }
run kiln-8fb64a2
for h in 1 8 32 4096; do run kiln $h; done
run kiln-8fb64a2
date -u >> $L
