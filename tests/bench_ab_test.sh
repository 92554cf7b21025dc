#!/usr/bin/env bash
# scripts/bench_ab.sh: a table row per binary with its lowest and median wall time and peak
# memory (and instruction count when valgrind is at hand); clear refusals of bad input, and a
# failing replay reported with the simulator's own error.
#   bench_ab_test.sh GPUFLEET_BIN SOURCE_DIR
source "$(dirname "$0")/lib.sh"
GPUFLEET=$(realpath "$1")
SRC=$2
BENCH="$SRC/scripts/bench_ab.sh"

# Two alternating runs of each on the first 200 Philly jobs.
run "$WORK/ok" env RUNS=2 bash "$BENCH" "$GPUFLEET" "$GPUFLEET" --max-jobs 200
[[ $RC == 0 ]] || fail "bench_ab.sh exited $RC: $(cat "$WORK/ok.err")"
rows=$(grep -cE "^\| $GPUFLEET \| [0-9]+\.[0-9]{2} \| [0-9]+\.[0-9]{2} \| [0-9]+ \|$" "$WORK/ok.out" || true)
[[ $rows == 2 ]] || fail "expected two rows of figures, got: $(cat "$WORK/ok.out")"
grep "^| binary | lowest wall (s) | median wall (s) | peak RSS (MiB) |$" "$WORK/ok.out" >/dev/null ||
  fail "no table header: $(cat "$WORK/ok.out")"
grep -- "--policy las --max-jobs 200 --no-progress -o json; 2 runs of each, alternating" "$WORK/ok.out" >/dev/null ||
  fail "the footer does not say what ran: $(cat "$WORK/ok.out")"

# A policy named by the caller replaces the default one.
run "$WORK/fifo" env RUNS=1 bash "$BENCH" "$GPUFLEET" "$GPUFLEET" --policy fifo --max-jobs 100
[[ $RC == 0 ]] || fail "bench_ab.sh --policy fifo exited $RC: $(cat "$WORK/fifo.err")"
grep -- "--cluster-gpus 480 --policy fifo --max-jobs 100" "$WORK/fifo.out" >/dev/null ||
  fail "the caller's policy was not used: $(cat "$WORK/fifo.out")"
grep -- "--policy las" "$WORK/fifo.out" >/dev/null && fail "las was added beside the caller's policy"

# Paths relative to where the caller stands (the trace, an output of sim), and a policy given
# as --policy=NAME.
head -n 101 "$SRC/data/traces/philly/philly.csv" >"$WORK/small.csv"
(cd "$WORK" && RUNS=1 TRACE=small.csv bash "$BENCH" "$GPUFLEET" "$GPUFLEET" --policy=sjf --jobs-out jobs.csv \
  >"$WORK/rel.out" 2>"$WORK/rel.err") || fail "TRACE=small.csv from the caller's folder: $(cat "$WORK/rel.err")"
grep -- "--trace small.csv --cluster-gpus 480 --policy=sjf --jobs-out jobs.csv --no-progress" "$WORK/rel.out" >/dev/null ||
  fail "the caller's trace or policy was not used: $(cat "$WORK/rel.out")"
[[ -s $WORK/jobs.csv ]] || fail "--jobs-out jobs.csv was not written in the caller's folder"

if command -v valgrind >/dev/null; then
  run "$WORK/ir" env RUNS=1 INSTRUCTIONS=1 bash "$BENCH" "$GPUFLEET" "$GPUFLEET" --max-jobs 20
  [[ $RC == 0 ]] || fail "INSTRUCTIONS=1 exited $RC: $(cat "$WORK/ir.err")"
  rows=$(grep -cE "^\| $GPUFLEET \| [0-9]+\.[0-9]{2} \| [0-9]+\.[0-9]{2} \| [0-9]+ \| [1-9][0-9]* \|$" "$WORK/ir.out" || true)
  [[ $rows == 2 ]] || fail "expected two rows with instruction counts, got: $(cat "$WORK/ir.out")"
  # A binary that fails only under valgrind (it reports a partial count then): an error, no table.
  cat >"$WORK/fails-under-valgrind" <<EOS
#!/bin/sh
case "\$LD_PRELOAD" in *vgpreload*) echo "this binary cannot run under valgrind" >&2; exit 3;; esac
exec "$GPUFLEET" "\$@"
EOS
  chmod +x "$WORK/fails-under-valgrind"
  run "$WORK/vg" env RUNS=1 INSTRUCTIONS=1 bash "$BENCH" "$GPUFLEET" "$WORK/fails-under-valgrind" --max-jobs 20
  [[ $RC == 1 ]] && grep "this binary cannot run under valgrind" "$WORK/vg.err" >/dev/null ||
    fail "a replay failing under valgrind: exit $RC, $(cat "$WORK/vg.err")"
  [[ ! -s $WORK/vg.out ]] || fail "a replay failing under valgrind printed a table: $(cat "$WORK/vg.out")"
fi

# Bad input: said, and nothing run.
run "$WORK/runs" env RUNS=zero bash "$BENCH" "$GPUFLEET" "$GPUFLEET"
[[ $RC == 2 ]] && grep "RUNS must be a positive number, not 'zero'" "$WORK/runs.err" >/dev/null ||
  fail "RUNS=zero: exit $RC, $(cat "$WORK/runs.err")"
run "$WORK/missing" bash "$BENCH" "$WORK/no-such-binary" "$GPUFLEET"
[[ $RC == 2 ]] && grep "no-such-binary is not an executable file" "$WORK/missing.err" >/dev/null ||
  fail "a missing binary: exit $RC, $(cat "$WORK/missing.err")"
run "$WORK/usage" bash "$BENCH" "$GPUFLEET"
[[ $RC == 2 ]] && grep "usage: bench_ab.sh BIN_A BIN_B" "$WORK/usage.err" >/dev/null ||
  fail "one binary: exit $RC, $(cat "$WORK/usage.err")"
# A replay that fails stops the benchmark with the simulator's error.
run "$WORK/bad" env RUNS=1 bash "$BENCH" "$GPUFLEET" "$GPUFLEET" --policy no-such-policy
[[ $RC == 1 ]] && grep "failed:" "$WORK/bad.err" >/dev/null && grep "unknown policy 'no-such-policy'" "$WORK/bad.err" >/dev/null ||
  fail "a failing replay: exit $RC, $(cat "$WORK/bad.err")"
[[ ! -s $WORK/bad.out ]] || fail "a failing replay printed a table: $(cat "$WORK/bad.out")"
echo "bench_ab.sh: tables and refusals as expected"
