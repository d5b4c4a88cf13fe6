#!/usr/bin/env bash
# Session 24 call 6: before (main 5eaf4dc), final (call 5) and variants of
# the fourth experiment build (exp4 = final plus, through NVRTC defines for
# the estimate module, FILM_EF: the film's reductions with an L2
# evict-first policy; PHOTON_EL: density_of's photon loads with an L2
# evict-last policy), 3 runs each alternating; then exp4's photon_gpu tests
# with both defines.
set -uo pipefail
d=target/photon-s24
out="${OUT:-/tmp}"
export CAUSTIC_KERNEL_CACHE=/tmp/s24-kernels
export CAUSTIC_NVRTC_EXTRA_MODULES=caustic-render/src/photon/estimate.cu
args=(1000000 1920x1080 --no-cpu)
short() { grep -E "^PHOTON-GPU-DISPLAY|^COMPARE" | sed -e 's/.*median \([0-9.]*\) ms.*estimates \([0-9.]*\) ms.*/display \1 est \2/' -e 's/COMPARE this frame vs [^:]*: //' -e 's/, 100.0000 % of pixels within 1e-3//' | tr '\n' ' '; echo; }
timeout 120 $d/before/photon_gpu_bench "${args[@]}" --save "$out/ref.f32" > "$out/before0.log" 2>&1
run() { # name, env...
  local name=$1; shift
  echo -n "$name: "
  env "$@" timeout 120 $d/exp4/photon_gpu_bench "${args[@]}" --compare "$out/ref.f32" > "$out/v.log" 2>&1
  short < "$out/v.log"
}
for rep in 1 2 3; do
  echo -n "before: "; timeout 120 $d/before/photon_gpu_bench "${args[@]}" --compare "$out/ref.f32" 2>&1 | short
  echo -n "final: "; timeout 120 $d/final/photon_gpu_bench "${args[@]}" --compare "$out/ref.f32" 2>&1 | short
  run film_ef CAUSTIC_NVRTC_EXTRA="-DFILM_EF=1"
  run photon_el CAUSTIC_NVRTC_EXTRA="-DPHOTON_EL=1"
  run both CAUSTIC_NVRTC_EXTRA="-DFILM_EF=1 -DPHOTON_EL=1"
done 2>&1 | tee "$out/variants.log"
rm -f "$out/ref.f32" "$out/v.log"
echo "== test exp4-photon_gpu with -DFILM_EF=1 -DPHOTON_EL=1"
CAUSTIC_NVRTC_EXTRA="-DFILM_EF=1 -DPHOTON_EL=1" timeout 200 $d/tests/exp4-photon_gpu --include-ignored --test-threads 1 2>&1 | grep -E "^test result|panicked|FAILED" | tail -n 10
