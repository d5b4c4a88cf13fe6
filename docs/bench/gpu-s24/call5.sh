#!/usr/bin/env bash
# Session 24 call 5 (final): before (main 5eaf4dc) against final (branch
# photon-s24: b2710057 plus the estimates' eye vertices loaded as 16-byte
# words with __ldcs), 5 runs each alternating, the gather frames and a
# traced frame (scripts/photon-frame-ab.sh); then b2710057 ("after", call
# 3) against final, 3 runs each alternating; then the photon GPU tests of
# final (gpu_points and accel's nvrtc_compile ran in call 3: points.cuh
# has not changed since).
set -uo pipefail
d=target/photon-s24
out="${OUT:-/tmp}"
export CAUSTIC_KERNEL_CACHE=/tmp/s24-kernels
OUT="$out" bash scripts/photon-frame-ab.sh $d/before $d/final "" 5 2>&1 | tee "$out/ab.log"
args=(1000000 1920x1080 --no-cpu)
short() { grep -E "^PHOTON-GPU-DISPLAY" | sed -e 's/.*median \([0-9.]*\) ms.*estimates \([0-9.]*\) ms.*/display \1 est \2/'; }
for rep in 1 2 3; do
  for b in after final; do echo -n "$b: "; timeout 120 $d/$b/photon_gpu_bench "${args[@]}" 2>&1 | short; done
done 2>&1 | tee "$out/ab2.log"
for t in $d/tests/*; do
  echo "== test $(basename $t)"
  timeout 200 $t --include-ignored --test-threads 1 2>&1 | grep -E "^test |^test result|panicked|skipped" | tail -n 30
done 2>&1 | tee "$out/tests.log"
