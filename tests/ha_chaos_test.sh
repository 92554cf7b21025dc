#!/usr/bin/env bash
# Chaos on the PostgreSQL store, on a throwaway server (gpufleet-test-postgres).
#
# 1. PostgreSQL crashes under load. A controller on PostgreSQL and one agent running a long job;
#    8 clients submit 600 jobs, each with its own request id. A third of the way in, PostgreSQL
#    stops as a crash would (immediate mode). Expect: while it is down a submission is refused
#    with 503 (never a 2xx that is not durable) and the clients' submissions go unanswered or get
#    5xx; PostgreSQL starts again and the same controller process recovers by itself: every
#    submission ends up answered 2xx and stored exactly once, with the id its answer named, and
#    the long job still runs in the same process, attempt 1.
# 2. The leader is cut off from the database. Two controllers with --leader-lease, each as its
#    own database role. The leader's role may no longer log in and its sessions are terminated
#    (what a network partition between it and the database looks like to both sides). Expect:
#    it refuses writes meanwhile, steps down within its lease (exit 75, saying why), and the
#    standby takes over with every job; healed and started again, the old leader stands by.
# 3. The leader is killed under load. An agent and 32 clients given both controllers' URLs; the
#    agent runs a long job; the clients submit 640 jobs; a third of the way in the leader gets
#    kill -9. Expect: the standby leads, every submission is answered and stored exactly once
#    (the store grows by exactly 640), and the long job runs on in the same process, attempt 1.
# After each, scripts/store_consistency.py finds every job in one state with a monotone history.
#
# Usage: ha_chaos_test.sh GPUFLEET GPUFLEET_TEST_POSTGRES SOURCE_DIR
GPUFLEET="${1:?usage: ha_chaos_test.sh GPUFLEET GPUFLEET_TEST_POSTGRES SOURCE_DIR}"
PG_TOOL="${2:?usage: ha_chaos_test.sh GPUFLEET GPUFLEET_TEST_POSTGRES SOURCE_DIR}"
SRC="${3:?usage: ha_chaos_test.sh GPUFLEET GPUFLEET_TEST_POSTGRES SOURCE_DIR}"
source "$(dirname "$0")/cluster_lib.sh"

REQUESTS=600
CLIENTS=8
LEASE=3s

OTHER_PIDS=()
CLIENTS_PID=""
coproc PG { exec "$PG_TOOL" 2>"$WORK/pg.err"; }
PG_TOOL_PID=$PG_PID
PG_IN="${PG[1]}"
PG_OUT="${PG[0]}"
stop_all() {
  local pid
  [[ -n "$CLIENTS_PID" ]] && kill -KILL "$CLIENTS_PID" 2>/dev/null
  for pid in "${OTHER_PIDS[@]}"; do _kill_tree_groups "$pid"; done
  exec {PG_IN}>&- 2>/dev/null || true
  wait "$PG_TOOL_PID" 2>/dev/null || true
}
trap 'rc=$?; set +e; stop_all; (exit $rc); cluster_cleanup' EXIT
read -r -t 120 PG_URL <&"$PG_OUT" || fail "could not start PostgreSQL: $(cat "$WORK/pg.err")"

# pg COMMAND: tells the PostgreSQL tool to kill, restart or run SQL; prints what SQL printed.
pg() {
  local answer
  echo "$*" >&"$PG_IN"
  read -r -t 120 answer <&"$PG_OUT" || fail "the PostgreSQL tool did not answer '$*': $(cat "$WORK/pg.err")"
  [[ "$answer" == ok* ]] || fail "PostgreSQL tool, '$*': $answer"
  echo "${answer#ok }"
}

# submit_status URL REQUEST_ID: the HTTP status of one submission there (000: no answer).
submit_status() {
  curl -s -o "$WORK/submit_body" -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" \
    -H 'Content-Type: application/json' --max-time 30 \
    --data-binary "{\"request_id\": \"$2\", \"job\": {\"name\": \"$2\", \"resources\": {\"gpus\": 1}, \"run\": \"true\"}}" \
    "$1/v1/jobs"
}
status_of() { curl -s -o "$WORK/last_body" -w '%{http_code}' "$1/v1/health"; }
answers() { [[ "$(status_of "$1")" == "$2" ]]; }
answered() { cat "$WORK"/logs/client-*.log 2>/dev/null | wc -l; }
answered_at_least() { [[ "$(answered)" -ge "$1" ]]; }
# submitted URL REQUEST_ID: the submission is answered 2xx.
submitted() { [[ "$(submit_status "$1" "$2")" == 2* ]]; }

# ---- 1. PostgreSQL crashes under load ------------------------------------------------------------
cluster_start_server --store "$PG_URL"
AGENT_GPUS=2xH100 cluster_start_agent chaos-node
long="$(api POST /v1/jobs "{\"request_id\": \"long-1\", \"job\": {\"name\": \"long-1\", \"resources\": {\"gpus\": 1},
  \"run\": \"echo \$\$ > $WORK/long-1.pid.tmp && mv $WORK/long-1.pid.tmp $WORK/long-1.pid && exec sleep 1000\"}}" |
  json_get "j['jobs'][0]['id']")"
WATCH_JOBS+=("$long")
wait_until "the long job runs" 30 test -s "$WORK/long-1.pid"
wait_until "the long job is running" 30 job_state_is "$long" running
[[ "$(job_field "$long" "j['attempt']")" == 1 ]] || fail "the long job is at attempt $(job_field "$long" "j['attempt']")"
LONG_PID="$(cat "$WORK/long-1.pid")"

mkdir -p "$WORK/logs"
"$PYTHON" "$SRC/tests/submit_storm_client.py" --url "$URL" --token-file "$SERVER_DIR/admin.token" \
  --clients "$CLIENTS" --requests "$REQUESTS" --log-dir "$WORK/logs" --deadline 200 \
  >"$WORK/clients.out" 2>"$WORK/clients.err" &
CLIENTS_PID=$!
wait_until "a third of the submissions are answered" 120 answered_at_least $((REQUESTS / 3))
pg kill >/dev/null
cp -r "$WORK/logs" "$WORK/logs-at-cut"
BEFORE="$(answered)"
[[ "$BEFORE" -lt "$REQUESTS" ]] || fail "every submission was answered before PostgreSQL went down"
# While it is down: refused, not acknowledged.
code="$(submit_status "$URL" during-outage)"
[[ "$code" == 503 ]] || fail "a submission while PostgreSQL is down got HTTP $code, expected 503: $(cat "$WORK/submit_body")"
expect_contains "$WORK/submit_body" "unavailable" "the refusal says the store is unavailable"
pg restart >/dev/null
RC=0
wait "$CLIENTS_PID" || RC=$?
CLIENTS_PID=""
[[ "$RC" == 0 ]] || fail "the clients did not get every submission answered: $(cat "$WORK/clients.out" "$WORK/clients.err")"
kill -0 "$SERVER_PID" 2>/dev/null || fail "the controller exited instead of recovering"
grep -q '"no_answer_attempts": 0,' "$WORK/clients.out" &&
  fail "no client saw the outage (PostgreSQL stopped too late?): $(cat "$WORK/clients.out")"
# The probe is sent again until it is answered: a submission is answered exactly once it is stored.
wait_until "the probe submission is answered after the restart" 60 submitted "$URL" during-outage
"$PYTHON" "$SRC/tests/storm_check.py" "$URL" "$SERVER_DIR/admin.token" "$WORK/logs" "$WORK/logs-at-cut" \
  "$REQUESTS" --long "$long" "$LONG_PID" long-1 --extra during-outage || fail "the store after PostgreSQL's crash"
"$PYTHON" "$SRC/scripts/store_consistency.py" "$URL" "$SERVER_DIR/admin.token" --logs "$WORK/logs" ||
  fail "the store is not consistent after PostgreSQL's crash"
echo "PostgreSQL crash under load: $BEFORE of $REQUESTS answered before it; the rest after it restarted; $(cat "$WORK/clients.out")"
JOBS_STORED=$((REQUESTS + 2))

# ---- 2. The leader cut off from the database ------------------------------------------------------
_kill_tree_groups "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=""
pg "sql CREATE ROLE ctl_a LOGIN SUPERUSER; CREATE ROLE ctl_b LOGIN SUPERUSER" >/dev/null
[[ "$PG_URL" == *user=postgres* ]] || fail "the PostgreSQL URL names no user: $PG_URL"

# start_controller NAME ROLE: a controller with --leader-lease as database role ROLE.
start_controller() {
  local name="$1" role="$2" port agent_port
  port="$(free_port)"
  agent_port="$(free_port)"
  mkdir -p "$WORK/$name"
  setsid "$GPUFLEET" server --data-dir "$WORK/$name" --listen "127.0.0.1:$port" \
    --agent-listen "127.0.0.1:$agent_port" --store "${PG_URL/user=postgres/user=$role}" --leader-lease "$LEASE" \
    </dev/null >"$WORK/$name/server.log" 2>&1 &
  OTHER_PIDS+=("$!")
  eval "${name}_PID=$!"
  eval "${name}_URL=http://127.0.0.1:$port"
  eval "${name}_AGENT_URL=http://127.0.0.1:$agent_port"
}
start_controller A ctl_a
wait_until "A leads" 30 answers "$A_URL" 200
start_controller B ctl_b
wait_until "B stands by" 30 answers "$B_URL" 503
expect_contains "$WORK/last_body" "the leader is $A_URL" "the standby names the leader"

terminated="$(pg "sql ALTER ROLE ctl_a NOLOGIN; SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = 'ctl_a'")"
echo "cut A off from the database: terminated its sessions ($terminated)"
code="$(submit_status "$A_URL" cut-off)"
[[ "$code" == 503 || "$code" == 000 ]] || fail "the cut-off leader answered a submission with HTTP $code: $(cat "$WORK/submit_body")"
wait_until "the cut-off leader steps down" 30 bash -c "! kill -0 $A_PID 2>/dev/null"
rc=0
wait "$A_PID" || rc=$?
[[ $rc == 75 ]] || fail "the cut-off leader exited with $rc, expected 75; its log: $(tail -n 20 "$WORK/A/server.log")"
expect_contains "$WORK/A/server.log" "could not renew the leader lease" "the old leader says why it stopped"
wait_until "B takes over" 30 answers "$B_URL" 200
URL="$B_URL"
count="$(api GET '/v1/jobs?limit=1000' | json_get "j['total'] if 'total' in j else len(j['jobs'])")"
[[ "$count" == "$JOBS_STORED" ]] || fail "the new leader sees $count jobs, expected $JOBS_STORED"
[[ "$(submit_status "$B_URL" after-cut)" == 201 ]] || fail "the new leader refused a submission: $(cat "$WORK/submit_body")"

printf '%s\n' "$TOKEN" >"$WORK/token"
"$PYTHON" "$SRC/scripts/store_consistency.py" "$B_URL" "$WORK/token" --logs "$WORK/logs" ||
  fail "the store is not consistent after the takeover"

# Healed, the old leader comes back as a standby naming B.
pg "sql ALTER ROLE ctl_a LOGIN" >/dev/null
start_controller A2 ctl_a
wait_until "the healed controller stands by" 30 answers "$A2_URL" 503
expect_contains "$WORK/last_body" "the leader is $B_URL" "the healed controller names the new leader"

# ---- 3. kill -9 of the leader during a 32-client storm, with a job running -------------------------
# B leads, A2 stands by. An agent and 32 clients are given both controllers and follow the leader.
URL="$B_URL"
AGENT_URL="$B_AGENT_URL,$A2_AGENT_URL"
printf 'server: [%s, %s]\ntoken: %s\n' "$B_URL" "$A2_URL" "$TOKEN" >"$GPUFLEET_CONFIG"
AGENT_GPUS=2xH100 cluster_start_agent ha-node
long2="$(api POST /v1/jobs "{\"request_id\": \"long-2\", \"job\": {\"name\": \"long-2\", \"resources\": {\"gpus\": 1},
  \"run\": \"echo \$\$ > $WORK/long-2.pid.tmp && mv $WORK/long-2.pid.tmp $WORK/long-2.pid && exec sleep 1000\"}}" |
  json_get "j['jobs'][0]['id']")"
WATCH_JOBS+=("$long2")
wait_until "the second long job runs" 30 test -s "$WORK/long-2.pid"
wait_until "the second long job is running" 30 job_state_is "$long2" running
LONG2_PID="$(cat "$WORK/long-2.pid")"
# job_count URL: the jobs in the store (all pages), as the consistency check counts them.
job_count() { "$PYTHON" "$SRC/scripts/store_consistency.py" "$1" "$WORK/token" --json | json_get "j['jobs']"; }
BEFORE_STORM="$(job_count "$B_URL")"
mkdir -p "$WORK/logs3"
"$PYTHON" "$SRC/tests/submit_storm_client.py" --url "$B_URL,$A2_URL" --token-file "$WORK/token" \
  --clients 32 --requests 640 --prefix ha --log-dir "$WORK/logs3" --deadline 200 \
  >"$WORK/clients3.out" 2>"$WORK/clients3.err" &
CLIENTS_PID=$!
storm_answered_at_least() { [[ "$(cat "$WORK"/logs3/client-*.log 2>/dev/null | wc -l)" -ge "$1" ]]; }
wait_until "a third of the 32 clients' submissions are answered" 120 storm_answered_at_least 213
_kill_tree_groups "$B_PID"
killed_at=$SECONDS
RC=0
wait "$CLIENTS_PID" || RC=$?
CLIENTS_PID=""
[[ "$RC" == 0 ]] || fail "the 32 clients did not get every submission answered: $(cat "$WORK/clients3.out" "$WORK/clients3.err")"
wait_until "A2 leads" 30 answers "$A2_URL" 200
echo "kill -9 of the leader under 32 clients: A2 leads $((SECONDS - killed_at)) s later; $(cat "$WORK/clients3.out")"
URL="$A2_URL"
AFTER_STORM="$(job_count "$A2_URL")"
[[ "$AFTER_STORM" == $((BEFORE_STORM + 640)) ]] ||
  fail "the store holds $AFTER_STORM jobs after the storm, expected $BEFORE_STORM + 640"
"$PYTHON" "$SRC/scripts/store_consistency.py" "$A2_URL" "$WORK/token" --logs "$WORK/logs3" ||
  fail "the store is not consistent after the takeover under the storm"
wait_until "the agent reports to the new leader" 30 job_state_is "$long2" running
[[ "$(job_field "$long2" "j['attempt']")" == 1 ]] || fail "the long job was restarted: attempt $(job_field "$long2" "j['attempt']")"
[[ "$(cat "$WORK/long-2.pid")" == "$LONG2_PID" ]] || fail "the long job runs in a new process"
kill -0 "$LONG2_PID" 2>/dev/null || fail "the long job's process $LONG2_PID is gone"

echo "PASS: PostgreSQL crashed under load without a lost or doubled job; a leader cut off from the database stepped down and the standby took over; a leader killed under 32 clients was replaced with every answered submission stored once and the running job undisturbed"
