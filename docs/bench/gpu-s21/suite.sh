#!/usr/bin/env bash
# Session 21 on the GPU machine: the GPU suite after the crossing rule
# changed the triangle test (caustic-gpu common.cuh, every kernel that
# intersects triangles), one binary at a time with `--include-ignored`.
#   OUT=... bash suite.sh BUNDLE_DIR GROUP      (GROUP: render | accel)
# BUNDLE_DIR holds t.tar.xz (the stripped test binaries, in t/), the scene
# archives (*.tar.xz, unpacked into CAUSTIC_SCENES) and, for `render`,
# refs.tar.xz (the Mitsuba references, unpacked into refs/).
set -uo pipefail
here="${1:?bundle dir}"
group="${2:?render|accel}"
out="${OUT:-/tmp}"
mkdir -p /tmp/sc /tmp/shared
for a in "$here"/*.tar.xz; do
  case "$a" in */t.tar.xz) tar -xJf "$a" -C /tmp ;; */refs.tar.xz) tar -xJf "$a" -C /tmp/shared ;; *) tar -xJf "$a" -C /tmp/sc ;; esac
done
export CAUSTIC_SCENES=/tmp/sc CAUSTIC_REFS=/tmp/shared/refs CAUSTIC_KERNEL_CACHE=/tmp/kc
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in $(ls /tmp/t); do
  start=$(date +%s)
  timeout 280 /tmp/t/$t --include-ignored --test-threads 1 > "/tmp/$t.log" 2>&1
  rc=$?
  echo "== $t rc=$rc $(( $(date +%s) - start )) s: $(grep -E '^test result' /tmp/$t.log | tail -1)"
  grep -E "FAILED|panicked|skipp" "/tmp/$t.log" | head -6
done 2>&1 | tee "$out/suite-$group.log"
