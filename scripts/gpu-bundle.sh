#!/usr/bin/env bash
# Builds everything the GPU machine runs, here where Rust is: the release
# test binaries and the examples of caustic-gpu and caustic-render (its
# GPU Whitted renderer's test and benchmark among them; and the caustic CLI,
# unless CAUSTIC_BUNDLE_CLI=0), and copies them with gpu-run.sh into
# target/gpu-bundle/, with the standard scenes' archives (shared/scenes,
# about 13 MB; CAUSTIC_SCENE_ARCHIVES names another folder, and an empty
# value leaves them out), which gpu-run.sh unpacks there. The GPU machine
# has no Rust toolchain and no network; carry that folder there and run it:
#
#   scripts/gpu-bundle.sh
#   device run: carry ["target/gpu-bundle"], command "bash target/gpu-bundle/gpu-run.sh"
set -euo pipefail
cd "$(dirname "$0")/.."

bundle=target/gpu-bundle
rm -rf "$bundle"
mkdir -p "$bundle/tests"

# cargo test --no-run builds the test harnesses and the examples; its JSON
# names each executable. Test targets go to tests/, examples beside them.
cargo test -p caustic-gpu -p caustic-render --release --no-run --message-format=json \
    | python3 -c '
import json, shutil, sys
bundle = sys.argv[1]
for line in sys.stdin:
    if not line.startswith("{"):
        continue
    msg = json.loads(line)
    if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
        continue
    target = msg["target"]
    if msg["profile"]["test"]:
        name = target["name"] if target["kind"] != ["lib"] else target["name"] + "-unit"
        dest = f"{bundle}/tests/{name}"
    elif "example" in target["kind"]:
        dest = bundle + "/" + target["name"]
    else:
        continue
    shutil.copy2(msg["executable"], dest)
    print(f"bundled {dest}")
' "$bundle"

if [ "${CAUSTIC_BUNDLE_CLI:-1}" != 0 ]; then
    if cargo build --release -p caustic-cli; then
        cp target/release/caustic "$bundle/caustic"
        echo "bundled $bundle/caustic"
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
    echo "note: no scene archives in '${archives}'; the scene tests and trace_bench will skip"
fi

# Debug sections are most of each binary's size, and what travels to the GPU
# machine is limited; panic messages keep their file and line without them.
find "$bundle" -type f -perm -u+x -exec strip --strip-debug {} +
cp scripts/gpu-run.sh "$bundle/gpu-run.sh"
du -sh "$bundle"
