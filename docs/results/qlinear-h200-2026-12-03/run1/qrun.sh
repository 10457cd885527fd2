#!/bin/bash
# One device call: parity of the linear kernels on cuda and Vulkan, kiln bench of qlinear_4bit
# beside torch's int4 GEMV peer, then PTX variants of qlinear_4bit at batch 1 (KILN_CUDA_PTX).
cd "$(dirname "$0")"
O=$OUT; L=$O/log.txt
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
gunzip -f kiln.gz; chmod +x kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; } > $L 2>&1
for p in ../engine/artifacts/cuda/sm_90/qlinear_4bit.ptx ../engine/artifacts/cuda/sm_90/qlinear_8bit.ptx q4-*.ptx; do echo "== ptxas $p"; ptxas -arch=sm_90 -v $p -o /dev/null 2>&1 | grep -E "Used|spill" | head -2; done >> $L 2>&1
Q=qlinear_2bit,qlinear_3bit,qlinear_4bit,qlinear_5bit,qlinear_6bit,qlinear_8bit
timeout 150 ./kiln parity --backend cuda --kernel $Q,linear,embedding_affine --json > $O/parity-cuda.json 2>$O/parity-cuda.err
echo "== parity cuda rc $? $(tail -1 $O/parity-cuda.err)" >> $L
timeout 150 ./kiln parity --backend wgpu --kernel $Q,linear --json > $O/parity-wgpu.json 2>$O/parity-wgpu.err
echo "== parity wgpu rc $? $(tail -1 $O/parity-wgpu.err)" >> $L
echo "== bench committed" >> $L
timeout 150 ./kiln bench --backend cuda --kernel qlinear_4bit --dtype bf16 --shape "g64 ,g32 1x" --csv $O/bench.csv >> $L 2>&1
echo "== peers" >> $L
python3 peers/torch_peers.py --only qgemv --json $O/peers.json >> $L 2>&1 </dev/null
B="g64 1x4096->4096,g64 1x4096->6144,g64 1x4096->28672,g64 1x14336->4096,g64 1x4096->128256"
for v in cancel mn3 m1r4 m1only-r2; do echo "== variant $v" >> $L; KILN_CUDA_PTX=q4-$v.ptx timeout 60 ./kiln bench --backend cuda --kernel qlinear_4bit --dtype bf16 --shape "$B" 2>&1 | grep -E "qlinear|copy" >> $L; done
echo "== bench committed again (B1 g64)" >> $L
timeout 60 ./kiln bench --backend cuda --kernel qlinear_4bit --dtype bf16 --shape "$B" 2>&1 | grep -E "qlinear|copy" >> $L
date -u >> $L
