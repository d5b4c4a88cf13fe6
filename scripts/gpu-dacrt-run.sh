#!/usr/bin/env bash
# GPU DACRT's checks and benchmarks in one call on the GPU machine, from a
# bundle made here by `scripts/gpu-dacrt-run.sh --bundle [DIR]` (default
# target/dacrt-bundle): the GPU test binaries of DACRT (and, for the shared
# slab_ray.cuh, of the grid and the kd-tree), the caustic CLI and the
# archives of the standard scenes. On the GPU machine:
#
#   bash DIR/gpu-dacrt-run.sh [tests] [bench] [figure7]
#
# (all three when none is named). Logs go to $OUT when it is set, else to
# logs/ beside the script. Every binary runs under `timeout`: the kernels
# also stop themselves (the task pool's watchdog), so a hang is a bug
# either way. CAUSTIC_DACRT_TESTS names the test binaries to run (default
# dacrt_tests), CAUSTIC_TEST_FILTER a test-name filter.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ "${1:-}" = "--bundle" ]; then
    cd "$here/.."
    bundle="${2:-target/dacrt-bundle}"
    rm -rf "$bundle" && mkdir -p "$bundle/scenes"
    copy_test() { # package test name
        cargo test -p "$1" --release --no-run --test "$2" --message-format=json |
            python3 -c '
import json, shutil, sys
for line in sys.stdin:
    msg = json.loads(line) if line.startswith("{") else {}
    if msg.get("reason") == "compiler-artifact" and msg.get("executable") and msg["target"]["name"] == sys.argv[2]:
        shutil.copy2(msg["executable"], sys.argv[1] + "/" + sys.argv[3])
' "$bundle" "$2" "$3"
    }
    copy_test caustic-accel gpu_dacrt dacrt_tests
    if [ "${CAUSTIC_BUNDLE_SPATIAL:-0}" != 0 ]; then
        copy_test caustic-accel gpu_grid grid_tests
        copy_test caustic-accel gpu_kdtree kdtree_tests
    fi
    cargo build --release -p caustic-cli
    cp "${CARGO_TARGET_DIR:-target}/release/caustic" "$bundle/"
    find "$bundle" -maxdepth 1 -type f -perm -u+x -exec strip --strip-debug {} +
    for scene in ${CAUSTIC_BUNDLE_SCENES:-cornell-box caustics-mnrt sponza-dabrovic conference-69k bunny sibenik buddha-100k dragon}; do
        cp "../shared/scenes/$scene.tar.xz" "$bundle/scenes/"
    done
    cp scripts/gpu-dacrt-run.sh scripts/dacrt-figure7.sh "$bundle/"
    du -sh "$bundle"
    exit 0
fi
# At most eight files come back from $OUT: the logs and plots go there as
# each step ends, everything else (JSON, tables) in one archive at the end.
logs=/tmp/dacrt-logs
out="${OUT:-$here/logs}"
mkdir -p "$logs" "$out"
keep() { for f in "$@"; do [ -f "$logs/$f" ] && cp "$logs/$f" "$out/"; done; return 0; }
nvrtc="$(ls /usr/local/cuda/lib64/libnvrtc.so.* /usr/local/cuda*/targets/*/lib/libnvrtc.so.* 2>/dev/null | head -n 1)"
[ -n "$nvrtc" ] && export LD_LIBRARY_PATH="$(dirname "$nvrtc")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
scenes=/tmp/caustic-scenes
mkdir -p "$scenes"
for a in "$here"/scenes/*.tar.xz; do tar -xJf "$a" -C "$scenes" & done
wait
export CAUSTIC_SCENES="$scenes"
steps="${*:-tests bench figure7}"
status=0
case " $steps " in *" tests "*)
    for t in ${CAUSTIC_DACRT_TESTS:-dacrt_tests}; do
        timeout "${CAUSTIC_TEST_TIMEOUT:-300}" "$here/$t" --include-ignored --test-threads=1 --nocapture \
            ${CAUSTIC_TEST_FILTER:-} >"$logs/$t.log" 2>&1 || status=1
        echo "== $t"
        grep -E '^test |test result|panicked|differ|identical|CAUSTIC_TEST_SEED|^device|scenes checked|slots|memory|tasks' \
            "$logs/$t.log" | cut -c1-400 | head -n 150
        keep "$t.log"
    done
esac
case " $steps " in *" bench "*)
    caustic="$here/caustic"
    sponza="$scenes/sponza-dabrovic/sponza.obj"
    timeout 200 "$caustic" bench gpu --log2-n 0 --camera standard --scene "$sponza" \
        --accel dacrt,dacrt-rdh,bvh-binned --warm-up 1 --reps 5 --check-every 64 \
        --json "$logs/bench-gpu.json" >"$logs/bench-gpu.log" 2>&1 || status=1
    grep -E '^\||^device|rror' "$logs/bench-gpu.log" | head -n 12
    timeout 200 "$caustic" bench dacrt --device cuda --camera standard --scene "$sponza" \
        --dacrt dacrt,dacrt-rdh --min-log2 8 --max-log2 20 --reps 2 \
        --json "$logs/bench-dacrt.jsonl" >"$logs/bench-dacrt.log" 2>&1 || status=1
    grep -E 'crossover|rays:|rror' "$logs/bench-dacrt.log"
    keep bench-gpu.log bench-dacrt.log
esac
case " $steps " in *" figure7 "*)
    # On the H100 (2026-11-26) the whole sweep with the CPU columns took
    # longer than one call allows: the GPU columns alone, fewer points.
    AGENTS="${AGENTS:-64,256,1024,4096,10000,16384,65536}" FRAMES="${FRAMES:-2}" \
        DEVICES="${DEVICES:-cuda}" DRAGON_DEVICES="${DRAGON_DEVICES:-cuda}" \
        CPU_MAX_SPONZA="${CPU_MAX_SPONZA:-4096}" CAUSTIC="$here/caustic" \
        timeout 300 bash "$here/dacrt-figure7.sh" "$scenes" "$logs" >"$logs/figure7.log" 2>&1 || status=1
    grep -E '^\||ms per collision|rror' "$logs/figure7.log" | tail -n 40
    keep figure7.log figure7-sponza.svg figure7-dragons.svg
esac
tar -czf "$out/results.tgz" -C "$logs" .
exit $status
