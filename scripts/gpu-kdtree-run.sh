#!/usr/bin/env bash
# The GPU kd-tree's checks and benchmark in one call on the GPU machine, from a
# small bundle made here by `scripts/gpu-kdtree-run.sh --bundle [DIR]`
# (default target/kdtree-bundle): the gpu_kdtree test binary, the kdtree_bench
# example and the archives of the scenes they use (a few MB, under what
# travels). On the GPU machine:
#
#   bash DIR/gpu-kdtree-run.sh [BENCH_SCENE ...]
#
# Logs go to $OUT when it is set, else to logs/ beside the script; the end
# of the output is the test summary and the benchmark's markdown tables.
# CAUSTIC_KDTREE_TESTS=0 skips the tests, CAUSTIC_KDTREE_BENCH=0 the benchmark.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ "${1:-}" = "--bundle" ]; then
    cd "$here/.."
    bundle="${2:-target/kdtree-bundle}"
    rm -rf "$bundle" && mkdir -p "$bundle/scenes"
    cargo test -p caustic-accel --release --no-run --test gpu_kdtree --message-format=json |
        python3 -c '
import json, shutil, sys
for line in sys.stdin:
    msg = json.loads(line) if line.startswith("{") else {}
    if msg.get("reason") == "compiler-artifact" and msg.get("executable") and msg["target"]["name"] == "gpu_kdtree":
        shutil.copy2(msg["executable"], sys.argv[1] + "/gpu_kdtree")
' "$bundle"
    cargo build -p caustic-accel --release --example kdtree_bench
    target="${CARGO_TARGET_DIR:-target}"
    cp "$target/release/examples/kdtree_bench" "$bundle/"
    strip --strip-debug "$bundle/gpu_kdtree" "$bundle/kdtree_bench"
    for scene in ${CAUSTIC_KDTREE_SCENES:-bunny sponza-dabrovic conference-69k sibenik dragon}; do
        cp "../shared/scenes/$scene.tar.xz" "$bundle/scenes/"
    done
    cp scripts/gpu-kdtree-run.sh "$bundle/"
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
if [ "${CAUSTIC_KDTREE_TESTS:-1}" != 0 ]; then
    CAUSTIC_GPU_SYNC=1 timeout "${CAUSTIC_TEST_TIMEOUT:-300}" "$here/gpu_kdtree" --include-ignored \
        --test-threads=1 --nocapture >"$logs/gpu_kdtree.log" 2>&1 || status=1
    grep -E '^test |test result|panicked|differ|invalid|not the CPU|CAUSTIC_TEST_SEED|^device|as expected|scenes checked' \
        "$logs/gpu_kdtree.log" | head -n 80
fi
if [ "${CAUSTIC_KDTREE_BENCH:-1}" != 0 ]; then
    timeout "${CAUSTIC_BENCH_TIMEOUT:-300}" "$here/kdtree_bench" "$@" >"$logs/kdtree_bench.log" 2>&1 || status=1
    grep -vE '^\|' "$logs/kdtree_bench.log" | tail -n 60
    grep -E '^\|' "$logs/kdtree_bench.log"
fi
exit $status
