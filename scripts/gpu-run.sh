#!/usr/bin/env bash
# Runs a bundle made by scripts/gpu-bundle.sh on the GPU machine: every test
# binary with the GPU tests included, `caustic bench gpu` (primitives and
# trace throughput on the carried scenes), torch.sort and cupy.sort on the
# same GPU, the OptiX anchor on the same scenes and cameras when the bundle
# carries Mitsuba (scripts/gpu_vs_optix.py then prints the side-by-side
# table), and optionally an Nsight Compute profile of the scan and sort
# kernels. Full logs go to $OUT (the device tool's folder; at most 8 files
# come back) or to logs/ beside this script; the end of the output is a
# summary.
#
# Settings (environment):
#   CAUSTIC_TESTS="gpu_trace nvrtc_compile"  only these test binaries (default: all; "none": no tests)
#   CAUSTIC_TEST_JOBS=2                       test binaries run at once, each on a GPU of its own (default 1)
#   CAUSTIC_BENCH=0                           skip caustic bench gpu
#   CAUSTIC_BENCH_SCENES="sponza-dabrovic/sponza.obj dragon/dragon_vrip.ply@16"
#                                             its scenes (paths in the scene folder; default: the OptiX set)
#   CAUSTIC_BENCH_ACCEL="ploc,lbvh"            the structures it builds and traces (default: all)
#   CAUSTIC_BENCH_ARGS="--reps 10 --warm-up 2" more flags for caustic bench gpu
#   CAUSTIC_BENCH_LARGE="dragon/dragon_vrip.ply@36"  one more scene, device builders only
#                                             (CAUSTIC_BENCH_LARGE_ACCEL: which)
#   CAUSTIC_PRIMITIVES_BENCH=0                skip the primitives (ours, torch.sort, cupy.sort)
#   CAUSTIC_OPTIX=0                           skip the OptiX anchor
#   CAUSTIC_WHITTED_BENCH=0                   skip the GPU-vs-CPU Whitted frame-time benchmark
#   CAUSTIC_POINTS_BENCH=0                    skip the GPU photon-search benchmark
#   CAUSTIC_PHOTON_BENCH=0                    skip the GPU photon-mapped frame benchmark
#   CAUSTIC_PHOTON_BENCH_ARGS="1000000 1920x1080 --no-cpu"  its arguments
#   CAUSTIC_NCU=1                             profile scan and radix sort with ncu (CAUSTIC_NCU_CUB=1: CUB's too)
#   CAUSTIC_MPI_BENCH=0                       skip SPPM under MPI (mpi-gpu-sppm.sh; runs when the
#                                             bundle carries openmpi.tar.xz: CAUSTIC_BUNDLE_MPI=1)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
logs="${OUT:-$here/logs}"
mkdir -p "$logs"
summary="$logs/summary.txt"
: >"$summary"

# A packed bundle (CAUSTIC_BUNDLE_PACK=1) carries its executables as one archive.
if [ -f "$here/bin.tar.xz" ] && ! [ -x "$here/caustic" ]; then
    tar -xJf "$here/bin.tar.xz" -C "$here"
fi

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

# The Mitsuba references the photon tests compare against (gpu-bundle.sh
# carries the Cornell scenes' files).
if [ -d "$here/refs" ]; then
    export CAUSTIC_REFS="$here/refs"
fi

# Tests: synchronise after every launch so a fault names its kernel.
# CAUSTIC_TEST_JOBS=N runs up to N test binaries at once, each alone on a
# GPU of its own (CUDA_VISIBLE_DEVICES): several tests exhaust the device's
# memory on purpose, and beside them another binary's allocations fail
# (2026-11-28: four binaries sharing one GPU failed 33 tests that pass
# alone). The binaries that test several GPUs (facade_gpu) run first, with
# every GPU. Each binary's output goes to its own log, appended to
# tests.log in order.
status=0
run_test() { # executable [visible GPUs]
    local name start code
    name="$(basename "$1")"
    start=$SECONDS
    # A hung kernel (a look-back that never resolves) must not eat the lease.
    env ${2:+CUDA_VISIBLE_DEVICES=$2} CAUSTIC_GPU_SYNC=1 timeout "${CAUSTIC_TEST_TIMEOUT:-240}" \
        "$1" --include-ignored --test-threads=1 --nocapture >"$logs/test-$name.log" 2>&1
    code=$?
    echo "$name: exit $code in $((SECONDS - start)) s${2:+ on GPU $2}: $(grep -E '^test result' "$logs/test-$name.log" | tail -n 1)" \
        >"$logs/test-$name.result"
}
selected=()
for test in "$here"/tests/*; do
    name="$(basename "$test")"
    if [ -n "${CAUSTIC_TESTS:-}" ] && ! [[ " $CAUSTIC_TESTS " == *" $name "* ]]; then
        continue
    fi
    selected+=("$test")
done
gpus="$(nvidia-smi -L 2>/dev/null | wc -l)"
jobs="${CAUSTIC_TEST_JOBS:-1}"
[ "$jobs" -le "$gpus" ] || jobs="$gpus"
if [ "$jobs" -le 1 ]; then
    for test in "${selected[@]}"; do run_test "$test"; done
else
    shared=() queued=()
    for test in "${selected[@]}"; do
        case "$(basename "$test")" in facade_gpu) shared+=("$test") ;; *) queued+=("$test") ;; esac
    done
    for test in "${shared[@]}"; do run_test "$test"; done
    # One queue a GPU, the binaries dealt round-robin.
    for gpu in $(seq 0 $((jobs - 1))); do
        (
            for i in "${!queued[@]}"; do
                [ $((i % jobs)) = "$gpu" ] && run_test "${queued[$i]}" "$gpu"
            done
        ) &
    done
    wait
fi
for test in "${selected[@]}"; do
    name="$(basename "$test")"
    { echo "== $name"; cat "$logs/test-$name.log"; } >>"$logs/tests.log"
    rm -f "$logs/test-$name.log"
    result="$(cat "$logs/test-$name.result")"
    rm -f "$logs/test-$name.result"
    [[ "$result" == "$name: exit 0 "* ]] || status=1
    echo "$result" | tee -a "$summary"
done
# Every randomised test prints its seed; only a failure's matters, and
# the failure's own lines carry it.
grep -E 'panicked|FAILED|failures:|^device' "$logs/tests.log" | head -n 60 | tee -a "$summary"

# caustic bench gpu: the primitives, then the trace passes on the scenes of
# the OptiX anchor (the standard cameras, --camera standard; 16 dragons framed
# as the anchor frames them).
optix_scenes="bunny/bun_zipper.ply dragon/dragon_vrip.ply sponza-dabrovic/sponza.obj sibenik/sibenik.obj conference-69k/conference.obj dragon/dragon_vrip.ply@16 dragon/dragon_vrip.ply@36"
if [ "${CAUSTIC_BENCH:-1}" != 0 ] && [ -x "$here/caustic" ]; then
    bench_args=()
    [ "${CAUSTIC_PRIMITIVES_BENCH:-1}" != 0 ] || bench_args+=(--log2-n 0)
    if [ -n "${scenes:-}" ]; then
        # Each standard scene's own camera, by its file name.
        bench_args+=(--camera standard --scene)
        for spec in ${CAUSTIC_BENCH_SCENES:-$optix_scenes}; do bench_args+=("$scenes/$spec"); done
    fi
    # shellcheck disable=SC2086 # CAUSTIC_BENCH_ARGS is a list of flags
    timeout "${CAUSTIC_BENCH_TIMEOUT:-360}" "$here/caustic" bench gpu "${bench_args[@]}" \
        --accel "${CAUSTIC_BENCH_ACCEL:-all}" ${CAUSTIC_BENCH_ARGS:-} \
        --json "$logs/caustic_gpu.json" 2>&1 | tee -a "$logs/bench.log"
    # The largest scene with the device builders only (a CPU build of 31 M
    # triangles repeated would take minutes): how build time grows.
    if [ -n "${CAUSTIC_BENCH_LARGE:-}" ] && [ -n "${scenes:-}" ]; then
        # shellcheck disable=SC2086
        timeout "${CAUSTIC_BENCH_LARGE_TIMEOUT:-120}" "$here/caustic" bench gpu --log2-n 0 \
            --camera standard --scene "$scenes/$CAUSTIC_BENCH_LARGE" \
            --accel "${CAUSTIC_BENCH_LARGE_ACCEL:-lbvh,hlbvh,ploc,bvh-wide}" ${CAUSTIC_BENCH_ARGS:-} \
            --json "$logs/caustic_gpu_large.json" 2>&1 | tee -a "$logs/bench.log"
    fi
fi

# The Whitted renderer at 1920x1080: GPU frame time against the CPU's.
# Photon-map search: hash-grid build for 10^6 points and kNN for 1920x1080
# queries (examples/points_bench.rs).
if [ "${CAUSTIC_POINTS_BENCH:-1}" != 0 ] && [ -x "$here/points_bench" ]; then
    timeout "${CAUSTIC_POINTS_BENCH_TIMEOUT:-120}" "$here/points_bench" 1000000 50 \
        >"$logs/points_bench.log" 2>&1
    echo "points_bench: exit $?" | tee -a "$summary"
    grep -E 'build|brute' "$logs/points_bench.log" | tee -a "$summary"
fi

if [ "${CAUSTIC_WHITTED_BENCH:-1}" != 0 ] && [ -x "$here/whitted_gpu_bench" ]; then
    timeout "${CAUSTIC_WHITTED_BENCH_TIMEOUT:-300}" "$here/whitted_gpu_bench" \
        2>&1 | tee -a "$logs/bench.log"
fi

# The photon mapper at 1920x1080 with 10^6 photons: GPU frame time by
# stage, against one CPU frame (examples/photon_gpu_bench.rs).
if [ "${CAUSTIC_PHOTON_BENCH:-1}" != 0 ] && [ -x "$here/photon_gpu_bench" ]; then
    timeout "${CAUSTIC_PHOTON_BENCH_TIMEOUT:-300}" "$here/photon_gpu_bench" ${CAUSTIC_PHOTON_BENCH_ARGS:-} \
        2>&1 | tee -a "$logs/bench.log"
fi

# torch.sort and cupy.sort (CUB) and a torch copy on the same GPU.
primitives_bench() {
    python3 - <<'PY' 2>&1 | tee -a "$logs/bench.log"
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

# OptiX through Mitsuba 3 on the same scenes and cameras (the anchor's specs).
if [ "${CAUSTIC_OPTIX:-1}" != 0 ] && [ -f "$here/optix/mts312.tar.xz" ] && [ -n "${scenes:-}" ]; then
    site=/tmp/mts-site
    mkdir -p "$site" && tar -xJf "$here/optix/mts312.tar.xz" -C "$site"
    (cd "$scenes" && PYTHONPATH="$site" PYTHONUNBUFFERED=1 timeout "${CAUSTIC_OPTIX_TIMEOUT:-300}" \
        python3 "$here/optix/optix_anchor.py" cuda_ad_rgb "$logs/optix.jsonl" \
        "bunny:bunny/bun_zipper.ply:0.1031,0.1959,0.3413:-0.0168,0.1102,-0.0015:0,1,0:40" \
        "dragon:dragon/dragon_vrip.ply:0.1221,0.2164,0.3610:-0.0059,0.1250,-0.0046:0,1,0:40" \
        "sponza:sponza-dabrovic/sponza.obj:-14,0,2.5:0,0,4:0,0,1:65" \
        "sibenik:sibenik/sibenik.obj:-17,-9,0:10,-11,0:0,1,0:65" \
        "conference:conference-69k/conference.obj:-850,-550,480:700,350,100:0,0,1:65" \
        "dragon-x16:dragon/dragon_vrip.ply:0,0,0:0,0,-1:0,1,0:40:16" \
        "dragon-x36:dragon/dragon_vrip.ply:0,0,0:0,0,-1:0,1,0:40:36") 2>&1 | tee -a "$logs/bench.log"
    if [ -f "$logs/caustic_gpu.json" ] && [ -f "$logs/optix.jsonl" ]; then
        python3 "$here/gpu_vs_optix.py" "$logs/caustic_gpu.json" \
            $(ls "$logs/caustic_gpu_large.json" 2>/dev/null) "$logs/optix.jsonl" | tee -a "$summary"
    fi
fi

# Nsight Compute: our scan and sort kernels (by default the scan's check
# run, the histograms of the u32 pair and keys sorts and the first keys-only
# digit pass; CAUSTIC_NCU_KERNELS and CAUSTIC_NCU_COUNT choose others), then
# with CAUSTIC_NCU_CUB=1 CUB's sort and scan through CuPy.
if [ "${CAUSTIC_NCU:-0}" != 0 ] && command -v ncu >/dev/null; then
    ncu_args=(--clock-control none --set full --import-source no)
    timeout 240 ncu "${ncu_args[@]}" \
        -k regex:"${CAUSTIC_NCU_KERNELS:-^(scan_exclusive_u32|radix_sort_histogram_u32|radix_sort_onesweep_keys_u32)\$}" \
        -c "${CAUSTIC_NCU_COUNT:-6}" "$here/caustic" bench gpu --log2-n 26 --warm-up 0 --reps 1 >"$logs/ncu.txt" 2>&1
    if [ "${CAUSTIC_NCU_CUB:-0}" != 0 ]; then
        timeout 120 ncu "${ncu_args[@]}" -k regex:'Onesweep|Histogram|Scan' -c 10 env CUPY_ACCELERATORS=cub python3 -c '
import cupy
keys = cupy.random.default_rng(0).integers(0, 2**32, size=1 << 26, dtype=cupy.uint32)
cupy.sort(keys); cupy.cuda.runtime.deviceSynchronize()
a = cupy.random.default_rng(1).integers(0, 2**20, size=1 << 26, dtype=cupy.uint32)
cupy.cumsum(a); cupy.cuda.runtime.deviceSynchronize()' >>"$logs/ncu.txt" 2>&1
    fi
    grep -E '^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|Executed Instructions  |Warp Cycles Per Issued' \
        "$logs/ncu.txt" | head -n 150 >"$logs/ncu_summary.txt"
    cat "$logs/ncu_summary.txt" >>"$summary"
fi

# SPPM under MPI, one rank per GPU, against one GPU and cuda:all, with the
# bundle's Open MPI (its settings: MPI_BUDGETS, MPI_RANKS, REPS, ...).
if [ "${CAUSTIC_MPI_BENCH:-1}" != 0 ] && [ -f "$here/openmpi.tar.xz" ] && [ -x "$here/caustic" ]; then
    CAUSTIC="$here/caustic" MPI_BUNDLE="$here/openmpi.tar.xz" OUT="$logs" \
        timeout "${CAUSTIC_MPI_BENCH_TIMEOUT:-300}" bash "$here/mpi-gpu-sppm.sh" >/dev/null 2>&1
    echo "mpi-gpu-sppm: exit $?" | tee -a "$summary"
    cat "$logs/mpi-gpu-sppm.md" >>"$summary" 2>/dev/null
fi

echo "---- summary"
cat "$summary"
grep -h -E '^\| |^Primitives|^BVH2|^WHITTED|^device|^(TORCH|CUPY)' "$logs/bench.log" 2>/dev/null
# The device tool brings back at most 8 files from $OUT: past that the
# logs go back as one archive (logs.tar.xz) beside the summary.
if [ -n "${OUT:-}" ] && [ "$(find "$logs" -maxdepth 1 -type f | wc -l)" -gt 7 ]; then
    (
        cd "$logs" || exit
        find . -maxdepth 1 -type f ! -name summary.txt ! -name logs.tar.xz -printf '%P\n' >/tmp/gpu-run-logs.txt
        tar -cJf logs.tar.xz -T /tmp/gpu-run-logs.txt && xargs rm -f </tmp/gpu-run-logs.txt
    )
fi

exit $status
