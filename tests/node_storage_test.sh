#!/usr/bin/env bash
# A node whose disk fills up, on a live cluster: the agent's data directory is a small tmpfs that
# the test fills. The test asserts that
#   - a job sent there is not failed for the node's fault: it goes back to the queue, its history
#     saying that the node could not start it, and no run of it counts as its own failure;
#   - the node takes no work meanwhile: `gpufleet nodes` shows it no-room (and `nodes NODE` why),
#     `gpufleet explain` names it, /metrics has gpufleet_node_storage_fault 1 and the built-in
#     alert NodeStorageFault fires; its agent reports the room left there (/v1/nodes disks,
#     `nodes NODE`, gpufleet_node_disk_free_bytes) and NodeDiskLow fires;
#   - once there is room again the node takes work by itself: the job runs there (attempt 2) and
#     succeeds, the gauge is 0 and the alert resolved;
#   - a job whose own output fills the disk fails with its own exit code and says the disk was
#     full (one that exits 0 succeeds and says its log may be cut short); the node is back once
#     that job's log is uploaded and removed;
#   - a full environments directory of its own (a second node, a second tmpfs) holds that node
#     the same way; once freed, an environment whose build takes the last of that small disk
#     fails its job with "does not fit on this node", leaves nothing behind, and the node is free.
# Needs root (it mounts the tmpfs); skipped (77) where it cannot mount one.
#
# Usage: node_storage_test.sh GPUFLEET_BINARY
GPUFLEET="$1"
source "$(dirname "$0")/cluster_lib.sh"

MNT="$WORK/agents/node-a/data"
EMNT="$WORK/agents/node-e/envs"  # node-e's environments directory (section 2)
mkdir -p "$MNT" "$EMNT"
if ! mount -t tmpfs -o size=2m,mode=0755 gpufleet-test "$MNT" 2>/dev/null; then
  echo "SKIP: cannot mount a tmpfs (needs root)"
  exit 77
fi
storage_cleanup() {
  local rc=$?
  set +e
  umount -l "$MNT" 2>/dev/null
  umount -l "$EMNT" 2>/dev/null
  (exit $rc)
  cluster_cleanup
}
trap storage_cleanup EXIT

ENV_PYTHON="${TORCH_PYTHON:-/usr/bin/python3}"
cp "$(dirname "$0")/data/environments_offline.yaml" "$WORK/envs.yaml"  # the preset only-in-this-file
printf 'disk_low_for: 0s\n' >"$WORK/alert_rules.yaml"
cluster_start_server --heartbeat 200ms --alert-interval 1s --environments "$WORK/envs.yaml" --alert-rules "$WORK/alert_rules.yaml"
AGENT_DATA_DIR="$MNT" cluster_start_agent node-a

# node_field EXPR [NODE]: one value of NODE (default node-a) as /v1/nodes reports it.
node_field() { api GET /v1/nodes | json_get "next(n for n in j['nodes'] if n['name'] == '${2:-node-a}')$1"; }
has_fault() { [[ -n "$(node_field ".get('storage_fault', '')" "${1:-node-a}")" ]]; }
no_fault() { [[ -z "$(node_field ".get('storage_fault', '')" "${1:-node-a}")" ]]; }
gauge_is() { api GET /metrics | grep -E "^gpufleet_node_storage_fault\{node=\"node-a\"\} $1\$" >/dev/null; }
alert_state() {
  "$GPUFLEET" alerts --all --name NodeStorageFault -o json </dev/null |
    json_get "next((a['state'] for a in (j['alerts'] if isinstance(j, dict) else j) if a['labels'].get('node') == 'node-a'), '')"
}
alert_is() { [[ "$(alert_state)" == "$1" ]]; }
low_alert_firing() {
  [[ "$("$GPUFLEET" alerts --name NodeDiskLow -o json </dev/null |
    json_get "any(a['state'] == 'firing' and a['labels'].get('node') == 'node-a' and a['labels'].get('dir') == 'data'
               for a in (j['alerts'] if isinstance(j, dict) else j))")" == true ]]
}
free_gauge_low() {
  api GET /metrics | awk -v want="gpufleet_node_disk_free_bytes{node=\"node-a\",dir=\"data\"}" '$1 == want && $2 < 65536 {ok = 1} END {exit !ok}'
}

# Fill it: nothing more can be written there.
dd if=/dev/zero of="$MNT/filler" bs=64k 2>/dev/null || true
if dd if=/dev/zero of="$MNT/more" bs=4k count=1 2>/dev/null; then fail "the tmpfs at $MNT is not full"; fi
rm -f "$MNT/more"

cat >"$WORK/job.yaml" <<'EOF'
name: hello
resources: {gpus: 1}
run: echo "hello from attempt $GPUFLEET_ATTEMPT"
EOF
JOB="$(submit_job "$WORK/job.yaml")"
WATCH_JOBS+=("$JOB")
wait_until "node-a reports that it cannot write its data directory" 30 has_fault
wait_until "job $JOB is back in the queue" 30 job_state_is "$JOB" pending
FAULT="$(node_field "['storage_fault']")"
[[ "$FAULT" == *"$MNT"*"No space left on device"* ]] || fail "the node's fault should name $MNT and the full disk, got: $FAULT"
HISTORY="$(job_history "$JOB")"
echo "$HISTORY" | grep "node node-a could not start it" >/dev/null ||
  fail "job $JOB's history should say node-a could not start it, got: $HISTORY"
if echo "$HISTORY" | grep -E "^[^ ]* *failed" >/dev/null; then fail "job $JOB was failed for the node's fault: $HISTORY"; fi

run "$WORK/nodes" "$GPUFLEET" nodes
expect_rc "$WORK/nodes" 0 "gpufleet nodes"
grep -E "^node-a +no-room " "$WORK/nodes.out" >/dev/null || fail "gpufleet nodes should show node-a no-room: $(cat "$WORK/nodes.out")"
run "$WORK/node" "$GPUFLEET" nodes node-a
expect_contains "$WORK/node.out" "storage:      the node's data directory $MNT cannot be written" "gpufleet nodes node-a"
run "$WORK/explain" "$GPUFLEET" explain "$JOB"
expect_contains "$WORK/explain.out" "node node-a takes no new work: the node's data directory $MNT" "gpufleet explain $JOB"
wait_until "/metrics has gpufleet_node_storage_fault 1 for node-a" 20 gauge_is 1
# The room left, as the agent reports it in its heartbeats: its data directory, 2 MiB, full.
[[ "$(node_field "['disks'][0]['path']")" == "$MNT" ]] || fail "/v1/nodes should report node-a's data directory $MNT in disks"
[[ "$(node_field "['disks'][0]['size_bytes']")" == 2097152 ]] || fail "node-a's data directory is a 2 MiB tmpfs"
wait_until "/metrics has gpufleet_node_disk_free_bytes under 64 KiB for node-a's data directory" 20 free_gauge_low
run "$WORK/node_disk" "$GPUFLEET" nodes node-a
expect_contains "$WORK/node_disk.out" "disk:         data directory $MNT: " "gpufleet nodes node-a"
expect_contains "$WORK/node_disk.out" " free of 2.0 MiB (" "gpufleet nodes node-a"
wait_until "the alert NodeDiskLow fires for node-a's data directory" 30 low_alert_firing
wait_until "the alert NodeStorageFault fires for node-a" 30 alert_is firing
# It was not sent there again meanwhile (each try would be a new attempt).
[[ "$(job_field "$JOB" "j['attempt']")" == 1 ]] ||
  fail "job $JOB was started again on a node without room: attempt $(job_field "$JOB" "j['attempt']")"
job_state_is "$JOB" pending || fail "job $JOB left the queue while its only node had no room"

# Room again: the node takes the job by itself.
rm -f "$MNT/filler"
wait_until "node-a says it can write again" 30 no_fault
wait_until "job $JOB succeeds on node-a" 30 job_state_is "$JOB" succeeded
[[ "$(job_field "$JOB" "j['attempt']")" == 2 ]] || fail "job $JOB should have succeeded in attempt 2, got $(job_field "$JOB" "j['attempt']")"
run "$WORK/logs" "$GPUFLEET" logs "$JOB"
expect_contains "$WORK/logs.out" "hello from attempt 2" "gpufleet logs $JOB"
wait_until "/metrics has gpufleet_node_storage_fault 0 for node-a" 20 gauge_is 0
wait_until "the alert NodeStorageFault is resolved" 30 alert_is resolved
run "$WORK/nodes2" "$GPUFLEET" nodes
grep -E "^node-a +up " "$WORK/nodes2.out" >/dev/null || fail "gpufleet nodes should show node-a up again: $(cat "$WORK/nodes2.out")"

# A job whose own output fills the disk fails with its own code, and says the disk was full; the
# node takes no work until its log is uploaded and removed, then takes work again.
cat >"$WORK/filler.yaml" <<'EOF'
name: filler
resources: {gpus: 1}
run: head -c 8M /dev/zero; exit 3
EOF
FILLER="$(submit_job "$WORK/filler.yaml")"
WATCH_JOBS+=("$FILLER")
wait_until "job $FILLER fails" 30 job_state_is "$FILLER" failed
[[ "$(job_field "$FILLER" "j['exit_code']")" == 3 ]] || fail "job $FILLER should fail with its own code 3"
REASON="$(job_history "$FILLER" | tail -n 1)"
[[ "$REASON" == *"exited with code 3 (when it ended, the node's data directory"*"No space left on device"* ]] ||
  fail "job $FILLER's failure should say the node's disk was full, got: $REASON"
wait_until "node-a takes work again once the filler's log is gone" 30 no_fault

# One that fills it and still exits 0 succeeds, and says its log may be cut short.
cat >"$WORK/quiet.yaml" <<'EOF'
name: quiet-filler
resources: {gpus: 1}
run: head -c 8M /dev/zero; true
EOF
QUIET="$(submit_job "$WORK/quiet.yaml")"
WATCH_JOBS+=("$QUIET")
wait_until "job $QUIET succeeds" 30 job_state_is "$QUIET" succeeded
REASON="$(job_history "$QUIET" | tail -n 1)"
[[ "$REASON" == *"its log may be cut short: when it ended, the node's data directory"*"No space left on device"* ]] ||
  fail "job $QUIET should say its log may be cut short by the full disk, got: $REASON"
wait_until "node-a takes work again once that log is gone" 30 no_fault

# 2. A full environments directory of its own (node-e; node-a drained): the job that needs an
# environment is requeued and node-e held; with the filler gone, the environment's build takes
# the last of the small disk: it does not fit there, the job fails saying so, and node-e (room
# again once the partial build is removed) is not held.
if "$ENV_PYTHON" -m venv --help >/dev/null 2>&1 && mount -t tmpfs -o size=4m gpufleet-test "$EMNT" 2>/dev/null; then
  run "$WORK/drain" "$GPUFLEET" drain node-a
  expect_rc "$WORK/drain" 0 "gpufleet drain node-a"
  cluster_start_agent node-e --environments "$WORK/envs.yaml" --environments-dir "$EMNT" --burn-in-python "$ENV_PYTHON"
  dd if=/dev/zero of="$EMNT/filler" bs=64k 2>/dev/null || true
  cat >"$WORK/env.yaml" <<'EOF'
name: with-env
environment: only-in-this-file
resources: {gpus: 1}
run: "true"
EOF
  ENVJOB="$(submit_job "$WORK/env.yaml")"
  WATCH_JOBS+=("$ENVJOB")
  wait_until "node-e reports that it cannot write its environments directory" 60 has_fault node-e
  FAULT="$(node_field "['storage_fault']" node-e)"
  [[ "$FAULT" == "the node's environments directory $EMNT cannot be written"* ]] ||
    fail "node-e's fault should name its environments directory, got: $FAULT"
  wait_until "job $ENVJOB is back in the queue" 30 job_state_is "$ENVJOB" pending
  job_history "$ENVJOB" | grep "node node-e could not start it: the node's environments directory" >/dev/null ||
    fail "job $ENVJOB's history should say node-e could not start it: $(job_history "$ENVJOB")"
  rm -f "$EMNT/filler"
  wait_until "job $ENVJOB fails: its environment does not fit on node-e" 120 job_state_is "$ENVJOB" failed
  REASON="$(job_history "$ENVJOB" | tail -n 1)"
  [[ "$REASON" == *"environment only-in-this-file does not fit on this node: the node's environments directory $EMNT"* ]] ||
    fail "job $ENVJOB should fail saying its environment does not fit, got: $REASON"
  wait_until "node-e is not held once the partial build is removed" 30 no_fault node-e
  [[ -z "$(ls -A "$EMNT")" ]] || fail "the partial build was left in $EMNT: $(ls -A "$EMNT")"
else
  echo "section 2 skipped: no python venv module, or no second tmpfs"
fi
echo "PASS: a node with a full disk requeues the job it could not start, takes no work, and comes back by itself"
