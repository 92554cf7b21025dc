# Helpers for the end-to-end tests that run a live cluster: a `gpufleet server` and several
# `gpufleet agent` processes on 127.0.0.1, each in its own process group, all torn down on exit
# (the job processes the agents started included). Source it after setting GPUFLEET (the binary);
# it sources lib.sh (WORK, fail, PYTHON).
#
#   cluster_start_server [SERVER FLAGS...]   starts the controller on a free port; sets URL, TOKEN,
#                                            JOIN_TOKEN_FILE, and GPUFLEET_CONFIG for the CLI
#   cluster_start_agent NAME [AGENT FLAGS]   starts an agent and waits until its node is up
#   cluster_lose_agent NAME                  kill -9 of the agent and of the job process groups it
#                                            started: what a machine that vanished looks like
#   wait_until DESC SECONDS CMD...           polls CMD (every 0.1 s) until it succeeds, else fails
#   api GET|POST PATH [BODY]                 the controller's API with the admin token
#   job_json ID / job_field ID EXPR          a job as JSON (`gpufleet status -o json`) / one value

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${GPUFLEET:?set GPUFLEET to the gpufleet binary before sourcing cluster_lib.sh}"

declare -A AGENT_PID=()
WATCH_JOBS=()  # job ids whose history and logs a failing test prints
CLUSTER_LOGS=()  # more log files (or folders of *.log) a failing test prints the last lines of
SERVER_PID=""
SERVER_DIR="$WORK/server"
URL=""
AGENT_URL=""
TOKEN=""
# The jobs of these tests write into the test's own folder, which only root may enter: their
# agents run jobs as root, which must be asked for explicitly. tests/isolation_test.sh checks the
# defaults (an unprivileged job user, workdir roots).
AGENT_JOB_FLAGS=(--job-user root --allow-root-jobs --workdir-root /)

# Kills the process groups of the children of PID (job parts are group leaders), then PID's group.
_kill_tree_groups() {
  local pid="$1" child pgid
  for child in $(pgrep -P "$pid" 2>/dev/null || true); do
    pgid="$(ps -o pgid= -p "$child" 2>/dev/null | tr -d ' ' || true)"
    if [[ -n "$pgid" && "$pgid" != "0" && "$pgid" != "$$" ]]; then
      kill -9 -- "-$pgid" 2>/dev/null || true
    fi
  done
  kill -9 -- "-$pid" 2>/dev/null || kill -9 "$pid" 2>/dev/null || true
}

cluster_cleanup() {
  local rc=$?
  set +e
  if [[ $rc -ne 0 ]]; then
    # On failure, the jobs' histories and the daemons' last words help more than anything else.
    local id
    for id in "${WATCH_JOBS[@]}"; do dump_job "$id"; done
    local extra=() entry
    for entry in "${CLUSTER_LOGS[@]}"; do
      if [[ -d "$entry" ]]; then extra+=("$entry"/*.log); else extra+=("$entry"); fi
    done
    for f in "$SERVER_DIR/server.log" "$WORK"/agents/*/agent.log "${extra[@]}"; do
      [[ -f "$f" ]] || continue
      echo "--- last lines of ${f#"$WORK"/}:" >&2
      tail -n 25 "$f" >&2
    done
  fi
  exec 2>/dev/null  # bash's "Killed" notices for the daemons below
  for name in "${!AGENT_PID[@]}"; do _kill_tree_groups "${AGENT_PID[$name]}"; done
  [[ -n "$SERVER_PID" ]] && _kill_tree_groups "$SERVER_PID"
  wait 2>/dev/null
  rm -rf "$WORK"
  exit $rc
}
trap cluster_cleanup EXIT
trap 'exit 143' TERM INT HUP

free_port() {
  "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_until DESC SECONDS CMD...: runs CMD every 0.1 s until it succeeds; fails after SECONDS.
wait_until() {
  local desc="$1" limit="$2"
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    if [[ -n "$SERVER_PID" ]] && ! kill -0 "$SERVER_PID" 2>/dev/null; then
      fail "the server (pid $SERVER_PID) exited while waiting until $desc; see server.log below"
    fi
    if ((SECONDS >= deadline)); then
      fail "timed out after ${limit}s waiting until $desc"
    fi
    sleep 0.1
  done
}

# api METHOD PATH [BODY]: prints the response body; fails on an HTTP error.
api() {
  local method="$1" path="$2" body="${3:-}"
  local args=(-sS --fail-with-body -X "$method" -H "Authorization: Bearer $TOKEN")
  [[ -n "$body" ]] && args+=(-H "Content-Type: application/json" --data-binary "$body")
  curl "${args[@]}" "$URL$path"
}

# json_get EXPR: evaluates a Python expression over the JSON on stdin (bound to `j`); prints the
# result (strings raw, the rest as JSON).
json_get() {
  "$PYTHON" -c '
import json, sys
j = json.load(sys.stdin)
v = eval(sys.argv[1])
print(v if isinstance(v, str) else json.dumps(v))' "$1"
}

cluster_start_server() {
  local port
  port="$(free_port)"
  local agent_port
  agent_port="$(free_port)"
  mkdir -p "$SERVER_DIR"
  URL="http://127.0.0.1:$port"
  AGENT_URL="http://127.0.0.1:$agent_port"
  setsid "$GPUFLEET" server --data-dir "$SERVER_DIR" --listen "127.0.0.1:$port" \
    --agent-listen "127.0.0.1:$agent_port" "$@" \
    </dev/null >"$SERVER_DIR/server.log" 2>&1 &
  SERVER_PID=$!
  wait_until "the server answers on $URL" 30 curl -sf "$URL/v1/health"
  wait_until "the server wrote admin.token" 10 test -s "$SERVER_DIR/admin.token"
  TOKEN="$(cat "$SERVER_DIR/admin.token")"
  JOIN_TOKEN_FILE="$SERVER_DIR/join.token"
  export GPUFLEET_CONFIG="$WORK/cli-config.yaml"
  printf 'server: %s\ntoken: %s\n' "$URL" "$TOKEN" >"$GPUFLEET_CONFIG"
  unset GPUFLEET_SERVER GPUFLEET_TOKEN
}

# node_state NAME: the node's state as `gpufleet nodes -o json` reports it (empty if unknown).
node_state() {
  "$GPUFLEET" nodes -o json </dev/null 2>/dev/null |
    json_get "next((n['state'] for n in (j['nodes'] if isinstance(j, dict) else j) if n['name'] == '$1'), '')"
}

node_is() { [[ "$(node_state "$1")" == "$2" ]]; }

# cluster_start_agent NAME [FLAGS...]: GPUs from AGENT_GPUS (default 1xH100); data in
# $WORK/agents/NAME, or AGENT_DIR when set (a replacement machine starts with an empty one).
cluster_start_agent() {
  local name="$1"
  shift
  local dir="${AGENT_DIR:-$WORK/agents/$name}"
  mkdir -p "$dir"
  setsid "$GPUFLEET" agent --server "$AGENT_URL" --join-token-file "$JOIN_TOKEN_FILE" --name "$name" \
    --data-dir "${AGENT_DATA_DIR:-$dir}" --fake-gpus "${AGENT_GPUS:-1xH100}" "${AGENT_JOB_FLAGS[@]}" "$@" \
    </dev/null >>"$dir/agent.log" 2>&1 &
  AGENT_PID[$name]=$!
  wait_until "node $name is up" 30 node_is "$name" up
}

# cluster_lose_agent NAME: the machine vanishes. The job processes it runs die with it (each part is
# a process group that the agent leads from outside: kill every child's group), then the agent.
# The agent is frozen first: a vanished machine reports nothing, so it must not see its parts die
# and report their exits in the moment between the two kills (on a loaded machine that moment is
# long enough for a heartbeat).
cluster_lose_agent() {
  local name="$1"
  local pid="${AGENT_PID[$name]}"
  [[ -n "$pid" ]] || fail "no agent named $name"
  kill -STOP "$pid" 2>/dev/null || true
  local child pgid
  for child in $(pgrep -P "$pid" || true); do
    pgid="$(ps -o pgid= -p "$child" | tr -d ' ' || true)"
    [[ -n "$pgid" ]] && kill -9 -- "-$pgid" 2>/dev/null || true
  done
  kill -9 -- "-$pid" 2>/dev/null || kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
  unset 'AGENT_PID[$name]'
}

# job_json ID: the job with its history (`gpufleet status ID -o json`; the API if that fails).
job_json() {
  "$GPUFLEET" status "$1" -o json </dev/null 2>/dev/null || api GET "/v1/jobs/$1"
}

# job_field ID EXPR: one value of the job (see json_get).
job_field() { job_json "$1" | json_get "$2"; }

job_state_is() { [[ "$(job_field "$1" "j['state']")" == "$2" ]]; }

# job_state_in ID STATE...: the job is in one of the states.
job_state_in() {
  local s
  s="$(job_field "$1" "j['state']")"
  shift
  local want
  for want in "$@"; do [[ "$s" == "$want" ]] && return 0; done
  return 1
}

# job_nodes ID: the node names of the job's current placement, one per part in rank order.
job_nodes() {
  local placement nodes
  placement="$(job_field "$1" "j.get('placement') or {}")"
  nodes="$(api GET /v1/nodes)"
  "$PYTHON" -c '
import json, sys
p = json.loads(sys.argv[1]); nodes = json.loads(sys.argv[2])["nodes"]
names = {n["id"]: n["name"] for n in nodes}
for part in p.get("parts", []):
    print(names.get(part["node"], "node-%s" % part["node"]))' "$placement" "$nodes"
}

# job_history ID: one line per transition: "FROM -> TO: REASON".
job_history() {
  job_json "$1" | "$PYTHON" -c '
import json, sys
for t in json.load(sys.stdin).get("history", []):
    print("%s -> %s: %s" % (t["from"], t["to"], t["reason"]))'
}

# submit_job FILE: submits a job file with the CLI (the API if the CLI fails); prints the job id.
submit_job() {
  local out
  if out="$("$GPUFLEET" submit "$1" -o json </dev/null 2>"$WORK/submit.err")"; then
    echo "$out" | json_get "j['jobs'][0]['id']"
    return
  fi
  echo "note: 'gpufleet submit' failed ($(head -c 300 "$WORK/submit.err")); using the API" >&2
  local body
  body="$("$PYTHON" -c 'import json, sys; print(json.dumps({"request_id": sys.argv[2], "source": sys.argv[1],
                                                          "yaml": open(sys.argv[1]).read()}))' \
    "$1" "test-$RANDOM$RANDOM")"
  api POST /v1/jobs "$body" | json_get "j['jobs'][0]['id']"
}

# dump_job ID: its history and logs, for failure messages.
dump_job() {
  echo "--- job $1:" >&2
  job_history "$1" >&2 || true
  timeout 20 "$GPUFLEET" logs "$1" </dev/null 2>&1 | tail -n 40 >&2 || true
}

# A job that must survive a takeover untouched (the HA tests): keeper_submit [DESC] submits a
# 1-GPU job that appends "PID ATTEMPT" to $KEEPER_LOG at each start and then sleeps; sets JOB
# (watched on failure). keeper_started waits for its process; sets JOB_PID, JOB_ATTEMPT.
# keeper_kept fails unless it still runs in that process and attempt, started once.
KEEPER_LOG="$WORK/pids/keeper"
KEEPER_YAML="$WORK/keeper.yaml"
keeper_submit() {
  mkdir -p "$(dirname "$KEEPER_LOG")"
  cat >"$KEEPER_YAML" <<XEOF2
name: keeper
resources: {gpus: 1}
run: >-
  echo "\$\$ \$GPUFLEET_ATTEMPT" >> $KEEPER_LOG && exec sleep 1000
XEOF2
  JOB="$("$GPUFLEET" submit "$KEEPER_YAML" -o json </dev/null | json_get "j['jobs'][0]['id']")" ||
    fail "submit ${1:-the keeper job}"
  WATCH_JOBS+=("$JOB")
}
keeper_started() {
  wait_until "the job's process started" 30 test -s "$KEEPER_LOG"
  read -r JOB_PID JOB_ATTEMPT <"$KEEPER_LOG"
}
keeper_kept() {
  job_state_is "$JOB" running || fail "job $JOB: $(job_json "$JOB")"
  [[ "$(job_field "$JOB" "j['attempt']")" == "$JOB_ATTEMPT" ]] || fail "the attempt changed: $(job_json "$JOB")"
  [[ "$(wc -l <"$KEEPER_LOG")" == 1 ]] || fail "the job started again: $(cat "$KEEPER_LOG")"
  kill -0 "$JOB_PID" 2>/dev/null || fail "the job's process $JOB_PID is gone"
}
