#!/usr/bin/env bash
# Session 25: GPU SPPM before and after its eye kernels' 16-byte accesses
# (renderer.cu, sppm.cuh), on the GPU machine, then its tests.
#   OUT=$OUT bash docs/bench/gpu-s25/sppm-call.sh BEFORE_DIR [REPS] [PASSES]
# BEFORE_DIR holds the earlier `sppm_gpu_bench` (or it packed by xz); the
# after build and the test binaries come from
# `CAUSTIC_BUNDLE_PACK=1 scripts/gpu-bundle.sh`'s bundle (target/gpu-bundle,
# with the Cornell references).
set -uo pipefail
before="${1:?before dir}"
reps="${2:-3}"
passes="${3:-1024}"
out="${OUT:-/tmp}"
b=target/gpu-bundle
[ -x "$b/sppm_gpu_bench" ] || tar -xJf "$b/bin.tar.xz" -C "$b"
[ -x "$before/sppm_gpu_bench" ] || { xz -dk "$before/sppm_gpu_bench.xz" && chmod +x "$before/sppm_gpu_bench"; }
export CAUSTIC_KERNEL_CACHE=/tmp/kc-sppm25 CAUSTIC_REFS="$b/refs"
nvrtc="$(ls /usr/local/cuda/lib64/libnvrtc.so.* /usr/local/cuda*/targets/*/lib/libnvrtc.so.* 2>/dev/null | head -n 1)"
[ -n "$nvrtc" ] && export LD_LIBRARY_PATH="$(dirname "$nvrtc")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/sppm.log"
for scene in cornell-box cornell-caustics; do
    xml="$b/refs/$scene/$scene.xml"
    ref="$b/refs/$scene/${scene}_path.exr"
    for side in before after; do  # fills the kernel cache, untimed
        dir="$before"; [ "$side" = after ] && dir="$b"
        timeout 60 "$dir/sppm_gpu_bench" "$xml" "$ref" 4 1000000 >/dev/null 2>&1
    done
    for rep in $(seq 1 "$reps"); do
        for side in before after; do
            dir="$before"; [ "$side" = after ] && dir="$b"
            echo "== $scene $side (rep $rep)"
            timeout 120 "$dir/sppm_gpu_bench" "$xml" "$ref" "$passes" 1000000 2>&1 | tail -n 6
        done
    done
done 2>&1 | tee -a "$out/sppm.log"
# The tests of the changed kernels and of everything sharing their headers.
tar -xJf "$b/bin.tar.xz" -C "$b" ./tests 2>/dev/null
export CAUSTIC_SCENES=/tmp/sc25
mkdir -p /tmp/sc25 && for a in "$b"/scenes/*.tar.xz; do tar -xJf "$a" -C /tmp/sc25; done
for t in sppm_gpu sppm facade_gpu render-nvrtc_compile caustic_render-unit photon_gpu whitted_gpu; do
    start=$(date +%s)
    timeout 120 "$b/tests/$t" --include-ignored --test-threads 1 >"/tmp/$t.log" 2>&1
    echo "== $t rc=$? $(( $(date +%s) - start )) s: $(grep -E '^test result' "/tmp/$t.log" | tail -1)"
    grep -E "FAILED|panicked|skipp" "/tmp/$t.log" | head -4
done 2>&1 | tee "$out/tests.log"
