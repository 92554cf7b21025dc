#!/usr/bin/env bash
# Given a one-machine cluster (`gpufleet dev`, one agent with two fake H100s), expect the client
# commands to work as a user and a script would use them: a bad job file or client config is
# refused before any network with file:line and the field (exit 2); `run` jobs succeed or fail
# with their exit code shown by `status`; `logs` prints their output; the -o json listings parse
# and carry their fields; `cancel` stops a running job; `explain` says when a job can never fit;
# a wrong token and a stopped controller exit 3 with a message that says what to do; `pool` on a
# controller without a pool exits 1 saying how to start one.
#
# Usage: cli_client_test.sh PATH/TO/gpufleet
source "$(dirname "$0")/lib.sh"

GPUFLEET="${1:?usage: cli_client_test.sh GPUFLEET}"
export GPUFLEET_CONFIG="$WORK/config.yaml"
unset GPUFLEET_SERVER GPUFLEET_TOKEN

# A free port: bind port 0 and read what the kernel picked.
PORT="$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
URL="http://127.0.0.1:$PORT"

DEV_PID=""
stop_dev() {
  if [[ -n "$DEV_PID" ]]; then
    kill "$DEV_PID" 2>/dev/null || true
    wait "$DEV_PID" 2>/dev/null || true
    DEV_PID=""
  fi
}
VAR_TMP_DIR=""  # the agent's folder for jobs' working directories, when it is outside $WORK
trap 'stop_dev; rm -rf "$WORK" ${VAR_TMP_DIR:+"$VAR_TMP_DIR"}' EXIT

# The data lives below a private folder, as under a home such as /root (mode 0700).
mkdir -m 700 "$WORK/private"
DATA="$WORK/private/data"
"$GPUFLEET" dev --data-dir "$DATA" --port "$PORT" --agents 1 --fake-gpus 2xH100 \
  --config "$GPUFLEET_CONFIG" >"$WORK/dev.log" 2>&1 &
DEV_PID=$!

# health_ok: the controller answers /v1/health.
health_ok() { curl -sf -o /dev/null --max-time 2 "$URL/v1/health"; }
# wait_for WHAT CMD...: polls CMD (bounded: 300 tries, 0.1 s apart) until it succeeds.
wait_for() {
  local what="$1" i
  shift
  for ((i = 0; i < 300; i++)); do
    if "$@"; then return 0; fi
    kill -0 "$DEV_PID" 2>/dev/null || { cat "$WORK/dev.log" >&2; fail "gpufleet dev exited while waiting for $what"; }
    sleep 0.1
  done
  cat "$WORK/dev.log" >&2
  fail "timed out waiting for $what"
}
wait_for "the controller's /v1/health" health_ok
# config_written: dev wrote the CLI config (server and admin token).
config_written() { [[ -s "$GPUFLEET_CONFIG" ]] && grep -q '^token: ' "$GPUFLEET_CONFIG"; }
wait_for "the CLI config" config_written
# node_up: the agent registered its node.
node_up() { "$GPUFLEET" nodes -o json 2>/dev/null | grep '"state": "up"' >/dev/null; }
wait_for "the agent's node" node_up

# job_state ID: the job's state, from `status -o json`.
job_state() {
  "$GPUFLEET" status "$1" -o json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["state"])'
}
# state_is ID STATE: true once the job is in STATE.
state_is() { [[ "$(job_state "$1")" == "$2" ]]; }
# submitted_id PREFIX: the job id from a "submitted job N (name)" line.
submitted_id() {
  sed -n 's/^submitted job \([0-9]*\) .*/\1/p' "$1.out" | head -1
}

# --- submit: a bad field is refused locally, naming file:line and the field ------------------
cat >"$WORK/bad.yaml" <<'YAML'
name: typo
resources:
  gpus: 1
  gpu_typo: H100
run: echo hi
YAML
run "$WORK/bad" "$GPUFLEET" submit "$WORK/bad.yaml"
expect_rc "$WORK/bad" 2 "submit of a job file with an unknown field"
expect_contains "$WORK/bad.err" "bad.yaml:4" "the error names file:line"
expect_contains "$WORK/bad.err" "gpu_typo" "the error names the field"

# --- a client config with a bad value is refused, naming file:line:column and the key ----------
printf 'token: x\nserver:\n  host: 127.0.0.1\n' >"$WORK/cfg2.yaml"
GPUFLEET_CONFIG="$WORK/cfg2.yaml" run "$WORK/cfg2" "$GPUFLEET" nodes
expect_rc "$WORK/cfg2" 2 "a client config whose server is a mapping"
expect_contains "$WORK/cfg2.err" "cfg2.yaml:3:3: server: must be a single value, got a mapping" \
  "the error points at the value"

# A config file named on purpose and missing is an error, not a quiet fall back to the default
# address; a bad URL is blamed on where it came from.
GPUFLEET_CONFIG="$WORK/no-such.yaml" run "$WORK/cfg3" "$GPUFLEET" nodes
expect_rc "$WORK/cfg3" 2 "GPUFLEET_CONFIG naming a missing file"
expect_contains "$WORK/cfg3.err" "GPUFLEET_CONFIG names $WORK/no-such.yaml, which does not exist" "the missing file is named"
run "$WORK/badurl" "$GPUFLEET" nodes --server 'not a url'
expect_rc "$WORK/badurl" 2 "--server 'not a url'"
expect_contains "$WORK/badurl.err" "(from --server)" "the bad URL is blamed on the flag, not the config file"
# An empty token (a script's unset variable) is refused, not replaced by the config file's admin
# token.
run "$WORK/emptytok" "$GPUFLEET" queue --token ''
expect_rc "$WORK/emptytok" 2 "--token ''"
expect_contains "$WORK/emptytok.err" "an empty token" "the empty --token is named"
GPUFLEET_TOKEN='' run "$WORK/emptyenv" "$GPUFLEET" queue
expect_rc "$WORK/emptyenv" 2 "GPUFLEET_TOKEN set but empty"
expect_contains "$WORK/emptyenv.err" "GPUFLEET_TOKEN is set but empty" "the empty variable is named"

# A good file submits; the same request id twice creates the jobs once.
cat >"$WORK/ok.yaml" <<'YAML'
name: ok
resources:
  gpus: 1
run: echo from-the-file
YAML
run "$WORK/sub1" "$GPUFLEET" submit "$WORK/ok.yaml" --request-id cli-test-1
expect_rc "$WORK/sub1" 0 "submit of a valid job file"
expect_contains "$WORK/sub1.out" "submitted job" "submit prints the job id"
FILE_JOB="$(submitted_id "$WORK/sub1")"
run "$WORK/sub2" "$GPUFLEET" submit "$WORK/ok.yaml" --request-id cli-test-1
expect_rc "$WORK/sub2" 0 "a repeated submit with the same request id"
expect_contains "$WORK/sub2.out" "already submitted (request cli-test-1) job $FILE_JOB (ok)" \
  "a repeated request id answers with the job it made"

# --- run: a job that succeeds; status and logs ------------------------------------------------
run "$WORK/hello" "$GPUFLEET" run -- sh -c 'echo hello; exit 0'
expect_rc "$WORK/hello" 0 "run -- sh -c 'echo hello'"
HELLO="$(submitted_id "$WORK/hello")"
[[ -n "$HELLO" ]] || { show "$WORK/hello"; fail "run did not print 'submitted job N'"; }
wait_for "job $HELLO to succeed" state_is "$HELLO" succeeded
run "$WORK/hstatus" "$GPUFLEET" status "$HELLO"
expect_rc "$WORK/hstatus" 0 "status of a finished job"
expect_contains "$WORK/hstatus.out" "state:      succeeded" "status shows the job succeeded"
expect_contains "$WORK/hstatus.out" "dev-1" "status names the node it ran on"
expect_contains "$WORK/hstatus.out" "process started" "status shows the transition history"
run "$WORK/hlogs" "$GPUFLEET" logs "$HELLO"
expect_rc "$WORK/hlogs" 0 "logs of a finished job"
expect_contains "$WORK/hlogs.out" "hello" "logs prints the job's output"
run "$WORK/hlogsf" "$GPUFLEET" logs -f "$HELLO"
expect_rc "$WORK/hlogsf" 0 "logs -f of a job that succeeded"
expect_contains "$WORK/hlogsf.err" "job $HELLO succeeded" "logs -f says how the job ended"

# run -f streams the output and exits with the job's outcome.
run "$WORK/follow" "$GPUFLEET" run -f -- sh -c 'echo followed-output'
expect_rc "$WORK/follow" 0 "run -f of a succeeding job"
expect_contains "$WORK/follow.out" "followed-output" "run -f streams the logs"

# A job sent to the API with no working directory runs in its agent's (<agent>/work/job-N); when
# dev runs as root the job runs as nobody, who must be let through every folder above it.
TOKEN_NOW="$(sed -n 's/^token: //p' "$GPUFLEET_CONFIG")"
NOWD="$(curl -sS -X POST "$URL/v1/jobs" -H "Authorization: Bearer $TOKEN_NOW" -H 'Content-Type: application/json' \
  -d '{"request_id": "no-workdir-1", "job": {"name": "nowd", "resources": {"gpus": 1}, "run": "pwd"}}' |
  "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["id"])')" || fail "POST /v1/jobs without a workdir"
wait_for "job $NOWD (no workdir) to end" bash -c "\"$GPUFLEET\" status $NOWD -o json | grep -q '\"state\": \"\(succeeded\|failed\)\"'"
state_is "$NOWD" succeeded || { "$GPUFLEET" status "$NOWD" >&2; ls -ld "$WORK/private" "$DATA" "$DATA/agents" >&2; fail "a job with no workdir"; }
run "$WORK/nowd" "$GPUFLEET" logs "$NOWD"
NOWD_DIR="$(head -1 "$WORK/nowd.out")"
if [[ $EUID == 0 ]]; then
  # Jobs run as nobody, who cannot pass through $WORK/private: the agent said so and put the
  # jobs' folders under /var/tmp.
  [[ "$NOWD_DIR" == /var/tmp/gpufleet-dev-1-*/work/job-$NOWD ]] || { show "$WORK/nowd"; fail "the job ran in $NOWD_DIR"; }
  VAR_TMP_DIR="${NOWD_DIR%/work/job-*}"
  expect_contains "$WORK/dev.log" "$WORK/private does not let other users through (mode 0700)" "dev says why"
else
  [[ "$NOWD_DIR" == "$DATA/agents/dev-1/work/job-$NOWD" ]] || { show "$WORK/nowd"; fail "the job ran in $NOWD_DIR"; }
fi

# --- a failing job ----------------------------------------------------------------------------
run "$WORK/bad_job" "$GPUFLEET" run -- sh -c 'echo failing >&2; exit 7'
expect_rc "$WORK/bad_job" 0 "run of a job that will fail (the submit itself succeeds)"
FAILING="$(submitted_id "$WORK/bad_job")"
wait_for "job $FAILING to fail" state_is "$FAILING" failed
run "$WORK/fstatus" "$GPUFLEET" status "$FAILING"
expect_contains "$WORK/fstatus.out" "state:      failed" "status shows the job failed"
expect_contains "$WORK/fstatus.out" "exit code:  7" "status shows the exit code"
run "$WORK/ffollow" "$GPUFLEET" run -f -- sh -c 'exit 5'
expect_rc "$WORK/ffollow" 1 "run -f of a failing job exits 1"

# logs -f follows a job across a restart: a '--- attempt N ---' line, then the new run's output.
run "$WORK/restart" "$GPUFLEET" run --max-restarts 1 -f -- sh -c 'echo "run $GPUFLEET_RESTART_COUNT"; exit 1'
expect_rc "$WORK/restart" 1 "run -f of a job that fails twice"
expect_contains "$WORK/restart.out" "run 0" "the first attempt's output"
expect_contains "$WORK/restart.out" "--- attempt 2 ---" "the restart is marked"
expect_contains "$WORK/restart.out" "run 1" "the second attempt's output"
RESTARTED="$(submitted_id "$WORK/restart")"
run "$WORK/first" "$GPUFLEET" logs --attempt 1 "$RESTARTED"
expect_contains "$WORK/first.out" "run 0" "logs --attempt 1 shows the first run"
if grep -qF "run 1" "$WORK/first.out"; then fail "logs --attempt 1 shows the second run's output"; fi
# An attempt or a part the job never had is an error, not an empty log.
run "$WORK/noattempt" "$GPUFLEET" logs --attempt 5 "$RESTARTED"
expect_rc "$WORK/noattempt" 2 "logs --attempt 5 of a job of two attempts"
expect_contains "$WORK/noattempt.err" "it has no attempt 5" "logs --attempt 5 of a job of two attempts"
run "$WORK/noattemptf" "$GPUFLEET" logs -f --attempt 5 "$RESTARTED"
expect_rc "$WORK/noattemptf" 2 "logs -f --attempt 5 of a job that ended after two attempts"
expect_contains "$WORK/noattemptf.err" "it has no attempt 5" "logs -f --attempt 5 of an ended job"
run "$WORK/nopart" "$GPUFLEET" logs --part 1 "$RESTARTED"
expect_rc "$WORK/nopart" 2 "logs --part 1 of a job of one part"
expect_contains "$WORK/nopart.err" "there is no part 1" "logs --part 1 of a job of one part"

# Following prints every attempt, however quickly the job restarts: run -f from its submit, and
# logs -f of a job whose attempts all went by before anyone looked (it used to show only the last).
run "$WORK/fast" "$GPUFLEET" run --max-restarts 3 -f -- sh -c 'echo "fast $GPUFLEET_RESTART_COUNT"; exit 1'
expect_rc "$WORK/fast" 1 "run -f of a job that fails four times in a row"
for n in 0 1 2 3; do expect_contains "$WORK/fast.out" "fast $n" "run -f prints attempt $((n + 1))"; done
FAST="$(submitted_id "$WORK/fast")"
run "$WORK/fast-logs" "$GPUFLEET" logs -f "$FAST"
expect_rc "$WORK/fast-logs" 1 "logs -f of a job that failed: the job's outcome, as run -f"
expect_contains "$WORK/fast-logs.err" "job $FAST failed" "logs -f says how the job ended"
for n in 0 1 2 3; do expect_contains "$WORK/fast-logs.out" "fast $n" "logs -f prints attempt $((n + 1))"; done
for n in 2 3 4; do expect_contains "$WORK/fast-logs.out" "--- attempt $n ---" "logs -f marks attempt $n"; done

# --- cancel a running job ---------------------------------------------------------------------
run "$WORK/sleep" "$GPUFLEET" run --name sleeper -- sleep 1000
SLEEPER="$(submitted_id "$WORK/sleep")"
wait_for "job $SLEEPER to run" state_is "$SLEEPER" running
run "$WORK/cancel" "$GPUFLEET" cancel "$SLEEPER"
expect_rc "$WORK/cancel" 0 "cancel of a running job"
wait_for "job $SLEEPER to be cancelled" state_is "$SLEEPER" cancelled
run "$WORK/cancel_again" "$GPUFLEET" cancel "$SLEEPER"
expect_rc "$WORK/cancel_again" 1 "cancel of a job that already ended"

# --- cancel an array's tasks at once ----------------------------------------------------------
# 30 sleepers of one GPU on two GPUs: two start, 28 wait. A filter selects the 28 (--dry-run) and
# cancels them; a range then stops the two running and says the others had ended (exit 1); a
# second says all had ended; a bad range is refused before any request.
cat >"$WORK/sweep.yaml" <<'YAML'
name: sweep-{{seed}}
resources: {gpus: 1}
run: sleep 1000
array:
  seed: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29]
YAML
run "$WORK/sweep" "$GPUFLEET" submit "$WORK/sweep.yaml"
expect_rc "$WORK/sweep" 0 "submit of a 30-task array"
SWEEP_FIRST="$(sed -n 's/^submitted 30 jobs: \([0-9]*\) (sweep-0) .. \([0-9]*\) (sweep-29)$/\1/p' "$WORK/sweep.out")"
SWEEP_LAST="$(sed -n 's/^submitted 30 jobs: \([0-9]*\) (sweep-0) .. \([0-9]*\) (sweep-29)$/\2/p' "$WORK/sweep.out")"
[[ -n "$SWEEP_FIRST" && -n "$SWEEP_LAST" ]] || { show "$WORK/sweep"; fail "submit did not print the array's first and last ids"; }
expect_contains "$WORK/sweep.out" "('gpufleet cancel $SWEEP_FIRST-$SWEEP_LAST' cancels them all)" "submit of an array says how to cancel it"
wait_for "two of the sweep's tasks to run" state_is "$((SWEEP_FIRST + 1))" running
run "$WORK/badrange" "$GPUFLEET" cancel "$SWEEP_LAST-$SWEEP_FIRST"
expect_rc "$WORK/badrange" 2 "cancel of a range whose first id is above its last"
expect_contains "$WORK/badrange.err" "a range of jobs is FIRST-LAST with 1 <= FIRST <= LAST" "cancel says what a range is"
run "$WORK/bothways" "$GPUFLEET" cancel "$SWEEP_FIRST" --state pending
expect_rc "$WORK/bothways" 2 "cancel naming ids and filters"
run "$WORK/badstate" "$GPUFLEET" cancel --state succeeded
expect_rc "$WORK/badstate" 2 "cancel --state of a state no unfinished job has"
run "$WORK/blankstate" "$GPUFLEET" cancel --state ' , '
expect_rc "$WORK/blankstate" 2 "cancel --state naming no state"
run "$WORK/dryrun" "$GPUFLEET" cancel --state pending --name 'sweep-*' --dry-run
expect_rc "$WORK/dryrun" 0 "cancel --dry-run"
expect_contains "$WORK/dryrun.out" "28 job(s) match: jobs $((SWEEP_FIRST + 2))-$SWEEP_LAST (28)" "cancel --dry-run lists the waiting tasks"
state_is "$((SWEEP_FIRST + 2))" pending || fail "cancel --dry-run cancelled a job"
run "$WORK/dryjson" "$GPUFLEET" cancel --state pending --name 'sweep-*' --dry-run -o json
expect_rc "$WORK/dryjson" 0 "cancel --dry-run -o json"
"$PYTHON" - "$WORK/dryjson.out" <<'PY' || { show "$WORK/dryjson"; fail "cancel --dry-run -o json: expected 28 selected, all of one team"; }
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["selected"]) == 28 and sum(d["teams"].values()) == 28 and len(d["teams"]) == 1, d
PY
run "$WORK/cancelwaiting" "$GPUFLEET" cancel --state pending --name 'sweep-*'
expect_rc "$WORK/cancelwaiting" 0 "cancel of the sweep's waiting tasks by filter"
expect_contains "$WORK/cancelwaiting.out" "cancel requested for 28 jobs: 28 were waiting (cancelled now), 0 stopping (they end cancelled)" \
  "cancel by filter says how many jobs waited"
state_is "$SWEEP_FIRST" running || fail "cancel --state pending stopped a running task"
run "$WORK/cancelsweep" "$GPUFLEET" cancel "$SWEEP_FIRST-$SWEEP_LAST"
expect_rc "$WORK/cancelsweep" 1 "cancel of the sweep's range, most of it ended"
expect_contains "$WORK/cancelsweep.out" "cancel requested for job $((SWEEP_FIRST + 1))" "cancel of a range names the running tasks it stops"
expect_contains "$WORK/cancelsweep.err" "and 8 more jobs had already ended" "cancel of a range counts the jobs that had ended"
wait_for "the sweep's first task to be cancelled" state_is "$SWEEP_FIRST" cancelled
wait_for "the sweep's second task to be cancelled" state_is "$((SWEEP_FIRST + 1))" cancelled
run "$WORK/cancelsweep2" "$GPUFLEET" cancel "$SWEEP_FIRST-$SWEEP_LAST" -o json
expect_rc "$WORK/cancelsweep2" 1 "cancel of a range whose jobs had all ended"
"$PYTHON" - "$WORK/cancelsweep2.out" "$SWEEP_FIRST" <<'PY' || fail "cancel -o json does not list the 30 ended jobs"
import json, sys
r = json.load(open(sys.argv[1]))
first = int(sys.argv[2])
assert r["cancel_requested"] is False and r["cancelled"] == [] and r["stopping"] == [], r
assert [e["id"] for e in r["ended"]] == list(range(first, first + 30)), r
assert all(e["state"] == "cancelled" for e in r["ended"]), r
PY
run "$WORK/cancelsweep3" "$GPUFLEET" cancel "$SWEEP_FIRST" "$SWEEP_LAST"
expect_rc "$WORK/cancelsweep3" 1 "cancel of two jobs that had ended"
expect_contains "$WORK/cancelsweep3.err" "job $SWEEP_LAST already cancelled" "cancel names a job that had ended"

run "$WORK/missing" "$GPUFLEET" status 99999
expect_rc "$WORK/missing" 1 "status of a job that does not exist"
expect_contains "$WORK/missing.err" "does not exist" "status says the job does not exist"

# --- explain: more GPUs than the cluster has --------------------------------------------------
run "$WORK/big" "$GPUFLEET" run --gpus 4 --gpu-type H100 --name too-big -- true
BIG="$(submitted_id "$WORK/big")"
# logs of a job that has not started: said so, not an empty success.
run "$WORK/biglogs" "$GPUFLEET" logs "$BIG"
expect_rc "$WORK/biglogs" 0 "logs of a job that has not started"
expect_contains "$WORK/biglogs.err" "job $BIG has not started yet: no output" "logs says the job has not started"
run "$WORK/explain" "$GPUFLEET" explain "$BIG"
expect_rc "$WORK/explain" 0 "explain of a job that can never fit"
expect_contains "$WORK/explain.out" "can ever run:    no" "explain says the job can never run here"
expect_contains "$WORK/explain.out" "infeasible" "explain gives the scheduler's reason"
run "$WORK/explain_json" "$GPUFLEET" explain "$BIG" -o json
"$PYTHON" -c 'import json,sys; e=json.load(sys.stdin); assert e["ever"] is False and e["reasons"], e' \
  <"$WORK/explain_json.out" || fail "explain -o json does not say ever=false with reasons"

# --- JSON listings ----------------------------------------------------------------------------
run "$WORK/queue" "$GPUFLEET" queue -o json
expect_rc "$WORK/queue" 0 "queue -o json"
"$PYTHON" - "$WORK/queue.out" "$BIG" <<'PY' || fail "queue -o json lacks the pending job or its fields"
import json, sys
jobs = json.load(open(sys.argv[1]))["jobs"]
big = [j for j in jobs if j["id"] == int(sys.argv[2])]
assert big, jobs
for k in ("id", "name", "team", "state", "gpus", "nodes", "position", "submitted_ms", "reason"):
    assert k in big[0], k
assert big[0]["state"] == "pending" and big[0]["position"] >= 1, big[0]
# Its reason is why it waits (it can never run here), not "submitted".
assert "can never run on this cluster" in big[0]["reason"], big[0]
PY
# A queue longer than asked for: the table says how many are left out and how to see them, the
# JSON carries the total and where to go on; --all reads every page.
run "$WORK/big2" "$GPUFLEET" run --gpus 4 --gpu-type H100 --name too-big-2 -- true
BIG2="$(submitted_id "$WORK/big2")"
run "$WORK/queue1" "$GPUFLEET" queue --limit 1
expect_rc "$WORK/queue1" 0 "queue --limit 1"
expect_contains "$WORK/queue1.out" "(1 of 2 jobs shown; --all shows every one" "queue --limit 1 says more jobs wait"
if grep -q too-big-2 "$WORK/queue1.out"; then fail "queue --limit 1 shows the second job"; fi
run "$WORK/queue1j" "$GPUFLEET" queue --limit 1 -o json
"$PYTHON" -c 'import json,sys; q=json.load(sys.stdin); assert len(q["jobs"]) == 1 and q["total"] == 2 and q["next_cursor"] == 1, q' \
  <"$WORK/queue1j.out" || fail "queue --limit 1 -o json lacks the total or the cursor"
run "$WORK/queueall" "$GPUFLEET" queue --all -o json
"$PYTHON" - "$WORK/queueall.out" "$BIG" "$BIG2" <<'PY' || fail "queue --all -o json does not list both pending jobs"
import json, sys
q = json.load(open(sys.argv[1]))
ids = [j["id"] for j in q["jobs"]]
assert ids == [int(sys.argv[2]), int(sys.argv[3])] and q["total"] == 2 and "next_cursor" not in q, q
PY
run "$WORK/queueboth" "$GPUFLEET" queue --all --limit 5
expect_rc "$WORK/queueboth" 2 "queue --all with --limit"
run "$WORK/cancelbig2" "$GPUFLEET" cancel "$BIG2"
expect_rc "$WORK/cancelbig2" 0 "cancel of the second pending job"
run "$WORK/big2logs" "$GPUFLEET" logs "$BIG2"
expect_contains "$WORK/big2logs.err" "job $BIG2 ended without starting: no output" "logs of a job cancelled before it started"
run "$WORK/big2follow" "$GPUFLEET" logs -f "$BIG2"
expect_contains "$WORK/big2follow.err" "job $BIG2 ended without starting (cancelled): no output" \
  "logs -f of a job cancelled before it started"

# A node name with characters no node has is refused before it reaches a route it could bend
# ('dev-1/undrain?' would otherwise undrain dev-1).
run "$WORK/badnode" "$GPUFLEET" drain 'dev-1/undrain?'
expect_rc "$WORK/badnode" 2 "drain of a name no node can have"
expect_contains "$WORK/badnode.err" "is not a node name" "drain says the name is not a node name"

# alerts: an unknown rule name is a typo, said with the rules; -o json says whether rules are on.
run "$WORK/alertsname" "$GPUFLEET" alerts --name GpuHott
expect_rc "$WORK/alertsname" 2 "alerts --name with an unknown rule"
expect_contains "$WORK/alertsname.err" "no alert rule is named 'GpuHott'; the rules: GpuAllocatedIdle, GpuHot," \
  "alerts --name lists the rules"
run "$WORK/alertsjson" "$GPUFLEET" alerts -o json
"$PYTHON" -c 'import json,sys; a=json.load(sys.stdin); assert a["enabled"] is True and isinstance(a["alerts"], list), a' \
  <"$WORK/alertsjson.out" || fail "alerts -o json lacks enabled"

run "$WORK/nodes" "$GPUFLEET" nodes -o json
expect_rc "$WORK/nodes" 0 "nodes -o json"
"$PYTHON" - "$WORK/nodes.out" <<'PY' || fail "nodes -o json lacks the dev node or its fields"
import json, sys
nodes = json.load(open(sys.argv[1]))["nodes"]
assert len(nodes) == 1, nodes
n = nodes[0]
assert n["name"] == "dev-1" and n["gpus"] == 2 and n["gpu_model"] == "H100", n
for k in ("state", "gpus_used", "telemetry", "jobs", "last_heartbeat_ms"):
    assert k in n, k
PY
run "$WORK/history" "$GPUFLEET" history -o json --limit 100
expect_rc "$WORK/history" 0 "history -o json"
"$PYTHON" - "$WORK/history.out" "$HELLO" "$FAILING" "$SLEEPER" <<'PY' || fail "history -o json is wrong"
import json, sys
jobs = json.load(open(sys.argv[1]))["jobs"]
by_id = {j["id"]: j for j in jobs}
ids = [j["id"] for j in jobs]
assert ids == sorted(ids, reverse=True), "not newest first"
hello, failing, sleeper = (int(a) for a in sys.argv[2:5])
assert by_id[hello]["state"] == "succeeded", by_id[hello]
assert by_id[failing]["state"] == "failed" and by_id[failing]["exit_code"] == 7, by_id[failing]
assert by_id[sleeper]["state"] == "cancelled", by_id[sleeper]
for j in jobs:
    assert "runtime_ms" in j and "submitted_ms" in j, j
PY
# A state filter with a limit: the newest job in that state, however many newer jobs are not.
run "$WORK/history-failed" "$GPUFLEET" history --state failed --limit 1 -o json
expect_rc "$WORK/history-failed" 0 "history --state failed --limit 1"
"$PYTHON" - "$WORK/history-failed.out" <<'PY' || fail "history --state failed --limit 1 is not the newest failed job"
import json, sys
jobs = json.load(open(sys.argv[1]))["jobs"]
assert len(jobs) == 1 and jobs[0]["state"] == "failed", jobs
PY
# The cluster's own history as a trace: the jobs that ran, oldest first, in the JSON Lines format
# the simulator reads back.
# A CPU-only job that ran: a trace is of GPU work, so the export leaves it out and says so (the
# simulator refuses a job of 0 GPUs).
run "$WORK/cpuonly" "$GPUFLEET" run --gpus 0 -f --name cpu-only -- echo cpu
expect_rc "$WORK/cpuonly" 0 "a CPU-only job"
CPUONLY="$(sed -n 's/^submitted job \([0-9]*\) .*/\1/p' "$WORK/cpuonly.err" "$WORK/cpuonly.out" | head -1)"
[[ -n "$CPUONLY" ]] || { show "$WORK/cpuonly"; fail "run -f did not say which job it submitted"; }
run "$WORK/history-jsonl" "$GPUFLEET" history -o jsonl --limit 100
expect_rc "$WORK/history-jsonl" 0 "history -o jsonl"
expect_contains "$WORK/history-jsonl.err" "left out 1 finished job(s) that held no GPU" "history -o jsonl counts the CPU-only job"
if grep -q "\"id\":\"$CPUONLY\"" "$WORK/history-jsonl.out"; then fail "history -o jsonl exports the CPU-only job"; fi
"$PYTHON" - "$WORK/history-jsonl.out" "$HELLO" "$FAILING" <<'PY' || fail "history -o jsonl is wrong"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ids = [int(r["id"]) for r in rows]
assert ids == sorted(ids), "not oldest first"
hello, failing = sys.argv[2], sys.argv[3]
by_id = {r["id"]: r for r in rows}
assert hello in by_id and failing in by_id, rows
for r in rows:
    assert r["work"] > 0 and r["submit"] > 1.6e9 and r.get("gpus", r.get("gpus_per_node", 0)) >= 1, r
PY
run "$WORK/history-sim" "$GPUFLEET" sim --trace "$WORK/history-jsonl.out" --format jsonl --cluster-gpus 8 -o json
expect_rc "$WORK/history-sim" 0 "gpufleet sim reads gpufleet history -o jsonl"
expect_contains "$WORK/history-sim.out" '"finished"' "the simulator replays the exported history"

for listing in queue nodes history; do
  run "$WORK/$listing-table" "$GPUFLEET" "$listing"
  expect_rc "$WORK/$listing-table" 0 "gpufleet $listing (table)"
  if awk 'length > 100 { bad = 1 } END { exit !bad }' "$WORK/$listing-table.out"; then
    fail "gpufleet $listing prints lines over 100 columns"
  fi
done
expect_contains "$WORK/queue-table.out" "too-big" "the queue table lists the pending job"

# Text a user wrote (here a command with an escape sequence) reaches another's terminal written
# out, never as the raw control bytes that would move the cursor or erase lines.
printf 'name: esc\nresources: {gpus: 0}\nrun: "echo \\e[2K\\e[1Ahidden"\n' >"$WORK/esc.yaml"
run "$WORK/esc" "$GPUFLEET" submit "$WORK/esc.yaml"
ESC_JOB="$(submitted_id "$WORK/esc")"
[[ -n "$ESC_JOB" ]] || { show "$WORK/esc"; fail "submit of the escape job"; }
run "$WORK/escstatus" "$GPUFLEET" status "$ESC_JOB"
expect_rc "$WORK/escstatus" 0 "status of the escape job"
expect_contains "$WORK/escstatus.out" 'echo \x1b[2K\x1b[1Ahidden' "status writes the escape sequence out"
if LC_ALL=C grep -q $'\x1b' "$WORK/escstatus.out"; then fail "status printed a raw escape byte"; fi

# --- pool: a controller without a pool says so (exit 1, like other "not found" answers) -------
run "$WORK/nopool" "$GPUFLEET" pool
expect_rc "$WORK/nopool" 1 "gpufleet pool on a controller without a pool"
expect_contains "$WORK/nopool.err" "gpufleet pool: this controller has no pool (start it with --pool FILE" \
  "gpufleet pool says there is no pool and how to get one"

# --- bad token, bad usage, no server ----------------------------------------------------------
run "$WORK/badtoken" "$GPUFLEET" queue --token gf_user_not-a-real-token
expect_rc "$WORK/badtoken" 3 "a wrong token"
expect_contains "$WORK/badtoken.err" "the token was refused" "a wrong token says so"
run "$WORK/badjob" "$GPUFLEET" status not-a-number
expect_rc "$WORK/badjob" 2 "status of a malformed job id"
run "$WORK/badflag" "$GPUFLEET" queue -o yaml
expect_rc "$WORK/badflag" 2 "an unknown output format"
# Logs streamed as text cannot go out as JSON: refused before anything is submitted.
run "$WORK/runjsonf" "$GPUFLEET" run -o json -f --name never-submitted -- true
expect_rc "$WORK/runjsonf" 2 "run -o json -f"
expect_contains "$WORK/runjsonf.err" "gpufleet logs -f ID" "run -o json -f says how to get both"
run "$WORK/nosub" "$GPUFLEET" history -o json
if grep -q never-submitted "$WORK/nosub.out"; then fail "run -o json -f submitted a job"; fi

# Listings with nothing to show say so, not a header alone.
run "$WORK/costnone" "$GPUFLEET" cost --team nosuch
expect_rc "$WORK/costnone" 0 "cost --team nosuch"
expect_contains "$WORK/costnone.out" "team nosuch has no costs or budget" "cost of a team with nothing"
run "$WORK/auditnone" "$GPUFLEET" audit --verb pool.rent
expect_rc "$WORK/auditnone" 0 "audit --verb pool.rent"
expect_contains "$WORK/auditnone.out" "no audit records match" "audit with no match"
# A verb no record can carry is an error that names the closest, not "no match".
run "$WORK/audittypo" "$GPUFLEET" audit --verb job.sumbit
if [[ $RC == 0 ]]; then fail "audit --verb job.sumbit succeeded"; fi
expect_contains "$WORK/audittypo.err" "unknown audit verb 'job.sumbit' (closest: job.submit)" "audit with a typo in the verb"

# A budget set and then removed: the removal says so.
run "$WORK/budgetset" "$GPUFLEET" budget vision --hard 100
expect_rc "$WORK/budgetset" 0 "budget vision --hard 100"
# --new-period starts it again from now by the controller's clock (this machine's was sent, and a
# clock a minute ahead was refused as a start in the future).
run "$WORK/budgetnew" "$GPUFLEET" budget vision --hard 100 --new-period
expect_rc "$WORK/budgetnew" 0 "budget vision --hard 100 --new-period"
"$PYTHON" - "$WORK/budgetnew.out" <<'PY' || fail "budget --new-period should count from about now: $(cat "$WORK/budgetnew.out")"
import datetime, re, sys
m = re.search(r"counting from (\S+?)(\.\d+)?Z", open(sys.argv[1]).read())
t = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
assert abs((datetime.datetime.now(datetime.timezone.utc) - t).total_seconds()) < 300, t
PY
# cost says which period SPENT covers: a monthly budget's from the first of this month (UTC) until
# the first of the next, when it starts again from $0.
run "$WORK/budgetmonth" "$GPUFLEET" budget vision --hard 100 --period monthly
expect_rc "$WORK/budgetmonth" 0 "budget vision --hard 100 --period monthly"
run "$WORK/costperiod" "$GPUFLEET" cost --team vision
expect_rc "$WORK/costperiod" 0 "cost --team vision"
"$PYTHON" - "$WORK/costperiod.out" <<'PY' || fail "cost should say the monthly period SPENT covers: $(cat "$WORK/costperiod.out")"
import datetime, re, sys
m = re.search(r"^vision: SPENT since (\S+)Z \(monthly budget; starts again from \$0 at (\S+)Z\)$", open(sys.argv[1]).read(), re.M)
now = datetime.datetime.now(datetime.timezone.utc)
first = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
nxt = (first + datetime.timedelta(days=32)).replace(day=1)
assert m and m.group(1) == first.strftime("%Y-%m-%dT%H:%M:%S") and m.group(2) == nxt.strftime("%Y-%m-%dT%H:%M:%S"), m
PY
# A team's name alone changes nothing (it removed the budget); --clear removes it.
run "$WORK/budgetlook" "$GPUFLEET" budget vision
expect_rc "$WORK/budgetlook" 2 "budget vision (no limits, no --clear)"
expect_contains "$WORK/budgetlook.err" "or --clear to remove the budget; 'gpufleet cost --team vision' shows it" \
  "budget without limits says what to give"
run "$WORK/budgetstill" "$GPUFLEET" cost --team vision
expect_contains "$WORK/budgetstill.out" "vision: SPENT since" "the budget is still there after 'budget vision'"
run "$WORK/budgetgone" "$GPUFLEET" budget vision --clear
expect_rc "$WORK/budgetgone" 0 "budget vision --clear"
expect_contains "$WORK/budgetgone.out" "team vision: budget removed" "the removal says so"

# A finished job with no log here (it wrote nothing) is said so, not printed as nothing at all.
run "$WORK/quiet" "$GPUFLEET" run --gpus 0 -f --name quiet -- true
QUIET="$(sed -n 's/^submitted job \([0-9]*\) .*/\1/p' "$WORK/quiet.err" "$WORK/quiet.out" | head -1)"
run "$WORK/quietlogs" "$GPUFLEET" logs "$QUIET"
expect_rc "$WORK/quietlogs" 0 "logs of a job that wrote nothing"
expect_contains "$WORK/quietlogs.err" "has no log on this controller: it wrote no output, or" "logs explains an absent log"

stop_dev
run "$WORK/down" "$GPUFLEET" queue
expect_rc "$WORK/down" 3 "the controller is down"
expect_contains "$WORK/down.err" "cannot reach the controller at $URL" "the down message names the server"
expect_contains "$WORK/down.err" "gpufleet dev" "the down message gives the hint"

echo PASS
