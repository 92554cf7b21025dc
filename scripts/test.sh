#!/usr/bin/env bash
# The whole check, as CI runs it: install dependencies, build, run every test.
#
# Environment: BUILD_DIR (default build), CTEST_JOBS (default 2), and what scripts/build.sh reads;
# GPUFLEET_WERROR (default ON: a compiler warning fails the check); RELEASE_DIR (default
# build-release: where scripts/build_release.sh builds the release binary, for a run without
# ctest arguments or with GPUFLEET_RELEASE=1). Extra arguments go to ctest,
# e.g. `bash scripts/test.sh -L integration`, or `-L unit` for the quick unit tests (`slow` ones
# are left out).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR="${BUILD_DIR:-build}"
export BUILD_DIR
export GPUFLEET_WERROR="${GPUFLEET_WERROR:-ON}"

bash scripts/setup.sh
RELEASE_DIR="${RELEASE_DIR:-build-release}"
export RELEASE_DIR
release_abs="$RELEASE_DIR"
[[ "$release_abs" == /* ]] || release_abs="$(pwd -P)/$release_abs"
bash scripts/build.sh -DGPUFLEET_RELEASE_DIR="$release_abs"
# The release binary (scripts/build_release.sh: profile-guided, a minute more), which ctest's
# cli.release_reference checks against the Philly references: for the whole run (CI), or when
# GPUFLEET_RELEASE=1. A run of some tests (`-L unit`) leaves it as it is.
if [[ $# -eq 0 || "${GPUFLEET_RELEASE:-}" == 1 ]]; then
  bash scripts/build_release.sh
  export GPUFLEET_RELEASE_REQUIRED=1  # the test fails, not skips, without that binary
fi
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${CTEST_JOBS:-2}" "$@"
