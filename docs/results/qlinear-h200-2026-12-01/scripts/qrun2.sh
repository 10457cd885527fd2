#!/bin/bash
cd "$(dirname "$0")"
O=${OUT:-out}; mkdir -p $O
gunzip -kf kiln.gz; chmod +x kiln
for n in 4 8; do python3 mkbounds.py q4-m1.ptx q4-m1mn$n.ptx $n; python3 mkbounds.py q4-m2.ptx q4-m2mn$n.ptx $n; done
for v in m1 m2 m1mn4 m1mn8 m2mn4 m2mn8; do echo "== $v"; ptxas -arch=sm_90 -v q4-$v.ptx -o /dev/null 2>&1 | grep -E "Compiling entry|Used|spill|rror"; done > $O/ptxas2.txt 2>&1
{
for v in m1 m1mn4 m1mn8 m2 m2mn4 m2mn8; do
  echo "=== variant $v: KILN_CUDA_PTX=q4-$v.ptx, qlinear_4bit bf16 g64 B1"
  KILN_CUDA_PTX=q4-$v.ptx ./kiln bench --backend cuda --kernel qlinear_4bit --dtype bf16 --shape "g64 1x4096->4096,g64 1x4096->28672,g64 1x4096->128256,g64 1x14336" 2>&1 | grep -v "^$" | grep -v "^ *[0-9]*:" 
done
} > $O/bench2.txt 2>&1
