#!/usr/bin/env bash
# Agents and the CLI follow the leader over a list of controllers (docs/operations.md). Three
# controllers A, B, C share one throwaway PostgreSQL; A leads with a long lease (120s), B stands
# by with a short one (2s), so that it asks for the lease often; C (2s) starts once B leads, so
# that B is the one standby when A steps down.
#   - The CLI, given the standby first and the leader second, submits through the standby to the
#     leader; `gpufleet controllers` shows the leader, the standby with the same token, and C (not
#     started yet) unreachable; a standby's agent listener names the leader's agent URL.
#   - An agent given every agent URL (a standby's first) registers with the leader and runs the job.
#   - SIGTERM of A: it releases its lease, and B leads while A's lease had more than a minute
#     left, which only the release allows; the agent reports to B, the job keeps its process.
#   - kill -9 of B: C takes over; the agent re-registers with C, the job still the same process and
#     attempt, and the CLI, given all three URLs, submits through the list to C and remembers C
#     for its next command.
#
# Usage: leader_follow_test.sh PATH/TO/gpufleet PATH/TO/gpufleet-test-postgres
GPUFLEET="${1:?usage: leader_follow_test.sh GPUFLEET GPUFLEET_TEST_POSTGRES}"
PG_TOOL="${2:?usage: leader_follow_test.sh GPUFLEET GPUFLEET_TEST_POSTGRES}"
source "$(dirname "$0")/cluster_lib.sh"

OTHER_PIDS=()
coproc PG { exec "$PG_TOOL" 2>"$WORK/pg.err"; }
PG_TOOL_PID=$PG_PID
stop_all() {
  local pid
  for pid in "${OTHER_PIDS[@]}"; do _kill_tree_groups "$pid"; done
  exec {PG[1]}>&- 2>/dev/null || true
  wait "$PG_TOOL_PID" 2>/dev/null || true
}
trap 'rc=$?; set +e; stop_all; (exit $rc); cluster_cleanup' EXIT
CLUSTER_LOGS=("$WORK/A/server.log" "$WORK/B/server.log" "$WORK/C/server.log" "$WORK/agent/agent.log")
read -r -t 120 PG_URL <&"${PG[0]}" || fail "could not start PostgreSQL: $(cat "$WORK/pg.err")"

# Ports first: every client is given every controller's URLs.
for name in A B C; do
  eval "${name}_PORT=$(free_port)"
  eval "${name}_AGENT_PORT=$(free_port)"
  eval "${name}_URL=http://127.0.0.1:\$${name}_PORT"
  eval "${name}_AGENT_URL=http://127.0.0.1:\$${name}_AGENT_PORT"
done
# C starts late; until then its ports stay bound and closed here, so that connections to them are
# refused at once and no other process on the machine (a parallel test) can listen on them.
"$PYTHON" -c '
import socket, sys, time
held = []
for port in sys.argv[1:]:
    s = socket.socket()
    s.bind(("127.0.0.1", int(port)))
    held.append(s)
print("held", flush=True)
time.sleep(3600)' "$C_PORT" "$C_AGENT_PORT" >"$WORK/hold.out" 2>&1 &
HOLD_PID=$!
OTHER_PIDS+=("$HOLD_PID")
wait_until "C's ports are held" 10 grep -q held "$WORK/hold.out"
# start_controller NAME LEASE: a controller on its ports and data directory; sets NAME_PID.
start_controller() {
  local name="$1" lease="$2" port agent_port
  port="$(eval echo "\$${name}_PORT")"
  agent_port="$(eval echo "\$${name}_AGENT_PORT")"
  mkdir -p "$WORK/$name"
  setsid "$GPUFLEET" server --data-dir "$WORK/$name" --listen "127.0.0.1:$port" \
    --agent-listen "127.0.0.1:$agent_port" --store "$PG_URL" --leader-lease "$lease" \
    </dev/null >"$WORK/$name/server.log" 2>&1 &
  OTHER_PIDS+=("$!")
  eval "${name}_PID=$!"
}
health_is() { [[ "$(curl -s -o /dev/null -w '%{http_code}' "$1/v1/health")" == "$2" ]]; }
role_of() { curl -s "$1/v1/leader" | json_get "j['role']"; }

start_controller A 120s
wait_until "A leads" 30 health_is "$A_URL" 200
start_controller B 2s
wait_until "B stands by" 30 health_is "$B_URL" 503
TOKEN="$(cat "$WORK/A/admin.token")"
JOIN_TOKEN_FILE="$WORK/A/join.token"
export GPUFLEET_CONFIG="$WORK/cli-config.yaml"
# The CLI's list starts with a standby.
printf 'server: [%s, %s, %s]\ntoken: %s\n' "$B_URL" "$A_URL" "$C_URL" "$TOKEN" >"$GPUFLEET_CONFIG"
unset GPUFLEET_SERVER GPUFLEET_TOKEN

# A standby's agent listener names the leader's agent URL.
headers="$(curl -s -D - -o /dev/null "$B_AGENT_URL/v1/health")"
grep -qi "^X-Gpufleet-Leader: $A_AGENT_URL" <<<"$headers" || fail "B's agent listener: $headers"

# Who leads, asked of each controller (standbys answer too).
"$GPUFLEET" controllers --server "$A_URL,$B_URL,$C_URL" -o json >"$WORK/controllers.json" ||
  fail "gpufleet controllers: $(cat "$WORK/controllers.json")"
roles="$(json_get "','.join(c.get('role', 'unreachable') + ':' + str(c.get('leader', {}).get('token', '-'))
                           for c in j['controllers'])" <"$WORK/controllers.json")"
[[ "$roles" == "leader:1,standby:1,unreachable:-" ]] || fail "roles and tokens: $roles; $(cat "$WORK/controllers.json")"
store="$(json_get "str(j['controllers'][1]['store']['reachable']) + ':' + str(j['controllers'][1]['store']['schema_version'])" \
  <"$WORK/controllers.json")"
[[ "$store" == "True:8" ]] || fail "B's store health: $store"
"$GPUFLEET" controllers --server "$A_URL,$B_URL,$C_URL" >"$WORK/controllers.txt" || fail "controllers table"
grep -q "standby" "$WORK/controllers.txt" || fail "the table: $(cat "$WORK/controllers.txt")"

# The agent is given every controller, a standby first.
mkdir -p "$WORK/agent"
setsid "$GPUFLEET" agent --server "$C_AGENT_URL,$B_AGENT_URL,$A_AGENT_URL" --join-token-file "$JOIN_TOKEN_FILE" \
  --name n1 --data-dir "$WORK/agent" --fake-gpus 1xH100 "${AGENT_JOB_FLAGS[@]}" \
  </dev/null >>"$WORK/agent/agent.log" 2>&1 &
AGENT_PID[n1]=$!
wait_until "node n1 is up" 30 node_is n1 up

# The CLI submits through the standby (first on its list) to the leader it names.
keeper_submit "through the standby"
URL="$A_URL"
wait_until "job $JOB runs" 30 job_state_is "$JOB" running
keeper_started

# SIGTERM of A: it releases its lease. B asks every 2/3 s; A's lease, renewed every 40 s for
# 120 s, still has more than a minute left, so B can lead before that only if A released it.
left="$(curl -s "$B_URL/v1/leader" | json_get "j['leader']['lease_left_ms']")"
(( left > 60000 )) || fail "A's lease as B reads it has $left ms left, expected more than a minute"
kill -TERM "$A_PID"
term_at=$SECONDS
wait_until "A stopped" 30 bash -c "! kill -0 $A_PID 2>/dev/null"
grep -q "released the leader lease" "$WORK/A/server.log" || fail "A's log: $(cat "$WORK/A/server.log")"
wait_until "B leads after A's release" 30 health_is "$B_URL" 200
echo "takeover after SIGTERM: $((SECONDS - term_at)) s (the leader's lease 120s)"
grep -q "took the leader lease (token 2)" "$WORK/B/server.log" || fail "B's log: $(cat "$WORK/B/server.log")"
URL="$B_URL"
wait_until "the agent reports to B" 30 bash -c "grep -q 'registered as n1 .* with $B_AGENT_URL' '$WORK/agent/agent.log'"
wait_until "node n1 is up on B" 30 node_is n1 up
job_state_is "$JOB" running || fail "job $JOB on B: $(job_json "$JOB")"

# kill -9 of B: C, standing by, takes over, and the agent follows with the job untouched.
kill "$HOLD_PID"
wait "$HOLD_PID" 2>/dev/null || true
start_controller C 2s
wait_until "C stands by" 30 health_is "$C_URL" 503
_kill_tree_groups "$B_PID"
killed_at=$SECONDS
wait_until "C leads after kill -9 of B" 30 health_is "$C_URL" 200
echo "takeover after kill -9: $((SECONDS - killed_at)) s (the leader's lease 2s)"
URL="$C_URL"
wait_until "the agent reports to C" 30 bash -c "grep -q 'registered as n1 .* with $C_AGENT_URL' '$WORK/agent/agent.log'"
wait_until "node n1 is up on C" 30 node_is n1 up
keeper_kept
[[ "$(role_of "$C_URL")" == leader ]] || fail "C's role: $(curl -s "$C_URL/v1/leader")"

# The CLI, given all three (two gone), submits to C.
id="$(GPUFLEET_SERVER="$A_URL,$B_URL,$C_URL" "$GPUFLEET" submit "$KEEPER_YAML" -o json </dev/null |
  json_get "j['jobs'][0]['id']")" || fail "submit through a list with two controllers gone"
[[ "$id" == $((JOB + 1)) ]] || fail "the second job got id '$id'"
# ... and remembers C for the next command given that list.
grep -qx "$C_URL" "$XDG_CACHE_HOME"/gpufleet/leader-* || fail "the remembered leaders: $(cat "$XDG_CACHE_HOME"/gpufleet/leader-*)"

echo "PASS: the CLI and an agent follow the leader across SIGTERM (released lease) and kill -9 of leaders; the job kept its process"
