#!/usr/bin/env bash
# A new user's first hour with the live cluster, as the README leads it. Given `gpufleet` linked
# onto PATH by scripts/install.sh and a dev cluster whose node declares 2 CPUs and 1 GiB, priced at
# $8/h, under backfill, expect:
#   - the banner to say `gpufleet run ...` when gpufleet is on PATH, else the binary's path;
#   - a second dev on the same port to say how to pick another (--port), not --listen;
#   - the README's first command to work as written;
#   - a job asking CPUs and memory the node has to run, and one asking more than any node has
#     to be refused at submit with the reason; a 2-node job on this 1-node cluster without a
#     pool to be taken with a warning that says why;
#   - explain to say a job held by a backfill reservation cannot start now, naming the policy;
#   - `gpufleet cost` to list a team without a budget whose jobs have ended;
#   - `history -o jsonl` to give the GPU model a job ran on when it named none;
#   - a team token's `run` without --team to submit for the token's team.
#
# Usage: first_hour_test.sh PATH/TO/gpufleet REPO_ROOT
source "$(dirname "$0")/lib.sh"

GPUFLEET="${1:?usage: first_hour_test.sh GPUFLEET REPO_ROOT}"
ROOT="${2:?usage: first_hour_test.sh GPUFLEET REPO_ROOT}"
export GPUFLEET_CONFIG="$WORK/config.yaml"
unset GPUFLEET_SERVER GPUFLEET_TOKEN
cd "$WORK"  # jobs default to the submitter's directory: one their agents allow
SELF="$(readlink -f "$GPUFLEET")"

PORT="$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
DEV_PID=""
stop_dev() {
  if [[ -n "$DEV_PID" ]]; then
    kill "$DEV_PID" 2>/dev/null || true
    wait "$DEV_PID" 2>/dev/null || true
    DEV_PID=""
  fi
}
trap 'stop_dev; rm -rf "$WORK"' EXIT
wait_for() { wait_for_while "$DEV_PID" "$WORK/dev.out" "$@"; }
# dev DIR [FLAGS]: starts gpufleet dev (from $WORK, jobs as this user) with PATH as it is now.
dev() {
  local dir="$1"
  shift
  (cd "$WORK" && exec "$GPUFLEET" dev --data-dir "$WORK/$dir" --port "$PORT" --config "$GPUFLEET_CONFIG" \
    --job-user "$(id -un)" --allow-root-jobs "$@") >"$WORK/dev.out" 2>&1 &
  DEV_PID=$!
}
submitted() { sed -n "s/^submitted job \([0-9]*\) .*/\1/p" "$1.out" | head -1; }
field() { "$GPUFLEET" status "$1" -o json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$2"; }
state_is() { [[ "$(field "$1" state)" == "$2" ]]; }

# --- Not on PATH: the banner gives the binary's path -----------------------------------------
NOPATH="/usr/bin:/bin"
[[ "$(PATH="$NOPATH" command -v gpufleet || true)" == "" ]] || fail "a gpufleet is already on $NOPATH"
PATH="$NOPATH" dev data0 --agents 0
wait_for "the banner" grep -q "Try, in another terminal" "$WORK/dev.out"
expect_contains "$WORK/dev.out" "  $SELF run --gpus 1" "off PATH, the banner's hint runs the binary by its path"
expect_contains "$WORK/dev.out" "scripts/install.sh" "off PATH, the banner says how to put gpufleet on it"

# --- A port in use: the hint names dev's own flag --------------------------------------------
run "$WORK/busy" "$GPUFLEET" dev --data-dir "$WORK/data-busy" --port "$PORT" --agents 0 --config "$WORK/other.yaml"
[[ "$RC" != 0 ]] || fail "a second dev on a busy port started"
expect_contains "$WORK/busy.err" "--port" "the port-in-use message says how to pick another port"
if grep -q -- "--listen" "$WORK/busy.err"; then show "$WORK/busy"; fail "dev's port-in-use hint suggests --listen, which dev does not take"; fi
stop_dev

# --- A config written elsewhere: the banner's hint names it --------------------------------------
(cd "$WORK" && exec "$GPUFLEET" dev --data-dir "$WORK/data-cfg" --port "$PORT" --config "$WORK/elsewhere.yaml" \
  --agents 0 --job-user "$(id -un)" --allow-root-jobs) >"$WORK/dev.out" 2>&1 &
DEV_PID=$!
wait_for "the banner" grep -q "Try, in another terminal" "$WORK/dev.out"
expect_contains "$WORK/dev.out" "  GPUFLEET_CONFIG=$WORK/elsewhere.yaml " "the hint names a config written elsewhere"
stop_dev

# --- On PATH (scripts/install.sh): the banner and the README's commands as written -------------
run "$WORK/install" env BUILD_DIR="$(dirname "$(dirname "$SELF")")" GPUFLEET_BIN_DIR="$WORK/bin" \
  bash "$ROOT/scripts/install.sh"
expect_rc "$WORK/install" 0 "scripts/install.sh"
[[ "$(readlink -f "$WORK/bin/gpufleet")" == "$SELF" ]] || fail "scripts/install.sh did not link $WORK/bin/gpufleet to $SELF"
export PATH="$WORK/bin:$PATH"
dev data --agents 1 --fake-gpus 2xH100 --cpus 2 --memory 1Gi --price-per-hour 8 --policy backfill
wait_for "the banner" grep -q "Try, in another terminal" "$WORK/dev.out"
expect_contains "$WORK/dev.out" "  gpufleet run --gpus 1" "on PATH, the banner's hint says gpufleet"
node_up() { gpufleet nodes -o json | grep '"state": "up"' >/dev/null; }
wait_for "node dev-1" node_up
run "$WORK/readme" bash -c "cd '$WORK' && gpufleet run --gpus 1 -- sh -c 'echo hello from job \$GPUFLEET_JOB_ID on GPUs \$CUDA_VISIBLE_DEVICES'"
expect_rc "$WORK/readme" 0 "the README's first command, as written"
HELLO="$(submitted "$WORK/readme")"
wait_for "job $HELLO to succeed" state_is "$HELLO" succeeded

# --- CPUs and memory -------------------------------------------------------------------------
run "$WORK/fits" gpufleet run --name fits --gpus 0 -- true
expect_rc "$WORK/fits" 0 "a CPU-only job"
printf 'name: sized\nteam: vision\nresources: {gpus: 1, cpus: 1, memory: 256Mi}\nrun: sleep 1\n' >"$WORK/sized.yaml"
run "$WORK/sized" gpufleet submit "$WORK/sized.yaml"
expect_rc "$WORK/sized" 0 "a job asking 1 CPU and 256 MiB"
SIZED="$(submitted "$WORK/sized")"
# Whether the node enforces them is its agent's word (cgroup v2 with the memory and cpu
# controllers, or not): nodes NODE says which, and a job asking for them on a node that does not
# is warned.
ENFORCED="$(gpufleet nodes -o json | "$PYTHON" -c '
import json, sys
l = json.load(sys.stdin)["nodes"][0]["limits"]
print("None" if l is None else "True" if l["memory"] and l["cpu"] else "Partly" if l["memory"] or l["cpu"] else "False")')"
run "$WORK/dev1" gpufleet nodes dev-1
case "$ENFORCED" in
  True)
    expect_contains "$WORK/dev1.out" "limits:       cgroup v2 at " "nodes dev-1 on a node that enforces limits"
    if grep -q "do not enforce" "$WORK/sized.err"; then fail "a node that enforces limits was said not to: $(cat "$WORK/sized.err")"; fi ;;
  Partly)
    expect_contains "$WORK/dev1.out" "limits:       NOT ENFORCED (" "nodes dev-1 on a node that enforces one limit"
    expect_contains "$WORK/sized.err" "warning: job $SIZED asks for " "a job asking for a limit a node does not enforce" ;;
  False)
    expect_contains "$WORK/dev1.out" "limits:       NOT ENFORCED (memory, cpu): " "nodes dev-1 on a node without enforcement"
    expect_contains "$WORK/sized.err" "warning: job $SIZED asks for CPUs and memory, which nodes dev-1 do not enforce (" \
      "a job asking for limits a node does not enforce" ;;
  *) fail "nodes -o json should say which limits dev-1 enforces, got '$ENFORCED'" ;;
esac
wait_for "job $SIZED (1 CPU, 256 MiB) to succeed" state_is "$SIZED" succeeded
printf 'name: greedy\nresources: {gpus: 1, cpus: 4}\nrun: "true"\n' >"$WORK/greedy.yaml"
run "$WORK/greedy" gpufleet submit "$WORK/greedy.yaml"
expect_rc "$WORK/greedy" 2 "a job asking more CPUs than any node has"
expect_contains "$WORK/greedy.err" "job 'greedy' can never run on this cluster" "the refusal says so"
expect_contains "$WORK/greedy.err" "4 CPUs" "the refusal names what the job asks"
expect_contains "$WORK/greedy.err" "2 CPUs (dev-1)" "the refusal names what the nodes have"
printf 'name: hungry\nresources: {gpus: 1, memory: 2Gi}\nrun: "true"\n' >"$WORK/hungry.yaml"
run "$WORK/hungry" gpufleet submit "$WORK/hungry.yaml"
expect_rc "$WORK/hungry" 2 "a job asking more memory than any node has"
expect_contains "$WORK/hungry.err" "1 GiB (dev-1)" "the refusal names the node's memory"
run "$WORK/gang" gpufleet run --nodes 2 --name gang -- true
expect_rc "$WORK/gang" 0 "a 2-node job on a 1-node cluster is taken (nodes may join)"
GANG="$(submitted "$WORK/gang")"
expect_contains "$WORK/gang.err" "warning: job $GANG cannot run on this cluster as it is" "a 2-node job on 1 node warns"
expect_contains "$WORK/gang.err" "no pool" "the warning says no pool can rent the nodes"
gpufleet cancel "$GANG" >/dev/null
# Interrupted while following its job, `run -f` says the job goes on and how to stop it.
"$GPUFLEET" run -f --gpus 0 --name followed -- sh -c 'echo following; sleep 60' >"$WORK/follow.out" 2>"$WORK/follow.err" &
FOLLOW_PID=$!
wait_for "run -f to print the job's output" grep -q "^following" "$WORK/follow.out"
FOLLOWED="$(submitted "$WORK/follow")"
kill -INT "$FOLLOW_PID"
RC=0
wait "$FOLLOW_PID" || RC=$?
[[ "$RC" == 130 ]] || fail "run -f interrupted should exit 130, got $RC"
expect_contains "$WORK/follow.err" "stopped following job $FOLLOWED; it goes on running ('gpufleet logs -f $FOLLOWED' follows it again, 'gpufleet cancel $FOLLOWED' stops it)" "run -f interrupted"
state_is "$FOLLOWED" running || fail "job $FOLLOWED should still run after its follower was interrupted"
gpufleet cancel "$FOLLOWED" >/dev/null
# More GPUs on one node than the node has: it runs split, its command on each part: said.
run "$WORK/wide" gpufleet run --gpus 4 --name wide -- true
expect_rc "$WORK/wide" 0 "a 4-GPU job on a 2-GPU node is taken (it runs split)"
WIDE="$(submitted "$WORK/wide")"
expect_contains "$WORK/wide.err" "warning: job $WIDE asks for 4 GPUs on one node, more than any node has (2): it runs as 2 nodes of 2 GPUs, its command once on each node" "a job split into a gang warns"
gpufleet cancel "$WIDE" >/dev/null

# --- explain: a job held by a backfill reservation cannot start now --------------------------
run "$WORK/first" gpufleet run --name first -- sleep 300
FIRST="$(submitted "$WORK/first")"
wait_for "job $FIRST to run" state_is "$FIRST" running
run "$WORK/head" gpufleet run --gpus 2 --name head -- true
run "$WORK/small" gpufleet run --gpus 1 --name small -- true
SMALL="$(submitted "$WORK/small")"
state_is "$SMALL" pending || fail "job $SMALL (1 GPU) was not held behind the 2-GPU job's reservation"
run "$WORK/explain" gpufleet explain "$SMALL"
expect_contains "$WORK/explain.out" "held by a reservation" "explain says the reservation holds it"
expect_contains "$WORK/explain.out" "can start now:   no" "explain says a reservation-held job cannot start now"
expect_contains "$WORK/explain.out" "policy backfill" "explain names the policy the controller runs"
gpufleet cancel "$FIRST" "$(submitted "$WORK/head")" "$SMALL" >/dev/null

# --- cost: a team without a budget whose jobs ended ------------------------------------------
run "$WORK/cost" gpufleet cost -o json
expect_rc "$WORK/cost" 0 "gpufleet cost"
"$PYTHON" - "$WORK/cost.out" <<'PY' || fail "gpufleet cost leaves out team vision (no budget, its job ended)"
import json, sys
teams = {t["team"]: t for t in json.load(open(sys.argv[1]))["teams"]}
v = teams["vision"]
assert "budget" not in v and v["jobs_cost_micros"] > 0 and v["spent_micros"] >= v["jobs_cost_micros"], v
PY
run "$WORK/cost-table" gpufleet cost
expect_contains "$WORK/cost-table.out" "vision" "the cost table lists team vision"

# --- history -o jsonl: the GPU model a job ran on --------------------------------------------
run "$WORK/jsonl" gpufleet history -o jsonl
expect_rc "$WORK/jsonl" 0 "history -o jsonl"
"$PYTHON" - "$WORK/jsonl.out" "$HELLO" <<'PY' || fail "history -o jsonl leaves out the GPU model of a job that named none"
import json, sys
rows = {r["id"]: r for r in (json.loads(l) for l in open(sys.argv[1]) if l.strip())}
assert rows[sys.argv[2]].get("gpu_models") == ["H100"], rows[sys.argv[2]]
PY

# --- A team token's run is its team's --------------------------------------------------------
run "$WORK/token" gpufleet token create --team nlp --subject alice
expect_rc "$WORK/token" 0 "token create --team nlp"
run "$WORK/team-run" gpufleet run --token "$(head -1 "$WORK/token.out")" --name mine -- true
expect_rc "$WORK/team-run" 0 "a team token's run without --team"
[[ "$(field "$(submitted "$WORK/team-run")" team)" == nlp ]] || fail "a team token's run did not default to the token's team"
echo PASS
