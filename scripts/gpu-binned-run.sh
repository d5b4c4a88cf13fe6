#!/usr/bin/env bash
# The GPU top-down SAH builders' checks and benchmark in one call on the GPU
# machine, from a small bundle made here by
#
#   scripts/gpu-binned-run.sh --bundle [DIR]     (default DIR: target/binned-bundle)
#
# (the nvrtc_compile and gpu_binned test binaries, the gpu_binned_bench
# example, stripped, and the standard scenes' archives the tests use, about
# 30 MB). On the GPU machine:
#
#   bash DIR/gpu-binned-run.sh [BENCH_SCENE ...]    (default: bunny sponza conference sibenik dragon dragon@16)
#
# CAUSTIC_TESTS=0 skips the tests, CAUSTIC_BENCH=0 the benchmark;
# CAUSTIC_NCU=1 adds an Nsight Compute profile of one dragon@16 build's
# level kernels. Logs go to $OUT when it is set, else to logs/ beside the
# script; the output ends with the test summary and the benchmark's tables.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ "${1:-}" = "--bundle" ]; then
    cd "$here/.."
    bundle="${2:-target/binned-bundle}"
    rm -rf "$bundle" && mkdir -p "$bundle/scenes"
    cargo test -p caustic-accel --release --no-run --test gpu_binned --test nvrtc_compile --message-format=json |
        python3 -c '
import json, shutil, sys
for line in sys.stdin:
    msg = json.loads(line) if line.startswith("{") else {}
    if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
        name = msg["target"]["name"]
        if name in ("gpu_binned", "nvrtc_compile"):
            shutil.copy2(msg["executable"], sys.argv[1] + "/" + name)
' "$bundle"
    cargo build -p caustic-accel --release --example gpu_binned_bench
    cp target/release/examples/gpu_binned_bench "$bundle/"
    strip --strip-debug "$bundle/gpu_binned" "$bundle/nvrtc_compile" "$bundle/gpu_binned_bench"
    for scene in bunny sponza-dabrovic conference-69k sibenik dragon cornell-box caustics-mnrt buddha-100k; do
        cp "../shared/scenes/$scene.tar.xz" "$bundle/scenes/"
    done
    cp scripts/gpu-binned-run.sh "$bundle/"
    du -sh "$bundle"
    exit 0
fi
logs="${OUT:-$here/logs}"
mkdir -p "$logs"
nvrtc="$(ls /usr/local/cuda/lib64/libnvrtc.so.* /usr/local/cuda*/targets/*/lib/libnvrtc.so.* 2>/dev/null | head -n 1)"
[ -n "$nvrtc" ] && export LD_LIBRARY_PATH="$(dirname "$nvrtc")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
scenes=/tmp/caustic-scenes
mkdir -p "$scenes"
for a in "$here"/scenes/*.tar.xz; do tar -xJf "$a" -C "$scenes"; done
export CAUSTIC_SCENES="$scenes" CAUSTIC_REQUIRE_SCENES=1
status=0
if [ "${CAUSTIC_TESTS:-1}" != 0 ]; then
    timeout 120 "$here/nvrtc_compile" >"$logs/nvrtc.log" 2>&1 || status=1
    grep -E 'test result|panicked' "$logs/nvrtc.log"
    # Synchronise after every launch so a fault names its kernel.
    CAUSTIC_GPU_SYNC=1 timeout "${CAUSTIC_TEST_TIMEOUT:-240}" "$here/gpu_binned" --include-ignored \
        --test-threads=1 --nocapture >"$logs/gpu_binned.log" 2>&1 || status=1
    grep -E '^test |test result|panicked|differ|invalid|CAUSTIC_TEST_SEED|^device|[0-9] of [0-9]+ standard' \
        "$logs/gpu_binned.log" | head -n 60
    grep -E 'bvh-binned|bvh-sweep' "$logs/gpu_binned.log" | grep -E 'bunny|sponza|conference|sibenik|dragon|200k|512x512' |
        head -n 40
fi
bench=("$@")
[ ${#bench[@]} -gt 0 ] || bench=(bunny sponza conference sibenik dragon dragon@16)
if [ "${CAUSTIC_BENCH:-1}" != 0 ]; then
    timeout "${CAUSTIC_BENCH_TIMEOUT:-300}" "$here/gpu_binned_bench" "${bench[@]}" >"$logs/bench.log" 2>&1 || status=1
    grep -vE '^\| ' "$logs/bench.log" | tail -n 5
    grep -E '^\| |^device|^GPU|^Stage' "$logs/bench.log"
fi
if [ "${CAUSTIC_NCU:-0}" != 0 ] && command -v ncu >/dev/null; then
    CAUSTIC_BENCH_REPEATS=1 CAUSTIC_BENCH_BUILDERS=bvh-binned timeout "${CAUSTIC_NCU_TIMEOUT:-120}" \
        ncu --clock-control none -k regex:'^sah_' --launch-skip "${CAUSTIC_NCU_SKIP:-0}" \
        --launch-count "${CAUSTIC_NCU_COUNT:-40}" --section SpeedOfLight --section Occupancy \
        --section LaunchStats "$here/gpu_binned_bench" dragon@16 >"$logs/ncu.txt" 2>&1
    grep -E '^  sah_|Duration|Memory Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per' \
        "$logs/ncu.txt" | head -n 160 >"$logs/ncu_summary.txt"
    head -n 80 "$logs/ncu_summary.txt"
fi
exit $status
