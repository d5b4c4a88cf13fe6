#!/bin/bash
# Interleaved A/B, 1 thread: main's binary (before, /tmp/cpu-rays6-before), then this branch's
# binary AFTER (default /tmp/cpu-rays6-after) with AO in streams and with single-ray AO
# (CAUSTIC_WIDE_AO=stream|single), per scene, per round; SIMD=avx2 caps the backend.
S=/work/main/target/scenes
AFTER=${AFTER:-/tmp/cpu-rays6-after}
for round in ${ROUNDS:-1 2 3}; do
  for scene in bunny/bun_zipper.ply sponza-dabrovic/sponza.obj conference-69k/conference.obj; do
    for v in ${VARIANTS:-before:stream after:stream after:single}; do
      bin=/tmp/cpu-rays6-before; [ ${v%%:*} = after ] && bin=$AFTER
      echo "# round $round $v ${SIMD:-avx512} $scene load: $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%H:%M:%S)"
      CAUSTIC_WIDE_AO=${v##*:} CAUSTIC_WIDE_SIMD=${SIMD:-} $bin bench accel --accel bvh-wide --scene $S/$scene --camera standard --reps 5 --threads 1 2>&1 | grep '| bvh-wide |'
    done
  done
done
