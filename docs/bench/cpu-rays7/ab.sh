#!/bin/bash
# Interleaved A/B, 1 thread: main's binary (before, /tmp/cpu-rays7-before) and this branch's
# (AFTER, default /tmp/cpu-rays7-after) per scene, per round. A variant is BIN:AO:ALONE:CLOSEST,
# BIN before|after, AO the CAUSTIC_WIDE_AO value (lanes: lane-wise streams, rays: per-ray node
# step, single: single-ray AO; main reads only `single`), ALONE the CAUSTIC_WIDE_ALONE value,
# CLOSEST the CAUSTIC_WIDE_CLOSEST value (lanes or rays); empty fields: the binary's default.
# SIMD=avx2 caps the backend; SIZE (default 1024) and REPS (default 5) set the image and the
# repetitions (the bench reports the best).
S=/work/main/target/scenes
AFTER=${AFTER:-/tmp/cpu-rays7-after}
for round in ${ROUNDS:-1 2 3}; do
  for scene in ${SCENES:-bunny/bun_zipper.ply sponza-dabrovic/sponza.obj conference-69k/conference.obj}; do
    for v in ${VARIANTS:-before::: after:lanes:: after:rays::}; do
      IFS=: read -r which ao alone closest <<< "$v"
      bin=/tmp/cpu-rays7-before; [ "$which" = after ] && bin=$AFTER
      echo "# round $round $v ${SIMD:-avx512} $scene load: $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%H:%M:%S)"
      env ${ao:+CAUSTIC_WIDE_AO=$ao} ${alone:+CAUSTIC_WIDE_ALONE=$alone} ${closest:+CAUSTIC_WIDE_CLOSEST=$closest} \
        CAUSTIC_WIDE_SIMD=${SIMD:-} $bin bench accel --accel bvh-wide --scene $S/$scene --camera standard \
        --width ${SIZE:-1024} --height ${SIZE:-1024} --reps ${REPS:-5} --threads 1 2>&1 | grep '| bvh-wide |'
    done
  done
done
