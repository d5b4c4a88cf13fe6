#!/bin/bash
# usage: ab.sh ROUNDS BIN_A BIN_B [scenes...] ; 512x512, reps 15, 1 thread, AVX-512 default
R=$1; A=$2; B=$3; shift 3
SC=${@:-bunny sponza conference}
for i in $(seq $R); do for s in $SC; do
 case $s in
  bunny) S="--scene /tmp/scenes/bunny/bun_zipper.ply --camera standard";;
  sponza) S="--scene /tmp/scenes/sponza-dabrovic/sponza.obj --eye=-13,0,3 --at=13,0,6 --up=0,0,1 --fov 70";;
  conference) S="--scene /tmp/scenes/conference-69k/conference.obj --camera standard";;
 esac
 for tag in A B; do bin=${!tag}
  row=$($bin bench accel $S --accel bvh-wide --width 512 --height 512 --reps 15 --threads 1 2>&1 | grep "bvh-wide |")
  echo "$i $s $tag $(echo $row | awk -F'|' '{print $9, $10, $11}') load=$(cut -d' ' -f1 /proc/loadavg)"
 done; done; done
