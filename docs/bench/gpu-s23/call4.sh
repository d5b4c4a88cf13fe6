#!/usr/bin/env bash
# Session 23 call 4: attribution variants (exp = after + NVRTC defines),
# then the A/B of before (cb1584f) against after, 5 runs each alternating
# (scripts/photon-frame-ab.sh), then the photon tests of after.
set -uo pipefail
d=target/photon-est
out="${OUT:-/tmp}"
export CAUSTIC_KERNEL_CACHE=/tmp/pe-kernels
args=(1000000 1920x1080 --no-cpu)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
short() { grep -E "^PHOTON-GPU-DISPLAY|^COMPARE" | sed -e 's/.*median \([0-9.]*\) ms.*estimates \([0-9.]*\) ms.*/display \1 est \2/' -e 's/COMPARE this frame vs [^:]*: //' -e 's/, 100.0000 % of pixels within 1e-3//' | tr '\n' ' '; echo; }
{
timeout 120 $d/before/photon_gpu_bench "${args[@]}" --save "$out/ref.f32" > /dev/null 2>&1
run() { # name, binary, extra defines
  echo -n "$1: "
  CAUSTIC_NVRTC_EXTRA_MODULES=caustic-render/src/photon/estimate.cu CAUSTIC_NVRTC_EXTRA="$3" timeout 120 $d/$2/photon_gpu_bench "${args[@]}" --compare "$out/ref.f32" 2>&1 | short
}
run before before ""
run after after ""
run exp-nostop exp "-DTILE_PASS2_STOP=0"
run exp-cap256-nostop exp "-DTILE_CAP=256u -DTILE_PASS2_STOP=0"
run exp-cap384 exp "-DTILE_CAP=384u"
rm -f "$out/ref.f32"
} 2>&1 | tee "$out/variants.log"
OUT="$out" bash scripts/photon-frame-ab.sh $d/before $d/after "" 5 2>&1 | tee "$out/ab.log"
for t in $d/tests/*; do
  echo "== test $(basename $t)"
  timeout 200 $t --include-ignored --test-threads 1 2>&1 | grep -E "^test |^test result|panicked|skipped" | tail -n 30
done 2>&1 | tee "$out/tests.log"
