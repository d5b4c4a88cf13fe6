#!/usr/bin/env bash
# Session 25 call 7: the other GPU tests whose kernels share the changed
# device code (shade_direct, the Path record): sppm_gpu and the facade's
# facade_gpu, 83833d0's binaries.
set -uo pipefail
d=target/photon-s25
out="${OUT:-/tmp}"
export CAUSTIC_KERNEL_CACHE=/tmp/s25-kernels
for t in facade_gpu:100 sppm_gpu:170; do
  echo "== test ${t%%:*}"
  timeout ${t##*:} $d/tests2/${t%%:*} --include-ignored --test-threads 1 2>&1 | grep -E "^test |^test result|panicked|skipped" | tail -n 40
done > "$out/tests.log" 2>&1
cat "$out/tests.log"
