#!/usr/bin/env bash
# The compressed wide BVH's GPU checks and benchmark in one call on the GPU
# machine, from a small bundle made by `scripts/gpu-wide-run.sh --bundle`
# here: the gpu_wide test binary, the wide_bench example and the standard
# scenes' archives (about 30 MB, under what travels). On the GPU machine:
#
#   bash target/dev-bundle/gpu-wide-run.sh [BENCH_SCENE ...]
#
# Logs go to $OUT when it is set, else to logs/ beside the script; the end of the output is the
# test summary and the benchmark's markdown tables.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ "${1:-}" = "--bundle" ]; then
    cd "$here/.."
    bundle=target/dev-bundle
    rm -rf "$bundle" && mkdir -p "$bundle/scenes"
    cargo test -p caustic-accel --release --no-run --test gpu_wide --message-format=json |
        python3 -c '
import json, shutil, sys
for line in sys.stdin:
    msg = json.loads(line) if line.startswith("{") else {}
    if msg.get("reason") == "compiler-artifact" and msg.get("executable") and msg["target"]["name"] == "gpu_wide":
        shutil.copy2(msg["executable"], sys.argv[1] + "/gpu_wide")
' "$bundle"
    cargo build -p caustic-accel --release --example wide_bench
    cp target/release/examples/wide_bench "$bundle/"
    strip --strip-debug "$bundle/gpu_wide" "$bundle/wide_bench"
    cp ../shared/scenes/*.tar.xz "$bundle/scenes/"
    cp scripts/gpu-wide-run.sh "$bundle/"
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
CAUSTIC_GPU_SYNC=1 timeout "${CAUSTIC_TEST_TIMEOUT:-300}" "$here/gpu_wide" --include-ignored --test-threads=1 \
    --nocapture >"$logs/gpu_wide.log" 2>&1 || status=1
grep -E '^test |test result|panicked|differ|CAUSTIC_TEST_SEED|^device' "$logs/gpu_wide.log" | head -n 80
bench=("$@")
[ ${#bench[@]} -gt 0 ] || bench=(bunny dragon sponza sibenik conference dragon@16)
timeout "${CAUSTIC_BENCH_TIMEOUT:-300}" "$here/wide_bench" "${bench[@]}" 2>&1 | tee "$logs/wide_bench.log" || status=1
# CAUSTIC_NCU=1: Nsight Compute on the diffuse pass of sponza, binary and
# wide closest-hit kernels (with one timed repeat, the 12th and 13th
# launches of the two kernels are that pass's checking runs).
if [ "${CAUSTIC_NCU:-0}" != 0 ] && command -v ncu >/dev/null; then
    CAUSTIC_BENCH_REPEATS=1 timeout "${CAUSTIC_NCU_TIMEOUT:-120}" ncu --clock-control none \
        -k regex:'^traverse_(bvh2|cwbvh)_closest$' --launch-skip 11 --launch-count 2 \
        --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats \
        --section LaunchStats "$here/wide_bench" sponza >"$logs/ncu.txt" 2>&1
    grep -E '^  traverse|Duration|SM Busy|Compute \(SM\) Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|Achieved Occupancy|Registers Per|Issued Ipc|No Eligible|Warp Cycles Per Issued|Avg. Active Threads|Active Warps Per' \
        "$logs/ncu.txt" | head -n 60
fi
exit $status
