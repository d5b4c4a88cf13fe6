#!/usr/bin/env bash
# SPPM with MPI on the GPU machine (issue 17), beside
# scripts/multi-gpu-sppm.sh (several GPUs in one process): the same render
# as one process on one GPU (the reference), as `mpirun -np 1`, as
# `mpirun -np N … --device cuda` (one rank per GPU: rank r takes GPU
# `local rank mod GPUs`), and as one process over every GPU
# (`--device cuda:all`), each timed (median of REPS: the whole command's
# wall time, and the render time the CLI prints), the images compared with
# the reference (`caustic compare`). The GPU machine has no MPI: the
# runtime comes as an archive made by scripts/mpi-bundle.sh.
#
#   OUT=DIR MPI_BUNDLE=openmpi.tar.xz CAUSTIC=./caustic scripts/mpi-gpu-sppm.sh
#
# Settings (environment):
#   CAUSTIC        caustic built with `--features mpi` (default: ./caustic
#                  beside this script, else on PATH)
#   MPI_BUNDLE     scripts/mpi-bundle.sh's archive, or a folder holding
#                  openmpi/env.sh (default: openmpi.tar.xz beside this script)
#   OUT            where the table (mpi-gpu-sppm.md) and the log go
#                  (default: logs/ beside this script)
#   WORK           the images, the unpacked runtime and the kernel cache
#                  (default: $TMPDIR/caustic-mpi-sppm; the device tool brings
#                  back only a few files from $OUT)
#   MPI_RANKS      rank counts besides 1 (default: the number of GPUs, or 2
#                  ranks sharing the GPU on a machine of one)
#   MPI_BUDGETS    renders as SIZE:PASSES:PHOTONS_PER_PASS
#                  (default: "1024:32:1000000 2048:8:4000000")
#   REPS           repetitions of each timed command (default 3)
#   STEP_TIMEOUT   seconds a command may take before it is killed (default 120)
#   MPIRUN_ARGS    more mpirun flags (e.g. "--mca btl_vader_single_copy_mechanism cma")
#   CAUSTIC_KERNEL_CACHE  the kernel disk cache (default: $WORK/kernels),
#                  filled by a small render first, so no timed run compiles
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-$here/logs}"
work="${WORK:-${TMPDIR:-/tmp}/caustic-mpi-sppm}"
mkdir -p "$out" "$work"
log="$out/mpi-gpu-sppm.log"
table="$out/mpi-gpu-sppm.md"
: >"$log"
say() { echo "$*" | tee -a "$log"; }

caustic="${CAUSTIC:-$here/caustic}"
[ -x "$caustic" ] || caustic="$(command -v caustic || true)"
[ -x "$caustic" ] || { say "mpi-gpu-sppm: no caustic binary (set CAUSTIC)"; exit 1; }
caustic="$(cd "$(dirname "$caustic")" && pwd)/$(basename "$caustic")"

# The MPI runtime: unpacked once, then sourced.
bundle="${MPI_BUNDLE:-$here/openmpi.tar.xz}"
if [ -f "$bundle" ]; then
    ompi="$work/openmpi-runtime"
    [ -f "$ompi/openmpi/env.sh" ] || { mkdir -p "$ompi" && tar -xJf "$bundle" -C "$ompi"; } ||
        { say "mpi-gpu-sppm: cannot unpack $bundle"; exit 1; }
    bundle="$ompi"
fi
[ -f "$bundle/openmpi/env.sh" ] || { say "mpi-gpu-sppm: no openmpi/env.sh in $bundle (MPI_BUNDLE)"; exit 1; }
# shellcheck source=/dev/null
. "$bundle/openmpi/env.sh"
libs="$(ldd "$caustic" 2>&1)"
if ! grep -q 'libmpi\.so' <<<"$libs"; then
    say "mpi-gpu-sppm: $caustic was built without the mpi feature (cargo build --release -p caustic-cli --features mpi)"
    exit 1
fi
if grep -q 'not found' <<<"$libs"; then
    say "mpi-gpu-sppm: $caustic misses libraries:"; grep 'not found' <<<"$libs" | tee -a "$log"
    exit 1
fi

# NVRTC: the CUDA toolkit's, else the nvidia-cuda-nvrtc wheel's (as gpu-run.sh).
nvrtc="$(ls /usr/local/cuda/lib64/libnvrtc.so.* /usr/local/cuda*/targets/*/lib/libnvrtc.so.* 2>/dev/null | head -n 1)"
[ -n "$nvrtc" ] && export LD_LIBRARY_PATH="$(dirname "$nvrtc"):$LD_LIBRARY_PATH"
export CAUSTIC_KERNEL_CACHE="${CAUSTIC_KERNEL_CACHE:-$work/kernels}"

gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')"
[ "$gpus" -ge 1 ] || { say "mpi-gpu-sppm: nvidia-smi lists no GPU"; exit 1; }
gpu_name="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)"
ranks_list="${MPI_RANKS:-$([ "$gpus" -gt 1 ] && echo "$gpus" || echo 2)}"
budgets="${MPI_BUDGETS:-1024:32:1000000 2048:8:4000000}"
reps="${REPS:-3}"
step_timeout="${STEP_TIMEOUT:-120}"
say "GPUs: $gpus x $gpu_name; $(mpirun --version 2>&1 | head -n 1); ranks: 1 $ranks_list; budgets: $budgets; $reps reps"

# One mpirun for the job: one node, ranks started by mpirun itself (plm
# isolated), shared memory between them; no binding, since each rank runs
# its host work on a pool of threads.
# shellcheck disable=SC2206 # MPIRUN_ARGS is a list of flags
mpirun_args=(--oversubscribe --bind-to none ${MPIRUN_ARGS:-})

# Kernels into the cache first (one small render), so no timed run pays for NVRTC.
timeout "$step_timeout" "$caustic" render cornell-caustics --integrator sppm --device cuda:0 \
    --width 64 --height 64 --passes 1 -q -o "$work/warm.exr" >>"$log" 2>&1 ||
    { say "mpi-gpu-sppm: the warm-up render failed (see $log)"; tail -n 20 "$log"; exit 1; }

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
now() { date +%s.%N; }

# run NAME IMAGE COMMAND…: REPS timed runs; prints "WALL RENDER" medians.
run() {
    local name="$1" image="$2" walls="" renders="" i start end line code
    shift 2
    for ((i = 1; i <= reps; i++)); do
        start="$(now)"
        line="$(timeout "$step_timeout" "$@" -o "$image" 2>&1)"
        code=$?
        end="$(now)"
        echo "== $name (run $i, exit $code): $*" >>"$log"
        echo "$line" >>"$log"
        if [ $code -ne 0 ]; then
            echo "$name: exit $code" >&2
            echo "- -"
            return
        fi
        walls+="$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')"$'\n'
        renders+="$(sed -n 's/.*): \([0-9.]*\) s (eye.*/\1/p' <<<"$line" | tail -n 1)"$'\n'
    done
    echo "$(median <<<"${walls%$'\n'}") $(median <<<"${renders%$'\n'}")"
}

# compare IMAGE REFERENCE: "RMSE r, PSNR p dB".
compare() {
    [ -f "$1" ] || { echo "no image"; return; }
    "$caustic" compare "$1" "$2" 2>&1 | tee -a "$log" |
        awk '/^rmse_linear/ { r = $2 } /^psnr_db/ { p = $2 } END { printf "RMSE %s, PSNR %s dB\n", r, p }'
}

{
    echo "SPPM with MPI on $gpus x $gpu_name ($(date -u +%Y-%m-%d), cornell-caustics, kernels cached; median of $reps;"
    echo "wall: the whole command, mpirun's start included; render: the CLI's render time; efficiency: one GPU's render time / (GPUs x this render time))"
    echo
    echo "| render | run | GPUs | wall | render | speed-up (render) | efficiency | image against one GPU |"
    echo "|---|---|---:|---:|---:|---:|---:|---|"
} >"$table"

for budget in $budgets; do
    IFS=: read -r size passes photons <<<"$budget"
    what="${size}², $passes passes × $photons photons"
    args=(render cornell-caustics --integrator sppm --width "$size" --height "$size"
        --passes "$passes" --photons-per-pass "$photons")
    ref="$work/sppm-$size-1gpu.exr"
    read -r wall one < <(run "$size 1 GPU" "$ref" "$caustic" "${args[@]}" --device cuda:0)
    echo "| $what | one process, \`--device cuda:0\` | 1 | $wall s | $one s | 1.00× | 100 % | (reference) |" >>"$table"
    say "$what: one process on GPU 0: wall $wall s, render $one s"
    # row NAME RUN GPUS IMAGE COMMAND…
    row() {
        local name="$1" label="$2" used="$3" image="$4" wall t speed eff cmp
        shift 4
        read -r wall t < <(run "$name" "$image" "$@")
        read -r speed eff < <(awk -v one="$one" -v t="$t" -v n="$used" \
            'BEGIN { if (t + 0 > 0 && one + 0 > 0) printf "%.2f× %.0f %%\n", one / t, 100 * one / t / n; else print "- -" }')
        cmp="$(compare "$image" "$ref")"
        echo "| $what | $label | $used | $wall s | $t s | $speed | $eff | $cmp |" >>"$table"
        say "$what: $label: wall $wall s, render $t s, speed-up $speed, efficiency $eff, $cmp"
    }
    row "$size mpirun -np 1" "\`mpirun -np 1\`" 1 "$work/sppm-$size-mpi1.exr" \
        mpirun "${mpirun_args[@]}" -np 1 "$caustic" "${args[@]}" --device cuda
    for n in $ranks_list; do
        used=$((n < gpus ? n : gpus))
        row "$size mpirun -np $n" "\`mpirun -np $n\`, \`--device cuda\` (GPU = local rank mod $gpus)" "$used" \
            "$work/sppm-$size-mpi$n.exr" mpirun "${mpirun_args[@]}" -np "$n" "$caustic" "${args[@]}" --device cuda
    done
    if [ "$gpus" -gt 1 ]; then
        row "$size cuda:all" "one process, \`--device cuda:all\`" "$gpus" "$work/sppm-$size-all.exr" \
            "$caustic" "${args[@]}" --device cuda:all
    fi
done
echo "---- $table"
cat "$table"
