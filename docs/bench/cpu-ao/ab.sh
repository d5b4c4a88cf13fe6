#!/bin/bash
# Interleaved A/B: main's binary (before) then this branch's (after), per scene, per round.
S=/work/main/target/scenes
for round in ${ROUNDS:-1 2}; do
  for scene in bunny/bun_zipper.ply sponza-dabrovic/sponza.obj conference-69k/conference.obj; do
    for bin in /tmp/cpu-ao-before /tmp/cpu-ao-after3; do
      echo "# round $round $bin $scene load: $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%H:%M:%S)"
      $bin bench accel --accel bvh-wide --scene $S/$scene --camera standard --reps 5 --threads 1 2>&1 | grep '| bvh-wide |'
    done
  done
done
