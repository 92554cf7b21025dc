#!/usr/bin/env bash
# Soak test of the highly available controller (not part of ctest: it runs for half an hour).
#
# On a throwaway PostgreSQL (gpufleet-test-postgres), three `gpufleet server --leader-lease`
# controllers, each restarted by a supervisor loop when it exits (as systemd would), and two agents
# with fake GPUs that know every controller. For DURATION, clients submit jobs in rounds (short
# jobs and some cancels) while a chaos loop, every CHAOS_EVERY, does one of: kill -9 of the
# leader, SIGSTOP of the leader for longer than its lease (then SIGCONT), SIGTERM of the leader
# (a clean step-down), or a PostgreSQL crash and restart. Then the chaos stops, the clients finish
# (every submission is retried with its request id until answered), and the store is checked:
#   - every answered submission exists exactly once, with the job id its answer named
#     (tests/storm_check.py, per round);
#   - every job is in one known state, its history chains from pending with monotone times and
#     never leaves a terminal state (scripts/store_consistency.py).
#
#   bash scripts/soak.sh                          # 30 minutes
#   DURATION=300 CHAOS_EVERY=20 bash scripts/soak.sh   # five minutes, chaos every 20 s
#
# Environment: DURATION (seconds, default 1800), CHAOS_EVERY (seconds, default 30), CLIENTS
# (default 8), ROUND (submissions per round, default 400), LEASE (default 3s), BUILD_DIR (default
# build). Everything listens on 127.0.0.1; the work directory is printed and kept on failure.
# Exit status 0 when every check holds.
set -uo pipefail
cd "$(dirname "$0")/.."
SRC="$PWD"
BUILD_DIR="${BUILD_DIR:-build}"
GPUFLEET="$SRC/$BUILD_DIR/src/gpufleet"
PG_TOOL="$SRC/$BUILD_DIR/src/testing/gpufleet-test-postgres"
DURATION="${DURATION:-1800}"
CHAOS_EVERY="${CHAOS_EVERY:-30}"
CLIENTS="${CLIENTS:-8}"
ROUND="${ROUND:-400}"
LEASE="${LEASE:-3s}"
PYTHON="${PYTHON:-python3}"
for f in "$GPUFLEET" "$PG_TOOL"; do
  [[ -x "$f" ]] || { echo "soak: $f is missing; build first: cmake --build $BUILD_DIR" >&2; exit 2; }
done

WORK="$(mktemp -d /tmp/gpufleet-soak.XXXXXX)"
echo "soak: work directory $WORK; $DURATION s, chaos every $CHAOS_EVERY s" >&2
log() { echo "[$(date +%T)] $*" | tee -a "$WORK/soak.log" >&2; }
free_port() { "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

PIDS=()
cleanup() {
  local rc=$?
  for p in "${PIDS[@]}"; do kill -CONT -- "-$p" 2>/dev/null; kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null; done
  pkill -KILL -f -- "--data-dir $WORK/" 2>/dev/null
  # The PostgreSQL tool stops (and removes its server) at the end of its stdin, or on SIGTERM.
  exec {PG_IN}>&- 2>/dev/null
  [[ -n "${PG[1]:-}" ]] && eval "exec ${PG[1]}>&-" 2>/dev/null
  [[ -n "${PG_PID:-}" ]] && { kill -TERM "$PG_PID" 2>/dev/null; wait "$PG_PID" 2>/dev/null; }
  if [[ $rc == 0 ]]; then rm -rf "$WORK"; else echo "soak: FAILED; logs kept in $WORK" >&2; fi
}
trap cleanup EXIT
trap 'exit 143' TERM INT

coproc PG { exec "$PG_TOOL" 2>"$WORK/pg.err"; }
# Copies of the coprocess's pipes: bash does not hand a coprocess's own descriptors to subshells
# (the chaos loop runs in one).
exec {PG_IN}>&"${PG[1]}" {PG_OUT}<&"${PG[0]}"
read -r -t 120 PG_URL <&"$PG_OUT" || { echo "soak: PostgreSQL did not start: $(cat "$WORK/pg.err")" >&2; exit 1; }
pg() {
  local a
  echo "$*" >&"$PG_IN"
  read -r -t 120 a <&"$PG_OUT" || { log "PostgreSQL tool did not answer '$*'"; return 1; }
  [[ "$a" == ok* ]] || { log "PostgreSQL tool, '$*': $a"; return 1; }
}

# Three controllers, each under a supervisor loop that starts it again whenever it exits.
NAMES=(c1 c2 c3)
declare -A PORT AGENT_PORT
URLS=()
AGENT_URLS=()
for n in "${NAMES[@]}"; do
  PORT[$n]="$(free_port)"
  AGENT_PORT[$n]="$(free_port)"
  URLS+=("http://127.0.0.1:${PORT[$n]}")
  AGENT_URLS+=("http://127.0.0.1:${AGENT_PORT[$n]}")
  mkdir -p "$WORK/$n"
  setsid bash -c "while :; do
      '$GPUFLEET' server --data-dir '$WORK/$n' --listen 127.0.0.1:${PORT[$n]} --agent-listen 127.0.0.1:${AGENT_PORT[$n]} \
        --store '$PG_URL' --leader-lease $LEASE --heartbeat 500ms --lost-after 30s >>'$WORK/$n/server.log' 2>&1
      echo \"exited \$?\" >>'$WORK/$n/server.log'; sleep 0.5
    done" </dev/null >/dev/null 2>&1 &
  PIDS+=("$!")
  disown
done
URL_LIST="$(IFS=,; echo "${URLS[*]}")"
AGENT_URL_LIST="$(IFS=,; echo "${AGENT_URLS[*]}")"

# leader: the URL of the controller that answers /v1/health with 200, if any.
leader() {
  local u
  for u in "${URLS[@]}"; do
    [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$u/v1/health")" == 200 ]] && { echo "$u"; return 0; }
  done
  return 1
}
# the pid of the gpufleet server listening on URL's port.
server_pid() { pgrep -f -- "^$GPUFLEET server .*--listen 127.0.0.1:${1##*:} " | head -n 1; }

deadline=$((SECONDS + 60))
until L="$(leader)"; do
  ((SECONDS < deadline)) || { log "no controller leads after 60 s"; exit 1; }
  sleep 0.5
done
log "leader: $L"
# The admin token lives in the store: any controller's data directory that wrote one has it.
until TOKEN_FILE="$(ls "$WORK"/c*/admin.token 2>/dev/null | head -n 1)" && [[ -s "$TOKEN_FILE" ]]; do sleep 0.2; done
JOIN_FILE="$(dirname "$TOKEN_FILE")/join.token"

for a in a1 a2; do
  mkdir -p "$WORK/agents/$a"
  setsid "$GPUFLEET" agent --server "$AGENT_URL_LIST" --join-token-file "$JOIN_FILE" --name "$a" \
    --data-dir "$WORK/agents/$a" --fake-gpus 8xH100 --job-user root --allow-root-jobs --workdir-root / \
    --max-disconnected 120s </dev/null >>"$WORK/agents/$a/agent.log" 2>&1 &
  PIDS+=("$!")
  disown
done

# Chaos: one fault every CHAOS_EVERY seconds until told to stop.
chaos() {
  local k=0 u pid
  while [[ ! -e "$WORK/stop-chaos" ]]; do
    sleep "$CHAOS_EVERY"
    [[ -e "$WORK/stop-chaos" ]] && break
    u="$(leader)" || { log "chaos: no leader right now"; continue; }
    pid="$(server_pid "$u")"
    [[ -n "$pid" ]] || { log "chaos: no server process for $u"; continue; }
    case $((k++ % 4)) in
      0) log "chaos: kill -9 of the leader $u (pid $pid)"; kill -KILL "$pid" ;;
      1) log "chaos: SIGSTOP of the leader $u for twice its lease"; kill -STOP "$pid"
         sleep "$(( ${LEASE%s} * 2 + 1 ))"; kill -CONT "$pid" ;;
      2) log "chaos: SIGTERM of the leader $u (clean step-down)"; kill -TERM "$pid" ;;
      3) log "chaos: PostgreSQL crashes"; pg kill; sleep 2; pg restart && log "chaos: PostgreSQL is back" ;;
    esac
  done
}
chaos &
CHAOS_PID=$!

round=0
end=$((SECONDS + DURATION))
while ((SECONDS < end)); do
  round=$((round + 1))
  mkdir -p "$WORK/rounds/$round"
  "$PYTHON" "$SRC/tests/submit_storm_client.py" --url "$URL_LIST" --token-file "$TOKEN_FILE" --clients "$CLIENTS" \
    --requests "$ROUND" --prefix "r$round" --log-dir "$WORK/rounds/$round" --deadline 600 \
    --job '{"name": "soak", "resources": {"gpus": 1}, "run": "sleep 1"}' \
    >"$WORK/rounds/$round/clients.out" 2>"$WORK/rounds/$round/clients.err"
  rc=$?
  log "round $round: $(cat "$WORK/rounds/$round/clients.out") (exit $rc)"
  [[ $rc == 0 ]] || { log "round $round: not every submission was answered"; exit 1; }
  # Some cancels, through whichever controller leads.
  if L="$(leader)"; then
    for id in $(curl -s -H "Authorization: Bearer $(cat "$TOKEN_FILE")" "$L/v1/queue?limit=20" |
                "$PYTHON" -c 'import json,sys; print(" ".join(str(j["id"]) for j in json.load(sys.stdin)["jobs"][:5]))' 2>/dev/null); do
      curl -s -o /dev/null -X POST -H "Authorization: Bearer $(cat "$TOKEN_FILE")" "$L/v1/jobs/$id/cancel"
    done
  fi
done
touch "$WORK/stop-chaos"
wait "$CHAOS_PID"
log "chaos stopped; checking the store"
deadline=$((SECONDS + 120))
until L="$(leader)"; do
  ((SECONDS < deadline)) || { log "no controller leads after the chaos"; exit 1; }
  sleep 0.5
done
mkdir -p "$WORK/all"
cat "$WORK"/rounds/*/client-*.log >"$WORK/all/client-0.log"
"$PYTHON" "$SRC/scripts/store_consistency.py" "$L" "$TOKEN_FILE" --logs "$WORK/all" | tee -a "$WORK/soak.log" || exit 1
log "PASS: $round rounds of $ROUND submissions under chaos; the store is consistent"
