#!/usr/bin/env bash
# A fuzz campaign of every loader at once, on prebuilt targets, for a
# machine with more cores than this one (the GPU machine has 16 and no Rust
# toolchain): each target runs in libFuzzer's fork mode with its share of
# the workers, reads the kept corpus (fuzz/corpus/TARGET) and writes what
# it finds to OUT/new/TARGET, crashes to OUT/artifacts/TARGET; the CPU
# time each spent (its workers included) goes to OUT/TARGET.time.
#
#   scripts/fuzz.sh --build obj ply gltf mitsuba     # here, then carry
#   tar -C fuzz/target/x86_64-unknown-linux-gnu/release -cJf target/fuzz-bundle/bins.tar.xz obj ply gltf mitsuba
#   scripts/fuzz-campaign.sh BINS_DIR_OR_TAR SECONDS "obj:4 ply:4 gltf:4 mitsuba:4"
#
# Then merge OUT/new/TARGET into the kept corpus with
# `scripts/fuzz.sh --minimize TARGET` after copying the files into
# fuzz/corpus/TARGET.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bins=$1
seconds=${2:-540}
plan=${3:-"obj:4 ply:4 gltf:4 mitsuba:4"}
out="${OUT:-$root/target/fuzz-campaign}"
mkdir -p "$out"
if [ -f "$bins" ]; then
    dir=$(mktemp -d)
    tar -xJf "$bins" -C "$dir"
    bins=$dir
fi
TIMEFORMAT='%U user %S sys %R wall (s)'
for entry in $plan; do
    t=${entry%%:*}
    workers=${entry##*:}
    mkdir -p "$out/new/$t" "$out/artifacts/$t"
    {
        time "$bins/$t" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
            -max_total_time="$seconds" -fork="$workers" \
            -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
            -dict="$root/fuzz/dict/$t.dict" -artifact_prefix="$out/artifacts/$t/" \
            -print_final_stats=1 "$out/new/$t" "$root/fuzz/corpus/$t" >"$out/$t.log" 2>&1
    } 2>"$out/$t.time" &
done
wait
for entry in $plan; do
    t=${entry%%:*}
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out/$t.log" | tail -n 1 | grep -o '[0-9]*$')
    last=$(grep -E '^#[0-9]+' "$out/$t.log" | tail -n 1 | cut -c1-120)
    echo "$t: $(cat "$out/$t.time"); found $(ls "$out/new/$t" | wc -l) new inputs, $(ls "$out/artifacts/$t" | wc -l) artifacts; executions ${execs:-?}; last: $last"
done
