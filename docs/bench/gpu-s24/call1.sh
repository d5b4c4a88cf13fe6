#!/usr/bin/env bash
# Session 24 call 1: before (main 5eaf4dc) and variants of one experiment
# build (exp1: pass 1 and pass 2 with one range comparison and the bin's
# raw bits, pass 2 without branches, 4 blocks an SM in launch bounds; NVRTC
# defines for the estimate module pick TILE_PIPE / TILE_HISTS / TILE_WIDE /
# TILE_STREAM2); then an ncu profile of exp1's estimate launch.
set -uo pipefail
d=target/photon-s24
out="${OUT:-/tmp}"
export CAUSTIC_KERNEL_CACHE=/tmp/s24-kernels
export CAUSTIC_NVRTC_EXTRA_MODULES=caustic-render/src/photon/estimate.cu
args=(1000000 1920x1080 --no-cpu)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
short() { grep -E "^PHOTON-GPU-DISPLAY|^COMPARE" | sed -e 's/.*median \([0-9.]*\) ms.*estimates \([0-9.]*\) ms.*/display \1 est \2/' -e 's/COMPARE this frame vs [^:]*: //' | tr '\n' ' '; echo; }
timeout 120 $d/before/photon_gpu_bench "${args[@]}" --save "$out/ref.f32" > "$out/before0.log" 2>&1
run() { # name, env...
  local name=$1; shift
  echo -n "$name: "
  env "$@" timeout 120 $d/exp1/photon_gpu_bench "${args[@]}" --compare "$out/ref.f32" > "$out/v.log" 2>&1
  short < "$out/v.log"
}
echo -n "before: "; timeout 120 $d/before/photon_gpu_bench "${args[@]}" --compare "$out/ref.f32" 2>&1 | short
run v1 X=1
run pipe CAUSTIC_NVRTC_EXTRA="-DTILE_PIPE=1"
run hists2 CAUSTIC_NVRTC_EXTRA="-DTILE_HISTS=2u"
run wide CAUSTIC_NVRTC_EXTRA="-DTILE_WIDE=1"
run widepipe CAUSTIC_NVRTC_EXTRA="-DTILE_WIDE=1 -DTILE_PIPE=1"
run stream2 CAUSTIC_NVRTC_EXTRA="-DTILE_STREAM2=1"
run mb1 CAUSTIC_NVRTC_EXTRA="-DESTIMATE_MIN_BLOCKS=1"
echo -n "before: "; timeout 120 $d/before/photon_gpu_bench "${args[@]}" --compare "$out/ref.f32" 2>&1 | short
run v1 X=1
run pipe CAUSTIC_NVRTC_EXTRA="-DTILE_PIPE=1"
run hists2 CAUSTIC_NVRTC_EXTRA="-DTILE_HISTS=2u"
run stream2 CAUSTIC_NVRTC_EXTRA="-DTILE_STREAM2=1"
echo -n "before: "; timeout 120 $d/before/photon_gpu_bench "${args[@]}" --compare "$out/ref.f32" 2>&1 | short
grep -E "^PHOTON-GPU" "$out/v.log" | head -5
rm -f "$out/ref.f32" "$out/v.log"
# The estimate launch of exp1 (v1) by SASS line.
which ncu && timeout 200 ncu --clock-control none -k photon_estimate -c 1 --set full --import-source no -o "$out/v1" \
  $d/exp1/photon_gpu_bench 1000000 1920x1080 --no-cpu > "$out/ncu-run.log" 2>&1
tail -3 "$out/ncu-run.log"
if [ -f "$out/v1.ncu-rep" ]; then
  ncu -i "$out/v1.ncu-rep" --page details > "$out/ncu_v1_details.txt" 2>&1
  ncu -i "$out/v1.ncu-rep" --page source --csv --print-source sass 2>/dev/null | gzip > "$out/ncu_v1_sass.csv.gz"
  rm -f "$out/v1.ncu-rep"
  grep -E "Duration|Registers|Achieved Occupancy|Executed Ipc|Issue Slots Busy|Executed Instructions " "$out/ncu_v1_details.txt" | head -12
fi
