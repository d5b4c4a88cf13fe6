#!/usr/bin/env bash
# Session 23 call 2: the tiles' answers in shared memory (list) against
# before, by warps a block; then the photon tests of the default build.
set -uo pipefail
d=target/photon-est
out="${OUT:-/tmp}"
export CAUSTIC_KERNEL_CACHE=/tmp/pe-kernels
export CAUSTIC_NVRTC_EXTRA_MODULES=caustic-render/src/photon/estimate.cu
args=(1000000 1920x1080 --no-cpu)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
short() { grep -E "^PHOTON-GPU-DISPLAY|^COMPARE" | sed -e 's/.*median \([0-9.]*\) ms.*estimates \([0-9.]*\) ms.*/display \1 est \2/' -e 's/COMPARE this frame vs [^:]*: //' | tr '\n' ' '; echo; }
timeout 120 $d/before/photon_gpu_bench "${args[@]}" --save "$out/ref.f32" > "$out/before0.log" 2>&1
run() { # name, env...
  local name=$1; shift
  echo -n "$name: "
  env "$@" timeout 120 $d/exp/photon_gpu_bench "${args[@]}" --compare "$out/ref.f32" > "$out/v-$name.log" 2>&1
  short < "$out/v-$name.log"
}
echo -n "before: "; timeout 120 $d/before/photon_gpu_bench "${args[@]}" --compare "$out/ref.f32" 2>&1 | short
run L3 X=1
run N4 CAUSTIC_ESTIMATE_THREADS=128 CAUSTIC_NVRTC_EXTRA="-DESTIMATE_WARPS=4u -DTILE_LIST_K=0u"
run L4c128 CAUSTIC_ESTIMATE_THREADS=128 CAUSTIC_NVRTC_EXTRA="-DESTIMATE_WARPS=4u -DTILE_CAP=128u"
run L2 CAUSTIC_ESTIMATE_THREADS=64 CAUSTIC_NVRTC_EXTRA="-DESTIMATE_WARPS=2u"
run N3 CAUSTIC_NVRTC_EXTRA="-DTILE_LIST_K=0u"
run L3db8 CAUSTIC_NVRTC_EXTRA="-DDENSITY_BATCH=8u"
run L3db2 CAUSTIC_NVRTC_EXTRA="-DDENSITY_BATCH=2u"
echo -n "before: "; timeout 120 $d/before/photon_gpu_bench "${args[@]}" --compare "$out/ref.f32" 2>&1 | short
run L3 X=1
run L4c128 CAUSTIC_ESTIMATE_THREADS=128 CAUSTIC_NVRTC_EXTRA="-DESTIMATE_WARPS=4u -DTILE_CAP=128u"
rm -f "$out/ref.f32"
for t in $d/tests/*; do
  echo "== test $(basename $t)"
  timeout 200 $t --include-ignored --test-threads 1 2>&1 | grep -E "^test |^test result|panicked|skipped" | tail -n 30
done
