#!/usr/bin/env bash
# Issue 17's throughput measurements on a machine of several GPUs, in one
# device call: photon-mapped animation frames dealt over 1, 2, 4, 8 GPUs of
# one process (scripts/multi-gpu-frames.sh: the wall clock and the GPUs'
# own rate, with and without the final gather) and over MPI ranks (one
# rank a GPU), then SPPM of 4096² × 100 passes on 1, 2, 4 GPUs of one
# process and under MPI (scripts/mpi-gpu-sppm.sh). Every image is compared
# with one GPU's. Key lines go to stdout; logs to $OUT.
#
#   BUNDLE=target/gpu-bundle OUT=DIR scripts/scale-out-evidence.sh
#
# BUNDLE holds caustic (the CLI with CUDA, or bin.tar.xz holding it), and for
# the MPI parts caustic-mpi.xz (the CLI built with `--features mpi`, xz) and
# openmpi.tar.xz (scripts/mpi-bundle.sh). PARTS picks parts (default
# "frames mpi-frames sppm mpi-sppm"); ANIM_FRAMES and GATHER_FRAMES the
# frames rendered without and with the final gather (default 0..47, 0..23).
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
bundle="$(cd "${BUNDLE:-$repo/target/gpu-bundle}" && pwd)"
out="${OUT:-$bundle/logs}"
mkdir -p "$out"
parts="${PARTS:-frames mpi-frames sppm mpi-sppm}"
want() { [[ " $parts " == *" $1 "* ]]; }
cd "$bundle"
[ -x caustic ] || tar -xJf bin.tar.xz -C "$bundle" ./caustic 2>/dev/null || tar -xJf bin.tar.xz -C "$bundle"
caustic="$bundle/caustic"
nvrtc="$(ls /usr/local/cuda/lib64/libnvrtc.so.* /usr/local/cuda*/targets/*/lib/libnvrtc.so.* 2>/dev/null | head -n 1)"
[ -n "$nvrtc" ] && export LD_LIBRARY_PATH="$(dirname "$nvrtc"):${LD_LIBRARY_PATH:-}"
export CAUSTIC_KERNEL_CACHE="${CAUSTIC_KERNEL_CACHE:-/tmp/caustic-kernels}"
gpus="$(nvidia-smi -L | grep -c '^GPU')"
echo "== $(date -u +%FT%TZ) $gpus x $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1), $(nproc) cores"
frames_dir=/dev/shm/caustic-evidence
anim="${ANIM_FRAMES:-0..47}"
gather="${GATHER_FRAMES:-0..23}"
moving=(cornell-caustics-moving --integrator photon --width 1920 --height 1080 --spp 1)

# The GPUs' own frame rate of a log (scripts/frame_rate.py).
rate_of() { python3 "$repo/scripts/frame_rate.py" "$1" "$2"; }

if want frames; then
    echo "== frames dealt over the GPUs of one process, global map read directly (frames $anim)"
    FRAMES_DIR=$frames_dir/direct bash "$repo/scripts/multi-gpu-frames.sh" "$caustic" "$out/frames-direct" "$anim" \
        "${moving[@]}" --no-final-gather
    echo "== the same with the final gather (frames $gather)"
    FRAMES_DIR=$frames_dir/gather bash "$repo/scripts/multi-gpu-frames.sh" "$caustic" "$out/frames-gather" "$gather" \
        "${moving[@]}"
fi

if want mpi-frames && [ -f caustic-mpi.xz ] && [ -f openmpi.tar.xz ]; then
    echo "== frames dealt over MPI ranks, one GPU a rank (frames $anim, global map read directly)"
    mkdir -p /tmp/ompi && tar -xJf openmpi.tar.xz -C /tmp/ompi
    # shellcheck source=/dev/null
    . /tmp/ompi/openmpi/env.sh
    xz -dc caustic-mpi.xz >/tmp/caustic-mpi && chmod +x /tmp/caustic-mpi
    one="$(rate_of "$out/frames-direct/frames-g1.log" 1 2>/dev/null || true)"
    mpi_frames() { # label ranks extra-flags...
        local label=$1 n=$2; shift 2
        rm -rf "$frames_dir/$label" && mkdir -p "$frames_dir/$label"
        timeout 180 mpirun --oversubscribe --bind-to none -np "$n" /tmp/caustic-mpi render "${moving[@]}" \
            --no-final-gather --frames "$anim" --device cuda "$@" -o "$frames_dir/$label/f_%04d.exr" \
            >"$out/frames-$label.log" 2>&1
        local rc=$? rate
        rate="$(rate_of "$out/frames-$label.log" "$n")"
        echo "$label ($n ranks$([ $# -gt 0 ] && echo ", $*")): rc=$rc $(grep '^animation:' "$out/frames-$label.log");" \
            "GPUs' own rate $rate frames/s$([ -n "$one" ] && python3 -c "print(f' ({$rate / ($n * $one) * 100:.0f} % of $n x one GPU\'s)')")"
        for f in 0001 0006 0023 0046; do
            [ -f "$frames_dir/direct/g1/f_$f.exr" ] &&
                echo "  f_$f vs 1 GPU: $("$caustic" compare "$frames_dir/$label/f_$f.exr" "$frames_dir/direct/g1/f_$f.exr" 2>&1 | head -n 1)"
        done
        rm -rf "${frames_dir:?}/$label"
    }
    for n in 2 4 8; do
        [ "$n" -le "$gpus" ] || break
        mpi_frames mpi$n "$n"
    done
    # Every rank a worker per core of the machine (the default before ranks
    # shared the node's cores).
    mpi_frames mpi2-allcores 2 --threads "$(nproc)"
fi

if want sppm; then
    echo "== SPPM 4096², 16e6 photons a pass, passes dealt round the GPUs of one process"
    "$caustic" render cornell-caustics --integrator sppm --device cuda:0 --width 64 --height 64 -q \
        -o /tmp/sppm-warm.exr >/dev/null 2>&1
    for passes in 20 100; do
        for n in 1 2 4 8; do
            [ "$n" -le "$gpus" ] || break
            "$caustic" render cornell-caustics --integrator sppm --device "cuda:$(seq -s, 0 $((n - 1)))" \
                --width 4096 --height 4096 --passes $passes --photons-per-pass 16000000 \
                -o "/tmp/sppm-$passes-g$n.exr" >"$out/sppm-$passes-g$n.log" 2>&1
            echo "$passes passes, $n GPU(s): rc=$? $(grep -o '): [0-9.]* s (eye [0-9.]* s' "$out/sppm-$passes-g$n.log" | head -n 1)"
            [ "$n" -gt 1 ] && echo "  vs 1 GPU: $("$caustic" compare "/tmp/sppm-$passes-g$n.exr" "/tmp/sppm-$passes-g1.exr" 2>&1 | head -n 1)"
        done
    done
fi

if want mpi-sppm && [ -f caustic-mpi.xz ] && [ -f openmpi.tar.xz ]; then
    echo "== SPPM under MPI, one rank a GPU (4096², 100 passes)"
    [ -x /tmp/caustic-mpi ] || { xz -dc caustic-mpi.xz >/tmp/caustic-mpi && chmod +x /tmp/caustic-mpi; }
    ranks="$(for n in 2 4 8; do [ "$n" -le "$gpus" ] && printf '%s ' $n; done)"
    OUT="$out" CAUSTIC=/tmp/caustic-mpi MPI_BUNDLE="$bundle/openmpi.tar.xz" MPI_RANKS="$ranks" \
        MPI_BUDGETS="4096:100:16000000" REPS=1 bash "$repo/scripts/mpi-gpu-sppm.sh" >/dev/null 2>&1
    cat "$out/mpi-gpu-sppm.md"
fi
