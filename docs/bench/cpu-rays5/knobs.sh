#!/bin/bash
# Interleaved, 1 thread: main's binary, then the knob-scan build of this branch
# (CAUSTIC_ALONE_A / CAUSTIC_ALONE_C: rays finishing a subtree alone in the
# any-hit / closest-hit stream; CAUSTIC_DEFER: subtrees a ray collects before
# its traversal, 0 = finish each at once), per scene, per round.
S=/work/main/target/scenes
for round in ${ROUNDS:-1 2 3}; do
  for scene in bunny/bun_zipper.ply sponza-dabrovic/sponza.obj conference-69k/conference.obj; do
    for cfg in before "3 3 8" "8 8 8" "3 3 0" "5 5 8"; do
      if [ "$cfg" = before ]; then bin=/tmp/cpu-rays5-before; env=""; else set -- $cfg; bin=/tmp/cpu-rays5-scan; env="CAUSTIC_ALONE_A=$1 CAUSTIC_ALONE_C=$2 CAUSTIC_DEFER=$3"; fi
      echo "# round $round cfg=[$cfg] $scene load: $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%H:%M:%S)"
      env $env CAUSTIC_WIDE_SIMD=${SIMD:-} $bin bench accel --accel bvh-wide --scene $S/$scene --camera standard --reps 5 --threads 1 2>&1 | grep '| bvh-wide |'
    done
  done
done
