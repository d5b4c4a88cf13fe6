#!/usr/bin/env bash
# The photon-mapped frame before and after a change, on the GPU machine
# (the device tool), in one call:
#
#   OUT=... bash photon-frame-ab.sh BEFORE_DIR AFTER_DIR [TESTS_DIR] [REPS]
#
# BEFORE_DIR and AFTER_DIR hold a `photon_gpu_bench` each (stripped
# release builds); TESTS_DIR, if given, the GPU test binaries to run with
# `--include-ignored` afterwards (photon_gpu, photon_knn, nvrtc_compile, …).
#   - `photon_gpu_bench 1000000 1920x1080 --no-cpu`, REPS runs of each build
#     (default 3), alternating, every frame against before's first
#     (`--save/--compare`): the f32 and the display frames' stage tables;
#   - one run of each with the final gather (`--gather 16`), compared;
#   - one run of after with a launch timeline (CAUSTIC_GPU_TRACE) into $OUT;
#   - the test binaries.
set -uo pipefail
before="${1:?usage: photon-frame-ab.sh BEFORE_DIR AFTER_DIR [TESTS_DIR] [REPS]}"
after="${2:?usage: photon-frame-ab.sh BEFORE_DIR AFTER_DIR [TESTS_DIR] [REPS]}"
tests="${3:-}"
reps="${4:-3}"
out="${OUT:-/tmp}"
export CAUSTIC_KERNEL_CACHE="${CAUSTIC_KERNEL_CACHE:-/tmp/caustic-photon-ab-kernels}"
args=(1000000 1920x1080 --no-cpu)
# The stage lines without the counts that never change.
short() {
    grep -E "^PHOTON-GPU|^COMPARE" | sed -e 's/ same frame as 8-bit sRGB converted on the device (pinned, 6 MB)//' \
        -e 's/ cornell-caustics 1920x1080 1 spp, 1000000 photons, eye depth 5, 32 photon bounces, 4 light samples//' \
        -e 's/ (1068694 global, 60865 caustic stored)//' -e 's/precompute 0.00 ms (0 points), //' \
        -e 's/(final gather 0.00 ms: 0 irradiance samples + 0 point gathers; /(/' -e 's/, 14.8 M rays//' \
        -e "s/; bytes against the host's sRGB of the median f32 frame: /; bytes differing from the f32 frame's: /"
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 120 "$before/photon_gpu_bench" "${args[@]}" --save "$out/before.f32" > /dev/null 2>&1
for rep in $(seq 1 "$reps"); do
    for side in before after; do
        dir="$before"; [ "$side" = after ] && dir="$after"
        echo "== $side (rep $rep)"
        timeout 120 "$dir/photon_gpu_bench" "${args[@]}" --compare "$out/before.f32" 2>&1 | short
    done
done
timeout 180 "$before/photon_gpu_bench" "${args[@]}" --gather 16 --save "$out/before-gather.f32" 2>&1 |
    short | sed 's/^/== before, gather 16: /'
timeout 180 "$after/photon_gpu_bench" "${args[@]}" --gather 16 --compare "$out/before-gather.f32" 2>&1 |
    short | sed 's/^/== after, gather 16: /'
rm -f "$out/before.f32" "$out/before-gather.f32"
echo "== after, traced"
CAUSTIC_GPU_TRACE="$out/trace-after.tsv" timeout 120 "$after/photon_gpu_bench" "${args[@]}" 2>&1 |
    grep -E "^TRACED" | sed -e 's/ (1068694 global.*stages//'
if [ -n "$tests" ]; then
    for t in "$tests"/*; do
        echo "== test $(basename "$t")"
        timeout 300 "$t" --include-ignored 2>&1 | grep -E "^test |^test result|panicked|skipped" | tail -n 30
    done
fi
