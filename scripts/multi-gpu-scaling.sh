#!/usr/bin/env bash
# Issue 17's scaling table in one call on a machine with several GPUs
# (device tool, kinds nvidia-h100-x2/x4/x8): SPPM, Whitted and photon
# mapping on 1, 2, 4, ... GPUs of one process (scripts/multi-gpu-sppm.sh),
# then SPPM with MPI, one rank per GPU (scripts/mpi-gpu-sppm.sh, when the
# bundle carries Open MPI and an mpi-feature CLI).
#
#   OUT=DIR bash multi-gpu-scaling.sh CAUSTIC [CAUSTIC_MPI]
#
# Everything goes to $OUT/scaling.md (the tables) and $OUT/scaling.log.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
caustic="${1:?usage: multi-gpu-scaling.sh CAUSTIC [CAUSTIC_MPI]}"
caustic_mpi="${2:-}"
out="${OUT:-/tmp}"
work="${TMPDIR:-/tmp}/caustic-scaling"
mkdir -p "$out" "$work"
export CAUSTIC_KERNEL_CACHE="$work/kernels"
report="$out/scaling.md"
: >"$report"
run() { # title, then the command
    local title="$1"
    shift
    echo "## $title" | tee -a "$report"
    timeout "${STEP_TIMEOUT:-240}" "$@" 2>&1 | tee -a "$report"
}
nvidia-smi -L | tee -a "$report"
run "SPPM 1024², 32 passes x 10^6 photons" bash "$here/multi-gpu-sppm.sh" "$caustic" "$work/sppm1" 1024 32 1000000
run "SPPM 2048², 8 passes x 4·10^6 photons" bash "$here/multi-gpu-sppm.sh" "$caustic" "$work/sppm2" 2048 8 4000000
run "Whitted 1920², 16 spp" env INTEGRATOR=whitted SPP=16 bash "$here/multi-gpu-sppm.sh" "$caustic" "$work/whitted" 1920
run "Photon mapping 1024², 4 spp, 16 Mi photons, final gather 16 rays" env INTEGRATOR=photon bash "$here/multi-gpu-sppm.sh" "$caustic" "$work/photon" 1024
if [ -n "$caustic_mpi" ] && [ -f "$here/openmpi.tar.xz" ]; then
    CAUSTIC="$caustic_mpi" MPI_BUNDLE="$here/openmpi.tar.xz" OUT="$out" WORK="$work/mpi" \
        MPI_BUDGETS="${MPI_BUDGETS:-1024:32:1000000 2048:8:4000000}" \
        timeout "${MPI_TIMEOUT:-300}" bash "$here/mpi-gpu-sppm.sh" >>"$out/scaling.log" 2>&1
    echo "## SPPM with MPI, one rank per GPU" | tee -a "$report"
    cat "$out/mpi-gpu-sppm.md" 2>/dev/null | tee -a "$report"
fi
