#!/bin/bash
# Planned in session 32 (no device time was left to it): programmatic dependent launch A/B in
# one process family, one warm GPU. kiln.xz is the release `kiln` with the sm_90 entries'
# griddepcontrol wait; KILN_CUDA_PDL=1 overlaps the launches, 0 (the default) serializes them. Paged decode
# (partial + merge: the merge's launch overlaps the partial's tail), the small kernels at their
# decode shapes (back-to-back replays), and the decode step of two model families.
cd "$(dirname "$0")"
W=/tmp/pdl; mkdir -p $W; L=$W/log.txt
trap 'tar czf $OUT/pdl.tgz -C $W .; cat $L' EXIT
mkdir -p /tmp/k; xz -dc kiln.xz > /tmp/k/kiln; chmod +x /tmp/k/kiln; K=/tmp/k/kiln
{ date -u; cat rev.txt; nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv; } > $L 2>&1
step() { echo "== $1 $(date -u +%T)" >> $L; tar czf $OUT/pdl.tgz -C $W .; }
step "parity cuda (every kernel, overlapped launches)"
KILN_CUDA_PDL=1 timeout 150 $K parity --backend cuda > $W/parity-cuda.txt 2>&1
echo "rc $? $(tail -n 1 $W/parity-cuda.txt)" >> $L
for round in 1 2; do
for pdl in 1 0; do
step "paged, KILN_CUDA_PDL=$pdl (round $round)"
KILN_CUDA_PDL=$pdl timeout 40 $K bench --backend cuda --paged --arms v2 --no-crossover --contexts 4096,16384,32768 --batches 1,4,8 > $W/paged-pdl$pdl-$round.csv 2>&1
echo "rc $?" >> $L
step "small kernels, KILN_CUDA_PDL=$pdl (round $round)"
KILN_CUDA_PDL=$pdl timeout 60 $K bench --backend cuda --kernel fused_add_rms_norm,fused_rope_qk_append,moe_combine,ssm_update > $W/kernels-pdl$pdl-$round.txt 2>&1
echo "rc $?" >> $L
done
done
for pdl in 1 0; do
step "decode Llama-3.1-8B and Qwen3-30B-A3B, KILN_CUDA_PDL=$pdl"
KILN_CUDA_PDL=$pdl timeout 150 $K bench --decode --backend cuda --model llama-3.1-8b,qwen3-30b-a3b --batches 1 > $W/decode-pdl$pdl.txt 2>&1
echo "rc $?" >> $L
done
date -u >> $L
