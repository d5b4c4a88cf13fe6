#!/usr/bin/env bash
# Two builds of the CLI side by side on the GPU machine (the device tool)
# for a change to the GPU Morton builders or the collision frame:
#
#   OUT=... bash build-before-after.sh BEFORE_DIR AFTER_DIR SCENE [REPS]
#
# Each dir holds `caustic`. SCENE is a path the CLI loads (with `@N` to
# replicate it, e.g. /tmp/caustic-scenes/dragon/dragon_vrip.ply@16).
# Alternating before/after, REPS times each (default 2):
#   - `caustic bench gpu` builds of lbvh and lbvh:leaf=1 (device ms per
#     stage, median of 10 after 2 warm-ups; no tracing checks);
#   - `caustic collide` of 10^4 agents x 128 segments, 5 frames, with
#     lbvh:leaf=1, lbvh and bvh-binned (build + trace per frame; the
#     answers of every method must agree, which collide checks).
# ACCEL and AGENTS override the structures and the agent count.
set -uo pipefail
before="${1:?usage: build-before-after.sh BEFORE_DIR AFTER_DIR SCENE [REPS]}"
after="${2:?usage: build-before-after.sh BEFORE_DIR AFTER_DIR SCENE [REPS]}"
scene="${3:?usage: build-before-after.sh BEFORE_DIR AFTER_DIR SCENE [REPS]}"
reps="${4:-2}"
accel="${ACCEL:-lbvh,lbvh:leaf=1}"
agents="${AGENTS:-10000}"
out="${OUT:-/tmp}/build-before-after"
mkdir -p "$out"
export CAUSTIC_KERNEL_CACHE="${CAUSTIC_KERNEL_CACHE:-/tmp/caustic-before-after-kernels}"
step() { timeout "${STEP_TIMEOUT:-240}" "$@"; }
for rep in $(seq 1 "$reps"); do
    for side in before after; do
        dir="$before"; [ "$side" = after ] && dir="$after"
        echo "== bench gpu $side (rep $rep)"
        step "$dir/caustic" bench gpu --log2-n 0 --camera standard --scene "$scene" \
            --accel "$accel" --warm-up 2 --reps 10 --check-every 0 \
            >"$out/bench-$side-$rep.txt" 2>&1
        grep -iE "build|lbvh|morton|hierarchy|stage" "$out/bench-$side-$rep.txt" | head -n 30
        echo "== collide $side (rep $rep)"
        step "$dir/caustic" collide "$scene" --agents "$agents" \
            --method "$accel,bvh-binned" --frames 5 --device cuda \
            >"$out/collide-$side-$rep.txt" 2>&1
        tail -n 8 "$out/collide-$side-$rep.txt"
    done
done
