#!/usr/bin/env bash
# Session 23 call 1: before (cb1584f) and knob variants of the estimate
# (one experimental build: NVRTC defines for the estimate module, the fine
# cell through CAUSTIC_FINE_CELL_KTH).
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
run exp0 X=1
run mb5 CAUSTIC_NVRTC_EXTRA="-DESTIMATE_MIN_BLOCKS=5"
run mb6 CAUSTIC_NVRTC_EXTRA="-DESTIMATE_MIN_BLOCKS=6"
run mb6cap128 CAUSTIC_NVRTC_EXTRA="-DESTIMATE_MIN_BLOCKS=6 -DTILE_CAP=128u"
run mb8cap128 CAUSTIC_NVRTC_EXTRA="-DESTIMATE_MIN_BLOCKS=8 -DTILE_CAP=128u"
run quad CAUSTIC_NVRTC_EXTRA="-DTILE_PASS1_QUAD=1"
run db2 CAUSTIC_NVRTC_EXTRA="-DDENSITY_BATCH=2u"
run c08m2 CAUSTIC_FINE_CELL_KTH=0.8 CAUSTIC_NVRTC_EXTRA="-DTILE_FINE_MARGIN=2"
run c06m2 CAUSTIC_FINE_CELL_KTH=0.6 CAUSTIC_NVRTC_EXTRA="-DTILE_FINE_MARGIN=2"
run c06m2s5 CAUSTIC_FINE_CELL_KTH=0.6 CAUSTIC_NVRTC_EXTRA="-DTILE_FINE_MARGIN=2 -DTILE_FINE_SHELLS=5 -DTILE_MAX_CELLS=1024u"
run c04m3s6 CAUSTIC_FINE_CELL_KTH=0.4 CAUSTIC_NVRTC_EXTRA="-DTILE_FINE_MARGIN=3 -DTILE_FINE_SHELLS=6 -DTILE_MAX_CELLS=2048u"
run c15m1 CAUSTIC_FINE_CELL_KTH=1.5
echo -n "before: "; timeout 120 $d/before/photon_gpu_bench "${args[@]}" --compare "$out/ref.f32" 2>&1 | short
rm -f "$out/ref.f32"
