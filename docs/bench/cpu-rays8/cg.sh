#!/bin/bash
# usage: cgao.sh BIN TAG SCENE -> AO instructions per ray (inclusive occluded_stream::run, avx2)
BIN=$1; TAG=$2; SC=$3
case $SC in
 bunny) A="--scene /tmp/scenes/bunny/bun_zipper.ply --camera standard"; R=117624;;
 sponza) A="--scene /tmp/scenes/sponza-dabrovic/sponza.obj --eye=-13,0,3 --at=13,0,6 --up=0,0,1 --fov 70"; R=515040;;
 conference) A="--scene /tmp/scenes/conference-69k/conference.obj --camera standard"; R=524288;;
esac
OUT=/tmp/cg-$TAG-$SC.out
CAUSTIC_WIDE_SIMD=avx2 valgrind --tool=callgrind ${CGOPTS:-} --callgrind-out-file=$OUT $BIN bench accel $A --accel bvh-wide --width 256 --height 256 --reps 1 --threads 1 > /tmp/cg-$TAG-$SC.log 2>&1
row=$(grep '| bvh-wide |' /tmp/cg-$TAG-$SC.log | awk -F'|' '{print $13}')
ANN=$(callgrind_annotate --inclusive=yes $OUT 2>/dev/null); n=$(echo "$ANN" | grep "avx::occluded_stream::run \[" | head -1 | awk "{gsub(\",\",\"\",\$1); print \$1}"); c=$(echo "$ANN" | grep "avx::closest_packets::run \[" | head -1 | awk "{gsub(\",\",\"\",\$1); print \$1}")
echo "$TAG $SC occluded=$row AO instr/ray: $(python3 -c "print(round($n/$R,1))") closest M: $(python3 -c "print(round($c/1e6,1))")"
