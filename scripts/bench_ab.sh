#!/usr/bin/env bash
# Compares the replay speed of two gpufleet binaries on one `gpufleet sim` run, the way the speed
# rounds in docs/benchmarks.md do: the two binaries alternate run by run (so that a noisy moment
# of the machine falls on both), and the table gives each one's lowest and median wall time and
# peak memory. With INSTRUCTIONS=1 it also counts each binary's instructions under valgrind
# (callgrind, both at once): the count does not move with the machine's load, where times on a
# shared 2-core machine can move by a tenth between two runs of one binary.
#
#   scripts/bench_ab.sh OLD/gpufleet NEW/gpufleet
#   RUNS=15 scripts/bench_ab.sh /tmp/before build-release/src/gpufleet --policy las --policy-opt victims=worst-rank
#   INSTRUCTIONS=1 scripts/bench_ab.sh A B --policy las --max-jobs 40000
#
# Arguments after the two binaries go to `sim` after the trace and cluster (Philly, 480 GPUs;
# set TRACE and GPUS for others): `--policy las` unless they name a policy. `--no-progress -o json` are always added.
# Environment: RUNS (alternating runs of each binary, default 11), INSTRUCTIONS (1: also count
# instructions; needs valgrind, `apt-get install valgrind`; a full Philly replay takes a few
# minutes under it, `--max-jobs 40000` about one), TRACE (default data/traces/philly/philly.csv),
# GPUS (default 480).
# Output on stdout: a Markdown table (the median of an even number of runs is the lower of the
# middle two), then a line that says what ran, when, and the machine's load. The binaries'
# decisions are not compared here: scripts/compare_decisions.sh does that.
set -euo pipefail

usage() {
  echo "usage: bench_ab.sh BIN_A BIN_B [sim arguments...]" >&2
  exit 2
}
(($# >= 2)) || usage
A=$1
B=$2
shift 2
for bin in "$A" "$B"; do
  [[ -f $bin && -x $bin ]] || { echo "bench_ab.sh: $bin is not an executable file" >&2; exit 2; }
done
A=$(realpath "$A")
B=$(realpath "$B")
declare -A bin_of=([a]=$A [b]=$B)

RUNS=${RUNS:-11}
INSTRUCTIONS=${INSTRUCTIONS:-0}
# Paths (the binaries, TRACE, and any in the sim arguments) are read from where the caller
# stands; the default trace is the source tree's.
TRACE=${TRACE:-$(dirname "$0")/../data/traces/philly/philly.csv}
GPUS=${GPUS:-480}
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "bench_ab.sh: RUNS must be a positive number, not '$RUNS'" >&2; exit 2; }
[[ -f $TRACE ]] || { echo "bench_ab.sh: trace $TRACE not found" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "bench_ab.sh: /usr/bin/time not found (apt-get install time)" >&2; exit 2; }
if [[ $INSTRUCTIONS == 1 ]] && ! command -v valgrind >/dev/null; then
  echo "bench_ab.sh: INSTRUCTIONS=1 needs valgrind (apt-get install valgrind)" >&2
  exit 2
fi

args=(sim --trace "$TRACE" --cluster-gpus "$GPUS")
[[ " $* " == *" --policy "* || " $* " == *" --policy="* ]] || args+=(--policy las)
args+=("$@" --no-progress -o json)

work=$(mktemp -d "${TMPDIR:-/tmp}/bench-ab.XXXXXX")
counting=()  # valgrind runs in the background, stopped if the script ends early
trap '((${#counting[@]} == 0)) || kill "${counting[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT

# run BIN NAME: one timed replay, its "wall rss" line appended to $work/NAME.
run() {
  if ! /usr/bin/time -f '%e %M' -o "$work/last" "$1" "${args[@]}" >"$work/out" 2>"$work/err"; then
    printf '\n' >&2
    echo "bench_ab.sh: $1 ${args[*]} failed:" >&2
    tail -n 5 "$work/err" >&2
    exit 1
  fi
  tail -n 1 "$work/last" >>"$work/$2"
}
for ((r = 1; r <= RUNS; r++)); do
  printf '\rbench_ab.sh: run %d of %d' "$r" "$RUNS" >&2
  # Each goes first in every other round, so that whatever favours the first run of a pair
  # (caches, the CPU's clock) falls on both.
  if ((r % 2 == 1)); then
    run "$A" a
    run "$B" b
  else
    run "$B" b
    run "$A" a
  fi
done
printf '\n' >&2

# instructions BIN NAME: one replay under callgrind, its report in $work/NAME.vg.
instructions() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$1" "${args[@]}" >/dev/null 2>"$work/$2.vg"
}
if [[ $INSTRUCTIONS == 1 ]]; then
  echo "bench_ab.sh: counting instructions under valgrind" >&2
  instructions "$A" a &
  counting+=($!)
  instructions "$B" b &
  counting+=($!)
  for name in a b; do
    # A replay that fails under valgrind (one it cannot run, say) still reports a partial count.
    if ! wait "${counting[0]}"; then
      echo "bench_ab.sh: ${bin_of[$name]} ${args[*]} failed under valgrind:" >&2
      grep -v '^==[0-9]*==' "$work/$name.vg" | tail -n 5 >&2
      exit 1
    fi
    counting=("${counting[@]:1}")
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$work/$name.vg" >"$work/$name.ir"
  done
fi

# summary NAME: "lowest median largest-rss" of the runs in $work/NAME.
summary() {
  sort -g "$work/$1" | awk '{ w[NR] = $1; if ($2 > m) m = $2 } END { printf "%.2f %.2f %d\n", w[1], w[int((NR + 1) / 2)], m }'
}
echo "| binary | lowest wall (s) | median wall (s) | peak RSS (MiB) |$([[ $INSTRUCTIONS == 1 ]] && echo " instructions (millions) |")"
echo "|---|---:|---:|---:|$([[ $INSTRUCTIONS == 1 ]] && echo "---:|")"
for name in a b; do
  bin=${bin_of[$name]}
  read -r low med rss < <(summary "$name")
  row="| $bin | $low | $med | $((rss / 1024)) |"
  if [[ $INSTRUCTIONS == 1 ]]; then
    ir=$(cat "$work/$name.ir")
    [[ -n $ir ]] || { echo "bench_ab.sh: valgrind gave no instruction count for $bin" >&2; exit 1; }
    row+=" $((ir / 1000000)) |"
  fi
  echo "$row"
done
echo
echo "gpufleet ${args[*]}; $RUNS runs of each, alternating; $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
