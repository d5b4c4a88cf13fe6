#!/usr/bin/env bash
# Session 25, the merged tree on the GPU machine: scripts/gpu-run.sh on the
# bundle of `CAUSTIC_BUNDLE_PACK=1 scripts/gpu-bundle.sh` for the test
# binaries TESTS (names as gpu-run.sh takes them), with the Whitted,
# photon-search and photon-frame benchmarks when BENCH=1; everything inside
# a time limit below the tool's, the summary and logs copied to $OUT even
# when it runs out.
#   OUT=$OUT bash docs/bench/gpu-s25/final-call.sh NAME "TESTS" [BENCH] [LIMIT_S]
set -uo pipefail
name="${1:?name}"
tests="${2:?test binaries}"
bench="${3:-0}"
limit="${4:-560}"
out="${OUT:-/tmp}"
logs="/tmp/gpu-logs-$name"
rm -rf "$logs" && mkdir -p "$logs"
OUT="$logs" CAUSTIC_TESTS="$tests" CAUSTIC_BENCH=0 CAUSTIC_PRIMITIVES_BENCH=0 CAUSTIC_OPTIX=0 \
    CAUSTIC_WHITTED_BENCH="$bench" CAUSTIC_POINTS_BENCH="$bench" CAUSTIC_PHOTON_BENCH="$bench" \
    CAUSTIC_PHOTON_BENCH_ARGS="1000000 1920x1080 --no-cpu" \
    timeout "$limit" bash target/gpu-bundle/gpu-run.sh >"$logs/run.out" 2>&1
echo "gpu-run.sh exit $?" >>"$logs/run.out"
cp "$logs/summary.txt" "$out/summary-$name.txt" 2>/dev/null
tail -c 100000 "$logs/run.out" >"$out/run-$name.out"
tar -czf "$out/logs-$name.tar.gz" -C "$logs" .
cat "$out/summary-$name.txt" 2>/dev/null | tail -60
