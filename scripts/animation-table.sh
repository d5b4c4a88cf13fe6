#!/usr/bin/env bash
# Frames per second of animated scenes, the per-frame update included (the
# kd-tree paper's Table 4 in spirit: Zhou et al. 2008 render the BART scenes
# at 1024x1024 with primary and shadow rays). Renders frames with
# `caustic render --frames` and summarises each run's frame lines with
# scripts/animation_table.py (median over the frames after the first).
#
# usage: animation-table.sh CAUSTIC SCENES OUT DEVICE FRAMES [UPDATES]
#   CAUSTIC  the caustic binary; SCENES the unpacked standard scenes
#   DEVICE   cpu or cuda;  FRAMES  e.g. 0..40;  UPDATES e.g. "rebuild refit"
#   CAUSTIC_ANIMATION_ACCEL=bvh-binned  the structure (refit needs a BVH;
#                                      on the GPU binary or bvh-wide)
#   CAUSTIC_ANIMATION_PHOTON_BART=1     also the BART scenes photon-mapped
#                                      (1 spp, global map read directly)
#   CAUSTIC_ANIMATION_SCENES="museum5 Robot kitchen cornell"  a subset
set -uo pipefail
bin="$1" scenes="$2" out="$3" device="$4" frames="$5" updates="${6:-rebuild}"
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$out"
images="$(mktemp -d)"
run() { # name, update, flags...
    local name="$1" update="$2"
    shift 2
    local accel=()
    [ -n "${CAUSTIC_ANIMATION_ACCEL:-}" ] && accel=(--accel "$CAUSTIC_ANIMATION_ACCEL")
    timeout "${CAUSTIC_ANIMATION_TIMEOUT:-150}" "$bin" render "$@" "${accel[@]}" --device "$device" \
        --frames "$frames" --update "$update" --quiet -o "$images/${name}_%04d.png" >"$out/$name-$device-$update.log" 2>&1
    echo "$name $device $update: exit $?"
}
wanted() { case " ${CAUSTIC_ANIMATION_SCENES:-museum5 Robot kitchen cornell} " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
for update in $updates; do
    for scene in bart-museum/aff/museum5.aff bart-robot/aff/Robot.aff bart-kitchen/aff/kitchen.aff; do
        name="$(basename "$scene" .aff)"
        wanted "$name" || continue
        # Whitted with one sample: primary, shadow and specular rays.
        run "$name" "$update" "$scenes/$scene" --integrator whitted --spp 1 --width 1024 --height 1024
        if [ -n "${CAUSTIC_ANIMATION_PHOTON_BART:-}" ]; then
            run "$name.photon" "$update" "$scenes/$scene" --integrator photon --spp 1 \
                --width 1024 --height 1024 --no-final-gather
        fi
    done
    # The photon-mapped animated Cornell box at 1920x1080, photons traced
    # and maps built every frame; the global map read directly.
    wanted cornell && run cornell-moving "$update" cornell-caustics-moving --integrator photon --spp 1 \
        --width 1920 --height 1080 --no-final-gather
done
rm -rf "$images"
python3 "$here/animation_table.py" "$out"/*.log
