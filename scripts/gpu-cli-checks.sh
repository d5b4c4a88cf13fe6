#!/usr/bin/env bash
# `caustic render` on the GPU against the CPU, from the command line, on the
# GPU machine: each integrator on the built-in caustics Cornell box with a
# GPU-built structure (`--device cuda --accel ploc|lbvh|grid`) and with the
# CPU's build of the same structure (`--device cpu --accel ...`), the images
# compared by `caustic compare` (PSNR, peak 1); then a structure the GPU
# does not build (`--accel ${CAUSTIC_CPU_ONLY_ACCEL:-brute}`), which must
# fail with the list of those it does. Run after gpu-run.sh has unpacked the bundle:
#
#   bash scripts/gpu-cli-checks.sh target/gpu-bundle/caustic
set -uo pipefail
bin="${1:-target/gpu-bundle/caustic}"
out="${OUT:-/tmp}/cli"
mkdir -p "$out"
status=0

render() { # integrator device accel file
    "$bin" render cornell-caustics --integrator "$1" --device "$2" --accel "$3" -o "$4" 2>&1 | tail -n 2
}

for integrator in photon whitted sppm; do
    for accel in ploc lbvh grid kdtree bvh-taskpool; do
        gpu="$out/$integrator-cuda-$accel.exr"
        cpu="$out/$integrator-cpu-$accel.exr"
        echo "== $integrator, --accel $accel"
        render "$integrator" cuda "$accel" "$gpu" || status=1
        render "$integrator" cpu "$accel" "$cpu" || status=1
        "$bin" compare "$gpu" "$cpu" | grep -E 'psnr|rmse' || status=1
    done
done

cpu_only="${CAUSTIC_CPU_ONLY_ACCEL:-brute}"
echo "== --device cuda --accel $cpu_only (must fail)"
if "$bin" render cornell-caustics --device cuda --accel "$cpu_only" -o "$out/cpu-only.png"; then
    echo "FAILED: --accel $cpu_only rendered on the GPU"
    status=1
else
    echo "exit $? as it must"
fi
exit $status
