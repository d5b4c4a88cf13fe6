#!/usr/bin/env bash
# Session 25 call 1: before (main 4def2db) against after (16-byte shaded
# photon records, the normal decoded per query), 3 runs each alternating
# (scripts/photon-frame-ab.sh); then the experiment build's variants (exp =
# after plus NVRTC defines for the estimate module: DENSITY_BATCH, the
# photons density_of loads at a time; VERTEX_LATE, the eye vertex's words
# other than the point loaded after the first map's search), two rounds,
# every frame against before's; and before with --serial (the passes
# alone, one after the other).
set -uo pipefail
d=target/photon-s25
out="${OUT:-/tmp}"
export CAUSTIC_KERNEL_CACHE=/tmp/s25-kernels
OUT="$out" bash scripts/photon-frame-ab.sh $d/before $d/after "" 3 > "$out/ab.log" 2>&1
args=(1000000 1920x1080 --no-cpu)
short() { grep -E "^PHOTON-GPU-DISPLAY|^COMPARE" | sed -e 's/.*median \([0-9.]*\) ms.*photons \([0-9.]*\) ms.*eye waves \([0-9.]*\) ms.*estimates \([0-9.]*\) ms.*/display \1 photons \2 eye \3 est \4/' -e 's/COMPARE this frame vs [^:]*: //' -e 's/, 100.0000 % of pixels within 1e-3//' | tr '\n' ' '; echo; }
timeout 120 $d/before/photon_gpu_bench "${args[@]}" --save "$out/ref.f32" > "$out/before0.log" 2>&1
export CAUSTIC_NVRTC_EXTRA_MODULES=caustic-render/src/photon/estimate.cu
run() { # name, env...
  local name=$1; shift
  echo -n "$name: "
  env "$@" timeout 120 $d/exp/photon_gpu_bench "${args[@]}" --compare "$out/ref.f32" > "$out/v.log" 2>&1
  short < "$out/v.log"
}
for rep in 1 2; do
  echo -n "before: "; timeout 120 $d/before/photon_gpu_bench "${args[@]}" --compare "$out/ref.f32" 2>&1 | short
  echo -n "after: "; timeout 120 $d/after/photon_gpu_bench "${args[@]}" --compare "$out/ref.f32" 2>&1 | short
  run batch6 CAUSTIC_NVRTC_EXTRA="-DDENSITY_BATCH=6u"
  run batch8 CAUSTIC_NVRTC_EXTRA="-DDENSITY_BATCH=8u"
  run late CAUSTIC_NVRTC_EXTRA="-DVERTEX_LATE=1"
  run late_batch8 CAUSTIC_NVRTC_EXTRA="-DVERTEX_LATE=1 -DDENSITY_BATCH=8u"
done > "$out/variants.log" 2>&1
# The passes alone: the photon pass before the eye pass on one stream.
{ echo -n "before --serial: "; timeout 120 $d/before/photon_gpu_bench "${args[@]}" --serial 2>&1 | grep -E "^PHOTON-GPU-DISPLAY"; } >> "$out/variants.log"
rm -f "$out/ref.f32" "$out/v.log"
cat "$out/ab.log" "$out/variants.log"
