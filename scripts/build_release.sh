#!/usr/bin/env bash
# Builds the release binary: the scheduler core and the simulator compiled with profiles of
# replays (profile-guided optimisation, GCC). Same sources, same decisions
# (tests/release_reference_test.sh checks the Philly references against it), faster replays
# and passes (docs/benchmarks.md, "Eleventh round").
#
#   bash scripts/build_release.sh            # -> build-release/src/gpufleet
#   BUILD_DIR=build-release bash scripts/install.sh   # then put it on PATH
#   RELEASE_DIR=/opt/gf-build bash scripts/build_release.sh
#
# Three steps in one build folder: (1) configure with GPUFLEET_PGO=generate and build the
# binary (src/sched and src/sim instrumented; everything else as in a normal build, so ccache
# hands back the objects of an earlier `scripts/build.sh`); (2) run the training replays
# (scripts/pgo_train.sh: every policy and the option sets that take other paths, on slices of
# the bundled traces, about 15 s); (3) reconfigure with GPUFLEET_PGO=use and build again
# (src/sched, src/sim, src/model and src/common recompile, the last two for link-time
# optimisation; everything relinks). Tests and benchmarks are not built here; `scripts/build.sh`
# keeps building the development tree in build/. When step 3 has succeeded, release.stamp in the
# folder names the sources it was built from (cli.release_reference checks a binary only when
# that matches the tree it runs in).
#
# Environment: RELEASE_DIR (default build-release; not BUILD_DIR, which names the development
# build), JOBS, GPUFLEET_WERROR (as scripts/build.sh; by default what build/ was configured with).
set -euo pipefail
cd "$(dirname "$0")/.."

# Compile with the settings of the development build when there is one, so that ccache hands back
# its objects (a different warning setting would make every object a new one).
dev_dir="${BUILD_DIR:-build}"
if [[ -z "${GPUFLEET_WERROR:-}" && -f "$dev_dir/CMakeCache.txt" ]]; then
  GPUFLEET_WERROR=$(sed -n 's/^GPUFLEET_WERROR:BOOL=//p' "$dev_dir/CMakeCache.txt")
  if [[ -n "$GPUFLEET_WERROR" ]]; then export GPUFLEET_WERROR; else unset GPUFLEET_WERROR; fi
fi
BUILD_DIR="${RELEASE_DIR:-build-release}"
export BUILD_DIR
profiles="$(mkdir -p "$BUILD_DIR" && cd "$BUILD_DIR" && pwd -P)/pgo-profiles"
common=(-DGPUFLEET_BUILD_TESTS=OFF -DGPUFLEET_BUILD_BENCH=OFF -DGPUFLEET_PGO_DIR="$profiles")
stamp="$BUILD_DIR/release.stamp"
rm -f "$stamp"  # the binary is instrumented, then being rebuilt, until step 3 ends

echo "build_release: 1/3 instrumented build in $BUILD_DIR" >&2
bash scripts/build.sh "${common[@]}" -DGPUFLEET_PGO=generate
rm -rf "$profiles"
echo "build_release: 2/3 training replays" >&2
bash scripts/pgo_train.sh "$BUILD_DIR/src/gpufleet"
if ! compgen -G "$profiles/*.gcda" > /dev/null; then
  echo "build_release: the training wrote no profiles to $profiles" >&2
  exit 1
fi
echo "build_release: 3/3 optimised build" >&2
# Without ccache: it would key these objects on the profiles' path, not on what they hold. The
# compiler's output goes to a log: GCC notes every called function the training did not reach
# (see GPUFLEET_PGO in CMakeLists.txt), dozens of lines that are not problems.
log="$BUILD_DIR/release-build.log"
if ! CCACHE_DISABLE=1 bash scripts/build.sh "${common[@]}" -DGPUFLEET_PGO=use > "$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "build_release: the optimised build failed (whole log: $log)" >&2
  exit 1
fi
bash scripts/source_state.sh > "$stamp"
echo "build_release: $BUILD_DIR/src/gpufleet" >&2
