#!/usr/bin/env bash
# Configures and builds gpufleet with Ninja.
#
# Environment: BUILD_DIR (default build), BUILD_TYPE (default RelWithDebInfo), JOBS (default
# nproc), GPUFLEET_WERROR (ON: warnings are errors, as scripts/test.sh and CI build; unset: the
# build folder keeps what it had, OFF at first). Extra arguments go to the CMake configure step,
# e.g. -DGPUFLEET_BUILD_BENCH=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR="${BUILD_DIR:-build}"
# ccache keys on paths relative to the repository, so that another build folder of the same tree
# (scripts/build_release.sh's) gets back the objects this one compiled.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}"
JOBS="${JOBS:-$(nproc)}"

generator=(-G Ninja)
if [[ -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  # CMake refuses to switch generators in place; keep the one the folder was made with.
  generator=()
  if ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$BUILD_DIR/CMakeCache.txt"; then
    echo "build: $BUILD_DIR was configured with another generator; keeping it (remove $BUILD_DIR to use Ninja)" >&2
  fi
fi

werror=()
if [[ -n "${GPUFLEET_WERROR:-}" ]]; then
  werror=(-DGPUFLEET_WERROR="$GPUFLEET_WERROR")
fi

cmake -S . -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" "${werror[@]}" "$@"
cmake --build "$BUILD_DIR" -j "$JOBS"
