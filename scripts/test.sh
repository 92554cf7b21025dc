#!/usr/bin/env bash
# The whole check, as CI runs it: install dependencies, build, run every test.
#
# Environment: BUILD_DIR (default build), CTEST_JOBS (default 2), and what scripts/build.sh reads;
# GPUFLEET_WERROR (default ON: a compiler warning fails the check). Extra arguments go to ctest,
# e.g. `bash scripts/test.sh -L integration`, or `-L unit` for the quick unit tests (`slow` ones
# are left out).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR="${BUILD_DIR:-build}"
export BUILD_DIR
export GPUFLEET_WERROR="${GPUFLEET_WERROR:-ON}"

bash scripts/setup.sh
bash scripts/build.sh
# The release binary (profile-guided; ccache hands back every object but src/sched's and
# src/sim's), which ctest's cli.release_reference checks against the Philly references.
bash scripts/build_release.sh
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${CTEST_JOBS:-2}" "$@"
