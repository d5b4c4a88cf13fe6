#!/usr/bin/env bash
# Session 24 call 3 (final): before (main 5eaf4dc) against after (branch
# photon-s24: one range comparison and the bins' bits in both passes, pass
# 2 without branches, the k-th bin's selection with its minimum in
# registers, 4 blocks an SM in launch bounds), 5 runs each alternating,
# the gather frames and a traced frame (scripts/photon-frame-ab.sh); then
# the GPU tests of after.
set -uo pipefail
d=target/photon-s24
out="${OUT:-/tmp}"
export CAUSTIC_KERNEL_CACHE=/tmp/s24-kernels
OUT="$out" bash scripts/photon-frame-ab.sh $d/before $d/after "" 5 2>&1 | tee "$out/ab.log"
for t in $d/tests/*; do
  echo "== test $(basename $t)"
  timeout 200 $t --include-ignored --test-threads 1 2>&1 | grep -E "^test |^test result|panicked|skipped" | tail -n 30
done 2>&1 | tee "$out/tests.log"
