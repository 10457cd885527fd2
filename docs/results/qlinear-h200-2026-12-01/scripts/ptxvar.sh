#!/bin/bash
# ptxvar.sh TREE OUT.ptx KERNEL : builds one kernel's sm_90 PTX from TREE (shaders-cuda + shared-kernel-math), as xtask does.
set -euo pipefail
TREE=$1; OUT=$2; K=$3
T=$(rustc +nightly --print sysroot)/lib/rustlib/x86_64-unknown-linux-gnu/bin
W=$(mktemp -d)
cd $TREE/shaders-cuda
env -u RUSTFLAGS -u CARGO_TARGET_DIR CARGO_ENCODED_RUSTFLAGS=-Ctarget-cpu=sm_90 cargo +nightly build --release --locked --message-format json-render-diagnostics --target-dir /work/target-var/kiln-cuda-sm_90 > $W/msgs.json
python3 - $W <<'PY'
import json,sys
w=sys.argv[1]
r=[]
for l in open(w+'/msgs.json'):
    try: m=json.loads(l)
    except: continue
    if m.get('reason')=='compiler-artifact':
        r+= [f for f in m['filenames'] if f.endswith('.rlib')]
open(w+'/rlibs','w').write('\n'.join(sorted(r, key=lambda p:p.split('/')[-1]))+'\n')
PY
grep -q libm $W/rlibs || ls /work/target-var/kiln-cuda-sm_90/nvptx64-nvidia-cuda/release/deps/liblibm-*.rlib >> $W/rlibs; echo >> $W/rlibs
n=0; BC=()
while read r; do [ -z "$r" ] && continue; mkdir -p $W/ar$n; (cd $W/ar$n && $T/llvm-ar x $r); for f in $(ls $W/ar$n | sort); do if head -c4 $W/ar$n/$f | grep -q "BC"; then BC+=($W/ar$n/$f); fi; done; n=$((n+1)); done < $W/rlibs
echo "bitcode: ${BC[@]}" >&2
$T/llvm-link "${BC[@]}" -o $W/linked.bc
$T/opt $W/linked.bc -o $W/int.bc -passes=internalize,globaldce -internalize-public-api-list=${K}_f32,${K}_f16,${K}_bf16
$T/opt $W/int.bc -o $W/opt.bc -passes='default<O3>,strip' -unroll-threshold=4000
$T/llc $W/opt.bc -o $OUT -march=nvptx64 -O3 -mcpu=sm_90
grep -c ".visible .entry" $OUT
rm -rf $W
