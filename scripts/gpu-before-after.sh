#!/usr/bin/env bash
# Two builds of the CLI and the photon/SPPM benchmarks side by side on the
# GPU machine (the device tool), for a change's before/after table:
#
#   OUT=... bash gpu-before-after.sh BEFORE_DIR AFTER_DIR [REPS]
#
# Each dir holds `caustic`, `photon_gpu_bench` and `sppm_gpu_bench`. Runs,
# alternating before/after, REPS times each (default 3):
#   - SPPM 1024², 32 passes x 10^6 photons on cornell-caustics (the CLI's
#     timing line: eye, photon, grid and gather seconds);
#   - the CLI's default GPU photon render of cornell-caustics (512², 16 spp,
#     final gather) and its timing line;
#   - photon_gpu_bench 10^6 photons at 1920x1080 (the frame's stage table);
# then `caustic compare` of the before and after images (they should agree).
set -uo pipefail
before="${1:?usage: gpu-before-after.sh BEFORE_DIR AFTER_DIR [REPS]}"
after="${2:?usage: gpu-before-after.sh BEFORE_DIR AFTER_DIR [REPS]}"
reps="${3:-3}"
out="${OUT:-/tmp}/before-after"
mkdir -p "$out"
export CAUSTIC_KERNEL_CACHE="${CAUSTIC_KERNEL_CACHE:-/tmp/caustic-before-after-kernels}"
step() { timeout "${STEP_TIMEOUT:-120}" "$@"; }
for side in before after; do
    dir="$before"; [ "$side" = after ] && dir="$after"
    # Compile every kernel into the cache once, untimed.
    step "$dir/caustic" render cornell-caustics --integrator sppm --device cuda --width 64 \
        --height 64 --passes 1 -q -o "$out/warm-$side.exr" >/dev/null 2>&1
    step "$dir/caustic" render cornell-caustics --integrator photon --device cuda --width 64 \
        --height 64 -q -o "$out/warm-$side.exr" >/dev/null 2>&1
done
for rep in $(seq 1 "$reps"); do
    for side in before after; do
        dir="$before"; [ "$side" = after ] && dir="$after"
        echo "== sppm $side (rep $rep): $(step "$dir/caustic" render cornell-caustics \
            --integrator sppm --device cuda --width 1024 --height 1024 --passes 32 \
            --photons-per-pass 1000000 -o "$out/sppm-$side.exr" 2>&1 | tail -n 1)"
        echo "== photon CLI $side (rep $rep): $(step "$dir/caustic" render cornell-caustics \
            --integrator photon --device cuda -o "$out/photon-$side.exr" 2>&1 | tail -n 1)"
    done
done
for side in before after; do
    dir="$before"; [ "$side" = after ] && dir="$after"
    echo "== photon_gpu_bench $side"
    step "$dir/photon_gpu_bench" 1000000 1920x1080 --no-cpu 2>&1 | tail -n 30
done
for what in sppm photon; do
    echo "== $what: after against before"
    "$after/caustic" compare "$out/$what-after.exr" "$out/$what-before.exr" 2>&1 | head -n 3
done
