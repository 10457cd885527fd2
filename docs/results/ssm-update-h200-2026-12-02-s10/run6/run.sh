#!/bin/bash
# Session 10 run 6: the build's embedded artifacts (ssm_update with the ln_1p_unit softplus, the
# new mixer kernels): parity on cuda (every kernel) and through Vulkan (the mixer kernels and
# ssm_update), and the ssm_update bench on cuda.
cd "$(dirname "$0")"
O=${OUT:-out}; mkdir -p $O
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
gunzip -kf kiln.gz; chmod +x kiln
{ date -u; echo "rev $(cat rev.txt)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; } > $O/gpu.txt 2>&1
K=causal_conv1d_update,gated_rms_norm,ssm_update
timeout 200 ./kiln parity --backend cuda --json > $O/parity-cuda.json 2>&1
timeout 150 ./kiln parity --backend wgpu --kernel $K --json > $O/parity-wgpu.json 2>&1
timeout 80 ./kiln bench --backend cuda --kernel ssm_update --csv $O/bench-cuda.csv > $O/bench-cuda.txt 2>&1
for f in $O/parity-cuda.json $O/parity-wgpu.json; do echo $f; tail -n 1 $f; grep -c '"pass": false' $f; done
grep "B8" $O/bench-cuda.txt | awk '{print $2, $3, $4, $(NF-2)" us", $NF}'; head -1 $O/bench-cuda.txt
