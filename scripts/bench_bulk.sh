#!/usr/bin/env bash
# bench_bulk.sh — bulk submission: one POST /v1/jobs whose job is an array of N tasks
# (docs/benchmarks.md, "Bulk submission").
#
# For each size a fresh `gpufleet server` on SQLite (a new data directory, WAL, synchronous=FULL)
# with no agents, so every task stays pending, listens on a free port of 127.0.0.1. One job,
# `{name: arr, resources: {gpus: 1}, run: "true", array: {i: [0, ..., N-1]}}`, is sent by curl;
# "answered in" is curl's time from the start of the request to the end of the answer (which
# lists every task's id and name), and "server CPU" is the server's user + system time
# (/proc/PID/stat) used between just before the send and just after the answer: on a shared
# machine the CPU time is the comparable figure. The answer is checked to hold N tasks. Then
# the N tasks are cancelled in one POST /v1/jobs/cancel naming every id ("cancelled in": curl's
# time; the answer is checked to list N cancelled tasks).
#
# STORE=postgresql runs each size on a fresh PostgreSQL server instead (gpufleet-test-postgres:
# initdb in a temporary directory, a unix socket, fsync on), as scripts/bench_store.sh does.
#
# Usage: bash scripts/bench_bulk.sh
# Knobs: BUILD_DIR=build SIZES="1000 10000 100000" NO_BUILD=1 OUT_DIR=/tmp/gpufleet-bench-bulk
#        STORE=sqlite|postgresql
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
SIZES="${SIZES:-1000 10000 100000}"
STORE="${STORE:-sqlite}"
OUT_DIR="${OUT_DIR:-/tmp/gpufleet-bench-bulk}"
PY="${PYTHON:-python3}"

if [[ "${NO_BUILD:-0}" != 1 ]]; then
  if [[ ! -f "$BUILD_DIR/build.ninja" && ! -f "$BUILD_DIR/Makefile" ]]; then
    cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo
  fi
  cmake --build "$BUILD_DIR" --target gpufleet gpufleet-test-postgres
fi
GF="$BUILD_DIR/src/gpufleet"
PG_TOOL="$BUILD_DIR/src/testing/gpufleet-test-postgres"
case "$STORE" in
  sqlite) ;;
  postgresql) [[ -x "$PG_TOOL" ]] || { echo "bench_bulk.sh: $PG_TOOL not found; build it first" >&2; exit 1; } ;;
  *) echo "bench_bulk.sh: STORE must be sqlite or postgresql, got '$STORE'" >&2; exit 2 ;;
esac

rm -rf "$OUT_DIR"
mkdir -p "$OUT_DIR"
# shellcheck source=bench_lib.sh
source "$ROOT/scripts/bench_lib.sh"
trap 'stop_server; stop_pg' EXIT

wait_health() {
  for _ in $(seq 1 300); do
    curl -fsS "$URL/v1/health" >/dev/null 2>&1 && [[ -s "$DATA/admin.token" ]] && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || { echo "the server exited:" >&2; tail -5 "$LOG" >&2; return 1; }
    sleep 0.1
  done
  echo "no answer from $URL" >&2
  return 1
}

# The process's user + system CPU time in clock ticks (fields 14 and 15 of /proc/PID/stat; the
# command name in field 2 may hold spaces, so count from its closing parenthesis).
cpu_ticks() {
  local stat
  stat="$(cat "/proc/$1/stat")"
  stat="${stat##*) }"
  # shellcheck disable=SC2086
  set -- $stat
  echo $(( ${12} + ${13} ))
}
TICKS="$(getconf CLK_TCK)"

printf '%-9s  %-15s  %-15s  %-15s  %s\n' "tasks" "answered in (s)" "server CPU (s)" "tasks/s (wall)" "cancelled in (s)"
for n in $SIZES; do
  DATA="$OUT_DIR/$n/data"
  mkdir -p "$DATA"
  PORT="$(free_port)"
  URL="http://127.0.0.1:$PORT"
  LOG="$OUT_DIR/$n/server.log"
  flags=()
  if [[ "$STORE" == postgresql ]]; then
    start_pg
    flags=(--store "$PG_URL")
  fi
  "$GF" server --data-dir "$DATA" --listen "127.0.0.1:$PORT" --agent-listen "127.0.0.1:$(free_port)" "${flags[@]}" >"$LOG" 2>&1 &
  SERVER_PID=$!
  wait_health
  "$PY" -c "import json, sys; n = int(sys.argv[1]); print(json.dumps({'job': {'name': 'arr', 'resources': {'gpus': 1}, 'run': 'true', 'array': {'i': list(range(n))}}}))" \
    "$n" >"$OUT_DIR/$n/arr.json"
  before="$(cpu_ticks "$SERVER_PID")"
  wall="$(curl -sS -o "$OUT_DIR/$n/out.json" -w '%{http_code} %{time_total}' \
    -H "Authorization: Bearer $(cat "$DATA/admin.token")" -H 'Content-Type: application/json' \
    --data-binary @"$OUT_DIR/$n/arr.json" "$URL/v1/jobs")"
  after="$(cpu_ticks "$SERVER_PID")"
  code="${wall% *}"
  wall="${wall#* }"
  if [[ "$code" != 201 ]]; then
    echo "size $n: HTTP $code: $(head -c 300 "$OUT_DIR/$n/out.json")" >&2
    exit 1
  fi
  got="$("$PY" -c "import json, sys; print(len(json.load(open(sys.argv[1]))['jobs']))" "$OUT_DIR/$n/out.json")"
  if [[ "$got" != "$n" ]]; then
    echo "size $n: the answer lists $got tasks" >&2
    exit 1
  fi
  "$PY" -c "import json, sys; print(json.dumps({'ids': [j['id'] for j in json.load(open(sys.argv[1]))['jobs']]}))" \
    "$OUT_DIR/$n/out.json" >"$OUT_DIR/$n/cancel.json"
  cwall="$(curl -sS -o "$OUT_DIR/$n/cancelled.json" -w '%{http_code} %{time_total}' \
    -H "Authorization: Bearer $(cat "$DATA/admin.token")" -H 'Content-Type: application/json' \
    --data-binary @"$OUT_DIR/$n/cancel.json" "$URL/v1/jobs/cancel")"
  if [[ "${cwall% *}" != 202 ]]; then
    echo "size $n: cancel: HTTP ${cwall% *}: $(head -c 300 "$OUT_DIR/$n/cancelled.json")" >&2
    exit 1
  fi
  got="$("$PY" -c "import json, sys; print(len(json.load(open(sys.argv[1]))['cancelled']))" "$OUT_DIR/$n/cancelled.json")"
  if [[ "$got" != "$n" ]]; then
    echo "size $n: the cancel's answer lists $got cancelled tasks" >&2
    exit 1
  fi
  stop_server
  stop_pg
  "$PY" -c "import sys; n, wall, ticks, hz, cw = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]); \
print(f'{n:<9}  {wall:<15.3f}  {ticks / hz:<15.2f}  {n / wall:<15,.0f}  {cw:.3f}')" "$n" "$wall" "$((after - before))" "$TICKS" "${cwall#* }"
done
