#!/usr/bin/env bash
# Given the release binary (scripts/build_release.sh: src/sched and src/sim compiled with the
# profiles of training replays, optimised at link time with src/model and src/common), expect
# the decisions of the development build: the Philly references of philly_reference_test.sh,
# every policy and the autoscaled replay, byte for byte. A profile changes how the compiler lays
# out and inlines code, never what it computes; this checks that the binary users are told to
# run for speed is that same program.
#
# Skipped (exit 77) when the folder holds no finished release build of the sources the test runs
# in (its release.stamp, written by build_release.sh after the optimised build, names another
# state of the tree, or is missing); failed instead when GPUFLEET_RELEASE_REQUIRED=1, as
# scripts/test.sh sets after building one, so that CI cannot pass without the check.
#
# Usage: release_reference_test.sh RELEASE_BUILD_DIR SOURCE_DIR
set -uo pipefail
DIR="${1:?usage: release_reference_test.sh RELEASE_BUILD_DIR SOURCE_DIR}"
SRC="${2:?usage: release_reference_test.sh RELEASE_BUILD_DIR SOURCE_DIR}"
RELEASE="$DIR/src/gpufleet"
not_here() {  # a skip, or a failure when the binary is required
  if [[ "${GPUFLEET_RELEASE_REQUIRED:-}" == 1 ]]; then
    echo "FAIL: $1"
    exit 1
  fi
  echo "SKIP: $1"
  exit 77
}
if [[ ! -x "$RELEASE" || ! -f "$DIR/release.stamp" ]]; then
  not_here "no finished release build in $DIR (build it with: bash scripts/build_release.sh)"
fi
built=$(cat "$DIR/release.stamp")
now=$(bash "$SRC/scripts/source_state.sh")
if [[ "$built" != "$now" ]]; then
  not_here "the release binary in $DIR was built from other sources ($built; the tree is at $now); rebuild it with: bash scripts/build_release.sh"
fi
exec bash "$(dirname "$0")/philly_reference_test.sh" "$RELEASE" "$SRC"
