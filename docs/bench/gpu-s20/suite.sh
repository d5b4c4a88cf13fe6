#!/usr/bin/env bash
# Session 20: the rest of the GPU suite on the GPU machine, one binary at a
# time (`--include-ignored`), GROUP 1 or 2 (the binaries of docs/bench/gpu-s20/run.sh ran before).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp}"
mkdir -p /tmp/sc /tmp/shared && for a in "$here"/*.tar.xz; do case "$a" in */t.tar.xz|*/refs.tar.xz) ;; *) tar -xJf "$a" -C /tmp/sc ;; esac; done
tar -xJf "$here/refs.tar.xz" -C /tmp/shared; tar -xJf "$here/t.tar.xz" -C /tmp
export CAUSTIC_SCENES=/tmp/sc CAUSTIC_REFS=/tmp/shared/refs CAUSTIC_KERNEL_CACHE=/tmp/kc
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
case "${1:-1}" in
  1) bins="gpu_kdtree gpu_refit gpu_grid gpu_trace gpu_wide accel-nvrtc_compile" ;;
  2) bins="caustic_accel gpu_binned gpu_build gpu_collision gpu_dacrt gpu_points accel-gpu_taskpool gpu-gpu_taskpool caustic_render-unit caustic-unit facade nvrtc_compile-439404 nvrtc_compile-517fa6 photon_render photon_trace photon_waves sppm team whitted_analytic whitted_refs" ;;
esac
for t in $bins; do
  start=$(date +%s)
  timeout 250 /tmp/t/$t --include-ignored --test-threads 1 > "/tmp/$t.log" 2>&1
  rc=$?
  echo "== $t rc=$rc $(( $(date +%s) - start )) s: $(grep -E '^test result' /tmp/$t.log | tail -1)"
  grep -E "FAILED|panicked|skipping" "/tmp/$t.log" | head -4
done 2>&1 | tee "$out/suite-$1.log"
