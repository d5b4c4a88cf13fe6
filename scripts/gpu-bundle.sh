#!/usr/bin/env bash
# Builds everything the GPU machine runs, here where Rust is: the release
# test binaries and the examples of caustic-gpu, caustic-render (its
# GPU renderers' tests and benchmarks among them) and the caustic facade
# (its queries and renders on the GPU against the CPU), the unit tests, GPU
# tests and examples of caustic-accel (not its CPU-only integration tests,
# which CI runs), and the caustic CLI (
# unless CAUSTIC_BUNDLE_CLI=0), and copies them with gpu-run.sh into
# target/gpu-bundle/ (CAUSTIC_BUNDLE_DIR names another folder), with the
# standard scenes' archives (shared/scenes,
# about 13 MB; CAUSTIC_SCENE_ARCHIVES names another folder, and an empty
# value leaves them out), which gpu-run.sh unpacks there. The GPU machine
# has no Rust toolchain and no network; carry that folder there and run it.
# CAUSTIC_BUNDLE_OPTIX=PATH/mts312.tar.xz (Mitsuba 3 for the GPU machine's
# Python, made by anchors/gpu/make_gpu_bundle.sh, about 20 MB) adds the OptiX
# anchor, which gpu-run.sh then runs on the same scenes and cameras:
#
#   scripts/gpu-bundle.sh
#   device run: carry ["target/gpu-bundle"], command "bash target/gpu-bundle/gpu-run.sh"
#
# The tool's 64 MiB counts the working tree too: `scripts/device-tree.sh
# slim` first (the fuzz corpus out of the tree). CAUSTIC_BUNDLE_PACK=1 and
# no more scenes than the run needs keep the bundle under the rest; the
# OptiX anchor (24 MB) goes in a call of its own with the CLI alone.
set -euo pipefail
cd "$(dirname "$0")/.."

bundle="${CAUSTIC_BUNDLE_DIR:-target/gpu-bundle}"
rm -rf "$bundle"
mkdir -p "$bundle/tests"

# cargo test --no-run builds the test harnesses and the examples; its JSON
# names each executable. Test targets go to tests/, examples beside them.
cargo test -p caustic-gpu -p caustic-accel -p caustic-render -p caustic --release --no-run --message-format=json \
    | python3 -c '
import json, os, shutil, sys
bundle = sys.argv[1]
for line in sys.stdin:
    if not line.startswith("{"):
        continue
    msg = json.loads(line)
    if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
        continue
    target = msg["target"]
    crate = msg["package_id"].split("#")[0].rsplit("/", 1)[-1]
    cpu_only = crate == "caustic-accel" and target["kind"] == ["test"] and not (
        target["name"].startswith("gpu_") or target["name"] == "nvrtc_compile")
    if cpu_only:
        continue
    if msg["profile"]["test"]:
        name = target["name"] if target["kind"] != ["lib"] else target["name"] + "-unit"
        if target["name"] == "nvrtc_compile":
            name = crate.replace("caustic-", "") + "-nvrtc_compile"
        # Test targets of the same name in two crates (gpu_taskpool) keep
        # both: the second takes its crate as a prefix.
        dest = f"{bundle}/tests/{name}"
        if os.path.exists(dest):
            short = crate.replace("caustic-", "")
            dest = f"{bundle}/tests/{short}-{name}"
    elif "example" in target["kind"]:
        dest = bundle + "/" + target["name"]
    else:
        continue
    shutil.copy2(msg["executable"], dest)
    print(f"bundled {dest}")
' "$bundle"

# CAUSTIC_BUNDLE_MPI=1: the CLI with the `mpi` feature, and Open MPI's
# runtime for the GPU machine, which has none (scripts/mpi-bundle.sh, about
# 2.5 MB), with scripts/mpi-gpu-sppm.sh, which gpu-run.sh then runs.
cli_features=()
[ "${CAUSTIC_BUNDLE_MPI:-0}" = 0 ] || cli_features=(--features mpi)
if [ "${CAUSTIC_BUNDLE_CLI:-1}" != 0 ]; then
    if cargo build --release -p caustic-cli "${cli_features[@]}"; then
        cp target/release/caustic "$bundle/caustic"
        echo "bundled $bundle/caustic"
        if [ "${CAUSTIC_BUNDLE_MPI:-0}" != 0 ]; then
            scripts/mpi-bundle.sh "$bundle/openmpi.tar.xz" target/release/caustic
            cp scripts/mpi-gpu-sppm.sh "$bundle/mpi-gpu-sppm.sh"
        fi
    else
        echo "note: the caustic CLI did not build; bundled without it"
    fi
fi

# The scenes travel packed: the dragon alone is 34 MB of PLY text, 7 MB as xz.
archives="${CAUSTIC_SCENE_ARCHIVES-../shared/scenes}"
if [ -n "$archives" ] && ls "$archives"/*.tar.xz >/dev/null 2>&1; then
    mkdir -p "$bundle/scenes"
    cp "$archives"/*.tar.xz "$bundle/scenes/"
    echo "bundled $(ls "$bundle/scenes" | wc -l) scene archives from $archives"
else
    echo "note: no scene archives in '${archives}'; the scene tests and the trace benchmark will skip"
fi

# The Cornell references (scene files and path-traced images, about 7 MB)
# for the photon mapper's GPU tests; CAUSTIC_BUNDLE_REFS=0 leaves them out.
refs="${CAUSTIC_REFS:-../shared/refs}"
if [ "${CAUSTIC_BUNDLE_REFS:-1}" != 0 ] && [ -d "$refs" ]; then
    for name in cornell-box cornell-caustics; do
        [ -d "$refs/$name" ] || continue
        mkdir -p "$bundle/refs/$name"
        cp "$refs/$name"/*.xml "$refs/$name"/*.obj "$refs/$name/${name}_path".* "$bundle/refs/$name/"
    done
    echo "bundled the Cornell references from $refs"
fi

# Debug sections are most of each binary's size, and what travels to the GPU
# machine is limited; panic messages keep their file and line without them.
find "$bundle" -type f -perm -u+x ! -name "*.sh" ! -name "*.py" -exec strip --strip-debug {} +

# What travels is limited to 64 MiB; with the OptiX anchor the bundle is
# over it unpacked. CAUSTIC_BUNDLE_PACK=1 packs the executables into one xz
# archive, which gpu-run.sh unpacks. The binaries share most of their code
# (the same crates linked into each), so one block with a dictionary larger
# than the whole tar finds the repeats: about 19 MB for 270 MB of
# binaries, against 46 MB with xz's default 8 MiB dictionary (about two
# and a half minutes of one core).
if [ "${CAUSTIC_BUNDLE_PACK:-0}" != 0 ]; then
    executables=$(cd "$bundle" && find . -maxdepth 2 -type f -perm -u+x ! -name '*.sh' ! -name '*.py' | sort)
    # shellcheck disable=SC2086 # one path per word
    tar -cf - -C "$bundle" $executables | xz -T1 --lzma2=preset=9,dict=256MiB >"$bundle/bin.tar.xz"
    (cd "$bundle" && rm -f $executables)
    echo "packed $(echo "$executables" | wc -l) executables into $bundle/bin.tar.xz"
fi
cp scripts/gpu-run.sh "$bundle/gpu-run.sh"
cp scripts/gpu_vs_optix.py "$bundle/gpu_vs_optix.py"
cp scripts/photon-gpu-table.sh "$bundle/photon-gpu-table.sh"
cp scripts/perf-targets.sh "$bundle/perf-targets.sh"

# The OptiX anchor: Mitsuba and the anchor's script, which here also records
# the median of its timings next to the best (its JSON has only the best).
if [ -n "${CAUSTIC_BUNDLE_OPTIX:-}" ]; then
    anchor="${CAUSTIC_OPTIX_ANCHOR:-../shared/anchors/gpu/optix_anchor.py}"
    mkdir -p "$bundle/optix"
    cp "$CAUSTIC_BUNDLE_OPTIX" "$bundle/optix/mts312.tar.xz"
    python3 - "$anchor" "$bundle/optix/optix_anchor.py" <<'PY'
import sys
text = open(sys.argv[1]).read()
for best, median, rays in [("p_best", "p_med", "W * H"), ("a_best", "a_med", "nvalid"), ("d_best", "d_med", "nvalid")]:
    old = f"mrays_s={rays} / {best} / 1e6"
    if old not in text:
        sys.exit(f"optix_anchor.py changed: '{old}' not found; update gpu-bundle.sh")
    text = text.replace(old, f"{old}, mrays_s_median={rays} / {median} / 1e6")
open(sys.argv[2], "w").write(text)
PY
    echo "bundled the OptiX anchor"
fi
du -sh "$bundle"
