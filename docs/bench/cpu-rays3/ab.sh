#!/usr/bin/env bash
# Interleaved A/B: main e7e617d's binary, this branch (AVX-512 auto), this branch capped at AVX2.
export CAUSTIC_SCENES=/work/main/target/scenes
S=$CAUSTIC_SCENES
declare -A SC=([bunny]="$S/bunny/bun_zipper.ply" [sponza]="$S/sponza-dabrovic/sponza.obj" [conference]="$S/conference-69k/conference.obj")
THREADS=${THREADS:-1}
for round in $(seq 1 ${ROUNDS:-2}); do
  for scene in bunny sponza conference; do
    for v in before after after-avx2; do
      case $v in
        before) cmd="/tmp/caustic-before-r3";;
        after) cmd="/tmp/caustic-after-r3";;
        after-avx2) cmd="env CAUSTIC_WIDE_SIMD=avx2 /tmp/caustic-after-r3";;
      esac
      load=$(cut -d' ' -f1 /proc/loadavg)
      line=$($cmd bench accel --scene ${SC[$scene]} --camera standard --accel bvh-wide --reps 5 --threads $THREADS 2>&1 | grep "| bvh-wide |" | tail -1)
      echo "round $round | $scene | $v | load $load $line"
    done
  done
done
