#!/bin/bash
# Final run of the session: parity on cuda (every kernel) and wgpu (matrix + embedding kernels),
# the bench beside torch's peer, and launch-bound variants of qlinear_4bit at batch 1 and 8.
cd "$(dirname "$0")"
O=${OUT:-out}; mkdir -p $O
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
gunzip -kf kiln.gz; chmod +x kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; } > $O/gpu.txt 2>&1
Q=qlinear_2bit,qlinear_3bit,qlinear_4bit,qlinear_5bit,qlinear_6bit,qlinear_8bit
timeout 150 ./kiln parity --backend cuda --json > $O/parity-cuda.json 2>&1
timeout 150 ./kiln parity --backend wgpu --kernel $Q,linear,embedding,embedding_affine --json > $O/parity-wgpu.json 2>&1
L="g64 1x4096->4096,g64 1x4096->6144,g64 1x4096->28672,g64 1x14336->4096,g64 1x4096->128256,g64 8x4096->4096,g64 8x4096->6144,g64 8x4096->28672,g64 8x14336->4096,g64 8x4096->128256"
timeout 120 ./kiln bench --backend cuda --kernel qlinear_4bit,linear,embedding,embedding_affine --dtype bf16 --shape 1x4096,1x14336,8x4096,8x14336," of " --csv $O/bench.csv > $O/bench.txt 2>&1
P=../engine/artifacts/cuda/sm_90/qlinear_4bit.ptx
sed 's/^.minnctapersm 4$/.minnctapersm 3/' $P > q4-mn3.ptx
grep -v '^.maxntid\|^.minnctapersm' $P > q4-none.ptx
for v in mn3 none; do echo "=== variant $v"; KILN_CUDA_PTX=q4-$v.ptx timeout 100 ./kiln bench --backend cuda --kernel qlinear_4bit --dtype bf16 --shape "$L" 2>&1 | grep qlinear; done > $O/variants.txt 2>&1
python3 peers/torch_peers.py --only qgemv --json $O/peers.json > $O/peers.txt 2>&1 </dev/null
tail -2 $O/parity-cuda.json $O/parity-wgpu.json
