#!/usr/bin/env bash
# Restoring a `gpufleet backup` with `gpufleet restore`, as docs/operations.md says, on `gpufleet dev`:
# 1. In place, over a store that went on after the backup (the agent's token changed, a job ran):
#    expect `gpufleet restore` refused while the controller runs, then to set the old store aside
#    with its write-ahead log (none left beside the restored file), and a damaged backup refused
#    with the store unchanged; expect the agent to join again (its token unknown to the restored store, it waits out the
#    node's lost_after with the join token instead of giving up), and a new job to get an id
#    after the lost one's, with its own log only (not the lost job's output).
# 2. Into a new data directory (no admin.token or join.token beside it): expect dev to refuse with
#    what to do, and with --new-admin-token to start, make a join token for its agents and run a
#    job.
# 3. A data directory holding a cluster's tokens, on a store with none (state.db without its WAL):
#    expect the controller to refuse, saying so, and the token files unchanged.
#
# Usage: restore_test.sh PATH/TO/gpufleet
source "$(dirname "$0")/lib.sh"

GPUFLEET="${1:?usage: restore_test.sh GPUFLEET}"
export GPUFLEET_CONFIG="$WORK/config.yaml"
unset GPUFLEET_SERVER GPUFLEET_TOKEN
cd "$WORK"

PORT="$(free_local_port)"
trap 'dev_stop; rm -rf "$WORK"' EXIT
start_dev() { dev_start "$GPUFLEET" "$1" "$PORT" --agents 1 --fake-gpus 2xH100 --heartbeat 1s --lost-after 3s "${@:2}"; }
wait_for() { dev_wait "$@"; }
node_up() {
  "$GPUFLEET" nodes -o json | "$PYTHON" -c '
import json, sys
sys.exit(0 if any(n["name"] == "dev-1" and n["state"] == "up" for n in json.load(sys.stdin)["nodes"]) else 1)'
}
state_is() {
  [[ "$("$GPUFLEET" status "$1" -o json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["state"])')" == "$2" ]]
}
# run_job TEXT: runs `echo TEXT` as a job until it succeeds; prints its id.
run_job() {
  local out id
  out="$("$GPUFLEET" run --gpus 0 --name "echo-$1" -- sh -c "echo $1")"
  id="$(sed -n 's/^submitted job \([0-9]*\) .*/\1/p' <<<"$out")"
  [[ -n "$id" ]] || fail "run printed no job id: $out"
  wait_for "job $id ($1) to succeed" state_is "$id" succeeded
  echo "$id"
}

# --- 1. In place ---------------------------------------------------------------------------------
start_dev "$WORK/data"
wait_for "the CLI config" test -s "$GPUFLEET_CONFIG"
wait_for "dev-1 up" node_up
run_job KEPT-JOB >/dev/null
"$GPUFLEET" backup --data-dir "$WORK/data" "$WORK/state-backup.db" >/dev/null || fail "gpufleet backup"
dev_stop
start_dev "$WORK/data"  # dev-1 registers again: its agent token changes
wait_for "dev-1 up after a restart" node_up
LOST="$(run_job LOST-JOB-OUTPUT)"
run "$WORK/busy" "$GPUFLEET" restore --data-dir "$WORK/data" "$WORK/state-backup.db"
expect_rc "$WORK/busy" 2 "gpufleet restore while the controller runs"
expect_contains "$WORK/busy.err" "a controller is running on $WORK/data; stop it first" "gpufleet restore while it runs"
dev_stop

head -c 3000 "$WORK/state-backup.db" >"$WORK/truncated.db"
before="$(md5sum <"$WORK/data/state.db")"
run "$WORK/bad" "$GPUFLEET" restore --data-dir "$WORK/data" "$WORK/truncated.db"
expect_rc "$WORK/bad" 1 "gpufleet restore of a truncated backup"
[[ "$(md5sum <"$WORK/data/state.db")" == "$before" ]] || fail "a refused restore changed the store"
compgen -G "$WORK/data/state.db.before-restore-*" >/dev/null && fail "a refused restore set the store aside"
run "$WORK/restore" "$GPUFLEET" restore --data-dir "$WORK/data" "$WORK/state-backup.db"
expect_rc "$WORK/restore" 0 "gpufleet restore"
expect_contains "$WORK/restore.out" "restored $WORK/state-backup.db into sqlite:$WORK/data/state.db (" "gpufleet restore"
expect_contains "$WORK/restore.out" "the store it replaced is kept as $WORK/data/state.db.before-restore-" "gpufleet restore"
[[ ! -e "$WORK/data/state.db-wal" ]] || fail "the old store's write-ahead log was left beside the restored one"
compgen -G "$WORK/data/state.db.before-restore-*" >/dev/null || fail "the replaced store was not kept"
start_dev "$WORK/data"
wait_for "dev-1 up after the restore" node_up
NEW="$(run_job NEW-JOB-OUTPUT)"
((NEW > LOST)) || fail "the job after the restore got id $NEW, not after the lost job's $LOST"
"$GPUFLEET" logs "$NEW" >"$WORK/new.log"
expect_contains "$WORK/new.log" "NEW-JOB-OUTPUT" "the new job's log"
if grep -q LOST-JOB-OUTPUT "$WORK/new.log"; then fail "the new job's log holds the lost job's output"; fi
dev_stop

# --- 2. Into a new data directory -----------------------------------------------------------------
run "$WORK/restore2" "$GPUFLEET" restore --data-dir "$WORK/elsewhere" "$WORK/state-backup.db" -o json
expect_rc "$WORK/restore2" 0 "gpufleet restore into a new data directory"
"$PYTHON" -c 'import json, sys; j = json.load(open(sys.argv[1])); sys.exit(0 if j["set_aside"] is None and j["jobs"] >= 1 else 1)' \
  "$WORK/restore2.out" || fail "a restore into a new data directory sets nothing aside: $(cat "$WORK/restore2.out")"
rm -f "$GPUFLEET_CONFIG"
run "$WORK/noadmin" "$GPUFLEET" dev --data-dir "$WORK/elsewhere" --port "$PORT" --config "$GPUFLEET_CONFIG" \
  --agents 1 --fake-gpus 2xH100 --job-user "$(id -un)" --allow-root-jobs
[[ "$RC" != 0 ]] || { show "$WORK/noadmin"; fail "dev started on a restored store without its admin token"; }
expect_contains "$WORK/noadmin.err" "admin.token is missing" "dev without admin.token"
expect_contains "$WORK/noadmin.err" "--new-admin-token" "dev without admin.token says what to do"
[[ ! -s "$GPUFLEET_CONFIG" ]] || fail "dev wrote a CLI config without a token"

start_dev "$WORK/elsewhere" --new-admin-token
wait_for "the CLI config (elsewhere)" test -s "$GPUFLEET_CONFIG"
wait_for "dev-1 up (elsewhere)" node_up
expect_contains "$WORK/dev.log" "join.token was missing; made a new join token" "dev made a join token"
if grep -q "agents cannot join with it" "$WORK/dev.log"; then
  fail "dev printed the server's 'join.token is missing' warning though it made one"
fi
run_job ELSEWHERE >/dev/null
dev_stop

# --- 3. A data directory's tokens on a store that is not its cluster's ----------------------------
# state.db copied without its WAL (or deleted): a store with no tokens beside admin.token and
# join.token. Expect a refusal that says so, and both token files as they were.
mkdir "$WORK/nowal"
cp "$WORK/elsewhere/admin.token" "$WORK/elsewhere/join.token" "$WORK/nowal/"
sums="$(md5sum "$WORK/nowal/admin.token" "$WORK/nowal/join.token")"
run "$WORK/nowal-run" timeout 30 "$GPUFLEET" server --data-dir "$WORK/nowal" --listen "127.0.0.1:$PORT" \
  --agent-listen "127.0.0.1:$(free_local_port)"
[[ "$RC" != 0 && "$RC" != 124 ]] || { show "$WORK/nowal-run"; fail "a controller started on an empty store beside a cluster's tokens"; }
expect_contains "$WORK/nowal-run.err" "has no tokens: it is not the store this data directory's cluster used" \
  "the refusal says the store is not the cluster's"
[[ "$(md5sum "$WORK/nowal/admin.token" "$WORK/nowal/join.token")" == "$sums" ]] || fail "the token files were overwritten"
echo PASS
