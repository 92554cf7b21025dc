#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (clang, ASan + UBSan) in build-fuzz/ and runs them.
#
#   bash scripts/fuzz.sh                      # smoke: ctest -L fuzz, a fixed number of runs each
#   bash scripts/fuzz.sh --long 600           # each target for 600 s; inputs that add coverage
#   bash scripts/fuzz.sh --long 600 trace     #   join fuzz/corpus/<target> (commit them)
#
# Environment: BUILD_DIR (default build-fuzz), JOBS (default nproc), FUZZ_CXX (a clang++ 16 or
# newer; default the newest clang++-NN found, then clang++). Missing compiler packages are
# installed as scripts/setup.sh installs its own (root, or sudo -n). A crash leaves its input in
# BUILD_DIR/fuzz/crash-<target>-* and fails the run; docs/security.md says how to reproduce one.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR="${BUILD_DIR:-build-fuzz}"
JOBS="${JOBS:-$(nproc)}"
TARGETS=(job_yaml codec agent_protocol trace cluster_spec pool_config)

long_seconds=""
selected=()
while (($#)); do
  case "$1" in
    --long)
      [[ $# -ge 2 && "$2" =~ ^[0-9]+$ ]] || { echo "fuzz: --long needs a number of seconds" >&2; exit 2; }
      long_seconds="$2"
      shift 2
      ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    -*) echo "fuzz: unknown option $1" >&2; exit 2 ;;
    *)
      [[ " ${TARGETS[*]} " == *" $1 "* ]] || { echo "fuzz: unknown target $1 (targets: ${TARGETS[*]})" >&2; exit 2; }
      selected+=("$1")
      shift
      ;;
  esac
done
((${#selected[@]})) || selected=("${TARGETS[@]}")

# The project's libraries and, for libFuzzer, clang 16 or newer: clang 14 (Debian 12's default)
# cannot compile the tree (C++20 lambdas capturing structured bindings).
bash scripts/setup.sh
install_packages() {
  local missing=() p
  for p in "$@"; do
    if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" != "install ok installed" ]]; then
      missing+=("$p")
    fi
  done
  ((${#missing[@]})) || return 0
  echo "fuzz: installing ${missing[*]}"
  local as_root=()
  if [[ "$(id -u)" -ne 0 ]]; then as_root=(sudo -n); fi
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update </dev/null
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" </dev/null
}
clang_major() { "$1" --version 2>/dev/null | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -1; }
pick_cxx() {
  local c
  for c in ${FUZZ_CXX:-} clang++-19 clang++-18 clang++-17 clang++-16 clang++; do
    if command -v "$c" >/dev/null 2>&1 && [[ "$(clang_major "$c")" -ge 16 ]]; then
      echo "$c"
      return
    fi
  done
}
cxx="$(pick_cxx)"
if [[ -z "$cxx" ]]; then
  install_packages clang-16 libclang-rt-16-dev llvm-16
  cxx="$(pick_cxx)"
fi
[[ -n "$cxx" ]] || { echo "fuzz: no clang++ 16 or newer (apt-get install clang-16 libclang-rt-16-dev)" >&2; exit 1; }
# llvm-symbolizer of the same version names functions and lines in reports.
symbolizer="$(command -v "llvm-symbolizer-$(clang_major "$cxx")" || command -v llvm-symbolizer || true)"
if [[ -n "$symbolizer" ]]; then export ASAN_SYMBOLIZER_PATH="$symbolizer"; fi

flags="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all"
flags+=" -fsanitize=fuzzer-no-link"
generator=(-G Ninja)
if [[ -f "$BUILD_DIR/CMakeCache.txt" ]]; then generator=(); fi
nice -n 10 cmake -S . -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_CXX_FLAGS="$flags" -DGPUFLEET_BUILD_FUZZ=ON -DGPUFLEET_BUILD_TESTS=OFF -DGPUFLEET_BUILD_BENCH=OFF >/dev/null
nice -n 10 cmake --build "$BUILD_DIR" -j "$JOBS" --target fuzz_targets

export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
if [[ -z "$long_seconds" ]]; then
  regex="^fuzz\\.(reset_scratch|$(IFS='|'; echo "${selected[*]}"))\$"
  start=$SECONDS
  status=0
  ctest --test-dir "$BUILD_DIR" -L fuzz -R "$regex" --output-on-failure -j "${CTEST_JOBS:-$JOBS}" || status=$?
  echo "fuzz: smoke run took $((SECONDS - start)) s"
  exit "$status"
fi

# Long runs, one target after another. New inputs go to a scratch folder first; the merge then
# copies into the repository's corpus only those that add coverage, so the corpus stays small.
out="$BUILD_DIR/fuzz"
failed=()
for t in "${selected[@]}"; do
  scratch="$out/long/$t"
  rm -rf "$scratch"
  mkdir -p "$scratch" "$out/logs"
  dict=()
  [[ -f "fuzz/dicts/$t.dict" ]] && dict=(-dict="fuzz/dicts/$t.dict")
  log="$out/logs/$t.log"
  echo "fuzz: $t for ${long_seconds} s (log: $log)"
  status=0
  nice -n 10 "$out/${t}_fuzz" -max_total_time="$long_seconds" -max_len=4096 -timeout=30 -rss_limit_mb=2560 \
    -print_final_stats=1 -artifact_prefix="$out/crash-$t-" "${dict[@]}" "$scratch" "fuzz/corpus/$t" >"$log" 2>&1 ||
    status=$?
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  cov="$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)"
  echo "fuzz: $t: ${execs:-?} executions, ${cov:-cov: ?}, exit $status"
  if ((status != 0)); then
    failed+=("$t")
    grep -m1 -A12 -E '==ERROR|runtime error|Check failed|CHECK|deadly signal|out-of-memory|timeout' "$log" || true
    continue
  fi
  before=$(find "fuzz/corpus/$t" -type f | wc -l)
  # The fewest new inputs that reach the code the run reached: set_cover_merge over edges only
  # (plain -merge keeps every input with a new hit count or comparison, hundreds per target).
  "$out/${t}_fuzz" -set_cover_merge=1 -use_counters=0 -use_value_profile=0 -max_len=4096 -timeout=30 -rss_limit_mb=2560 "fuzz/corpus/$t" "$scratch" >>"$log" 2>&1
  after=$(find "fuzz/corpus/$t" -type f | wc -l)
  echo "fuzz: $t: $((after - before)) new corpus entries in fuzz/corpus/$t"
done
if ((${#failed[@]})); then
  echo "fuzz: findings in ${failed[*]}: inputs in $out/crash-*, logs in $out/logs" >&2
  exit 1
fi
