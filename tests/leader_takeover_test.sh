#!/usr/bin/env bash
# Given --leader-lease with a SQLite store or below 300ms, expect exit 2 saying why. Given two
# `gpufleet server --leader-lease 3s` on one throwaway PostgreSQL, expect the first to
# lead and the second to stand by, answering 503 that names the leader; after kill -9 of the
# leader, expect the standby to take over within a bounded time with the state of the store (a job
# submitted before, the request id remembered) and to accept new jobs. Then, with a third
# controller standing by, expect a leader paused by SIGSTOP past its lease to be replaced, and on
# SIGCONT to exit with status 75 saying it lost the leadership.
#
# Usage: leader_takeover_test.sh PATH/TO/gpufleet PATH/TO/gpufleet-test-postgres
GPUFLEET="${1:?usage: leader_takeover_test.sh GPUFLEET GPUFLEET_TEST_POSTGRES}"
PG_TOOL="${2:?usage: leader_takeover_test.sh GPUFLEET GPUFLEET_TEST_POSTGRES}"
source "$(dirname "$0")/cluster_lib.sh"

LEASE=3s

run "$WORK/sqlite" "$GPUFLEET" server --data-dir "$WORK/d1" --listen 127.0.0.1:0 --leader-lease "$LEASE"
expect_rc "$WORK/sqlite" 2 "--leader-lease with the SQLite store"
expect_contains "$WORK/sqlite.err" "only a PostgreSQL --store" "the refusal says why"
run "$WORK/short" "$GPUFLEET" server --data-dir "$WORK/d2" --listen 127.0.0.1:0 --leader-lease 10ms \
  --store "postgresql:///postgres?host=$WORK/no-server-here"
expect_rc "$WORK/short" 2 "--leader-lease below 300ms"
expect_contains "$WORK/short.err" "at least 300ms" "the refusal says the least lease"

OTHER_PIDS=()
coproc PG { exec "$PG_TOOL" 2>"$WORK/pg.err"; }
PG_TOOL_PID=$PG_PID
stop_all() {
  local pid
  for pid in "${OTHER_PIDS[@]}"; do kill -CONT "$pid" 2>/dev/null || true; _kill_tree_groups "$pid"; done
  exec {PG[1]}>&- 2>/dev/null || true
  wait "$PG_TOOL_PID" 2>/dev/null || true
}
trap 'rc=$?; set +e; stop_all; (exit $rc); cluster_cleanup' EXIT
read -r -t 120 PG_URL <&"${PG[0]}" || fail "could not start PostgreSQL: $(cat "$WORK/pg.err")"

# start_controller NAME [PORT AGENT_PORT [LEASE]]: a controller with --leader-lease on its own
# ports (free ones unless given) and data directory; sets its URL, ports and pid.
start_controller() {
  local name="$1" port="${2:-}" agent_port="${3:-}" lease="${4:-$LEASE}"
  [[ -n $port ]] || port="$(free_port)"
  [[ -n $agent_port ]] || agent_port="$(free_port)"
  mkdir -p "$WORK/$name"
  setsid "$GPUFLEET" server --data-dir "$WORK/$name" --listen "127.0.0.1:$port" \
    --agent-listen "127.0.0.1:$agent_port" --store "$PG_URL" --leader-lease "$lease" \
    </dev/null >>"$WORK/$name/server.log" 2>&1 &
  OTHER_PIDS+=("$!")
  eval "${name}_PID=$!"
  eval "${name}_URL=http://127.0.0.1:$port"
  eval "${name}_PORTS='$port $agent_port'"
}
# status_of URL: the HTTP status of GET /v1/health there (000 when nothing answers).
status_of() { curl -s -o "$WORK/last_body" -w '%{http_code}' "$1/v1/health"; }
answers() { [[ "$(status_of "$1")" == "$2" ]]; }

# A leads: it is the only one.
cluster_start_server --store "$PG_URL" --leader-lease "$LEASE"
LEADER_URL="$URL"
id="$(api POST /v1/jobs '{"request_id": "before", "job": {"name": "kept", "resources": {"gpus": 1}, "run": "true"}}' |
  json_get "j['jobs'][0]['id']")"
[[ "$id" == 1 ]] || fail "the first job got id '$id'"

# B stands by and says who leads.
start_controller B
wait_until "the standby answers 503" 30 answers "$B_URL" 503
expect_contains "$WORK/last_body" "not the leader; the leader is $LEADER_URL" "the standby names the leader"
answers "$LEADER_URL" 200 || fail "the leader stopped answering once a standby started"
grep -q "standing by" "$WORK/B/server.log" || fail "the standby's log: $(cat "$WORK/B/server.log")"

# kill -9 of the leader: B takes over with the store's state.
_kill_tree_groups "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=""
killed_at=$SECONDS
wait_until "the standby took over" 30 answers "$B_URL" 200
echo "takeover after kill -9: $((SECONDS - killed_at)) s (lease $LEASE)"
grep -q "took the leader lease (token 2)" "$WORK/B/server.log" || fail "B's log: $(cat "$WORK/B/server.log")"
URL="$B_URL"
[[ "$(api GET /v1/jobs/1 | json_get "j['name']")" == kept ]] || fail "job 1 on the new leader: $(api GET /v1/jobs/1)"
again="$(api POST /v1/jobs '{"request_id": "before", "job": {"name": "kept", "resources": {"gpus": 1}, "run": "true"}}')"
[[ "$(echo "$again" | json_get "j['created']")" == false ]] || fail "the new leader forgot the request id: $again"
id="$(api POST /v1/jobs '{"request_id": "after", "job": {"name": "new", "resources": {"gpus": 1}, "run": "true"}}' |
  json_get "j['jobs'][0]['id']")"
[[ "$id" == 2 ]] || fail "the first job after the takeover got id '$id'"

# A third controller stands by; B is paused past its lease (SIGSTOP), C takes over,
# and B, continued, finds its lease gone and exits 75 without writing.
start_controller C
wait_until "the third controller stands by" 30 answers "$C_URL" 503
expect_contains "$WORK/last_body" "the leader is $B_URL" "the standby names the new leader"
kill -STOP "$B_PID"
wait_until "the third controller took over from the paused leader" 30 answers "$C_URL" 200
grep -q "took the leader lease (token 3)" "$WORK/C/server.log" || fail "C's log: $(cat "$WORK/C/server.log")"
kill -CONT "$B_PID"
wait_until "the paused leader exited after it was continued" 30 bash -c "! kill -0 $B_PID 2>/dev/null"
rc=0
wait "$B_PID" || rc=$?
[[ $rc == 75 ]] || fail "the old leader exited with $rc, expected 75; its log: $(cat "$WORK/B/server.log")"
expect_contains "$WORK/B/server.log" "lost the leadership" "the old leader says why it stopped"
URL="$C_URL"
jobs="$(api GET '/v1/jobs' | json_get "len(j['jobs'])")"
[[ "$jobs" == 2 ]] || fail "the store holds $jobs jobs after the second takeover, expected 2"

# A leader killed and started again at once on the same addresses, with nobody standing by:
# the lease still names it, so until it lapses it says that its own earlier run holds it (not
# that the leader is itself), then it leads. (An 8 s lease: the restart takes well under that.)
kill -TERM "$C_PID"
wait "$C_PID" 2>/dev/null || true
start_controller D "" "" 8s
wait_until "D leads once C gave the lease up" 30 answers "$D_URL" 200
_kill_tree_groups "$D_PID"
wait "$D_PID" 2>/dev/null || true
start_controller D $D_PORTS 8s
wait_until "D, started again, answers" 30 bash -c "[[ \$(curl -s -o /dev/null -w '%{http_code}' $D_URL/v1/health) != 000 ]]"
answers "$D_URL" 503 || fail "D started again led at once, inside its earlier run's lease"
expect_contains "$WORK/last_body" "this controller's earlier run" "the restarted controller says its own earlier run holds the lease"
wait_until "D leads once its earlier lease lapsed" 30 answers "$D_URL" 200
URL="$D_URL"
jobs="$(api GET '/v1/jobs' | json_get "len(j['jobs'])")"
[[ "$jobs" == 2 ]] || fail "the store holds $jobs jobs after D's restart, expected 2"

echo "PASS: one leader; kill -9 of it hands over to the standby with the store's state; a paused leader is replaced and exits 75; a leader restarted inside its own lease says so, then leads"
