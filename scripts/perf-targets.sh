#!/usr/bin/env bash
# The command-line targets of issue 16 on the GPU machine, after gpu-run.sh
# has unpacked its bundle (its benchmarks give the frames, primitives and
# the peers): the CLI's default GPU photon render, and GPU SPPM to the
# references' noise with its time.
#
#   bash perf-targets.sh BUNDLE_DIR
#
# BUNDLE_DIR holds the `caustic` CLI and refs/ (gpu-bundle.sh carries the
# Cornell references). Settings: BOX_PASSES (default 14500) and
# CAUSTICS_PASSES (default 4096), SPPM's passes on each scene at 10^6
# photons a pass; RENDERS (default 3), timed photon renders after one that
# fills the kernel cache.
set -uo pipefail
here="$(cd "${1:?usage: perf-targets.sh BUNDLE_DIR}" && pwd)"
bin="$here/caustic"
out="${OUT:-/tmp}/targets"
mkdir -p "$out"
export CAUSTIC_KERNEL_CACHE="${CAUSTIC_KERNEL_CACHE:-/tmp/kc}"
status=0

# The user's command as the README gives it, with the CLI's defaults (512²,
# 16 spp, final gather 256 rays); its own summary times the render.
echo "== caustic render cornell-caustics --integrator photon --device cuda"
for run in $(seq 0 "${RENDERS:-3}"); do
    label="timed $run"
    [ "$run" = 0 ] && label="kernel cache"
    echo "-- $label"
    "$bin" render cornell-caustics --integrator photon --device cuda -o "$out/photon-$run.png" 2>&1 |
        tail -n 4 || status=1
done

# SPPM against the Mitsuba references; --score prints the RMSE as passes go.
for spec in "cornell-box:${BOX_PASSES:-14500}" "cornell-caustics:${CAUSTICS_PASSES:-4096}"; do
    scene="${spec%%:*}"
    passes="${spec##*:}"
    refs="$here/refs/$scene"
    echo "== sppm $scene, $passes passes x 10^6 photons, scored against ${scene}_path.exr"
    [ -d "$refs" ] || { echo "missing $refs"; status=1; continue; }
    "$bin" render "$refs/$scene.xml" --integrator sppm --device cuda --photons-per-pass 1000000 \
        --passes "$passes" --score "$refs/${scene}_path.exr" -o "$out/sppm-$scene.exr" 2>&1 |
        grep -v '^\s*$' | tail -n 8 || status=1
done
exit $status
