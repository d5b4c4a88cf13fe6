#!/usr/bin/env bash
# Fuzz one scene loader with libFuzzer, on the stable toolchain.
#
#   scripts/fuzz.sh TARGET [SECONDS] [libFuzzer options...]   build, then fuzz
#   scripts/fuzz.sh --build [TARGET...]                       build only
#   scripts/fuzz.sh --minimize TARGET                         shrink the corpus
#   scripts/fuzz.sh --run TARGET FILE...                      replay inputs
#
# TARGET is obj, ply, gltf or mitsuba (fuzz/fuzz_targets/). The corpus in
# fuzz/corpus/TARGET is kept in the repository; new inputs found while
# fuzzing are added to it (minimise before committing). Crashes, leaks and
# timeouts land in fuzz/artifacts/TARGET/.
#
# cargo-fuzz needs nightly only for its sanitizer flags (-Zsanitizer); the
# coverage instrumentation libFuzzer needs is LLVM's SanitizerCoverage
# pass, which stable rustc runs with `-Cpasses=sancov-module` and the
# `-Cllvm-args` below (the same ones cargo-fuzz passes). libfuzzer-sys
# builds libFuzzer itself with the system C++ compiler. `--target` keeps
# RUSTFLAGS off build scripts and proc macros. Without AddressSanitizer,
# memory errors in unsafe code go unseen; caustic-scene has no unsafe code,
# and panics, overflows, debug assertions, hangs (-timeout) and memory
# blow-ups (-rss_limit_mb) are all caught.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# Inputs to replay are named relative to where the script was started.
if [ "${1:-}" = --run ] && [ $# -ge 3 ]; then
    set -- "$1" "$2" $(realpath "${@:3}")
fi
cd "$root/fuzz"
host=$(rustc -vV | sed -n 's/^host: //p')
bin_dir="target/$host/release"
targets=(obj ply gltf mitsuba)

build() {
    RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module \
-Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
-Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares" \
        cargo build --release --target "$host" "${@/#/--bin=}"
}

check_target() {
    [[ " ${targets[*]} " == *" $1 "* ]] || {
        echo "unknown target '$1' (targets: ${targets[*]})" >&2
        exit 2
    }
}

# Options every run shares: a hang is an input that takes 10 s, a memory
# blow-up one that passes 2 GiB; inputs are kept small, as scene files
# that exercise a loader's logic are.
common=(-timeout=10 -rss_limit_mb=2048 -max_len=65536)

case "${1:-}" in
--build)
    shift
    [ $# -eq 0 ] && set -- "${targets[@]}"
    for t in "$@"; do check_target "$t"; done
    build "$@"
    ;;
--minimize)
    t=$2
    check_target "$t"
    build "$t"
    tmp=$(mktemp -d)
    # The kept corpus stays small: inputs are cut to 8 KiB (later options
    # win), which keeps every format's logic and drops bulk.
    "$bin_dir/$t" -merge=1 "${common[@]}" -max_len=8192 "$tmp" "corpus/$t"
    rm -rf "corpus/$t"
    mv "$tmp" "corpus/$t"
    echo "corpus/$t: $(ls "corpus/$t" | wc -l) inputs, $(du -sh "corpus/$t" | cut -f1)"
    ;;
--run)
    t=$2
    shift 2
    check_target "$t"
    build "$t"
    "$bin_dir/$t" "${common[@]}" "$@"
    ;;
"" | -*)
    sed -n '2,9p' "$0" >&2
    exit 2
    ;;
*)
    t=$1
    seconds=${2:-60}
    shift $(($# < 2 ? $# : 2))
    check_target "$t"
    build "$t"
    mkdir -p "corpus/$t" "artifacts/$t"
    "$bin_dir/$t" "${common[@]}" -max_total_time="$seconds" \
        -dict="dict/$t.dict" -artifact_prefix="artifacts/$t/" -print_final_stats=1 \
        "$@" "corpus/$t"
    ;;
esac
