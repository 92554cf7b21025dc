#!/usr/bin/env bash
# Controller kill -9 during a submit storm.
#
# A controller (gpufleet server) and one agent with 4 fake H100s; two long-running jobs hold two
# GPUs. 8 clients submit 2,000 jobs (tests/submit_storm_client.py), each with its own request id;
# once a third of them are answered the controller is killed with SIGKILL and started again on
# the same data directory and port, and the clients retry every submission that got no answer
# with the same request id. Then:
#   - every request id exists exactly once among the jobs (record.request_id), and the job an
#     answer named before the kill is that job (a 2xx answer was durable);
#   - nothing else was created;
#   - the two long-running jobs are still running, attempt 1, with the same process ids, alive.
#
# Usage: submit_storm_test.sh GPUFLEET_BIN SOURCE_DIR
source "$(dirname "$0")/lib.sh"
BIN="$1"
SRC="$2"
REQUESTS="${STORM_REQUESTS:-2000}"
CLIENTS=8

DATA="$WORK/server"
PORT="$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
AGENT_PORT="$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
URL="http://127.0.0.1:$PORT"
SERVER_PID=""
AGENT_PID=""
CLIENTS_PID=""

cleanup() {
  # The long jobs run in their own process groups; the agent leaves jobs running when it stops.
  for f in "$WORK"/long-*.pid; do
    [[ -s "$f" ]] && kill -KILL -- "-$(cat "$f")" 2>/dev/null || true
  done
  for p in $CLIENTS_PID $AGENT_PID $SERVER_PID; do kill -KILL "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

start_server() {
  "$BIN" server --data-dir "$DATA" --listen "127.0.0.1:$PORT" --agent-listen "127.0.0.1:$AGENT_PORT" \
    >>"$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 300); do
    if curl -fsS "$URL/v1/health" >/dev/null 2>&1; then return 0; fi
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.log" >&2; fail "the server exited at start"; }
    sleep 0.1
  done
  cat "$WORK/server.log" >&2
  fail "the server did not answer /v1/health within 30 s"
}

# api METHOD PATH [BODY]: prints the body; the status goes to $WORK/status.
api() {
  local args=(-sS -o "$WORK/body" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $(cat "$DATA/admin.token")")
  if [[ $# -ge 3 ]]; then args+=(-H 'Content-Type: application/json' --data-binary "$3"); fi
  curl "${args[@]}" "$URL$2" >"$WORK/status"
  cat "$WORK/body"
}

job_state() {  # job_state ID: "<state> <attempt>"
  api GET "/v1/jobs/$1" | "$PYTHON" -c 'import json,sys; j=json.load(sys.stdin); print(j["state"], j["attempt"])'
}

start_server
"$BIN" agent --server "http://127.0.0.1:$AGENT_PORT" --join-token-file "$DATA/join.token" --name storm-node \
  --fake-gpus 4xH100 --job-user root --allow-root-jobs --workdir-root / \
  --data-dir "$WORK/agent" >"$WORK/agent.log" 2>&1 &
AGENT_PID=$!
for _ in $(seq 1 300); do
  n="$(api GET /v1/nodes | "$PYTHON" -c 'import json,sys; print(sum(1 for n in json.load(sys.stdin)["nodes"] if n["state"]=="up"))' 2>/dev/null || echo 0)"
  [[ "$n" == 1 ]] && break
  sleep 0.1
done
[[ "$n" == 1 ]] || { cat "$WORK/agent.log" >&2; fail "the agent did not register within 30 s"; }

# Two long-running jobs; each writes its shell's pid (which exec hands to sleep) and sleeps.
LONG_IDS=()
for i in 1 2; do
  body="{\"request_id\": \"long-$i\", \"job\": {\"name\": \"long-$i\", \"resources\": {\"gpus\": 1},
         \"run\": \"echo \$\$ > $WORK/long-$i.pid.tmp && mv $WORK/long-$i.pid.tmp $WORK/long-$i.pid && exec sleep 1000\"}}"
  out="$(api POST /v1/jobs "$body")"
  [[ "$(cat "$WORK/status")" == 201 ]] || fail "submitting long-$i: HTTP $(cat "$WORK/status"): $out"
  LONG_IDS+=("$(echo "$out" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["id"])')")
done
for i in 1 2; do
  id="${LONG_IDS[$((i - 1))]}"
  for _ in $(seq 1 300); do
    [[ -s "$WORK/long-$i.pid" && "$(job_state "$id")" == "running 1" ]] && break
    sleep 0.1
  done
  [[ -s "$WORK/long-$i.pid" ]] || fail "long-$i did not start within 30 s ($(job_state "$id"))"
  [[ "$(job_state "$id")" == "running 1" ]] || fail "long-$i: expected 'running 1', got '$(job_state "$id")'"
done
PID1="$(cat "$WORK/long-1.pid")"
PID2="$(cat "$WORK/long-2.pid")"

# The storm.
mkdir -p "$WORK/logs"
"$PYTHON" "$SRC/tests/submit_storm_client.py" --url "$URL" --token-file "$DATA/admin.token" --clients "$CLIENTS" \
  --requests "$REQUESTS" --log-dir "$WORK/logs" --deadline 200 >"$WORK/clients.out" 2>"$WORK/clients.err" &
CLIENTS_PID=$!
answered() { cat "$WORK"/logs/client-*.log 2>/dev/null | wc -l; }
for _ in $(seq 1 3000); do
  [[ "$(answered)" -ge $((REQUESTS / 3)) ]] && break
  kill -0 "$CLIENTS_PID" 2>/dev/null || break
  sleep 0.05
done
BEFORE="$(answered)"
[[ "$BEFORE" -ge $((REQUESTS / 3)) && "$BEFORE" -lt "$REQUESTS" ]] ||
  fail "expected to kill the server mid-storm, but $BEFORE of $REQUESTS submissions were answered"
kill -KILL "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null || true
cp -r "$WORK/logs" "$WORK/logs-at-kill"
echo "killed the server after $BEFORE answered submissions" >&2
start_server

RC=0
wait "$CLIENTS_PID" || RC=$?
CLIENTS_PID=""
[[ "$RC" == 0 ]] || { cat "$WORK/clients.out" "$WORK/clients.err" >&2; fail "the clients did not get every submission answered"; }
echo "clients: $(cat "$WORK/clients.out")" >&2

# The check: every answered request id exists exactly once, with the id its answer named.
"$PYTHON" "$SRC/tests/storm_check.py" "$URL" "$DATA/admin.token" "$WORK/logs" "$WORK/logs-at-kill" "$REQUESTS" \
  --long "${LONG_IDS[0]}" "$PID1" long-1 --long "${LONG_IDS[1]}" "$PID2" long-2 || fail "the store after the storm"
echo PASS
