#!/bin/bash
# Session 11 run 1: bitlinear parity (cuda, Vulkan) and bench; ssm_update variants (u32 indices, 4 or 2 rows per
# wave at once, first state loads before the head prologue) through KILN_CUDA_PTX: parity, bench, ncu.
cd "$(dirname "$0")"
O=${OUT:-out}; mkdir -p $O
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
gunzip -kf kiln.gz; chmod +x kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; } > $O/gpu.txt 2>&1
{
timeout 60 ./kiln parity --backend cuda --kernel bitlinear | tail -2
timeout 90 ./kiln parity --backend wgpu --kernel bitlinear | tail -2
for v in g4m2 g4m3 g2m3 g2m4; do echo "== parity $v"; KILN_CUDA_PTX=ssm-$v.ptx timeout 60 ./kiln parity --backend cuda --kernel ssm_update | tail -1; done
} > $O/parity.txt 2>&1
{
timeout 60 ./kiln bench --backend cuda --kernel bitlinear
echo "== ssm embedded"; timeout 60 ./kiln bench --backend cuda --kernel ssm_update --shape B8
for v in g4m2 g4m3 g2m3 g2m4; do echo "== ssm $v"; KILN_CUDA_PTX=ssm-$v.ptx timeout 60 ./kiln bench --backend cuda --kernel ssm_update --shape B8; done
} > $O/bench.txt 2>&1
NCU=$(which ncu || ls /usr/local/cuda*/bin/ncu | head -1)
S="--section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis --section SchedulerStats --section InstructionStats"
for v in g4m2 g2m3; do KILN_CUDA_PTX=ssm-$v.ptx timeout 80 $NCU $S -k regex:ssm -s 1 -c 1 ./kiln bench --backend cuda --kernel ssm_update --dtype f32 --runs 2 --shape "nemotron-h B8" > $O/ncu-$v.txt 2>&1; done
