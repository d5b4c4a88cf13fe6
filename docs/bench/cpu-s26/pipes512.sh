#!/usr/bin/env bash
# Session 26: session 25's pipe microbenchmark (docs/bench/cpu-s25/pipes.c) at
# 256 and at 512 bits, to see whether this CPU issues 512-bit FMAs, minima and
# maxima as often as 256-bit ones (BENCHMARKS.md, "CPU rays, session 26").
#   bash docs/bench/cpu-s26/pipes512.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
sed -e 's/__m256/__m512/g; s/_mm256_/_mm512_/g; s/__mmask8/__mmask16/; s/float s\[8\]/float s[16]/' \
    -e 's/_mm512_castsi256_ps/_mm512_castsi512_ps/g; s/_mm512_castps_si256/_mm512_castps_si512/g' \
    "$here/../cpu-s25/pipes.c" >"$work/pipes512.c"
flags="-O2 -mavx2 -mfma -mavx512f -mavx512vl -mavx512dq"
gcc $flags -o "$work/p256" "$here/../cpu-s25/pipes.c"
gcc $flags -o "$work/p512" "$work/pipes512.c"
echo "256-bit:" && "$work/p256"
echo "512-bit:" && "$work/p512"
