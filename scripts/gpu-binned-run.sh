#!/usr/bin/env bash
# The GPU top-down SAH builders' checks and benchmark (bvh-binned,
# bvh-binned-staged, bvh-sweep) in one call on the GPU machine, from a small
# bundle made here by
#
#   scripts/gpu-binned-run.sh --bundle [DIR]     (default DIR: target/gpu-binned-bundle)
#
# (the gpu_binned test binary and the gpu_binned_bench example, release,
# stripped, this script, and the archives of the standard scenes the tests
# use: about 40 MB). On the GPU machine:
#
#   bash DIR/gpu-binned-run.sh [BENCH_SCENE ...]    (default: bunny dragon dragon@16)
#
# CAUSTIC_TESTS=0 skips the tests, CAUSTIC_BENCH=0 the benchmark;
# CAUSTIC_TEST_FILTER=NAME runs only the tests whose names contain NAME.
# A bundle made with CAUSTIC_BUNDLE_CLI=1 also carries the `caustic` binary
# and the facade's GPU tests: then `caustic bench gpu` builds and traces
# the SAH builders beside the Morton ones on bunny, dragon and 16 dragons
# (CAUSTIC_BENCH_ACCEL: the specs), and the facade's GPU tests run.
# Logs go to $OUT when it is set (the device tool's folder), else to logs/
# beside the script; the output ends with the test summary and the
# benchmark's tables.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ "${1:-}" = "--bundle" ]; then
    cd "$here/.."
    bundle="${2:-target/gpu-binned-bundle}"
    scenes_dir="${CAUSTIC_SCENE_ARCHIVES:-$(cd .. && pwd)/shared/scenes}"
    rm -rf "$bundle" && mkdir -p "$bundle/scenes"
    cargo test -p caustic-accel --release --no-run --test gpu_binned --message-format=json |
        python3 -c '
import json, shutil, sys
for line in sys.stdin:
    msg = json.loads(line) if line.startswith("{") else {}
    if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
        if msg["target"]["name"] == "gpu_binned":
            shutil.copy2(msg["executable"], sys.argv[1] + "/gpu_binned")
' "$bundle" || exit 1
    cargo build -p caustic-accel --release --example gpu_binned_bench || exit 1
    cp "${CARGO_TARGET_DIR:-target}/release/examples/gpu_binned_bench" "$bundle/"
    strip --strip-debug "$bundle/gpu_binned" "$bundle/gpu_binned_bench"
    if [ "${CAUSTIC_BUNDLE_CLI:-0}" != 0 ]; then
        cargo build -p caustic-cli --release || exit 1
        cp "${CARGO_TARGET_DIR:-target}/release/caustic" "$bundle/"
        cargo test -p caustic --release --no-run --test facade_gpu --message-format=json |
            python3 -c '
import json, shutil, sys
for line in sys.stdin:
    msg = json.loads(line) if line.startswith("{") else {}
    if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
        if msg["target"]["name"] == "facade_gpu":
            shutil.copy2(msg["executable"], sys.argv[1] + "/facade_gpu")
' "$bundle" || exit 1
        strip --strip-debug "$bundle/caustic" "$bundle/facade_gpu"
    fi
    for scene in cornell-box caustics-mnrt sponza-dabrovic conference-69k bunny sibenik buddha-100k dragon; do
        cp "$scenes_dir/$scene.tar.xz" "$bundle/scenes/" || exit 1
    done
    cp scripts/gpu-binned-run.sh "$bundle/"
    du -sh "$bundle"
    exit 0
fi

logs="${OUT:-$here/logs}"
mkdir -p "$logs"
# NVRTC: the CUDA toolkit's, else the nvidia-cuda-nvrtc wheel's.
nvrtc="$(ls /usr/local/cuda/lib64/libnvrtc.so.* /usr/local/cuda*/targets/*/lib/libnvrtc.so.* 2>/dev/null | head -n 1)"
if [ -z "$nvrtc" ]; then
    wheel="$(python3 -c 'import os, nvidia; print(os.path.join(nvidia.__path__[0], "cu13", "lib"))' 2>/dev/null)"
    nvrtc="$(ls "${wheel:-/nonexistent}"/libnvrtc.so.* 2>/dev/null | head -n 1)"
fi
[ -n "$nvrtc" ] && export LD_LIBRARY_PATH="$(dirname "$nvrtc")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "nvrtc: ${nvrtc:-not found}"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader
scenes="${TMPDIR:-/tmp}/caustic-scenes"
mkdir -p "$scenes"
for archive in "$here"/scenes/*.tar.xz; do
    [ -d "$scenes/$(basename "$archive" .tar.xz)" ] && continue
    tar -xJf "$archive" -C "$scenes" 2>/dev/null ||
        python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$archive" "$scenes"
done
export CAUSTIC_SCENES="$scenes" CAUSTIC_REQUIRE_SCENES=1
status=0
if [ "${CAUSTIC_TESTS:-1}" != 0 ]; then
    start=$SECONDS
    # Synchronise after every launch so a fault names its kernel; a hung
    # kernel must not eat the lease.
    CAUSTIC_GPU_SYNC=1 timeout "${CAUSTIC_TEST_TIMEOUT:-240}" "$here/gpu_binned" --include-ignored \
        --test-threads=1 --nocapture ${CAUSTIC_TEST_FILTER:-} >"$logs/gpu_binned.log" 2>&1
    code=$?
    [ $code -eq 0 ] || status=1
    echo "gpu_binned: exit $code in $((SECONDS - start)) s"
    grep -E '^test |test result|panicked|SAH beyond|invalid|differ \(|FAILED|CAUSTIC_TEST_SEED|^device|standard scenes checked|out of GPU memory' \
        "$logs/gpu_binned.log" | head -n 60
    # The SAH lines of the standard scenes and the large soups.
    grep -E '^  bvh-|awkward soup 200000|height field' "$logs/gpu_binned.log" | grep -vE ':leaf|:bins|:sweep' | head -n 50
fi
bench=("$@")
[ ${#bench[@]} -gt 0 ] || bench=(bunny dragon dragon@16)
if [ "${CAUSTIC_BENCH:-1}" != 0 ]; then
    start=$SECONDS
    timeout "${CAUSTIC_BENCH_TIMEOUT:-200}" "$here/gpu_binned_bench" "${bench[@]}" >"$logs/bench.log" 2>&1
    code=$?
    [ $code -eq 0 ] || status=1
    echo "gpu_binned_bench: exit $code in $((SECONDS - start)) s"
    grep -vE '^\| ' "$logs/bench.log" | grep -vE '^$' | tail -n 4
    grep -E '^\| (scene|---)|^\| [a-z0-9-]+x?[0-9]* \| [0-9]' "$logs/bench.log" | awk '!seen[$0]++'
    grep -E '^\| [a-z0-9-]+ \| bvh-' "$logs/bench.log"
fi
if [ -x "$here/caustic" ] && [ "${CAUSTIC_BENCH:-1}" != 0 ]; then
    start=$SECONDS
    timeout "${CAUSTIC_CLI_TIMEOUT:-150}" "$here/caustic" bench gpu --log2-n 0 --camera standard \
        --scene "$scenes/bunny/bun_zipper.ply" "$scenes/dragon/dragon_vrip.ply" \
        "$scenes/dragon/dragon_vrip.ply@16" --reps 5 --warm-up 2 \
        --accel "${CAUSTIC_BENCH_ACCEL:-ploc,lbvh,hlbvh,bvh-binned,bvh-binned-staged,bvh-sweep}" \
        >"$logs/bench_gpu.log" 2>&1
    code=$?
    [ $code -eq 0 ] || status=1
    echo "caustic bench gpu: exit $code in $((SECONDS - start)) s"
    grep -E '^\| (scene|---)|^\| [^|]+ \| [a-z-]+(:[^|]*)? \| [0-9]+ \|' "$logs/bench_gpu.log" | head -n 24
    grep -iE 'error|panicked|differ' "$logs/bench_gpu.log" | head -n 10
fi
if [ -x "$here/facade_gpu" ]; then
    start=$SECONDS
    CAUSTIC_GPU_SYNC=1 timeout "${CAUSTIC_FACADE_TIMEOUT:-150}" "$here/facade_gpu" --include-ignored \
        --test-threads=1 >"$logs/facade_gpu.log" 2>&1
    code=$?
    [ $code -eq 0 ] || status=1
    echo "facade_gpu: exit $code in $((SECONDS - start)) s"
    grep -E '^test |test result|panicked' "$logs/facade_gpu.log" | head -n 20
fi
exit $status
