#!/usr/bin/env bash
# A render split among the GPUs of one machine (issue 17): the same render
# on 1, 2, ... GPUs (`--device cuda:0`, `cuda:0,1`, ...), its time, the
# scaling efficiency against one GPU, and the images compared with the
# one-GPU image (they must agree to the float rounding of each pixel's
# sum: RMSE 0 or nearly so).
#
#   scripts/multi-gpu-sppm.sh CAUSTIC OUT_DIR [SIZE] [PASSES] [PHOTONS]
#
# Settings from the environment:
#   INTEGRATOR=sppm|whitted|photon   what to render (default sppm)
#   SPP=N          samples per pixel (whitted, photon; default 16 and 4)
#   GATHER=N       photon: final-gather rays (default 16; 0: the global map directly)
#   SPACING=S      photon: pixels between irradiance samples (default 4)
#   REPS=N         renders per device set, the median time taken (default 3)
#   SCENE=NAME     the scene (default cornell-caustics)
#   VERBOSE=1      print each device set's last CLI output whole (the
#                  photon mapper's stage times), not only its last line
# SIZE is the image's side (default 1024); PASSES is SPPM's passes
# (default 32); PHOTONS is SPPM's photons per pass, or the photon
# mapper's global and caustic photons (one pass, split by index among
# the GPUs: default 16 Mi).
#
# The time is the renderer's own (the CLI's summary: SPPM's and Whitted's
# render seconds, the photon mapper's "total"), which leaves out loading
# the scene; each GPU's upload of the scene counts for Whitted and photon
# mapping (the members upload in parallel). Kernels are compiled once
# into a disk cache first (a small render), so no timed run pays for NVRTC.
set -uo pipefail
usage="usage: [INTEGRATOR=…] multi-gpu-sppm.sh CAUSTIC OUT_DIR [SIZE] [PASSES] [PHOTONS]"
caustic="${1:?$usage}"
out="${2:?$usage}"
integrator="${INTEGRATOR:-sppm}"
size="${3:-1024}"
passes="${4:-32}"
case "$integrator" in
    sppm) photons="${5:-1000000}" ;;
    photon) photons="${5:-16777216}" ;;
    whitted) photons=0 ;;
    *) echo "INTEGRATOR must be sppm, whitted or photon" >&2; exit 2 ;;
esac
reps="${REPS:-3}"
scene="${SCENE:-cornell-caustics}"
mkdir -p "$out"
export CAUSTIC_KERNEL_CACHE="${CAUSTIC_KERNEL_CACHE:-$out/kernels}"
gpus="$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)"
echo "GPUs: $gpus ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)); $integrator on $scene, ${size}²"
flags=(--integrator "$integrator" --width "$size" --height "$size")
case "$integrator" in
    sppm) flags+=(--passes "$passes" --photons-per-pass "$photons") ;;
    whitted) flags+=(--spp "${SPP:-16}") ;;
    photon)
        flags+=(--spp "${SPP:-4}" --photons "$photons" --caustic-photons "$photons"
            --gather-rays "${GATHER:-16}" --sample-spacing "${SPACING:-4}")
        ;;
esac
"$caustic" render "$scene" --integrator "$integrator" --device cuda:0 --width 64 --height 64 \
    -q -o "$out/warm.exr" || exit 1
seconds() { # the render's time in the CLI's output
    case "$integrator" in
        sppm) sed -n 's/.*): \([0-9.]*\) s (eye.*/\1/p' ;;
        whitted) sed -n 's/.*): \([0-9.]*\) s, .*/\1/p' ;;
        photon) sed -n 's/.*; total \([0-9.]*\) s, .*/\1/p' ;;
    esac | tail -n 1
}
render() { # device, output: the median of $reps renders' times, the last line
    local times=() line
    for _ in $(seq "$reps"); do
        line="$("$caustic" render "$scene" "${flags[@]}" --device "$1" -o "$2" 2>&1)"
        times+=("$(seconds <<<"$line")")
    done
    echo "$(printf '%s\n' "${times[@]}" | sort -g | sed -n "$(((reps + 1) / 2))p") s (of ${times[*]}): $(tail -n 1 <<<"$line")"
    [ "${VERBOSE:-0}" = 0 ] || sed 's/^/    /' <<<"$line" >&2
}
one_line="$(render cuda:0 "$out/gpus1.exr")"
echo "1 GPU: $one_line"
one="${one_line%% s *}"
for n in 2 4 8; do
    [ "$n" -le "$gpus" ] || break
    set="$(seq -s, 0 $((n - 1)))"
    line="$(render "cuda:$set" "$out/gpus$n.exr")"
    t="${line%% s *}"
    echo "$n GPUs: $line"
    python3 -c "import sys; one, t, n = map(float, sys.argv[1:]); print(f'{int(n)} GPUs: {t:.3f} s against {one:.3f} s: speed-up {one / t:.2f}x, efficiency {100 * one / t / n:.1f} %')" "$one" "$t" "$n"
    "$caustic" compare "$out/gpus$n.exr" "$out/gpus1.exr" | head -n 2
done
