#!/usr/bin/env bash
# usage: ptxone.sh <kernel> <out.ptx> [maxntid minblocks]  -- sm_90 PTX of one kernel, fast path
set -euo pipefail
K=$1; OUT=$2; NT=${3:-}; MB=${4:-}
ROOT=${ROOT:-/work/main}
TOOLS=$(rustc +nightly --print sysroot)/lib/rustlib/x86_64-unknown-linux-gnu/bin
W=$(mktemp -d)
cd $ROOT/shaders-cuda
env -u RUSTFLAGS -u CARGO_TARGET_DIR CARGO_ENCODED_RUSTFLAGS=-Ctarget-cpu=sm_90 cargo +nightly build --release --locked --message-format json-render-diagnostics --target-dir $ROOT/target/kiln-cuda-sm_90 > $W/msgs.json
python3 - "$W" <<'PY' > $W/rlibs
import json,sys
out=[]
for l in open(sys.argv[1]+"/msgs.json"):
    try: m=json.loads(l)
    except: continue
    if m.get("reason")!="compiler-artifact": continue
    out += [f for f in m["filenames"] if f.endswith(".rlib")]
import os
out.sort(key=os.path.basename)
print("\n".join(out))
PY
n=0; BCS=()
while read r; do mkdir -p $W/ar$n; (cd $W/ar$n && $TOOLS/llvm-ar x $r); for f in $(ls $W/ar$n | sort); do if head -c2 $W/ar$n/$f | grep -q BC; then BCS+=($W/ar$n/$f); fi; done; n=$((n+1)); done < $W/rlibs
$TOOLS/llvm-link "${BCS[@]}" -o $W/linked.bc
SYMS=$(grep -o "\.visible \.entry ${K}_[a-z0-9]*" $ROOT/engine/artifacts/cuda/sm_90/$K.ptx | awk '{print $3}' | paste -sd,)
$TOOLS/opt $W/linked.bc -o $W/i.bc -passes=internalize,globaldce -internalize-public-api-list=$SYMS
$TOOLS/opt $W/i.bc -o $W/o.bc '-passes=default<O3>,strip' -unroll-threshold=4000
$TOOLS/llc $W/o.bc -o $W/k.ptx -march=nvptx64 -O3 -mcpu=sm_90 ${LLC_FLAGS:-}
if [ -n "$NT" ]; then
  python3 - $W/k.ptx $NT $MB <<'PY'
import sys,re
p,nt,mb=sys.argv[1],sys.argv[2],sys.argv[3]
s=open(p).read()
s=re.sub(r"(\.visible \.entry [^\n]*\((?:.|\n)*?\n\)[^\n]*\n)", lambda m: m.group(1)+f".maxntid {nt}, 1, 1\n.minnctapersm {mb}\n", s)
open(p,"w").write(s)
PY
fi
cp $W/k.ptx $OUT
echo "$OUT: $(wc -l < $OUT) lines, syms $SYMS"
