#!/bin/bash
# Device call 3 (session 28): ncu of qlinear_mma_4bit variant a (LM head and 4096->4096) and
# torch's qgemv peer, outputs in one tarball.
cd "$(dirname "$0")"
O=$OUT; W=/tmp/c3; mkdir -p $W; L=$W/log.txt
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
mkdir -p /tmp/kc; [ -x /tmp/kc/kiln ] || { xz -dc kiln.xz > /tmp/kc/kiln; chmod +x /tmp/kc/kiln; }; K=/tmp/kc/kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name --format=csv; } > $L 2>&1
P=s28/a.ptx
KILN_CUDA_PTX=$P timeout 150 ncu -k regex:qlinear_mma_4bit_bf16 --launch-skip 3 --launch-count 1 --set full $K bench --backend cuda --kernel qlinear_mma_4bit --dtype bf16 --shape "g64 1x4096->128256" --runs 5 --eager > $W/ncu-lmhead-a.txt 2>&1
echo "ncu rc $?" >> $L
timeout 90 python3 peers/torch_peers.py --only qgemv > $W/peers.txt 2>&1 </dev/null
echo "peers rc $?" >> $L
date -u >> $L
tar czf $O/out.tgz -C $W .
cat $L
