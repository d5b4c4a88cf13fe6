#!/usr/bin/env bash
# The GPU photon mapper's error against the Mitsuba path references as the
# photon count grows, on the GPU machine from a bundle (scripts/gpu-bundle.sh
# carries the CLI and the Cornell references):
#
#   bash target/gpu-bundle/photon-gpu-table.sh [SPP]
#
# For cornell-box and cornell-caustics at the references' 512x512: the
# global map read directly ("direct"), the final gather (64 rays) at the
# CLI's adaptive irradiance samples ("samples") and at every shading point
# ("gather"), for 10^5 .. 10^7 photons per map (CAUSTIC_TABLE_MODES and
# CAUSTIC_TABLE_PHOTONS pick fewer). Prints one markdown row per render:
# RMSE, 8x8-block RMSE, and the render's own timing line.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[ -x "$here/caustic" ] || tar -xJf "$here/bin.tar.xz" -C "$here"
refs="${CAUSTIC_REFS:-$here/refs}"
spp="${1:-16}"
out="${OUT:-/tmp}/photon-table"
mkdir -p "$out"
echo "| scene | photons per map | indirect | RMSE | block8 | frame |"
echo "|---|---:|---|---:|---:|---|"
for scene in cornell-box cornell-caustics; do
    xml="$refs/$scene/$scene.xml"
    ref="$refs/$scene/${scene}_path.exr"
    [ -f "$xml" ] || { echo "skipping $scene: $xml not found"; continue; }
    for photons in ${CAUSTIC_TABLE_PHOTONS:-100000 1000000 10000000}; do
        for mode in ${CAUSTIC_TABLE_MODES:-direct samples gather}; do
            case "$mode" in
                direct) args=(--no-final-gather) ;;
                samples) args=(--gather-rays 64) ;;
                *) args=(--gather-rays 64 --sample-spacing 0) ;;
            esac
            image="$out/$scene-$photons-$mode.exr"
            line=$("$here/caustic" render "$xml" --integrator photon --device cuda --spp "$spp" \
                --photons "$photons" --caustic-photons "$photons" "${args[@]}" -q -o "$image" 2>&1 |
                grep '^photon:' || true)
            metrics=$("$here/caustic" compare "$image" "$ref" --block 8 2>&1)
            rmse=$(echo "$metrics" | awk '$1 == "rmse_linear" {print $2}')
            block=$(echo "$metrics" | awk '$1 == "rmse_block8" {print $2}')
            echo "| $scene | $photons | $mode | $rmse | $block | ${line#photon: } |"
        done
    done
done
