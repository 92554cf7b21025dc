#!/usr/bin/env bash
# Given `gpufleet dev` with one drained node and a 40-task array (stored once, as one row, by the
# SQLite store; the tasks wait for the node), expect a kill -9 of the controller to lose nothing:
# the next start lists the 40 tasks pending, each with its own name, command and parameters; once
# the node is undrained every task runs its own command (each writes its parameter to its own
# file) and succeeds, and a task's history reads submitted -> ... -> succeeded.
#
# Usage: array_restart_test.sh PATH/TO/gpufleet
source "$(dirname "$0")/lib.sh"

GPUFLEET="${1:?usage: array_restart_test.sh GPUFLEET}"
export GPUFLEET_CONFIG="$WORK/config.yaml"
unset GPUFLEET_SERVER GPUFLEET_TOKEN
cd "$WORK"  # jobs default to the submitter's directory: one their agents allow

PORT="$(free_local_port)"
trap 'dev_stop; rm -rf "$WORK"' EXIT
start_dev() { dev_start "$GPUFLEET" "$WORK/data" "$PORT" --fake-gpus "$1" --agents 1; }
wait_for() { dev_wait "$@"; }
job() { "$GPUFLEET" status "$1" -o json; }
count_in_state() {
  "$GPUFLEET" history --limit 1000 -o json | "$PYTHON" -c '
import json, sys
jobs = json.load(sys.stdin)["jobs"]
print(sum(1 for j in jobs if j["name"].startswith("sweep-") and j["state"] == sys.argv[1]))' "$1"
}
all_in_state() { [[ "$(count_in_state "$1")" == "$2" ]]; }

start_dev 4xH100
wait_for "the CLI config" test -s "$GPUFLEET_CONFIG"
wait_for "the controller" "$GPUFLEET" queue
wait_for "the node" "$GPUFLEET" drain dev-1

VALUES="$(seq -s, 0 39)"
cat >"$WORK/sweep.yaml" <<YAML
name: sweep-{{lr}}
resources: {gpus: 1}
run: echo "lr={{lr}} index=\$GPUFLEET_ARRAY_INDEX" > out-{{lr}}.txt
array: {lr: [$VALUES]}
YAML
"$GPUFLEET" submit "$WORK/sweep.yaml" -o json >"$WORK/sweep.json" || fail "submit of the array failed"
"$PYTHON" - "$WORK/sweep.json" <<'PY' || fail "the array's answer is not 40 tasks named sweep-0 .. sweep-39"
import json, sys
jobs = json.load(open(sys.argv[1]))["jobs"]
assert [j["name"] for j in jobs] == ["sweep-%d" % i for i in range(40)], jobs[:3]
PY
# Stored once: one row of job_arrays for the 40 tasks, none of them in jobs yet.
"$PYTHON" - "$WORK/data/state.db" <<'PY' || fail "the array is not stored once"
import sqlite3, sys
db = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
spans = db.execute("SELECT last_id - first_id + 1 FROM job_arrays").fetchall()
assert spans == [(40,)], spans
rows = db.execute("SELECT count(*) FROM jobs j JOIN job_arrays a ON j.id BETWEEN a.first_id AND a.last_id").fetchone()
assert rows == (0,), rows
PY
FIRST="$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["jobs"][7]["id"])' "$WORK/sweep.json")"
[[ "$(count_in_state pending)" == 40 ]] || fail "expected 40 pending tasks (the node is drained), got $(count_in_state pending)"

# --- kill -9: the next start has every task, each with its own command ------------------------
kill -KILL "$DEV_PID"
wait "$DEV_PID" 2>/dev/null || true
DEV_PID=""
start_dev 4xH100
wait_for "the controller" "$GPUFLEET" queue
[[ "$(count_in_state pending)" == 40 ]] || fail "after kill -9, expected 40 pending tasks, got $(count_in_state pending)"
job "$FIRST" >"$WORK/task7.json"
"$PYTHON" - "$WORK/task7.json" <<'PY' || { cat "$WORK/task7.json" >&2; fail "task 7 did not come back as submitted"; }
import json, sys
j = json.load(open(sys.argv[1]))
assert j["name"] == "sweep-7", j["name"]
assert j["state"] == "pending", j["state"]
assert [t["reason"] for t in j["history"]] == ["submitted"], j["history"]
text = json.dumps(j)
assert "out-7.txt" in text, "its command is not its own"
PY

# --- the tasks run once the node takes jobs again -------------------------------------------
"$GPUFLEET" undrain dev-1 >/dev/null || fail "undrain failed"
wait_for "every task to succeed" all_in_state succeeded 40
for i in $(seq 0 39); do
  [[ "$(cat "$WORK/out-$i.txt" 2>/dev/null)" == "lr=$i index=$i" ]] ||
    fail "task $i wrote '$(cat "$WORK/out-$i.txt" 2>/dev/null)', not its own parameter"
done
job "$FIRST" | "$PYTHON" -c '
import json, sys
h = json.load(sys.stdin)["history"]
assert h[0]["reason"] == "submitted" and h[-1]["to"] == "succeeded", h' || fail "task 7's history is not submitted .. succeeded"
echo PASS
