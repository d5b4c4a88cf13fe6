#!/usr/bin/env bash
# SPPM's steady-state time per pass on 1, 2, 4, ... GPUs of one process,
# free of what a render pays once (opening each GPU, loading its kernel
# modules, uploading the scene, building its structure): the same render
# with P and 5P passes, the difference of their wall times (median of
# REPS each) over 4P passes. Prints a markdown table.
#
#   scripts/multi-gpu-steady.sh CAUSTIC OUT_DIR [SIZE] [P] [PHOTONS]
set -uo pipefail
caustic="${1:?usage: multi-gpu-steady.sh CAUSTIC OUT_DIR [SIZE] [P] [PHOTONS]}"
out="${2:?usage: multi-gpu-steady.sh CAUSTIC OUT_DIR [SIZE] [P] [PHOTONS]}"
size="${3:-1024}"
p="${4:-32}"
photons="${5:-1000000}"
reps="${REPS:-3}"
mkdir -p "$out"
export CAUSTIC_KERNEL_CACHE="${CAUSTIC_KERNEL_CACHE:-$out/kernels}"
gpus="$(nvidia-smi -L | wc -l)"
"$caustic" render cornell-caustics --integrator sppm --device cuda:0 --width 64 --height 64 \
    --passes 1 -q -o "$out/warm.exr" >/dev/null 2>&1 || exit 1
wall() { # device, passes: the median wall time of $reps renders
    for _ in $(seq "$reps"); do
        local start end
        start="$(date +%s.%N)"
        "$caustic" render cornell-caustics --integrator sppm --device "$1" --width "$size" \
            --height "$size" --passes "$2" --photons-per-pass "$photons" -q \
            -o "$out/steady.exr" >/dev/null 2>&1
        end="$(date +%s.%N)"
        python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$start" "$end"
    done | sort -g | sed -n "$(((reps + 1) / 2))p"
}
echo "| GPUs | wall, $p passes | wall, $((5 * p)) passes | per pass (steady) | speed-up | efficiency |"
echo "|---:|---:|---:|---:|---:|---:|"
one=""
for n in 1 2 4 8; do
    [ "$n" -le "$gpus" ] || break
    device="cuda:$(seq -s, 0 $((n - 1)))"
    [ "$n" = 1 ] && device=cuda:0
    short="$(wall "$device" "$p")"
    long="$(wall "$device" $((5 * p)))"
    per="$(python3 -c "import sys; s, l, p = map(float, sys.argv[1:]); print((l - s) / (4 * p) * 1e3)" "$short" "$long" "$p")"
    [ -n "$one" ] || one="$per"
    python3 -c "import sys; n, s, l, per, one = map(float, sys.argv[1:]); print(f'| {int(n)} | {s:.2f} s | {l:.2f} s | {per:.2f} ms | {one / per:.2f}x | {100 * one / per / n:.0f} % |')" \
        "$n" "$short" "$long" "$per" "$one"
done
