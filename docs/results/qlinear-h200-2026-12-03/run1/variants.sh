#!/bin/bash
# The PTX variants of run 1, from run 1's source (qlinear-run1.rs.txt: the committed body with
# 16-row blocks and one row per wave at M > 4). Run from this folder on a machine with nightly
# Rust and ptxas; q4-mn3.ptx is run 1's embedded qlinear_4bit.ptx with `.minnctapersm 3`.
set -e
V=../variant.sh; B=qlinear-run1.rs.txt; export OUTDIR=${OUTDIR:-/tmp}
bash $V $B q4-run1
bash $V $B q4-cancel \
  '                let centred = code_float(w[r], first + j) - 1.5;
                dot[r][m] = crate::mul_add(centred, xf[j], dot[r][m]);=>>                dot[r][m] = crate::mul_add(code_float(w[r], first + j), xf[j], dot[r][m]);' \
  '        let mid = crate::mul_add(sc, 0.5, of);=>>        let mid = of - sc;'
bash $V $B q4-m1r4 '            [[0.0f32; 1]; 2],=>>            [[0.0f32; 1]; 4],'
sed 's/^.minnctapersm 4$/.minnctapersm 3/' $OUTDIR/q4-run1.ptx > $OUTDIR/q4-mn3.ptx
