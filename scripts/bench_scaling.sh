#!/usr/bin/env bash
# Does the cost of a replay grow linearly with the trace? Builds 10k-, 100k- and 1M-job traces by
# tiling the real Philly trace in time (copy k is the trace with every submit time shifted by k
# trace spans, so each copy arrives after the previous one, as in a longer history), replays each
# with `gpufleet sim` and reports wall time, peak memory and time per job.
#
#   scripts/bench_scaling.sh
#   SIZES="10000 100000" POLICIES=fifo CLUSTER=proportional scripts/bench_scaling.sh
#
# Cluster: CLUSTER=fixed (default) keeps --cluster-gpus at BASE_GPUS (480): the copies follow one
# another in time, so a fixed cluster sees the same load per hour at every size, and the cost per
# job should stay flat. CLUSTER=proportional scales it with the job count (BASE_GPUS per 82,247
# jobs, rounded up to whole 8-GPU nodes): a bigger cluster over the same longer history, so the
# load per GPU falls as the trace grows — it measures a larger cluster, not a longer queue.
#
# Environment: BUILD_DIR (default build), SIZES (default "10000 100000 1000000"), POLICIES
# (default "fifo las"), CLUSTER (fixed|proportional), BASE_GPUS (480), TIMEOUT_S (default 1800),
# REPEAT (runs per cell, default 1: the table shows the median wall time and the largest peak RSS).
# Traces are written once to $BUILD_DIR/bench-traces/ (python3 standard library only).
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
SIZES=${SIZES:-"10000 100000 1000000"}
POLICIES=${POLICIES:-"fifo las"}
CLUSTER=${CLUSTER:-fixed}
BASE_GPUS=${BASE_GPUS:-480}
REPEAT=${REPEAT:-1}
TIMEOUT_S=${TIMEOUT_S:-1800}
TRACE=data/traces/philly/philly.csv
BIN=$BUILD_DIR/src/gpufleet
TRACE_DIR=$BUILD_DIR/bench-traces

[[ -x $BIN ]] || { echo "bench_scaling.sh: $BIN not found; build the gpufleet target first" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "bench_scaling.sh: /usr/bin/time not found (apt-get install time)" >&2; exit 1; }
[[ $CLUSTER == fixed || $CLUSTER == proportional ]] || { echo "bench_scaling.sh: CLUSTER must be fixed or proportional" >&2; exit 1; }
mkdir -p "$TRACE_DIR"

# philly-N.csv: the first N jobs (by submit time) of the trace tiled in time, in Philly format.
for n in $SIZES; do
  out=$TRACE_DIR/philly-$n.csv
  [[ -s $out ]] && continue
  python3 - "$TRACE" "$n" "$out" <<'PY'
import csv, datetime, sys

src, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
fmt = "%Y-%m-%d %H:%M:%S"
with open(src, newline="") as f:
    reader = csv.reader(f)
    header = next(reader)
    rows = [r for r in reader if r]
times = [datetime.datetime.strptime(r[0], fmt) for r in rows]
# Submit order, ties by position in the file: the order in which gpufleet reads them.
order = sorted(range(len(rows)), key=lambda i: (times[i], i))
span = max(times) - min(times) + datetime.timedelta(seconds=1)
with open(out, "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(header)
    written, copy = 0, 0
    while written < n:
        shift = span * copy
        for i in order:
            if written == n:
                break
            w.writerow([(times[i] + shift).strftime(fmt)] + rows[i][1:])
            written += 1
        copy += 1
PY
done

base_jobs=82247
echo "# Philly tiled in time; cluster: $CLUSTER ($BASE_GPUS GPUs per $base_jobs jobs when proportional); timeout ${TIMEOUT_S}s; median of $REPEAT run(s)"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores; $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
echo
echo "| policy | jobs | cluster GPUs | wall s | peak RSS MiB | µs per job | outcome |"
echo "|---|---:|---:|---:|---:|---:|---|"
for policy in $POLICIES; do
  for n in $SIZES; do
    if [[ $CLUSTER == fixed ]]; then
      gpus=$BASE_GPUS
    else
      gpus=$(( (BASE_GPUS * n + base_jobs * 8 - 1) / (base_jobs * 8) * 8 ))
    fi
    report=$TRACE_DIR/report-$policy-$n-$CLUSTER.txt
    measure "$REPEAT" "$report" "$BIN" sim --trace "$TRACE_DIR/philly-$n.csv" --format philly \
      --cluster-gpus "$gpus" --policy "$policy" --no-progress
    case $rc in
      0) outcome=ok ;;
      124) outcome="timed out at ${TIMEOUT_S}s" ;;
      *) outcome="failed (exit $rc, see $report.err)" ;;
    esac
    per_job=$(awk -v w="$wall" -v n="$n" -v rc="$rc" 'BEGIN { if (rc == 0) printf "%.1f", w * 1e6 / n; else printf "-" }')
    printf '| %s | %d | %d | %s | %d | %s | %s |\n' "$policy" "$n" "$gpus" "$wall" $((rss_kib / 1024)) "$per_job" "$outcome"
  done
done
