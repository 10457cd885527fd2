#!/bin/bash
# One device call: ptxas of the qlinear_4bit PTX variants, the bench with each, torch's peers.
cd "$(dirname "$0")"
O=${OUT:-out}; mkdir -p $O
gunzip -kf kiln.gz; chmod +x kiln
nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
for n in 4 8; do python3 mkbounds.py q4-new.ptx q4-mn$n.ptx $n; python3 mkbounds.py q4-m2.ptx q4-m2mn$n.ptx $n; done
for v in old new m1 m2 mn4 mn8 m2mn4 m2mn8; do echo "== $v"; ptxas -arch=sm_90 -v q4-$v.ptx -o /dev/null 2>&1 | grep -E "Compiling entry|Used|spill" | grep -v "^$"; done > $O/ptxas.txt 2>&1
S="1x4096,1x14336,1x2048"
{
date -u; git_rev=$(cat rev.txt); echo "rev $git_rev"
echo "=== embedded (new) qlinear_4bit + linear, bf16, B1 and B8"
./kiln bench --backend cuda --kernel qlinear_4bit,linear --dtype bf16 --shape $S,8x4096,8x14336 --csv $O/bench-new.csv
python3 peers/torch_peers.py --only qgemv --json $O/peers.json > $O/peers.txt 2>&1 </dev/null
for v in old m1 m2 mn4 mn8 m2mn4 m2mn8; do
  echo "=== variant $v: KILN_CUDA_PTX=q4-$v.ptx, qlinear_4bit bf16 g64 B1"
  KILN_CUDA_PTX=q4-$v.ptx ./kiln bench --backend cuda --kernel qlinear_4bit --dtype bf16 --shape "g64 1x" 2>&1 | grep -v "^$"
done
} > $O/bench.txt 2>&1
echo done
