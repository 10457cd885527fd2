#!/bin/bash
# usage: variant.sh <base qlinear.rs> <name> ['old=>>new' ...]
# Writes the base with each edit applied over shared-kernel-math/src/kernels/qlinear.rs, builds
# qlinear_4bit's sm_90 PTX as `cargo xtask kernels` does (ptxone.sh beside this script), puts
# the committed file back, and prints ptxas registers and spills with and without the launch
# bound. Output: $OUTDIR/<name>.ptx (default /tmp).
set -e
BASE=$(realpath "$1"); N=$2; shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel); OUTDIR=${OUTDIR:-/tmp}
SRC=$ROOT/shared-kernel-math/src/kernels/qlinear.rs
cp "$SRC" "$OUTDIR/qlinear.committed.rs"
trap 'cp "$OUTDIR/qlinear.committed.rs" "$SRC"' EXIT
python3 - "$BASE" "$SRC" "$@" <<'PY'
import sys
s=open(sys.argv[1]).read()
for e in sys.argv[3:]:
    a,b=e.split('=>>')
    assert a in s, a
    s=s.replace(a,b)
open(sys.argv[2],'w').write(s)
PY
ROOT=$ROOT LLC_FLAGS="${LLC_FLAGS:-}" bash "$HERE/ptxone.sh" qlinear_4bit "$OUTDIR/$N.ptx" 128 4 > /dev/null
echo "$N: local $(grep -c 'ld.local\|st.local' "$OUTDIR/$N.ptx")"
ptxas -arch=sm_90 -v "$OUTDIR/$N.ptx" -o /dev/null 2>&1 | grep -E "Used|spill" | paste - - | sed 's/ptxas info    ://'
sed '/^.maxntid/d;/^.minnctapersm/d' "$OUTDIR/$N.ptx" > "$OUTDIR/${N}_nb.ptx"
ptxas -arch=sm_90 -v "$OUTDIR/${N}_nb.ptx" -o /dev/null 2>&1 | grep -E "Used" | head -1 | sed 's/ptxas info    :/  uncapped:/'
