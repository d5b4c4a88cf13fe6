#!/usr/bin/env bash
# Benchmark tables on the GPU machine, after gpu-run.sh has unpacked a
# bundle beside this script (bin.tar.xz, scenes/) into its folder and
# /tmp/caustic-scenes (animation-table.sh and animation_table.py beside it
# for `animation`). Each part is named on the command line:
#
#   taskpool  bvh-taskpool's minimum grab (Eq. 1's K = 14, 4, 1) on the 16
#             dragons and the dragon, with the pool's own counters
#   papers    bench gpu at 1024x1024 (the thesis's ray-cast size) on the
#             papers' scenes: bunny, dragon, sponza, sibenik, conference, the
#             BART frames of the kd-tree paper (museum, robots, kitchen), and
#             the 16 dragons
#   cpu       the CPU builders of the same structures on this machine's
#             cores (Zhou et al. 2008's Table 2 has the CPU builder's time)
#   ncu       Nsight Compute on the kd-tree's and the BVH's closest-hit
#             kernels (sponza and conference), the grid's (sponza) and the
#             task-pool build's one launch (the dragon, taskpool; the 16 dragons,
#             taskpool16); CAUSTIC_NCU_ONLY="grid
#             taskpool" picks runs by name
#   animation frames per second of the BART scenes (Whitted, 1024x1024) and
#             the photon-mapped moving Cornell box (1920x1080), the
#             per-frame rebuild included (animation-table.sh)
#   view      the viewer's interaction latency on the GPU (bench view)
#
# Logs go to $OUT (or logs/ beside this script).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-$here/logs}"
mkdir -p "$out"
bin="$here/caustic"
s="${CAUSTIC_SCENES:-/tmp/caustic-scenes}"
bart="$s/bart-museum/aff/museum5.aff $s/bart-robot/aff/Robot.aff $s/bart-kitchen/aff/kitchen.aff"

for part in "$@"; do
    case "$part" in
    taskpool)
        timeout 200 "$bin" bench gpu --log2-n 0 --camera standard \
            --scene "$s/dragon/dragon_vrip.ply" "$s/dragon/dragon_vrip.ply@16" \
            --accel bvh-taskpool,bvh-taskpool:grab=4,bvh-taskpool:grab=1,bvh-binned \
            --reps 5 --warm-up 1 --json "$out/taskpool.json" >"$out/taskpool.md" 2>&1
        echo "taskpool: exit $?"
        grep -E '^\| .*bvh-(taskpool|binned)' "$out/taskpool.md" | head -n 24
        ;;
    papers)
        # shellcheck disable=SC2086 # $bart is a list of paths
        timeout "${CAUSTIC_PAPERS_TIMEOUT:-300}" "$bin" bench gpu --log2-n 0 --camera standard \
            --width 1024 --height 1024 --scene "$s/bunny/bun_zipper.ply" "$s/dragon/dragon_vrip.ply" \
            "$s/sponza-dabrovic/sponza.obj" "$s/sibenik/sibenik.obj" "$s/conference-69k/conference.obj" \
            $bart "$s/dragon/dragon_vrip.ply@16" \
            --accel all --reps 3 --warm-up 1 --json "$out/papers.json" >"$out/papers.md" 2>&1
        echo "papers: exit $?"
        head -c 3000 "$out/papers.md"
        ;;
    cpu)
        # shellcheck disable=SC2086
        timeout 300 "$bin" bench accel --camera standard --width 1024 --height 1024 --reps 3 \
            --scene "$s/bunny/bun_zipper.ply" "$s/dragon/dragon_vrip.ply" $bart \
            --accel kdtree,bvh-binned,bvh-taskpool,grid --json "$out/cpu.json" >"$out/cpu.md" 2>&1
        echo "cpu: exit $?"
        grep -E '^\| ' "$out/cpu.md" | head -n 24
        ;;
    ncu)
        if ! command -v ncu >/dev/null; then
            echo "ncu: not installed"
            continue
        fi
        sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy
            --section WarpStateStats --section LaunchStats --section SchedulerStats)
        # name, kernels, how many launches, scene, structures
        while read -r name kernels count scene accel; do
            if [ -n "${CAUSTIC_NCU_ONLY:-}" ] && [[ " $CAUSTIC_NCU_ONLY " != *" $name "* ]]; then
                continue
            fi
            timeout 200 ncu --clock-control none -k "regex:^($kernels)\$" --launch-count "$count" \
                "${sections[@]}" "$bin" bench gpu --log2-n 0 --camera standard --scene "$s/$scene" \
                --accel "$accel" --reps 1 --warm-up 0 --check-every 0 >"$out/ncu-$name.txt" 2>&1
            echo "ncu $name: exit $?"
        done <<'RUNS'
sponza kd_trace_closest|traverse_bvh2_closest 12 sponza-dabrovic/sponza.obj bvh-binned,kdtree
conference kd_trace_closest|traverse_bvh2_closest 12 conference-69k/conference.obj bvh-binned,kdtree
grid grid_trace_closest 6 sponza-dabrovic/sponza.obj grid
taskpool bvh_taskpool_build 1 dragon/dragon_vrip.ply bvh-taskpool
taskpool16 bvh_taskpool_build 1 dragon/dragon_vrip.ply@16 bvh-taskpool
RUNS
        ;;
    animation)
        bash "$here/animation-table.sh" "$bin" "$s" "$out/animation" cuda "${CAUSTIC_FRAMES:-0..30}" rebuild |
            tee "$out/animation.md"
        ;;
    view)
        for integrator in whitted photon; do
            timeout 120 "$bin" bench view --device cuda --integrator "$integrator" 2>&1 |
                tee -a "$out/view.md" | tail -n 6
        done
        ;;
    *)
        echo "unknown part: $part (taskpool, papers, cpu, ncu, animation, view)" >&2
        ;;
    esac
done
