#!/usr/bin/env bash
# The GPU grid's checks and benchmark in one call on the GPU machine, from a
# small bundle made here by `scripts/gpu-grid-run.sh --bundle [DIR]`
# (default target/grid-bundle): the gpu_grid test binary, the grid_bench
# example and the archives of the scenes they use (about 25 MB, under what
# travels). On the GPU machine:
#
#   bash DIR/gpu-grid-run.sh [BENCH_SCENE ...]
#
# Logs go to $OUT when it is set, else to logs/ beside the script; the end
# of the output is the test summary and the benchmark's markdown tables.
# CAUSTIC_GRID_TESTS=0 skips the tests, CAUSTIC_GRID_BENCH=0 the benchmark.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ "${1:-}" = "--bundle" ]; then
    cd "$here/.."
    bundle="${2:-target/grid-bundle}"
    rm -rf "$bundle" && mkdir -p "$bundle/scenes"
    cargo test -p caustic-accel --release --no-run --test gpu_grid --message-format=json |
        python3 -c '
import json, shutil, sys
for line in sys.stdin:
    msg = json.loads(line) if line.startswith("{") else {}
    if msg.get("reason") == "compiler-artifact" and msg.get("executable") and msg["target"]["name"] == "gpu_grid":
        shutil.copy2(msg["executable"], sys.argv[1] + "/gpu_grid")
' "$bundle"
    cargo build -p caustic-accel --release --example grid_bench
    target="${CARGO_TARGET_DIR:-target}"
    cp "$target/release/examples/grid_bench" "$bundle/"
    strip --strip-debug "$bundle/gpu_grid" "$bundle/grid_bench"
    for scene in bunny sponza-dabrovic conference-69k sibenik dragon; do
        cp "../shared/scenes/$scene.tar.xz" "$bundle/scenes/"
    done
    cp scripts/gpu-grid-run.sh "$bundle/"
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
for a in "$here"/scenes/*.tar.xz; do tar -xJf "$a" -C "$scenes" & done
wait
export CAUSTIC_SCENES="$scenes"
status=0
if [ "${CAUSTIC_GRID_TESTS:-1}" != 0 ]; then
    CAUSTIC_GPU_SYNC=1 timeout "${CAUSTIC_TEST_TIMEOUT:-300}" "$here/gpu_grid" --include-ignored \
        --test-threads=1 --nocapture >"$logs/gpu_grid.log" 2>&1 || status=1
    grep -E '^test |test result|panicked|differ|CAUSTIC_TEST_SEED|^device|as expected|scenes checked' \
        "$logs/gpu_grid.log" | head -n 80
fi
if [ "${CAUSTIC_GRID_BENCH:-1}" != 0 ]; then
    timeout "${CAUSTIC_BENCH_TIMEOUT:-300}" "$here/grid_bench" "$@" >"$logs/grid_bench.log" 2>&1 || status=1
    grep -vE '^\|' "$logs/grid_bench.log" | tail -n 60
    grep -E '^\|' "$logs/grid_bench.log"
fi
exit $status
