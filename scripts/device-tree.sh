#!/usr/bin/env bash
# The device tool copies the working tree to the GPU machine with each
# call, 64 MiB at most, tracked files and carried paths together. The fuzz
# corpus (fuzz/corpus: about 9 700 small files) alone counts for most of
# that limit, and no GPU run needs it; `slim` takes it out of the working
# tree with a sparse checkout (the files stay tracked and committed, and
# git status stays clean), `full` brings it back. Run `full` before
# committing anything under fuzz/ or running the fuzzers.
#
#   scripts/device-tree.sh slim    # before device calls
#   scripts/device-tree.sh full    # after them
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
    slim) git sparse-checkout set --no-cone '/*' '!/fuzz/corpus/' ;;
    full) git sparse-checkout disable ;;
    *) echo "usage: scripts/device-tree.sh slim|full" >&2; exit 2 ;;
esac
echo "working tree: $(git ls-files -t | grep -c '^H') tracked files present, $(git ls-files -t | grep -c '^S') left out"
