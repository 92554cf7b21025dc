#!/usr/bin/env bash
# Takeover time of the highly available controller: on a throwaway PostgreSQL, three
# `gpufleet server --leader-lease LEASE` controllers (each restarted by a supervisor loop, as
# systemd would), and KILLS times: kill -9 of whichever leads, then the time until another
# controller (its own restart included) answers GET /v1/health with 200. Then the same with SIGTERM (the leader gives its
# lease up on the way out; the next leader may be its own restart). Prints one line per kill and a
# table with p50 and max per way.
#
#   bash scripts/bench_takeover.sh                    # 5 kills of each kind, 3 s lease
#   KILLS=10 LEASE=10s bash scripts/bench_takeover.sh
#
# Environment: KILLS (default 5), LEASE (default 3s), BUILD_DIR (default build). 127.0.0.1 only.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build}"
GPUFLEET="$PWD/$BUILD_DIR/src/gpufleet"
PG_TOOL="$PWD/$BUILD_DIR/src/testing/gpufleet-test-postgres"
KILLS="${KILLS:-5}"
LEASE="${LEASE:-3s}"
PYTHON="${PYTHON:-python3}"
for f in "$GPUFLEET" "$PG_TOOL"; do
  [[ -x "$f" ]] || { echo "bench_takeover: $f is missing; build first: cmake --build $BUILD_DIR" >&2; exit 2; }
done
WORK="$(mktemp -d /tmp/gpufleet-takeover.XXXXXX)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null; done
  pkill -KILL -f -- "--data-dir $WORK/" 2>/dev/null
  [[ -n "${PG[1]:-}" ]] && eval "exec ${PG[1]}>&-" 2>/dev/null
  [[ -n "${PG_PID:-}" ]] && { kill -TERM "$PG_PID" 2>/dev/null; wait "$PG_PID" 2>/dev/null; }
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 143' TERM INT
coproc PG { exec "$PG_TOOL" 2>"$WORK/pg.err"; }
read -r -t 120 PG_URL <&"${PG[0]}" || { echo "PostgreSQL did not start: $(cat "$WORK/pg.err")" >&2; exit 1; }
free_port() { "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
URLS=()
for n in c1 c2 c3; do
  port="$(free_port)"
  agent_port="$(free_port)"
  URLS+=("http://127.0.0.1:$port")
  mkdir -p "$WORK/$n"
  setsid bash -c "while :; do '$GPUFLEET' server --data-dir '$WORK/$n' --listen 127.0.0.1:$port \
      --agent-listen 127.0.0.1:$agent_port --store '$PG_URL' --leader-lease $LEASE >>'$WORK/$n/server.log' 2>&1; \
      sleep 0.2; done" </dev/null >/dev/null 2>&1 &
  PIDS+=("$!")
  disown
done
now_ms() { date +%s%3N; }
leader() {
  local u
  for u in "${URLS[@]}"; do
    [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$u/v1/health")" == 200 ]] && { echo "$u"; return 0; }
  done
  return 1
}
# Once process $1 (the old leader) is gone, prints the URL of the controller that leads next: any
# of them, the old one's restart included (after SIGTERM it may take the lease it released).
wait_next_leader() {
  local l
  for _ in $(seq 1 1200); do
    if ! kill -0 "$1" 2>/dev/null; then
      l="$(leader)" && { echo "$l"; return 0; }
    fi
    sleep 0.05
  done
  return 1
}
L=""
for _ in $(seq 1 600); do L="$(leader)" && break; sleep 0.1; done
[[ -n "$L" ]] || { echo "no controller leads" >&2; exit 1; }
declare -A TIMES
for how in KILL TERM; do
  TIMES[$how]=""
  for k in $(seq 1 "$KILLS"); do
    L="$(leader)" || { sleep 1; L="$(leader)"; } || { echo "no leader before kill $k" >&2; exit 1; }
    pid="$(pgrep -f -- "^$GPUFLEET server .*--listen 127.0.0.1:${L##*:} " | head -n 1)"
    t0="$(now_ms)"
    kill "-$how" "$pid"
    new="$(wait_next_leader "$pid")" || { echo "no takeover within 60 s after SIG$how" >&2; exit 1; }
    ms=$(($(now_ms) - t0))
    TIMES[$how]+="$ms "
    echo "SIG$how of $L: $new leads after $ms ms" >&2
    sleep 1  # let the old one come back as a standby
  done
done
"$PYTHON" - "$LEASE" "${TIMES[KILL]}" "${TIMES[TERM]}" <<'PY'
import statistics, sys
lease = sys.argv[1]
print("| leader stopped by | kills | p50 | max |  (lease %s)" % lease)
print("|---|---|---|---|")
for name, raw in (("kill -9", sys.argv[2]), ("SIGTERM (lease released)", sys.argv[3])):
    t = [int(x) / 1000 for x in raw.split()]
    print("| %s | %d | %.1f s | %.1f s |" % (name, len(t), statistics.median(t), max(t)))
PY
