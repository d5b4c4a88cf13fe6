#!/bin/bash
# usage: cg.sh BIN TAG SCENE(bunny|sponza|conference)   (env passes through, e.g. CAUSTIC_WIDE_AO=single)
# Callgrind of the AVX2 backend (valgrind 3.19 cannot run AVX-512), 256^2 protocol rays, warm-up + one pass;
# prints the bench row and the inclusive counts of the AO and closest-hit entry points.
BIN=$1; TAG=$2; SC=$3
S=/work/main/target/scenes
case $SC in
 bunny) A="--scene $S/bunny/bun_zipper.ply --camera standard";;
 sponza) A="--scene $S/sponza-dabrovic/sponza.obj --eye=-13,0,3 --at=13,0,6 --up=0,0,1 --fov 70";;
 conference) A="--scene $S/conference-69k/conference.obj --camera standard";;
esac
OUT=/tmp/cg-$TAG-$SC.out
CAUSTIC_WIDE_SIMD=avx2 valgrind --tool=callgrind --callgrind-out-file=$OUT $BIN bench accel $A --accel bvh-wide --width 256 --height 256 --reps 1 --threads 1 > /tmp/cg-$TAG-$SC.log 2>&1
grep '| bvh-wide |' /tmp/cg-$TAG-$SC.log
callgrind_annotate --inclusive=yes $OUT 2>/dev/null | grep -E "occluded_stream|occluded_single|occluded_rays|closest_packets|closest_rays" | head -6
