#!/usr/bin/env bash
# Session 24 call 4: before (main 5eaf4dc), after (b2710057, call 3) and
# variants of the third experiment build (exp3 = b2710057 plus, through
# NVRTC defines for the estimate module, TILE_ONE_SITE: tile_map_knn's
# stages as one loop around a single warp_tile_knn, 6 912 SASS instructions
# instead of 12 224 and 95 registers; DENSITY_BATCH 6 or 8).
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
  env "$@" timeout 120 $d/exp3/photon_gpu_bench "${args[@]}" --compare "$out/ref.f32" > "$out/v.log" 2>&1
  short < "$out/v.log"
}
for rep in 1 2; do
  echo -n "before: "; timeout 120 $d/before/photon_gpu_bench "${args[@]}" --compare "$out/ref.f32" 2>&1 | short
  echo -n "after: "; timeout 120 $d/after/photon_gpu_bench "${args[@]}" --compare "$out/ref.f32" 2>&1 | short
  run onesite CAUSTIC_NVRTC_EXTRA="-DTILE_ONE_SITE=1"
  run batch8 CAUSTIC_NVRTC_EXTRA="-DDENSITY_BATCH=8u"
  run batch6 CAUSTIC_NVRTC_EXTRA="-DDENSITY_BATCH=6u"
  run onesite-b8 CAUSTIC_NVRTC_EXTRA="-DTILE_ONE_SITE=1 -DDENSITY_BATCH=8u"
  run onesite-again CAUSTIC_NVRTC_EXTRA="-DTILE_ONE_SITE=1"
done
rm -f "$out/ref.f32" "$out/v.log"
