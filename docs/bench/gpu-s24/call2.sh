#!/usr/bin/env bash
# Session 24 call 2: before (main 5eaf4dc) and variants of the second
# experiment build (exp2 = exp1 plus TILE_SELECT_REG: the k-th bin's
# selection keeps its running minimum in registers; DENSITY_PREFETCH:
# density_of loads the next batch's keys while this batch's photons load).
set -uo pipefail
d=target/photon-s24
out="${OUT:-/tmp}"
export CAUSTIC_KERNEL_CACHE=/tmp/s24-kernels
export CAUSTIC_NVRTC_EXTRA_MODULES=caustic-render/src/photon/estimate.cu
args=(1000000 1920x1080 --no-cpu)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
short() { grep -E "^PHOTON-GPU-DISPLAY|^COMPARE" | sed -e 's/.*median \([0-9.]*\) ms.*estimates \([0-9.]*\) ms.*/display \1 est \2/' -e 's/COMPARE this frame vs [^:]*: //' -e 's/, 100.0000 % of pixels within 1e-3//' | tr '\n' ' '; echo; }
timeout 120 $d/before/photon_gpu_bench "${args[@]}" --save "$out/ref.f32" > "$out/before0.log" 2>&1
run() { # name, env...
  local name=$1; shift
  echo -n "$name: "
  env "$@" timeout 120 $d/exp2/photon_gpu_bench "${args[@]}" --compare "$out/ref.f32" > "$out/v.log" 2>&1
  short < "$out/v.log"
}
for rep in 1 2; do
  echo -n "before: "; timeout 120 $d/before/photon_gpu_bench "${args[@]}" --compare "$out/ref.f32" 2>&1 | short
  run v1 X=1
  run pipe CAUSTIC_NVRTC_EXTRA="-DTILE_PIPE=1"
  run select CAUSTIC_NVRTC_EXTRA="-DTILE_SELECT_REG=1"
  run prefetch CAUSTIC_NVRTC_EXTRA="-DDENSITY_PREFETCH=1"
  run sel+pre CAUSTIC_NVRTC_EXTRA="-DTILE_SELECT_REG=1 -DDENSITY_PREFETCH=1"
  run all3 CAUSTIC_NVRTC_EXTRA="-DTILE_PIPE=1 -DTILE_SELECT_REG=1 -DDENSITY_PREFETCH=1"
  run all3-again CAUSTIC_NVRTC_EXTRA="-DTILE_PIPE=1 -DTILE_SELECT_REG=1 -DDENSITY_PREFETCH=1"
done
echo -n "before: "; timeout 120 $d/before/photon_gpu_bench "${args[@]}" --compare "$out/ref.f32" 2>&1 | short
rm -f "$out/ref.f32" "$out/v.log"
