#!/bin/bash
# Interleaved, 1 thread: main's binary, then the scan build with software
# prefetch of pushed subtrees off (CAUSTIC_PREFETCH=0) and on, per scene, per round.
S=/work/main/target/scenes
for round in ${ROUNDS:-1 2 3}; do
  for scene in bunny/bun_zipper.ply sponza-dabrovic/sponza.obj conference-69k/conference.obj; do
    for cfg in before "0" "1"; do
      if [ "$cfg" = before ]; then bin=/tmp/cpu-rays5-before; env=""; else bin=$SCAN; env="CAUSTIC_ALONE_A=3 CAUSTIC_ALONE_C=3 CAUSTIC_DEFER=8 CAUSTIC_PREFETCH=$cfg"; fi
      echo "# round $round cfg=[$cfg] $scene load: $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%H:%M:%S)"
      env $env CAUSTIC_WIDE_SIMD=${SIMD:-} $bin bench accel --accel bvh-wide --scene $S/$scene --camera standard --reps 5 --threads 1 2>&1 | grep '| bvh-wide |'
    done
  done
done
