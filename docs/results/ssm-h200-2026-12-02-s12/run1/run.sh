#!/bin/bash
# Session 12 run 1: mamba1_selective_scan parity (cuda, Vulkan) and bench (cuda, Vulkan).
cd "$(dirname "$0")"
O=${OUT:-out}; mkdir -p $O
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
gunzip -kf kiln.gz; chmod +x kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; } > $O/gpu.txt 2>&1
{
timeout 90 ./kiln parity --backend cuda --kernel mamba1_selective_scan
timeout 150 ./kiln parity --backend wgpu --kernel mamba1_selective_scan
} > $O/parity.txt 2>&1
{
timeout 90 ./kiln bench --backend cuda --kernel mamba1_selective_scan
timeout 120 ./kiln bench --backend wgpu --kernel mamba1_selective_scan
} > $O/bench.txt 2>&1
tail -3 $O/parity.txt; grep -c pass $O/parity.txt; cat $O/bench.txt | head -40
