#!/usr/bin/env bash
# Given the release binary (scripts/build_release.sh: src/sched and src/sim compiled with the
# profiles of training replays), expect the decisions of the development build: the Philly
# references of philly_reference_test.sh, every policy and the autoscaled replay, byte for byte.
# A profile changes how the compiler lays out and inlines code, never what it computes; this
# checks that the binary users are told to run for speed is that same program.
#
# Skipped (exit 77) when no release binary has been built (scripts/test.sh builds one).
#
# Usage: release_reference_test.sh PATH/TO/release/gpufleet SOURCE_DIR
set -uo pipefail
RELEASE="${1:?usage: release_reference_test.sh RELEASE_GPUFLEET SOURCE_DIR}"
SRC="${2:?usage: release_reference_test.sh RELEASE_GPUFLEET SOURCE_DIR}"
if [[ ! -x "$RELEASE" ]]; then
  echo "SKIP: no release binary at $RELEASE (build it with: bash scripts/build_release.sh)"
  exit 77
fi
exec bash "$(dirname "$0")/philly_reference_test.sh" "$RELEASE" "$SRC"
