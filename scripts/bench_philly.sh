#!/usr/bin/env bash
# Replays the full Philly trace once per policy and cluster size and reports what each replay
# cost: wall time and peak resident memory of `gpufleet sim` (from /usr/bin/time -f '%e %M').
# Every run is capped by `timeout`; a capped run is reported as such, not dropped.
#
#   scripts/bench_philly.sh                       # all policies, 480 and 2000 GPUs
#   POLICIES="fifo las" GPUS=480 scripts/bench_philly.sh
#   POLICIES="las@min_run=30m fair-share@quota.ee9e8c=100,quota.7f04ca=100" GPUS=480 scripts/bench_philly.sh
#
# Environment: BUILD_DIR (default build), TRACE (default data/traces/philly/philly.csv),
# POLICIES (default "fifo backfill priority las sjf srtf fair-share"; NAME@k=v,k=v adds policy
# options), GPUS (default "480 2000"),
# TIMEOUT_S (default 300), ESTIMATES (trace|oracle, default trace: what the scheduler is told),
# REPEAT (runs per cell, default 1: the table shows the median wall time and the largest peak RSS).
# Output: one Markdown table on stdout; the simulator's own reports go to $OUT_DIR (default
# $BUILD_DIR/bench-philly) for a look at the scheduling results behind the figures.
set -euo pipefail

cd "$(dirname "$0")/.."

# measure REPEAT REPORT CMD...: runs CMD (capped by timeout) REPEAT times, stdout to REPORT;
# sets wall (median seconds), rss_kib (largest peak RSS) and rc (first non-zero exit, else 0).
measure() {
  local repeat=$1 report=$2 stats w m code
  shift 2
  local walls=()
  rss_kib=0
  rc=0
  for ((r = 0; r < repeat; r++)); do
    stats=$(mktemp)
    set +e
    /usr/bin/time -f '%e %M' -o "$stats" timeout "$TIMEOUT_S" "$@" > "$report" 2> "$report.err"
    code=$?
    set -e
    read -r w m < <(tail -n 1 "$stats")
    rm -f "$stats"
    walls+=("$w")
    ((m > rss_kib)) && rss_kib=$m
    if ((code != 0)); then
      rc=$code
      break
    fi
  done
  wall=$(printf '%s\n' "${walls[@]}" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
}
BUILD_DIR=${BUILD_DIR:-build}
TRACE=${TRACE:-data/traces/philly/philly.csv}
POLICIES=${POLICIES:-"fifo backfill priority las sjf srtf fair-share"}
GPUS=${GPUS:-"480 2000"}
REPEAT=${REPEAT:-1}
TIMEOUT_S=${TIMEOUT_S:-300}
ESTIMATES=${ESTIMATES:-trace}
OUT_DIR=${OUT_DIR:-$BUILD_DIR/bench-philly}
BIN=$BUILD_DIR/src/gpufleet

[[ -x $BIN ]] || { echo "bench_philly.sh: $BIN not found; build the gpufleet target first" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "bench_philly.sh: /usr/bin/time not found (apt-get install time)" >&2; exit 1; }
[[ -f $TRACE ]] || { echo "bench_philly.sh: trace $TRACE not found" >&2; exit 1; }
mkdir -p "$OUT_DIR"

jobs=$(($(wc -l < "$TRACE") - 1))  # data rows; the per-job figure uses the report's count
echo "# Philly replay: $TRACE (~$jobs jobs), estimates=$ESTIMATES, timeout ${TIMEOUT_S}s, median of $REPEAT run(s)"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores; $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
echo
echo "| policy | cluster GPUs | wall s | peak RSS MiB | µs per job | avg JCT | preemptions | outcome |"
echo "|---|---:|---:|---:|---:|---:|---:|---|"
for gpus in $GPUS; do
  for entry in $POLICIES; do
    policy=${entry%%@*}
    opts=()
    [[ $entry == *@* ]] && opts=(--policy-opt "${entry#*@}")
    report="$OUT_DIR/$(printf '%s' "$entry" | tr -c 'A-Za-z0-9._-' _)-$gpus.txt"
    measure "$REPEAT" "$report" "$BIN" sim --trace "$TRACE" --cluster-gpus "$gpus" --policy "$policy" \
      "${opts[@]}" --estimates "$ESTIMATES" --no-progress
    case $rc in
      0) outcome=ok ;;
      124) outcome="timed out at ${TIMEOUT_S}s" ;;
      *) outcome="failed (exit $rc, see $report.err)" ;;
    esac
    # The report says how many jobs were simulated (the reader may skip none, but it knows).
    n=$(sed -n 's/^jobs *\([0-9,]*\).*/\1/p' "$report" | tr -d , | head -1)
    per_job=$(awk -v w="$wall" -v n="${n:-$jobs}" -v rc="$rc" 'BEGIN { if (rc == 0) printf "%.1f", w * 1e6 / n; else printf "-" }')
    jct=$(sed -n 's/^JCT *avg \([^ ]*\).*/\1/p' "$report" | head -1)
    preempt=$(sed -n 's/^preemptions *\([0-9,]*\).*/\1/p' "$report" | head -1)
    printf '| %s | %s | %s | %d | %s | %s | %s | %s |\n' "$entry" "$gpus" "$wall" $((rss_kib / 1024)) "$per_job" \
      "${jct:--}" "${preempt:--}" "$outcome"
  done
done
