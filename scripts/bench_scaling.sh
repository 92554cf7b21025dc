#!/usr/bin/env bash
# Does the cost of a replay grow linearly with the trace? Builds traces of 10k to 10M jobs from
# the real Philly trace, replays each with `gpufleet sim` and reports wall time, peak memory, time
# per job and memory per job, as a table, a CSV and (PLOT=FILE.svg) a log-log plot.
#
#   scripts/bench_scaling.sh                                     # the issue's curve (below)
#   SIZES="10000 100000" POLICIES=fifo scripts/bench_scaling.sh
#   TILE=serial CLUSTER=fixed scripts/bench_scaling.sh           # a longer history instead
#   PLOT=docs/img/scaling.svg scripts/bench_scaling.sh
#
# How the trace grows (TILE):
#   parallel (default)  copy k is the trace with every submit time shifted by k seconds: k times
#                       the jobs over the same 109 days. With CLUSTER=proportional (the default)
#                       the cluster grows with it, so the load per GPU stays Philly's while the
#                       queue and the cluster grow: a bigger cluster, the scale that matters.
#   serial              copy k is shifted by k trace spans, each copy arriving after the previous
#                       one, as in a longer history. Use it with CLUSTER=fixed: the same load per
#                       hour at every size, so the cost per job should stay flat.
# Cluster: CLUSTER=proportional scales --cluster-gpus with the job count (BASE_GPUS per 82,247
# jobs, rounded up to whole 8-GPU nodes); CLUSTER=fixed keeps BASE_GPUS (480).
#
# Environment: BUILD_DIR (default build), SIZES (default "10000 100000 1000000 10000000"),
# POLICIES (default "fifo backfill las fair-share"), TILE (parallel|serial), CLUSTER
# (proportional|fixed), BASE_GPUS (480), TIMEOUT_S (per run, default 1800), REPEAT (runs per cell,
# default 1: the table shows the median wall time and the largest peak RSS), CSV (default
# $BUILD_DIR/bench-traces/scaling-TILE-CLUSTER.csv; rows are appended), PLOT (an SVG made from
# the CSV's rows for this TILE and CLUSTER). Traces are written once to $BUILD_DIR/bench-traces/
# (python3 standard library only; 10M jobs is about 420 MB).
set -euo pipefail

cd "$(dirname "$0")/.."

# measure REPEAT REPORT CMD...: runs CMD (capped by timeout) REPEAT times, stdout to REPORT;
# sets wall and cpu (median seconds; cpu = user + system, the figure to compare on a shared
# machine), rss_kib (largest peak RSS) and rc (first non-zero exit, else 0).
measure() {
  local repeat=$1 report=$2 stats w m u k code
  shift 2
  local walls=() cpus=()
  rss_kib=0
  rc=0
  for ((r = 0; r < repeat; r++)); do
    stats=$(mktemp)
    set +e
    /usr/bin/time -f '%e %M %U %S' -o "$stats" timeout "$TIMEOUT_S" "$@" > "$report" 2> "$report.err"
    code=$?
    set -e
    read -r w m u k < <(tail -n 1 "$stats")
    rm -f "$stats"
    walls+=("$w")
    cpus+=("$(awk -v u="$u" -v k="$k" 'BEGIN { printf "%.2f", u + k }')")
    ((m > rss_kib)) && rss_kib=$m
    if ((code != 0)); then
      rc=$code
      break
    fi
  done
  wall=$(printf '%s\n' "${walls[@]}" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
  cpu=$(printf '%s\n' "${cpus[@]}" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
}
BUILD_DIR=${BUILD_DIR:-build}
SIZES=${SIZES:-"10000 100000 1000000 10000000"}
POLICIES=${POLICIES:-"fifo backfill las fair-share"}
TILE=${TILE:-parallel}
CLUSTER=${CLUSTER:-proportional}
BASE_GPUS=${BASE_GPUS:-480}
REPEAT=${REPEAT:-1}
TIMEOUT_S=${TIMEOUT_S:-1800}
TRACE=data/traces/philly/philly.csv
BIN=$BUILD_DIR/src/gpufleet
TRACE_DIR=$BUILD_DIR/bench-traces

[[ -x $BIN ]] || { echo "bench_scaling.sh: $BIN not found; build the gpufleet target first" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "bench_scaling.sh: /usr/bin/time not found (apt-get install time)" >&2; exit 1; }
[[ $CLUSTER == fixed || $CLUSTER == proportional ]] || { echo "bench_scaling.sh: CLUSTER must be fixed or proportional" >&2; exit 1; }
[[ $TILE == parallel || $TILE == serial ]] || { echo "bench_scaling.sh: TILE must be parallel or serial" >&2; exit 1; }
mkdir -p "$TRACE_DIR"
CSV=${CSV:-$TRACE_DIR/scaling-$TILE-$CLUSTER.csv}
[[ -s $CSV ]] || echo "date,tile,cluster,policy,jobs,cluster_gpus,wall_s,cpu_s,peak_rss_kib,outcome" > "$CSV"

# philly-TILE-N.csv: the first N jobs (by submit time) of the trace tiled, in Philly format.
for n in $SIZES; do
  out=$TRACE_DIR/philly-$TILE-$n.csv
  [[ -s $out ]] && continue
  python3 - "$TRACE" "$n" "$out" "$TILE" <<'PY'
import csv, datetime, sys

src, n, out, tile = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
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
        shift = span * copy if tile == "serial" else datetime.timedelta(seconds=copy)
        for i in order:
            if written == n:
                break
            w.writerow([(times[i] + shift).strftime(fmt)] + rows[i][1:])
            written += 1
        copy += 1
PY
done

base_jobs=82247
echo "# Philly tiled ($TILE); cluster: $CLUSTER ($BASE_GPUS GPUs per $base_jobs jobs when proportional); timeout ${TIMEOUT_S}s; median of $REPEAT run(s)"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores; $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
echo
echo "| policy | jobs | cluster GPUs | wall s | CPU s | peak RSS MiB | CPU µs per job | bytes per job | outcome |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---|"
for policy in $POLICIES; do
  for n in $SIZES; do
    if [[ $CLUSTER == fixed ]]; then
      gpus=$BASE_GPUS
    else
      gpus=$(( (BASE_GPUS * n + base_jobs * 8 - 1) / (base_jobs * 8) * 8 ))
    fi
    report=$TRACE_DIR/report-$policy-$n-$TILE-$CLUSTER.txt
    measure "$REPEAT" "$report" "$BIN" sim --trace "$TRACE_DIR/philly-$TILE-$n.csv" --format philly \
      --cluster-gpus "$gpus" --policy "$policy" --no-progress
    case $rc in
      0) outcome=ok ;;
      124) outcome="timed out at ${TIMEOUT_S}s" ;;
      *) outcome="failed (exit $rc, see $report.err)" ;;
    esac
    per_job=$(awk -v c="$cpu" -v n="$n" -v rc="$rc" 'BEGIN { if (rc == 0) printf "%.1f", c * 1e6 / n; else printf "-" }')
    bytes_per_job=$(awk -v m="$rss_kib" -v n="$n" 'BEGIN { printf "%d", m * 1024 / n }')
    printf '| %s | %d | %d | %s | %s | %d | %s | %s | %s |\n' "$policy" "$n" "$gpus" "$wall" "$cpu" $((rss_kib / 1024)) \
      "$per_job" "$bytes_per_job" "$outcome"
    echo "$(date -u +%Y-%m-%dT%H:%MZ),$TILE,$CLUSTER,$policy,$n,$gpus,$wall,$cpu,$rss_kib,${outcome//,/;}" >> "$CSV"
  done
done
echo
echo "rows appended to $CSV"
if [[ -n ${PLOT:-} ]]; then
  python3 scripts/plot_scaling.py "$CSV" "$PLOT" "$TILE" "$CLUSTER"
  echo "plot written to $PLOT"
fi
