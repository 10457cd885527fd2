#!/bin/bash
# ptxvar.sh REPO OUT.ptx KERNEL [MINBLOCKS] [MAXNTID] : one kernel's sm_90 PTX from REPO's sources, plus ptxas report
set -e
REPO=$1; OUT=$2; K=$3; MINB=${4:-}; MAXN=${5:-256}
T=/tmp/ptxvar-target; W=$(mktemp -d)
TOOLS=$(rustc +nightly --print sysroot)/lib/rustlib/x86_64-unknown-linux-gnu/bin
cd $REPO/shaders-cuda
env -u RUSTFLAGS -u CARGO_TARGET_DIR CARGO_ENCODED_RUSTFLAGS=-Ctarget-cpu=sm_90 cargo +nightly build -q --release --locked --target-dir $T --message-format json-render-diagnostics > $W/msgs.json
python3 - "$W" <<'PY' > $W/rlibs
import json,sys
for l in open(sys.argv[1]+"/msgs.json"):
    try: m=json.loads(l)
    except: continue
    if m.get("reason")=="compiler-artifact":
        for f in m["filenames"]:
            if f.endswith(".rlib"): print(f)
PY
n=0; : > $W/bcs
for r in $(sort -t/ -k99 $W/rlibs); do mkdir -p $W/ar$n; (cd $W/ar$n && $TOOLS/llvm-ar x $r); for f in $W/ar$n/*; do if head -c4 $f | grep -q "BC" ; then echo $f >> $W/bcs; fi; done; n=$((n+1)); done
$TOOLS/llvm-link $(cat $W/bcs) -o $W/linked.bc
$TOOLS/opt $W/linked.bc -o $W/int.bc -passes=internalize,globaldce -internalize-public-api-list=${K}_f32,${K}_f16,${K}_bf16
$TOOLS/opt $W/int.bc -o $W/opt.bc -passes='default<O3>,strip' -unroll-threshold=4000
$TOOLS/llc $W/opt.bc -o $W/k.ptx -march=nvptx64 -O3 -mcpu=sm_90
if [ -n "$MINB" ]; then
python3 - $W/k.ptx $OUT $MAXN $MINB <<'PY'
import sys,re
src=open(sys.argv[1]).read(); out=[]; i=0
lines=src.split("\n"); res=[]; inent=False
for l in lines:
    res.append(l)
    if l.startswith(".visible .entry"): inent=True
    elif inent and l.startswith(")"):
        res.append(".maxntid %s, 1, 1"%sys.argv[3]); res.append(".minnctapersm %s"%sys.argv[4]); inent=False
open(sys.argv[2],"w").write("\n".join(res))
PY
else cp $W/k.ptx $OUT; fi
/tmp/nvcc/x/nvidia/cuda_nvcc/bin/ptxas -arch=sm_90 -v $OUT -o /dev/null 2>&1 | grep -E "Compiling|registers|spill|stack" | sed 's/ptxas info    ://'
rm -rf $W
