#!/usr/bin/env bash
# Session 23 call 5 (final): before (cb1584f) against after (TILE_CAP 512,
# the cone flag read once), 5 runs each alternating, the gather frames and
# a traced frame (scripts/photon-frame-ab.sh); then the GPU tests of after.
set -uo pipefail
d=target/photon-est
out="${OUT:-/tmp}"
export CAUSTIC_KERNEL_CACHE=/tmp/pe-kernels
OUT="$out" bash scripts/photon-frame-ab.sh $d/before $d/after "" 5 2>&1 | tee "$out/ab.log"
for t in $d/tests/*; do
  echo "== test $(basename $t)"
  timeout 200 $t --include-ignored --test-threads 1 2>&1 | grep -E "^test |^test result|panicked|skipped" | tail -n 30
done 2>&1 | tee "$out/tests.log"
