#!/usr/bin/env bash
# Session 25 call 2: before's frame with a launch timeline (CAUSTIC_GPU_TRACE),
# the passes alone (--serial) and overlapped, for the kernels' own times.
set -uo pipefail
d=target/photon-s25
out="${OUT:-/tmp}"
export CAUSTIC_KERNEL_CACHE=/tmp/s25-kernels
args=(1000000 1920x1080 --no-cpu)
CAUSTIC_GPU_TRACE="$out/trace-serial.tsv" timeout 120 $d/before/photon_gpu_bench "${args[@]}" --serial > "$out/serial.log" 2>&1
timeout 120 $d/before/photon_gpu_bench "${args[@]}" --serial 2>&1 | grep -E "^PHOTON-GPU" >> "$out/serial.log"
cat "$out/serial.log" | grep -E "^TRACED|^PHOTON"
