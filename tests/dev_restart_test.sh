#!/usr/bin/env bash
# Given `gpufleet dev` with two nodes and a running job, expect Ctrl-C (SIGINT) to stop the job
# with its checkpoint signal and requeue it (preempted -> pending, never failed), and the next
# start on the same data directory with one node to trust no node whose agent has not come back:
# the requeued job runs again on dev-1, and a job that only the stale dev-2 could hold waits
# instead of being placed there.
#
# Usage: dev_restart_test.sh PATH/TO/gpufleet
source "$(dirname "$0")/lib.sh"

GPUFLEET="${1:?usage: dev_restart_test.sh GPUFLEET}"
export GPUFLEET_CONFIG="$WORK/config.yaml"
unset GPUFLEET_SERVER GPUFLEET_TOKEN
cd "$WORK"  # jobs default to the submitter's directory: one their agents allow

PORT="$(free_local_port)"
trap 'dev_stop; rm -rf "$WORK"' EXIT
start_dev() { dev_start "$GPUFLEET" "$WORK/data" "$PORT" --fake-gpus 2xH100 "$@"; }
wait_for() { dev_wait "$@"; }
node_is() {
  "$GPUFLEET" nodes -o json | "$PYTHON" -c '
import json, sys
nodes = {n["name"]: n["state"] for n in json.load(sys.stdin)["nodes"]}
sys.exit(0 if nodes.get(sys.argv[1]) == sys.argv[2] else 1)' "$1" "$2"
}
job() { "$GPUFLEET" status "$1" -o json; }
state_is() { [[ "$(job "$1" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["state"])')" == "$2" ]]; }
history_of() {
  job "$1" | "$PYTHON" -c '
import json, sys
for t in json.load(sys.stdin)["history"]:
    print("%s -> %s: %s" % (t["from"], t["to"], t["reason"]))'
}

# --- Ctrl-C requeues the running job --------------------------------------------------------
start_dev --agents 2
wait_for "the CLI config" test -s "$GPUFLEET_CONFIG"
wait_for "dev-1 up" node_is dev-1 up
wait_for "dev-2 up" node_is dev-2 up
# The job notes its checkpoint signal, as a training script would save a checkpoint.
"$GPUFLEET" run --name trainer --workdir "$WORK" -- \
  sh -c 'trap "echo got-sigterm >> signals.log; exit 143" TERM; echo started; while :; do sleep 0.1; done' \
  >"$WORK/run.out"
JOB="$(sed -n 's/^submitted job \([0-9]*\) .*/\1/p' "$WORK/run.out")"
[[ -n "$JOB" ]] || fail "run printed no job id: $(cat "$WORK/run.out")"
wait_for "job $JOB to run" state_is "$JOB" running

kill -INT "$DEV_PID"
for ((i = 0; i < 600; i++)); do kill -0 "$DEV_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$DEV_PID" 2>/dev/null && fail "gpufleet dev did not stop within a minute of Ctrl-C"
wait "$DEV_PID" || fail "gpufleet dev exited with status $? after Ctrl-C"
DEV_PID=""
grep -q got-sigterm "$WORK/signals.log" 2>/dev/null || fail "the job did not get its checkpoint signal on Ctrl-C"

# --- The next start: one node; dev-2 is stale ------------------------------------------------
start_dev --agents 1
wait_for "the controller" "$GPUFLEET" queue
history_of "$JOB" >"$WORK/history.txt"
if grep -q -- "-> failed" "$WORK/history.txt"; then
  cat "$WORK/history.txt" >&2
  fail "Ctrl-C on dev failed the running job instead of requeueing it"
fi
grep -q "running -> stopping: stopped by its agent on dev-" "$WORK/history.txt" ||
  { cat "$WORK/history.txt" >&2; fail "the stop does not say its agent stopped the job"; }
grep -q "stopping -> preempted" "$WORK/history.txt" || { cat "$WORK/history.txt" >&2; fail "the job was not preempted"; }
grep -q "preempted -> pending: requeued" "$WORK/history.txt" || { cat "$WORK/history.txt" >&2; fail "the job was not requeued"; }

wait_for "dev-1 up" node_is dev-1 up
wait_for "job $JOB to run again" state_is "$JOB" running
# dev-1 now has one GPU free; a 2-GPU job fits only dev-2, whose agent is gone: it must wait, not
# be placed there (it would hang until dev-2 is declared lost).
"$GPUFLEET" run --gpus 2 --name needs-two -- true >"$WORK/two.out"
TWO="$(sed -n 's/^submitted job \([0-9]*\) .*/\1/p' "$WORK/two.out")"
state_is "$TWO" pending || { history_of "$TWO" >&2; fail "a job was placed on dev-2, a node of the earlier run whose agent is gone"; }
"$GPUFLEET" explain "$TWO" >"$WORK/explain.out"
grep -q "can start now:   no" "$WORK/explain.out" || { cat "$WORK/explain.out" >&2; fail "explain says the job can start now"; }

# --- A revoked admin token, replaced at the next start --------------------------------------
# A second admin revokes the first; the data directory's admin.token (and the CLI config dev
# wrote) then opens nothing, and `--new-admin-token` at the next start makes one that does.
"$GPUFLEET" token create --role admin --subject ops -o json >"$WORK/ops.json"
OPS="$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$WORK/ops.json")"
FIRST_ID="$("$GPUFLEET" token list -o json | "$PYTHON" -c '
import json, sys
print([t["id"] for t in json.load(sys.stdin)["tokens"] if t["subject"] == "admin"][0])')"
GPUFLEET_TOKEN="$OPS" "$GPUFLEET" token revoke "$FIRST_ID" >/dev/null || fail "the second admin could not revoke the first"
"$GPUFLEET" queue >/dev/null 2>&1 && fail "the revoked admin token still works"
# A start without the flag says that admin.token opens nothing any more.
dev_stop
start_dev --agents 1
wait_for "the controller with a revoked admin.token" env GPUFLEET_TOKEN="$OPS" "$GPUFLEET" queue
grep -q "admin.token no longer opens the controller as admin" "$WORK/dev.log" ||
  fail "the start did not say that admin.token was revoked"
dev_stop
start_dev --agents 1 --new-admin-token
wait_for "the controller with a new admin token" "$GPUFLEET" queue
GPUFLEET_TOKEN="$OPS" "$GPUFLEET" audit --verb token.create -o jsonl >"$WORK/audit.jsonl"
grep -q -- "--new-admin-token" "$WORK/audit.jsonl" || { cat "$WORK/audit.jsonl" >&2; fail "the audit log does not record the new admin token"; }
# Each token made at a start is recorded like any other: its id as the object, and its expiry.
"$PYTHON" - "$WORK/audit.jsonl" <<'PY' || { cat "$WORK/audit.jsonl" >&2; fail "tokens made at start lack their id or expiry in the audit log"; }
import json, sys
records = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
made = [r for r in records if r.get("source") == "local"]
assert len(made) == 3, made  # the first start's admin and join tokens, and --new-admin-token's
assert all(r["object"].startswith("token ") and "no expiry" in r["reason"] for r in made), made
PY
# Left on the command line, the flag makes no further token while the one there works.
cp "$WORK/data/admin.token" "$WORK/admin.before"
dev_stop
start_dev --agents 1 --new-admin-token
wait_for "the controller again" "$GPUFLEET" queue
cmp -s "$WORK/admin.before" "$WORK/data/admin.token" || fail "--new-admin-token replaced an admin token that still worked"
grep -q "still opens the controller as admin; no new token made" "$WORK/dev.log" ||
  fail "the start did not say that --new-admin-token made no token"
echo PASS
