#!/usr/bin/env bash
# Runs the tests under sanitizers (GCC's, which need no packages beyond scripts/setup.sh's).
#
#   bash scripts/sanitize.sh            # ASan + UBSan build in build-asan/, ctest -L unit
#   bash scripts/sanitize.sh --e2e      #   ... and the end-to-end tests (ctest -L e2e) too
#   bash scripts/sanitize.sh --tsan     # TSan build in build-tsan/: controller_test, agent_test
#   SANITIZE_TARGETS="api_test sim_cluster_spec_test" bash scripts/sanitize.sh
#                                       # only these test binaries (build and run): minutes, not hours
#
# Any sanitizer report fails the test it happens in (halt_on_error; leaks count). Reports are in
# the test's output (ctest --output-on-failure) and BUILD_DIR/Testing/Temporary/LastTest.log.
# Environment: BUILD_DIR (default build-asan or build-tsan), JOBS (default nproc), CTEST_JOBS
# (default 2), SANITIZE_EXCLUDE (a ctest -E regex; default below), TEST_TIMEOUT (seconds per
# test, default 600), SANITIZE_TARGETS (test binaries to build and run instead of the default
# set). Extra arguments after `--` go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=asan
e2e=0
ctest_args=()
while (($#)); do
  case "$1" in
    --tsan) mode=tsan; shift ;;
    --e2e) e2e=1; shift ;;
    --) shift; ctest_args=("$@"); break ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "sanitize: unknown option $1" >&2; exit 2 ;;
  esac
done

JOBS="${JOBS:-$(nproc)}"
CTEST_JOBS="${CTEST_JOBS:-2}"
TEST_TIMEOUT="${TEST_TIMEOUT:-600}"
common="-O1 -g -fno-omit-frame-pointer"
if [[ "$mode" == tsan ]]; then
  BUILD_DIR="${BUILD_DIR:-build-tsan}"
  flags="$common -fsanitize=thread"
  targets=(controller_test agent_test)
  selection=(-R '^(controller_test|agent_test)\.')
  # second_deadlock_stack: both stacks of a lock-order inversion.
  export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1 second_deadlock_stack=1}"
  # Tests that exceed TEST_TIMEOUT under TSan's slowdown (none known); see docs/security.md.
  exclude="${SANITIZE_EXCLUDE:-}"
else
  BUILD_DIR="${BUILD_DIR:-build-asan}"
  flags="$common -fsanitize=address,undefined -fno-sanitize-recover=undefined"
  targets=(all)
  selection=(-L unit)
  if ((e2e)); then selection=(-L '^(unit|e2e)$'); fi
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
  exclude="${SANITIZE_EXCLUDE:-}"
fi

if [[ -n "${SANITIZE_TARGETS:-}" ]]; then
  read -r -a targets <<<"$SANITIZE_TARGETS"
  # ctest test names start with their binary's name: "api_test.CodecTest.JobRoundTrips".
  names=(-R "^($(IFS='|'; echo "${targets[*]}"))\\.")
  if [[ "$mode" == tsan ]]; then selection=("${names[@]}"); else selection+=("${names[@]}"); fi
fi

bash scripts/setup.sh
generator=(-G Ninja)
if [[ -f "$BUILD_DIR/CMakeCache.txt" ]]; then generator=(); fi
start=$SECONDS
nice -n 10 cmake -S . -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS="$flags" \
  -DGPUFLEET_BUILD_BENCH=OFF >/dev/null
nice -n 10 cmake --build "$BUILD_DIR" -j "$JOBS" --target "${targets[@]}"
echo "sanitize: build took $((SECONDS - start)) s"

excluded=()
if [[ -n "$exclude" ]]; then excluded=(-E "$exclude"); fi
start=$SECONDS
status=0
ctest --test-dir "$BUILD_DIR" "${selection[@]}" "${excluded[@]}" --timeout "$TEST_TIMEOUT" --output-on-failure \
  -j "$CTEST_JOBS" "${ctest_args[@]}" || status=$?
echo "sanitize: $mode tests took $((SECONDS - start)) s"
exit "$status"
