#!/bin/bash
# Planned in session 32 (no device time was left to it): issue #17's ssm_update A/B in one call.
# base/kiln.xz is the release `kiln` of 2a3e56a (the two-row body, 256-thread blocks);
# new/kiln.xz the release `kiln` of the straight-line group body (128-thread blocks, 8 rows a
# wave, launch bound 6). Both bench the same rows (their own launch geometry each), then the
# new build's parity through CUDA and Vulkan. .gl/ holds the Vulkan loader debs.
cd "$(dirname "$0")"
W=/tmp/ssm; mkdir -p $W; L=$W/log.txt
trap 'tar czf $OUT/ssm.tgz -C $W .; cat $L' EXIT
for f in ../../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
for v in base new; do mkdir -p /tmp/$v; xz -dc $v/kiln.xz > /tmp/$v/kiln; chmod +x /tmp/$v/kiln; done
{ date -u; cat base/rev.txt new/rev.txt; nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv; } > $L 2>&1
step() { echo "== $1 $(date -u +%T)" >> $L; tar czf $OUT/ssm.tgz -C $W .; }
for round in 1 2; do
for v in base new; do
step "bench ssm_update $v (round $round)"
timeout 90 /tmp/$v/kiln bench --backend cuda --kernel ssm_update --dtype f32,bf16 > $W/bench-$v-$round.txt 2>&1
echo "rc $?" >> $L
done
done
step "parity cuda ssm_update (new)"
timeout 60 /tmp/new/kiln parity --backend cuda --kernel ssm_update,causal_conv1d_update,gated_rms_norm > $W/parity-cuda.txt 2>&1
echo "rc $? $(tail -n 1 $W/parity-cuda.txt)" >> $L
step "parity wgpu ssm_update (new)"
timeout 60 /tmp/new/kiln parity --backend wgpu --kernel ssm_update > $W/parity-wgpu.txt 2>&1
echo "rc $? $(tail -n 1 $W/parity-wgpu.txt)" >> $L
step "ncu nemotron-h B8 (new)"
timeout 60 ncu --clock-control none --kernel-name regex:ssm_update --launch-skip 20 --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats /tmp/new/kiln bench --backend cuda --kernel ssm_update --dtype f32 > $W/ncu-new.txt 2>&1
echo "rc $?" >> $L
date -u >> $L
