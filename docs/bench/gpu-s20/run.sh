#!/usr/bin/env bash
# Session 20 on the GPU machine: (1) GPU traversal of spatial-split trees
# uploaded from the CPU, beside the GPU-built bvh-binned, every 16th ray
# checked against the CPU traversal; (2) the GPU tests of the merged main.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp}"
mkdir -p /tmp/sc && for a in "$here"/*-*.tar.xz "$here"/sibenik.tar.xz; do tar -xJf "$a" -C /tmp/sc; done
tar -xJf "$here/t.tar.xz" -C /tmp
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export CAUSTIC_SCENES=/tmp/sc CAUSTIC_KERNEL_CACHE=/tmp/kc
(cd /tmp/sc && timeout 200 "$here/caustic" bench gpu --camera standard --log2-n 0 --check-every 16 \
  --scene sponza-dabrovic/sponza.obj sibenik/sibenik.obj conference-69k/conference.obj \
  --accel bvh-binned,cpu:bvh-binned,cpu:bvh-spatial,bvh-wide,bvh-wide:from=cpu:bvh-spatial \
  --json "$out/gpu-s20.json" > "$out/bench.log" 2>&1; echo "bench exit $?" >> "$out/bench.log")
tail -30 "$out/bench.log"
for t in caustic_gpu gpu_ops photon_gpu photon_knn whitted_gpu whitted_wavefront sppm_gpu facade_gpu; do
  start=$(date +%s)
  timeout 150 /tmp/t/$t --include-ignored --test-threads 1 > "/tmp/$t.log" 2>&1
  rc=$?
  echo "== $t rc=$rc $(( $(date +%s) - start )) s: $(grep -E '^test result' /tmp/$t.log | tail -1)"
  grep -E "FAILED|panicked|skipp" "/tmp/$t.log" | head -5
done 2>&1 | tee "$out/tests.log"
