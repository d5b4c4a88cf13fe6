#!/usr/bin/env bash
# Session 25 call 3: ncu (speed of light, memory, occupancy, warp states)
# of the serial frame's photon_tail and the eye pass's first wave's
# whitted_shade, photon_collect_at and whitted_gather_shadows (before).
set -uo pipefail
d=target/photon-s25
out="${OUT:-/tmp}"
export CAUSTIC_KERNEL_CACHE=/tmp/s25-kernels
timeout 100 $d/before/photon_gpu_bench 1000000 1920x1080 --no-cpu --serial > /dev/null 2>&1
timeout 200 ncu --clock-control none -k 'regex:^(whitted_shade|photon_collect_at|whitted_gather_shadows|photon_tail|traverse_bvh2_any)$' -c 5 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
  --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
  $d/before/photon_gpu_bench 1000000 1920x1080 --no-cpu --serial > "$out/ncu.txt" 2>&1
grep -E "^  [a-z_]+|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|No Eligible|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|Warp Cycles Per Issued" "$out/ncu.txt" | head -120
