#!/usr/bin/env bash
# The paper's Figure 7 (Vinkler, Bittner, Havran and Hapala 2013, §6.2):
# time per collision frame (build + trace) against the number of agents
# (2^6 .. 2^16, and 10^4, 128 rays each), for DACRT (median, RDH) and the
# BVH builders (bvh-binned, lbvh, lbvh:leaf=1, hlbvh, ploc), on Sponza and
# the 16-dragon scene (dragon_vrip.ply@16, 14 M triangles, the stand-in for
# the paper's Power Plant), on the GPU and the CPU, by `caustic bench
# collide` (on the GPU each frame's segments are made, traced and reduced
# per agent on the device):
#
#   scripts/dacrt-figure7.sh SCENES_DIR OUT_DIR
#
# SCENES_DIR holds the unpacked scenes (sponza-dabrovic/, dragon/), OUT_DIR
# receives figure7-sponza.{md,json,svg} and figure7-dragons.{md,json,svg}
# (the parts of a scene's runs as figure7-NAME-PART.{md,json}).
# Settings (environment):
#   CAUSTIC         the binary (default target/release/caustic)
#   FRAMES          positions per agent, one frame each (default 20, the paper's)
#   AGENTS          the agent counts (comma separated)
#   METHODS         the methods (default: all of the above)
#   GPU             1: run the GPU series (default 1); CPU: 1: the CPU series (default 1)
#   CPU_MAX_SPONZA  the most agents on the CPU for Sponza (default 65536)
#   CPU_METHODS_SPONZA  the CPU's methods on Sponza (default METHODS)
#   CPU_MAX_DRAGON  the most agents on the CPU for the dragons (default 1024:
#                   its BVH builds over 14 M triangles take seconds a frame)
#   CPU_METHODS_DRAGON  the CPU's methods on the dragons (default lbvh,lbvh:leaf=1;
#                   a CPU DACRT frame over 14 M triangles takes minutes)
#   DACRT_MAX_DRAGON  the most agents of the GPU DACRT series on the
#                   dragons (default 65536; each frame of 10^4 agents takes
#                   about 2 s)
set -euo pipefail
scenes="${1:?usage: dacrt-figure7.sh SCENES_DIR OUT_DIR}"
out="${2:?usage: dacrt-figure7.sh SCENES_DIR OUT_DIR}"
caustic="${CAUSTIC:-target/release/caustic}"
frames="${FRAMES:-20}"
agents="${AGENTS:-64,128,256,512,1024,2048,4096,8192,10000,16384,32768,65536}"
methods="${METHODS:-dacrt,dacrt-rdh,bvh-binned,lbvh,lbvh:leaf=1,hlbvh,ploc}"
bvh_methods="$(echo "$methods" | tr ',' '\n' | grep -v '^dacrt' | paste -sd, -)"
dacrt_methods="$(echo "$methods" | tr ',' '\n' | grep '^dacrt' | paste -sd, -)"
mkdir -p "$out"
parts=()
part() { # name part device agents methods [extra flags...]
    local name="$1" part="$2" device="$3" counts="$4" list="$5" scene
    shift 5
    [ -n "$list" ] && [ -n "$counts" ] || return 0
    scene="$scenes/sponza-dabrovic/sponza.obj"
    [ "$name" = dragons ] && scene="$scenes/dragon/dragon_vrip.ply@16"
    "$caustic" bench collide --scene "$scene" --device "$device" --agents "$counts" \
        --method "$list" --frames "$frames" --json "$out/figure7-$name-$part.json" "$@" |
        tee "$out/figure7-$name-$part.md"
    parts+=(--from "$out/figure7-$name-$part.json")
}
upto() { # the counts of $agents up to $1
    echo "$agents" | tr ',' '\n' | awk -v max="$1" '$1 <= max' | paste -sd, -
}
figure() { # name: the combined table and plot of the parts run
    local name="$1"
    [ ${#parts[@]} -gt 0 ] || return 0
    "$caustic" bench collide "${parts[@]}" --plot "$out/figure7-$name.svg" |
        tee "$out/figure7-$name.md"
    parts=()
}
if [ "${GPU:-1}" = 1 ]; then
    part sponza gpu cuda "$agents" "$methods"
fi
if [ "${CPU:-1}" = 1 ]; then
    part sponza cpu cpu "$(upto "${CPU_MAX_SPONZA:-65536}")" "${CPU_METHODS_SPONZA:-$methods}"
fi
figure sponza
if [ "${GPU:-1}" = 1 ]; then
    part dragons gpu cuda "$agents" "$bvh_methods"
    part dragons gpu-dacrt cuda "$(upto "${DACRT_MAX_DRAGON:-65536}")" "$dacrt_methods"
fi
if [ "${CPU:-1}" = 1 ]; then
    part dragons cpu cpu "$(upto "${CPU_MAX_DRAGON:-1024}")" "${CPU_METHODS_DRAGON:-lbvh,lbvh:leaf=1}"
fi
figure dragons
