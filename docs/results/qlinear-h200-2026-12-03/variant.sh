#!/bin/bash
# usage: variant.sh name python-edit-expr   (edits qlinear.rs from qlinear-centred.rs, builds PTX, restores)
set -e
N=$1; shift
cd /work/main
python3 - "$@" <<'PY'
import sys
s=open('/tmp/qv/qlinear-centred.rs').read()
for e in sys.argv[1:]:
    a,b=e.split('=>>')
    assert a in s, a
    s=s.replace(a,b)
open('shared-kernel-math/src/kernels/qlinear.rs','w').write(s)
PY
LLC_FLAGS="${LLC_FLAGS:-}" bash /tmp/qv/ptxone.sh qlinear_4bit /tmp/qv/$N.ptx 128 4 > /dev/null
cp /tmp/qv/qlinear-centred.rs shared-kernel-math/src/kernels/qlinear.rs
echo "$N: local $(grep -c 'ld.local\|st.local' /tmp/qv/$N.ptx)"
ptxas -arch=sm_90 -v /tmp/qv/$N.ptx -o /tmp/qv/$N.cubin 2>&1 | grep -E "Used|spill" | paste - - | sed 's/ptxas info    ://' | awk '{print "  "$0}'
sed '/^.maxntid/d;/^.minnctapersm/d' /tmp/qv/$N.ptx > /tmp/qv/${N}_nb.ptx; ptxas -arch=sm_90 -v /tmp/qv/${N}_nb.ptx -o /dev/null 2>&1 | grep -E "Used" | head -1 | sed 's/ptxas info    :/  uncapped:/'
