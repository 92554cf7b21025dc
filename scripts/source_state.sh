#!/usr/bin/env bash
# Prints one line naming the state of what the release binary is built from: the commit, and a
# hash of what differs from it under src/, the CMake files, the release scripts and the training
# data (changes to tracked files, and the names of untracked ones). The same sources print the
# same line; files elsewhere (docs, tests, what a test run leaves behind) do not count. Outside a
# git checkout it prints "unknown".
#
# scripts/build_release.sh writes it next to the release binary; tests/release_reference_test.sh
# compares it with the tree it runs in, so that an older release binary is not taken for this one.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! head=$(git rev-parse HEAD 2> /dev/null); then
  echo unknown
  exit 0
fi
paths=(src cmake CMakeLists.txt scripts/build.sh scripts/build_release.sh scripts/pgo_train.sh data examples)
changes=$( { git diff HEAD -- "${paths[@]}"; git status --porcelain --untracked-files=all -- "${paths[@]}"; } |
           sha256sum | cut -c1-16)
echo "$head $changes"
