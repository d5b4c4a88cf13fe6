#!/usr/bin/env bash
# Side-by-side CPU benchmark: caustic's `bench accel` and the Embree / obvhs
# anchor harnesses of ../shared/anchors on the same scenes, cameras and rays
# (anchors/PROTOCOL.md), in one run on this machine. Writes JSON lines to
# target/bench/<scene>.jsonl and prints compare.py's tables and agreement
# check.
#
#   scripts/bench-cpu-anchors.sh [SCENE_NAME ...]   (default: every scene below)
#   CAUSTIC_ACCELS=bvh-binned,... to choose caustic's structures
#   CAUSTIC_REPS=N: timed repetitions of caustic's builds and passes (5)
#   ANCHOR_SET=embree-medium,obvhs-cw-medium_build,... to choose the peers
#   ANCHOR_WAIT=SECONDS: how long each peer run waits for an idle machine (120)
#   ANCHOR_RETRIES=N: reruns of a peer run disturbed by other processes (3)
#   BENCH_OUT=DIR: where the JSON lines go (target/bench)
#   CAUSTIC_BIN=PATH: a caustic binary to measure instead of building one
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SCENES=${CAUSTIC_SCENES:-$ROOT/target/scenes}
ANCHORS=$ROOT/target/anchors
OUT=${BENCH_OUT:-$ROOT/target/bench}
ACCELS=${CAUSTIC_ACCELS:-bvh-binned}
SET=${ANCHOR_SET:-embree-medium,embree-medium-1,embree-high,obvhs-cw-very_slow_build,obvhs-cw-medium_build}
mkdir -p "$OUT"

[ -d "$SCENES" ] || ../shared/scenes/unpack "$SCENES"
if [ ! -x "$ANCHORS/embree/embree_bench" ]; then
    rm -rf "$ANCHORS" && cp -r ../shared/anchors "$ANCHORS" && chmod -R u+w "$ANCHORS"
    "$ANCHORS/build.sh"
fi
if [ -n "${CAUSTIC_BIN:-}" ]; then
    CAUSTIC=$CAUSTIC_BIN
else
    cargo build --release -p caustic-cli
    CAUSTIC=$ROOT/target/release/caustic
fi

# name | mesh | camera arguments (anchors README for sibenik and sponza,
# shared/scenes/README.md for the rest)
read -r -d '' TABLE <<'T' || true
bunny|bunny/bun_zipper.ply|--eye=0.1031,0.1959,0.3413 --at=-0.0168,0.1102,-0.0015 --fov 40
dragon|dragon/dragon_vrip.ply|--eye=0.1221,0.2164,0.3610 --at=-0.0059,0.1250,-0.0046 --fov 40
buddha|buddha-100k/buddha_100k.obj|--eye=1.0434,0.7718,3.2197 --at=-0.0544,-0.0124,0.0831 --fov 40
sponza|sponza-dabrovic/sponza.obj|--eye=-13,0,3 --at=13,0,6 --up=0,0,1 --fov 70
sibenik|sibenik/sibenik.obj|--eye=-16,-10,0 --at=10,-10,0 --fov 60
conference|conference-69k/conference.obj|--eye=-850,-550,480 --at=700,350,100 --up=0,0,1 --fov 65
cornell|cornell-box/mcguire/CornellBox-Original.obj|--eye=0,1,3.9 --at=0,1,0 --fov 39.3
ring|caustics-mnrt/MNRing.obj|--eye=-6,6,6 --at=0,0,0 --fov 45
T

want=("$@")
files=()
while IFS='|' read -r name mesh cam; do
    [ -n "$name" ] || continue
    if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " == *" $name "* ]]; then continue; fi
    # The anchors read only OBJ: ASCII PLY meshes are rewritten once as
    # `v`/`f` lines, every face kept (degenerate ones too), in file order.
    src=$SCENES/$mesh
    if [[ $mesh == *.ply ]]; then
        obj=$OUT/$name.obj
        [ -f "$obj" ] || python3 - "$src" "$obj" <<'PY'
import sys
src, dst = sys.argv[1], sys.argv[2]
with open(src) as f:
    lines = f.read().split("\n")
nv = nf = 0
i = 0
while not lines[i].startswith("end_header"):
    w = lines[i].split()
    if w[:2] == ["element", "vertex"]: nv = int(w[2])
    if w[:2] == ["element", "face"]: nf = int(w[2])
    if w[:2] == ["format", "binary_little_endian"] or w[:2] == ["format", "binary_big_endian"]:
        sys.exit("only ASCII PLY is converted")
    i += 1
i += 1
with open(dst, "w") as out:
    for line in lines[i:i + nv]:
        x, y, z = line.split()[:3]
        out.write("v %s %s %s\n" % (x, y, z))
    for line in lines[i + nv:i + nv + nf]:
        w = line.split()
        n = int(w[0])
        out.write("f " + " ".join(str(int(k) + 1) for k in w[1:1 + n]) + "\n")
PY
    else
        obj=$src
    fi
    out=$OUT/$name.jsonl
    rm -f "$out"
    echo "== $name" >&2
    # shellcheck disable=SC2086
    python3 "$ANCHORS/run_anchors.py" --out "$out" --scene "$obj" $cam --set "$SET" --wait "${ANCHOR_WAIT:-120}" --retries "${ANCHOR_RETRIES:-3}"
    # shellcheck disable=SC2086
    "$CAUSTIC" bench accel --scene "$obj" --accel "$ACCELS" $cam --reps "${CAUSTIC_REPS:-5}" --json "$out" >&2
    files+=("$out")
done <<< "$TABLE"
python3 "$ANCHORS/compare.py" "${files[@]}"
