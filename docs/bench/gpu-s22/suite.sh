#!/usr/bin/env bash
# Session 22 on the GPU machine: the GPU suite after the crossing rule's
# margin changed (caustic-gpu common.cuh, every kernel that intersects
# triangles), one test binary at a time with `--include-ignored`, in two
# calls (each under the tool's 10 minutes).
#   OUT=$OUT bash docs/bench/gpu-s22/suite.sh BUNDLE_DIR NAME
# BUNDLE_DIR holds t.tar.xz (stripped test binaries, named CRATE-TARGET),
# scene archives (unpacked into CAUSTIC_SCENES) and optionally refs.tar.xz
# (the Mitsuba references, unpacked into CAUSTIC_REFS). /tmp/t is emptied
# first: a warm machine keeps the previous call's binaries.
set -uo pipefail
here="${1:?bundle dir}"
name="${2:?name of the log}"
out="${OUT:-/tmp}"
rm -rf /tmp/t && mkdir -p /tmp/t /tmp/sc /tmp/shared
for a in "$here"/*.tar.xz; do
  case "$a" in
    */t.tar.xz) tar -xJf "$a" -C /tmp/t ;;
    */refs.tar.xz) tar -xJf "$a" -C /tmp/shared ;;
    *) tar -xJf "$a" -C /tmp/sc ;;
  esac
done
export CAUSTIC_SCENES=/tmp/sc CAUSTIC_REFS=/tmp/shared/refs CAUSTIC_KERNEL_CACHE=/tmp/kc
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in $(ls /tmp/t); do
  start=$(date +%s)
  timeout 280 "/tmp/t/$t" --include-ignored --test-threads 1 > "/tmp/$t.log" 2>&1
  rc=$?
  echo "== $t rc=$rc $(( $(date +%s) - start )) s: $(grep -E '^test result' "/tmp/$t.log" | tail -1)"
  grep -E "FAILED|panicked|skipp" "/tmp/$t.log" | head -6
done 2>&1 | tee "$out/suite-$name.log"
