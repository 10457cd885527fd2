#!/bin/bash
# The static figures of paged-decode-mma-2026-12-06-s30.md from the committed sm_90 PTX, on a
# machine without a GPU: registers per entry (ptxas) and the instruction mix of the f16 v2
# entry's tensor-core tile loop (the loop that holds the HMMAs: from its back-branch target to
# the back-branch).
#   pip download --no-deps nvidia-cuda-nvcc-cu12 nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm
#   (unzip each wheel into $T; ptxas in nvidia/cuda_nvcc/bin, cuobjdump/nvdisasm in nvidia/cu13/bin)
# Usage: T=<unzipped wheels> bash sass.sh [repo root]
set -euo pipefail
R=${1:-.}; P=$T/nvidia/cuda_nvcc/bin/ptxas; export PATH=$T/nvidia/cu13/bin:$PATH
W=$(mktemp -d)
for k in paged_attention_decode paged_attention_decode_v2_partial paged_attention_merge_states; do
  $P -arch=sm_90 -v $R/engine/artifacts/cuda/sm_90/$k.ptx -o $W/$k.cubin 2>&1 |
    grep -E "Compiling entry|Used" | paste - - |
    sed -E "s/.*entry function '([a-z0-9_]+)'.*Used ([0-9]+) registers.*/\1 \2 registers/"
  $P -arch=sm_90 -v $R/engine/artifacts/cuda/sm_90/$k.ptx -o $W/$k.cubin 2>&1 | grep -c "[1-9][0-9]* bytes spill" || true
done
cuobjdump -sass -fun paged_attention_decode_v2_partial_f16 $W/paged_attention_decode_v2_partial.cubin |
  sed 's@/\* 0x[0-9a-f]* \*/@@' | awk '{$1=$1};1' > $W/f16.s
python3 - $W/f16.s <<'PY'
import re, sys, collections
lines = [l for l in open(sys.argv[1]) if re.match(r'/\*[0-9a-f]+\*/', l)]
addr = lambda l: int(l[2:l.index('*/')], 16)
last_mma = max(i for i, l in enumerate(lines) if 'HMMA' in l)
# The first backward branch after the last HMMA closes the tile loop.
for l in lines[last_mma:]:
    m = re.search(r'BRA (0x[0-9a-f]+)', l)
    if m and int(m.group(1), 16) < addr(l):
        top, bottom = int(m.group(1), 16), addr(l); break
body = [l for l in lines if top <= addr(l) <= bottom]
ops = collections.Counter(l.split()[2 if l.split()[1].startswith('@') else 1] for l in body)
print(f"tile loop: {len(body)} instructions ({top:#x}..{bottom:#x})")
for op in ['HMMA.16816.F32', 'LDG.E.128', 'LDS.128', 'SHFL.BFLY', 'MUFU.EX2']:
    print(f"  {op}: {ops[op]}")
PY
rm -rf $W
