#!/usr/bin/env bash
# An animation's frames dealt over 1, 2, 4, ... GPUs of one process (issue
# 17: photon-frame throughput): `caustic render SCENE --frames A..B --device
# cuda:0|cuda:0,1|…`, frame k on GPU k mod N. Prints the CLI's `animation:`
# line (wall clock, the images' writes included) and the GPUs' own frame
# rate: N / the median frame time (posing, update, upload, render and
# download of a frame, its write left out), with the slowest frames (kernel
# loads, first refits) left out; then compares frames with one GPU's.
#
#   scripts/multi-gpu-frames.sh CAUSTIC OUT_DIR [FRAMES] [CLI flags…]
#
# FRAMES defaults to 0..47; the flags default to the photon-mapped moving
# Cornell box at 1920x1080, 1 spp, the global map read directly. Images go
# to $FRAMES_DIR (default /dev/shm/caustic-frames: a 1080p EXR is 25 MB, and
# a disk can bound the wall clock before the GPUs do). Kernels are compiled
# into the disk cache by a two-frame animation first.
set -uo pipefail
caustic="${1:?usage: multi-gpu-frames.sh CAUSTIC OUT_DIR [FRAMES] [flags…]}"
out="${2:?usage: multi-gpu-frames.sh CAUSTIC OUT_DIR [FRAMES] [flags…]}"
frames="${3:-0..47}"
shift $(($# < 3 ? $# : 3))
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(cornell-caustics-moving --integrator photon --width 1920 --height 1080
    --spp 1 --no-final-gather)
images="${FRAMES_DIR:-/dev/shm/caustic-frames}"
mkdir -p "$out" "$images/warm"
export CAUSTIC_KERNEL_CACHE="${CAUSTIC_KERNEL_CACHE:-$out/kernels}"
gpus="$(nvidia-smi -L | wc -l)"
"$caustic" render "${flags[@]}" --frames 0..1 --device cuda:0 \
    -o "$images/warm/f_%04d.exr" >"$out/warm.log" 2>&1 || { echo "warm-up failed:"; tail -5 "$out/warm.log"; exit 1; }
one=""
for n in 1 2 4 8; do
    [ "$n" -le "$gpus" ] || break
    set="$(seq -s, 0 $((n - 1)))"
    rm -rf "$images/g$n" && mkdir -p "$images/g$n"
    "$caustic" render "${flags[@]}" --frames "$frames" --device "cuda:$set" -o "$images/g$n/f_%04d.exr" \
        >"$out/frames-g$n.log" 2>&1 || { echo "$n GPUs failed:"; tail -5 "$out/frames-g$n.log"; continue; }
    rate="$(python3 "$(dirname "$0")/frame_rate.py" "$out/frames-g$n.log" "$n")"
    [ -n "$one" ] || one="$rate"
    eff="$(python3 -c "print(f'{$rate / ($n * $one) * 100:.0f}')")"
    echo "$n GPU(s): $(grep '^animation:' "$out/frames-g$n.log"); GPUs' own rate $rate frames/s ($eff % of $n × one GPU's)"
    if [ "$n" -gt 1 ]; then
        for f in "$images/g1"/f_*.exr; do
            name="$(basename "$f")"
            echo "  $name: $("$caustic" compare "$images/g$n/$name" "$f" 2>&1 | head -n 1)"
        done | sort | awk 'NR % 12 == 1'
        rm -rf "$images/g$n" # one GPU's frames stay, for the next comparison
    fi
done
