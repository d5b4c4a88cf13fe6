#!/usr/bin/env bash
# Session 25 call 4: before (main 4def2db) against after (77442b2: wave
# records in 16-byte accesses), 5 runs each alternating, the gather frames
# and a traced frame (scripts/photon-frame-ab.sh); both builds with the
# passes alone (--serial); ncu (speed of light, memory) of after's first
# wave's whitted_shade, photon_collect_at and whitted_gather_shadows.
set -uo pipefail
d=target/photon-s25
out="${OUT:-/tmp}"
export CAUSTIC_KERNEL_CACHE=/tmp/s25-kernels
OUT="$out" bash scripts/photon-frame-ab.sh $d/before $d/after "" 5 > "$out/ab.log" 2>&1
args=(1000000 1920x1080 --no-cpu)
for rep in 1 2; do
  for b in before after; do
    echo -n "$b --serial: "; timeout 120 $d/$b/photon_gpu_bench "${args[@]}" --serial 2>&1 | grep -E "^PHOTON-GPU-DISPLAY" | sed -e 's/.*median/median/' -e 's/ (1068694.*eye pass/, eye pass/' -e 's/ (final gather 0.00 ms: 0 irradiance samples + 0 point gathers;/ (/' -e 's/, 14.8 M rays.*//'
  done
done > "$out/serial.log" 2>&1
timeout 150 ncu --clock-control none -k 'regex:^(whitted_shade|photon_collect_at|whitted_gather_shadows)$' -c 3 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
  $d/after/photon_gpu_bench "${args[@]}" --serial > "$out/ncu.txt" 2>&1
grep -E "^  [a-z_]+ \(|Duration|DRAM Throughput|L2 Cache Throughput|Issue Slots Busy|Warp Cycles Per Issued" "$out/ncu.txt" > "$out/ncu-short.txt"
cat "$out/ab.log" "$out/serial.log" "$out/ncu-short.txt"
