#!/bin/bash
# Session 14 run 4: kiln bench's per-launch floor — its smallest shapes beside ssm_update B1.
cd "$(dirname "$0")"
O=${OUT:-out}; mkdir -p $O
gunzip -kf kiln.gz; chmod +x kiln
timeout 200 ./kiln bench --backend cuda --dtype f32 --kernel fused_silu_mul,embedding,gumbel_max_merge,speculative_accept,ssm_update > $O/bench.txt 2>&1
head -n 2 $O/bench.txt
sort -t' ' -k1,1 $O/bench.txt | awk 'NR>0 {print $1, $(NF-4), $(NF-3), $(NF-2), $NF}' | sort -k4 -n | head -40
