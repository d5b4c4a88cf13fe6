#!/usr/bin/env bash
# SPPM split among the GPUs of one machine (issue 17): the same render on
# 1, 2, ... GPUs (`--device cuda:0`, `cuda:0,1`, ...), its time, the
# scaling efficiency against one GPU, and the images compared with the
# one-GPU image (they must be equal: RMSE 0).
#
#   scripts/multi-gpu-sppm.sh CAUSTIC OUT_DIR [SIZE] [PASSES] [PHOTONS]
#
# Kernels are compiled once into a disk cache first (a small render), so
# no timed run pays for NVRTC.
set -uo pipefail
caustic="${1:?usage: multi-gpu-sppm.sh CAUSTIC OUT_DIR [SIZE] [PASSES] [PHOTONS]}"
out="${2:?usage: multi-gpu-sppm.sh CAUSTIC OUT_DIR [SIZE] [PASSES] [PHOTONS]}"
size="${3:-1024}"
passes="${4:-32}"
photons="${5:-1000000}"
mkdir -p "$out"
export CAUSTIC_KERNEL_CACHE="${CAUSTIC_KERNEL_CACHE:-$out/kernels}"
gpus="$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)"
echo "GPUs: $gpus ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1))"
"$caustic" render cornell-caustics --integrator sppm --device cuda:0 --width 64 --height 64 \
    --passes 1 -q -o "$out/warm.exr" || exit 1
render() { # device, output
    "$caustic" render cornell-caustics --integrator sppm --device "$1" --width "$size" \
        --height "$size" --passes "$passes" --photons-per-pass "$photons" -o "$2" 2>&1 | tail -n 1
}
one_line="$(render cuda:0 "$out/gpus1.exr")"
echo "1 GPU: $one_line"
one="$(sed -n 's/.*): \([0-9.]*\) s (eye.*/\1/p' <<<"$one_line")"
set=0
for n in 2 4 8; do
    [ "$n" -le "$gpus" ] || break
    set="$(seq -s, 0 $((n - 1)))"
    line="$(render "cuda:$set" "$out/gpus$n.exr")"
    t="$(sed -n 's/.*): \([0-9.]*\) s (eye.*/\1/p' <<<"$line")"
    echo "$n GPUs: $line"
    python3 -c "import sys; one, t, n = map(float, sys.argv[1:]); print(f'{int(n)} GPUs: {t:.2f} s against {one:.2f} s: speed-up {one / t:.2f}x, efficiency {100 * one / t / n:.1f} %')" "$one" "$t" "$n"
    "$caustic" compare "$out/gpus$n.exr" "$out/gpus1.exr" | head -n 2
done
