#!/usr/bin/env bash
# Session 25 call 6: the GPU tests of 83833d0 (77442b2 plus a comment and
# clippy's form of a const assert), then before and 83833d0 ("after")
# with the passes alone (--serial), alternating, two runs each.
set -uo pipefail
d=target/photon-s25
out="${OUT:-/tmp}"
export CAUSTIC_KERNEL_CACHE=/tmp/s25-kernels
for t in $d/tests/*; do
  echo "== test $(basename $t)"
  timeout 240 $t --include-ignored --test-threads 1 2>&1 | grep -E "^test |^test result|panicked|skipped" | tail -n 40
done > "$out/tests.log" 2>&1
for rep in 1 2; do
  for b in before after; do
    echo "== $b --serial"
    timeout 120 $d/$b/photon_gpu_bench 1000000 1920x1080 --no-cpu --serial 2>&1 | grep -E "^PHOTON-GPU-DISPLAY"
  done
done > "$out/serial.log" 2>&1
cat "$out/tests.log" "$out/serial.log"
