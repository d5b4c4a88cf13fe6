#!/usr/bin/env bash
# Runs a bundle made by scripts/gpu-bundle.sh on the GPU machine: every test
# binary with the GPU tests included, the primitives benchmark and torch.sort
# on the same GPU for comparison, and the trace benchmark on the carried
# scenes. Full logs go to $OUT (the device tool's folder) or to logs/ beside
# this script; the end of the output is a summary.
#
# Settings (environment):
#   CAUSTIC_TESTS="gpu_trace nvrtc_compile"  only these test binaries (default: all)
#   CAUSTIC_PRIMITIVES_BENCH=0                skip the primitives bench and torch.sort
#   CAUSTIC_TRACE_BENCH=0                     skip the trace benchmark
#   CAUSTIC_TRACE_SCENES="sponza dragon"      the trace benchmark's scenes (default: its set)
#   CAUSTIC_WHITTED_BENCH=0                   skip the GPU-vs-CPU Whitted frame-time benchmark
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
logs="${OUT:-$here/logs}"
mkdir -p "$logs"
summary="$logs/summary.txt"
: >"$summary"

# NVRTC: the CUDA toolkit's, else the nvidia-cuda-nvrtc wheel's.
nvrtc="$(ls /usr/local/cuda/lib64/libnvrtc.so.* /usr/local/cuda*/targets/*/lib/libnvrtc.so.* 2>/dev/null | head -n 1)"
if [ -z "$nvrtc" ]; then
    wheel="$(python3 -c 'import os, nvidia; print(os.path.join(nvidia.__path__[0], "cu13", "lib"))' 2>/dev/null)"
    nvrtc="$(ls "${wheel:-/nonexistent}"/libnvrtc.so.* 2>/dev/null | head -n 1)"
fi
if [ -n "$nvrtc" ]; then
    export LD_LIBRARY_PATH="$(dirname "$nvrtc")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
{
    echo "nvrtc: ${nvrtc:-not found}"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader
} | tee -a "$summary"

# Scenes: the carried archives, unpacked once (tar needs xz; Python's
# tarfile reads them too).
if ls "$here"/scenes/*.tar.xz >/dev/null 2>&1; then
    scenes="${TMPDIR:-/tmp}/caustic-scenes"
    mkdir -p "$scenes"
    for archive in "$here"/scenes/*.tar.xz; do
        [ -d "$scenes/$(basename "$archive" .tar.xz)" ] && continue
        tar -xJf "$archive" -C "$scenes" 2>/dev/null ||
            python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$archive" "$scenes"
    done
    export CAUSTIC_SCENES="$scenes" CAUSTIC_REQUIRE_SCENES=1
    echo "scenes: $(ls "$scenes" | tr '\n' ' ')" | tee -a "$summary"
fi

# Tests: synchronise after every launch so a fault names its kernel.
status=0
for test in "$here"/tests/*; do
    name="$(basename "$test")"
    if [ -n "${CAUSTIC_TESTS:-}" ] && ! [[ " $CAUSTIC_TESTS " == *" $name "* ]]; then
        continue
    fi
    echo "== $name" >>"$logs/tests.log"
    start=$SECONDS
    # A hung kernel (a look-back that never resolves) must not eat the lease.
    CAUSTIC_GPU_SYNC=1 timeout "${CAUSTIC_TEST_TIMEOUT:-240}" \
        "$test" --include-ignored --test-threads=1 --nocapture >>"$logs/tests.log" 2>&1
    code=$?
    [ $code -eq 0 ] || status=1
    result="$(grep -E '^test result' "$logs/tests.log" | tail -n 1)"
    echo "$name: exit $code in $((SECONDS - start)) s: $result" | tee -a "$summary"
done
grep -E 'panicked|FAILED|failures:|CAUSTIC_TEST_SEED|^device' "$logs/tests.log" | head -n 60 | tee -a "$summary"

# Trace benchmark on the carried scenes.
if [ "${CAUSTIC_TRACE_BENCH:-1}" != 0 ] && [ -x "$here/trace_bench" ]; then
    # shellcheck disable=SC2086 # the scene list is meant to split
    timeout "${CAUSTIC_TRACE_BENCH_TIMEOUT:-300}" "$here/trace_bench" ${CAUSTIC_TRACE_SCENES:-} \
        2>&1 | tee "$logs/trace_bench.log"
fi

# The Whitted renderer at 1920x1080: GPU frame time against the CPU's.
if [ "${CAUSTIC_WHITTED_BENCH:-1}" != 0 ] && [ -x "$here/whitted_gpu_bench" ]; then
    timeout "${CAUSTIC_WHITTED_BENCH_TIMEOUT:-300}" "$here/whitted_gpu_bench" \
        2>&1 | tee "$logs/whitted_bench.log"
fi

# Primitives benchmark, then torch.sort on the same GPU.
primitives_bench() {
    if [ -x "$here/bench" ]; then
        timeout "${CAUSTIC_BENCH_TIMEOUT:-120}" "$here/bench" 26 2>&1 | tee "$logs/bench.log"
    fi
    python3 - <<'PY' 2>&1 | tee "$logs/torch.log"
import statistics, torch
n = 1 << 26
def median_ms(fn, repeats=20, warm_up=3):
    for _ in range(warm_up):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(); fn(); end.record(); torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)
g = torch.Generator(device="cuda").manual_seed(0)
for name, dtype, low, high in [("int32", torch.int32, -2**31, 2**31 - 1), ("int64", torch.int64, -2**62, 2**62)]:
    keys = torch.randint(low, high, (n,), dtype=dtype, device="cuda", generator=g)
    # torch.sort returns the keys and their int64 indices: a key-value sort.
    ms = median_ms(lambda: torch.sort(keys, stable=True))
    print(f"TORCH sort {name} keys + int64 indices, n=2^26: {ms:.3f} ms, {n / ms / 1e6:.3f} Gkeys/s")
try:
    import cupy
    # cupy.sort of unsigned keys is a keys-only radix sort (CUB through Thrust).
    keys = cupy.random.default_rng(0).integers(0, 2**32, size=n, dtype=cupy.uint32)
    def cupy_sort():
        cupy.sort(keys)
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    for _ in range(3):
        cupy_sort()
    times = []
    for _ in range(20):
        start.record(); cupy_sort(); end.record(); end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end))
    ms = statistics.median(times)
    print(f"CUPY {cupy.__version__} sort uint32 keys only, n=2^26: {ms:.3f} ms, {n / ms / 1e6:.3f} Gkeys/s")
except Exception as e:
    print(f"CUPY keys-only sort unavailable: {e}")
src = torch.randint(0, 2**31 - 1, (n,), dtype=torch.int32, device="cuda", generator=g)
dst = torch.empty_like(src)
ms = median_ms(lambda: dst.copy_(src))
print(f"TORCH copy int32 n=2^26: {ms:.3f} ms, {8 * n / ms / 1e6:.1f} GB/s")
print(f"TORCH {torch.__version__} on {torch.cuda.get_device_name()}")
PY
}
if [ "${CAUSTIC_PRIMITIVES_BENCH:-1}" != 0 ]; then
    primitives_bench
fi

echo "---- summary"
cat "$summary"
grep -h -E '^\| |^RESULT|^GPU BVH2|^WHITTED|^device' "$logs/bench.log" "$logs/trace_bench.log" \
    "$logs/whitted_bench.log" 2>/dev/null
grep -h -E "^(TORCH|CUPY)" "$logs/torch.log" 2>/dev/null
exit $status
