#!/bin/bash
# Interleaved A/B, 1 thread: main's binary (before, /tmp/cpu-rays5-before) then this
# branch's (after, /tmp/cpu-rays5-after), per scene, per round; SIMD=avx2 caps the backend.
S=/work/main/target/scenes
for round in ${ROUNDS:-1 2 3}; do
  for scene in bunny/bun_zipper.ply sponza-dabrovic/sponza.obj conference-69k/conference.obj; do
    for bin in /tmp/cpu-rays5-before /tmp/cpu-rays5-after; do
      echo "# round $round $bin ${SIMD:-avx512} $scene load: $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%H:%M:%S)"
      CAUSTIC_WIDE_SIMD=${SIMD:-} $bin bench accel --accel bvh-wide --scene $S/$scene --camera standard --reps 5 --threads 1 2>&1 | grep '| bvh-wide |'
    done
  done
done
