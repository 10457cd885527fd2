#!/bin/bash
# Device call 1b (2026-12-06, session 24), on the machine call1.sh left warm: the outputs of
# call 1 that the tool did not return (it returns 8 files), rerun: the WGSL prelude tests
# through Vulkan, the decode rows (new, and old qlinear_4bit through KILN_CUDA_PTX) and the
# torch peers. Run from devcarry/ beside call1.sh's binaries; everything lands in rest.tgz.
cd "$(dirname "$0")"; O=/tmp/o2; mkdir -p $O /tmp/kc
for f in ../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
for b in kiln wgsl_libm; do xz -dc $b.xz > /tmp/kc/$b; chmod +x /tmp/kc/$b; done
K=/tmp/kc/kiln; C=$(head -1 rev.txt | cut -c1-12)
KILN_REQUIRE_BACKENDS=wgpu timeout 60 /tmp/kc/wgsl_libm --nocapture --test-threads 1 > $O/tests-libm.txt 2>&1
echo "libm rc $?" > $O/log.txt
for arm in new old; do
  if [ $arm = old ]; then export KILN_CUDA_PTX=old/qlinear_4bit.ptx; else unset KILN_CUDA_PTX; fi
  KILN_COMMIT=$C timeout 100 $K bench --decode --backend cuda --model llama-3.1-8b --batches 1 --csv $O/decode-$arm.csv >> $O/decode.txt 2>&1
  echo "decode $arm rc $?" >> $O/log.txt
done
unset KILN_CUDA_PTX
timeout 150 python3 peers/torch_peers.py --only sample,norm,qgemv > $O/peers.txt 2>&1
echo "peers rc $?" >> $O/log.txt
nvidia-smi --query-gpu=name,driver_version --format=csv >> $O/log.txt; date -u >> $O/log.txt
tar czf $OUT/rest.tgz -C $O .
