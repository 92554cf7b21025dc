#!/usr/bin/env bash
# bench_store.sh — durable submits/s of `gpufleet server` on SQLite and on PostgreSQL, at 1, 8 and
# 32 clients (docs/benchmarks.md, "State store: SQLite and PostgreSQL").
#
# Each run gets a fresh controller with no agents (jobs stay pending) on 127.0.0.1 and a fresh
# store: SQLite in a new data directory (WAL, synchronous=FULL), or a new throwaway PostgreSQL
# server (gpufleet-test-postgres: initdb in a temp dir, unix socket, fsync on, default
# synchronous_commit). gpufleet-submit-load then sends $SUBMITS submits over N keep-alive
# connections; every 2xx answer is after the commit, so the rate is of durable submits. Both
# engines see the same group commit: concurrent submits share one transaction.
#
# Usage: bash scripts/bench_store.sh
# Knobs: BUILD_DIR=build SUBMITS=2000 CLIENTS="1 8 32" STORES="sqlite postgresql" NO_BUILD=1
#        OUT_DIR=/tmp/gpufleet-bench-store
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
SUBMITS="${SUBMITS:-2000}"
CLIENTS="${CLIENTS:-1 8 32}"
STORES="${STORES:-sqlite postgresql}"
OUT_DIR="${OUT_DIR:-/tmp/gpufleet-bench-store}"
PY="${PYTHON:-python3}"

if [[ "${NO_BUILD:-0}" != 1 ]]; then
  if [[ ! -f "$BUILD_DIR/build.ninja" && ! -f "$BUILD_DIR/Makefile" ]]; then
    cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo
  fi
  cmake --build "$BUILD_DIR" --target gpufleet gpufleet-submit-load gpufleet-test-postgres
fi
GF="$BUILD_DIR/src/gpufleet"
LOAD="$BUILD_DIR/bench/gpufleet-submit-load"
PG_TOOL="$BUILD_DIR/src/testing/gpufleet-test-postgres"

rm -rf "$OUT_DIR"
mkdir -p "$OUT_DIR/results"
RES="$OUT_DIR/results"
# shellcheck source=bench_lib.sh
source "$ROOT/scripts/bench_lib.sh"
trap 'stop_server; stop_pg' EXIT

wait_health() {
  for _ in $(seq 1 300); do
    curl -fsS "$URL/v1/health" >/dev/null 2>&1 && [[ -s "$DATA/admin.token" ]] && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || { echo "the server exited; see $OUT_DIR/$RUN.server.log" >&2; return 1; }
    sleep 0.1
  done
  echo "no answer from $URL" >&2
  return 1
}

echo "== machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(. /etc/os-release; echo "$PRETTY_NAME"), $(date -u +%Y-%m-%dT%H:%MZ)"
for store in $STORES; do
  for c in $CLIENTS; do
    RUN="${store}_$c"
    DATA="$OUT_DIR/$RUN"
    flags=()
    if [[ "$store" == postgresql ]]; then
      start_pg
      flags=(--store "$PG_URL")
    fi
    PORT="$(free_port)"
    URL="http://127.0.0.1:$PORT"
    "$GF" server --data-dir "$DATA" --listen "127.0.0.1:$PORT" --agent-listen "127.0.0.1:$(free_port)" "${flags[@]}" 2>"$OUT_DIR/$RUN.server.log" &
    SERVER_PID=$!
    wait_health
    # Submits that got no answer are counted ("no_answer") and make the tool exit 1; go on.
    "$LOAD" --server "$URL" --token-file "$DATA/admin.token" --clients "$c" --requests "$SUBMITS" -o json \
      >"$RES/$RUN.json" || true
    stop_server
    stop_pg
    echo "$RUN: $(cat "$RES/$RUN.json")"
  done
done

"$PY" - "$RES" "$CLIENTS" <<'PYEND'
import json, os, sys
res, clients = sys.argv[1], sys.argv[2].split()
def load(name):
    p = os.path.join(res, name + ".json")
    return json.load(open(p)) if os.path.exists(p) and os.path.getsize(p) else None
print("\n%-10s %-34s %-34s %s" % ("clients", "SQLite submits/s (p50, p99 ms)", "PostgreSQL submits/s (p50, p99 ms)", "PG/SQLite"))
for c in clients:
    s, p = load("sqlite_" + c), load("postgresql_" + c)
    cell = lambda r: "%.0f (%.1f, %.1f)" % (r["submits_per_s"], r["latency_ms"]["p50"], r["latency_ms"]["p99"]) if r else "-"
    ratio = "%.2f" % (p["submits_per_s"] / s["submits_per_s"]) if s and p and s["submits_per_s"] else "-"
    print("%-10s %-34s %-34s %s" % (c, cell(s), cell(p), ratio))
PYEND
echo "results in $RES"
