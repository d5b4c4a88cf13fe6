#!/usr/bin/env bash
# Session 23 call 3: where the tiles' work goes (device counters), and
# variants of the tiles' attempts, on 4 warps a block without the list.
set -uo pipefail
d=target/photon-est
out="${OUT:-/tmp}"
export CAUSTIC_KERNEL_CACHE=/tmp/pe-kernels
export CAUSTIC_NVRTC_EXTRA_MODULES=caustic-render/src/photon/estimate.cu
export CAUSTIC_ESTIMATE_THREADS=128
B="-DESTIMATE_WARPS=4u -DTILE_LIST_K=0u"
args=(1000000 1920x1080 --no-cpu)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
short() { grep -E "^PHOTON-GPU-DISPLAY|^COMPARE" | sed -e 's/.*median \([0-9.]*\) ms.*estimates \([0-9.]*\) ms.*/display \1 est \2/' -e 's/COMPARE this frame vs [^:]*: //' -e 's/, 100.0000 % of pixels within 1e-3//' | tr '\n' ' '; echo; }
timeout 120 $d/before/photon_gpu_bench "${args[@]}" --save "$out/ref.f32" > "$out/before0.log" 2>&1
run() { # name, extra defines, env...
  local name=$1 extra=$2; shift 2
  echo -n "$name: "
  env CAUSTIC_NVRTC_EXTRA="$B $extra" "$@" timeout 120 $d/exp/photon_gpu_bench "${args[@]}" --compare "$out/ref.f32" > "$out/v-$name.log" 2>&1
  short < "$out/v-$name.log"
}
echo -n "before: "; timeout 120 $d/before/photon_gpu_bench "${args[@]}" --compare "$out/ref.f32" 2>&1 | short
run N4 ""
env CAUSTIC_NVRTC_EXTRA="$B -DESTIMATE_COUNTERS" timeout 120 $d/exp/photon_gpu_bench 1000000 1920x1080 --no-cpu > "$out/counters.log" 2>&1
grep "^CNT" "$out/counters.log" | tail -n 2
run skip2 "-DTILE_SKIP=2"
run skip4 "-DTILE_SKIP=4"
run skip8 "-DTILE_SKIP=8"
run m2 "-DTILE_FINE_MARGIN=2"
run cap512 "-DTILE_CAP=512u"
run cap384 "-DTILE_CAP=384u"
echo -n "before: "; timeout 120 $d/before/photon_gpu_bench "${args[@]}" --compare "$out/ref.f32" 2>&1 | short
run N4 ""
rm -f "$out/ref.f32"
