#!/bin/bash
# Session 12 run 2: mamba1_selective_scan (lane-group body) and gated_delta_step parity (cuda,
# Vulkan) and bench (cuda, Vulkan); ssm_update B8 bench for the record.
cd "$(dirname "$0")"
O=${OUT:-out}; mkdir -p $O
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
gunzip -kf kiln.gz; chmod +x kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; } > $O/gpu.txt 2>&1
{
for k in mamba1_selective_scan gated_delta_step; do
timeout 90 ./kiln parity --backend cuda --kernel $k
timeout 150 ./kiln parity --backend wgpu --kernel $k
done
} > $O/parity.txt 2>&1
{
for k in mamba1_selective_scan gated_delta_step; do
timeout 90 ./kiln bench --backend cuda --kernel $k
timeout 120 ./kiln bench --backend wgpu --kernel $k
done
timeout 60 ./kiln bench --backend cuda --kernel ssm_update --shape B8
} > $O/bench.txt 2>&1
grep passed $O/parity.txt; grep -i fail $O/parity.txt | head; cat $O/bench.txt
