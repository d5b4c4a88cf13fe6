#!/usr/bin/env bash
# The task pool's checks and benchmark in one call on the GPU machine, from a
# small bundle made here by `scripts/gpu-taskpool-run.sh --bundle [DIR]`
# (default target/taskpool-bundle): the runtime's and the builder's GPU test
# binaries, the gpu_taskpool_bench example and the archives of the scenes
# they use. On the GPU machine:
#
#   bash DIR/gpu-taskpool-run.sh [BENCH_SCENE ...]
#
# Logs go to $OUT when it is set, else to logs/ beside the script; the end
# of the output is the test summaries and the benchmark's markdown table.
# CAUSTIC_TASKPOOL_TESTS=0 skips the tests, CAUSTIC_TASKPOOL_BENCH=0 the
# benchmark. Every binary runs under `timeout`: the kernels also stop
# themselves (a device-side watchdog), so a hang is a bug either way.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ "${1:-}" = "--bundle" ]; then
    cd "$here/.."
    bundle="${2:-target/taskpool-bundle}"
    rm -rf "$bundle" && mkdir -p "$bundle/scenes"
    copy_test() { # package test name [features]
        cargo test -p "$1" --release ${4:+--features "$4"} --no-run --test "$2" --message-format=json |
            python3 -c '
import json, shutil, sys
for line in sys.stdin:
    msg = json.loads(line) if line.startswith("{") else {}
    if msg.get("reason") == "compiler-artifact" and msg.get("executable") and msg["target"]["name"] == sys.argv[2]:
        shutil.copy2(msg["executable"], sys.argv[1] + "/" + sys.argv[3])
' "$bundle" "$2" "$3"
    }
    copy_test caustic-gpu gpu_taskpool runtime_tests
    copy_test caustic-accel gpu_taskpool builder_tests cuda
    cargo build -p caustic-accel --release --features cuda --example gpu_taskpool_bench
    target="${CARGO_TARGET_DIR:-target}"
    cp "$target/release/examples/gpu_taskpool_bench" "$bundle/"
    strip --strip-debug "$bundle/runtime_tests" "$bundle/builder_tests" "$bundle/gpu_taskpool_bench"
    for scene in bunny sponza-dabrovic conference-69k sibenik dragon buddha-100k cornell-box caustics-mnrt; do
        cp "../shared/scenes/$scene.tar.xz" "$bundle/scenes/"
    done
    cp scripts/gpu-taskpool-run.sh "$bundle/"
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
if [ "${CAUSTIC_TASKPOOL_TESTS:-1}" != 0 ]; then
    for t in runtime_tests builder_tests; do
        CAUSTIC_GPU_SYNC=1 timeout "${CAUSTIC_TEST_TIMEOUT:-150}" "$here/$t" --include-ignored \
            --test-threads=1 --nocapture >"$logs/$t.log" 2>&1 || status=1
        echo "== $t"
        grep -E '^test |test result|panicked|differ|beyond|CAUSTIC_TEST_SEED|^device|as expected|scenes checked|SAH |n = |stale|pool:' \
            "$logs/$t.log" | head -n 120
    done
fi
if [ "${CAUSTIC_TASKPOOL_BENCH:-1}" != 0 ]; then
    timeout "${CAUSTIC_BENCH_TIMEOUT:-120}" "$here/gpu_taskpool_bench" "$@" >"$logs/bench.log" 2>&1 || status=1
    grep -vE '^\|' "$logs/bench.log" | tail -n 40
    grep -E '^\|' "$logs/bench.log"
fi
exit $status
