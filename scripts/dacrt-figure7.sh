#!/usr/bin/env bash
# The paper's Figure 7 (Vinkler, Bittner, Havran and Hapala 2013, §6.2):
# time per collision frame (build + trace) against the number of agents
# (2^6 .. 2^16, and 10^4, 128 rays each), for DACRT (median, RDH) and the
# BVH builders (bvh-binned, lbvh, hlbvh, ploc), on Sponza and the 16-dragon
# scene (dragon_vrip.ply@16, 14 M triangles, the stand-in for the paper's
# Power Plant), on the GPU and the CPU, by `caustic bench collide`:
#
#   scripts/dacrt-figure7.sh SCENES_DIR OUT_DIR
#
# SCENES_DIR holds the unpacked scenes (sponza-dabrovic/, dragon/), OUT_DIR
# receives figure7-sponza.{md,json,svg} and figure7-dragons.{md,json,svg}.
# CAUSTIC names the binary (default target/release/caustic), FRAMES the
# positions per agent (default 20, the paper's; each is one frame),
# AGENTS the agent counts (comma separated), DEVICES the devices
# (default cuda,cpu; DRAGON_DEVICES for the dragons
# alone). On the CPU the 16-dragon scene runs DACRT and lbvh up to
# CPU_MAX_DRAGON agents (default 1024): its BVH builds over 14 M triangles
# take seconds a frame there.
set -euo pipefail
scenes="${1:?usage: dacrt-figure7.sh SCENES_DIR OUT_DIR}"
out="${2:?usage: dacrt-figure7.sh SCENES_DIR OUT_DIR}"
caustic="${CAUSTIC:-target/release/caustic}"
frames="${FRAMES:-20}"
devices="${DEVICES:-cuda,cpu}"
agents="${AGENTS:-64,128,256,512,1024,2048,4096,8192,10000,16384,32768,65536}"
methods="dacrt,dacrt-rdh,bvh-binned,lbvh,hlbvh,ploc"
mkdir -p "$out"
run() { # name scene devices [extra flags...]
    local name="$1" scene="$2" on="$3"
    shift 3
    "$caustic" bench collide --scene "$scene" --device "$on" --agents "$agents" \
        --method "$methods" --frames "$frames" --json "$out/figure7-$name.json" \
        --plot "$out/figure7-$name.svg" "$@" | tee "$out/figure7-$name.md"
}
run sponza "$scenes/sponza-dabrovic/sponza.obj" "$devices" --cpu-max-agents "${CPU_MAX_SPONZA:-65536}"
run dragons "$scenes/dragon/dragon_vrip.ply@16" "${DRAGON_DEVICES:-$devices}" --cpu-max-agents "${CPU_MAX_DRAGON:-1024}" \
    --cpu-method dacrt,dacrt-rdh,lbvh
