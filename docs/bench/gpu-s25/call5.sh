#!/usr/bin/env bash
# Session 25 call 5 (final): before (main 4def2db) against final (branch
# photon-s25: 77442b2 plus the shadow values read in place, the flags
# cleared in 8/16-byte stores, the vertex keys' 16-byte load), 5 runs
# each alternating, the gather frames and a traced frame
# (scripts/photon-frame-ab.sh); then after (77442b2, call 4) against final,
# 3 runs each alternating; then the GPU tests of final.
set -uo pipefail
d=target/photon-s25
out="${OUT:-/tmp}"
export CAUSTIC_KERNEL_CACHE=/tmp/s25-kernels
OUT="$out" bash scripts/photon-frame-ab.sh $d/before $d/final "" 5 > "$out/ab.log" 2>&1
args=(1000000 1920x1080 --no-cpu)
short() { grep -E "^PHOTON-GPU-DISPLAY" | sed -e 's/.*median \([0-9.]*\) ms.*photons \([0-9.]*\) ms.*map builds \([0-9.]*\) ms.*eye waves \([0-9.]*\) ms.*vertex order \([0-9.]*\) ms.*photon wait \([0-9.]*\) ms.*estimates \([0-9.]*\) ms.*/display \1 photons \2 builds \3 eye \4 order \5 wait \6 est \7/'; }
for rep in 1 2 3; do
  for b in after final; do echo -n "$b: "; timeout 120 $d/$b/photon_gpu_bench "${args[@]}" 2>&1 | short; done
done > "$out/ab2.log" 2>&1
for t in $d/tests/*; do
  echo "== test $(basename $t)"
  timeout 240 $t --include-ignored --test-threads 1 2>&1 | grep -E "^test |^test result|panicked|skipped" | tail -n 40
done > "$out/tests.log" 2>&1
cat "$out/ab.log" "$out/ab2.log" "$out/tests.log"
