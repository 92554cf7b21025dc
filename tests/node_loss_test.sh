#!/usr/bin/env bash
# Node loss on a live cluster, without torch: a controller and two agents (separate processes,
# fake GPUs) run a 2-node gang of sleeping processes and a single-node job. One machine vanishes
# (kill -9 of its agent and of the job processes it started). The test asserts that
#   - the controller marks the node lost (`gpufleet nodes`) once heartbeats stop;
#   - the gang's part on the surviving node is stopped (its process is gone) and the whole gang is
#     requeued together: running -> stopping -> preempted -> pending, the reason naming the loss;
#   - the single-node job on the surviving node is not disturbed (same attempt, same process);
#   - when a machine with the lost node's name comes back, the gang runs again as attempt 2 with
#     GPUFLEET_RESTART_COUNT=1, on both nodes.
#
# Usage: node_loss_test.sh GPUFLEET_BINARY REPO_ROOT
GPUFLEET="$1"
REPO="$2"
source "$REPO/tests/cluster_lib.sh"

PIDS="$WORK/pids"
mkdir -p "$PIDS"

# Lost after 5 s of silence, not 2: on a loaded machine a live agent's heartbeats can pause for
# over 2 s, and the surviving node would be declared lost too.
cluster_start_server --heartbeat 200ms --lost-after 5s
AGENT_GPUS=2xH100 cluster_start_agent node-a
AGENT_GPUS=2xH100 cluster_start_agent node-b

# Each process writes its pid (it is the leader of its part's process group: `exec` keeps the
# pid the agent started) and what gpufleet told it, then sleeps until stopped.
cat >"$WORK/gang.yaml" <<EOF
name: gang
resources: {gpus: 1, nodes: 2}
checkpoint: {grace: 5s}
run: >-
  echo "attempt \$GPUFLEET_ATTEMPT rank \$NODE_RANK restarts \$GPUFLEET_RESTART_COUNT" &&
  echo \$\$ > $PIDS/gang.a\$GPUFLEET_ATTEMPT.p\$NODE_RANK.tmp &&
  echo \$GPUFLEET_RESTART_COUNT > $PIDS/gang.a\$GPUFLEET_ATTEMPT.p\$NODE_RANK.restarts &&
  mv $PIDS/gang.a\$GPUFLEET_ATTEMPT.p\$NODE_RANK.tmp $PIDS/gang.a\$GPUFLEET_ATTEMPT.p\$NODE_RANK &&
  exec sleep 1000
EOF
cat >"$WORK/single.yaml" <<EOF
name: single
resources: {gpus: 1}
run: >-
  echo \$\$ > $PIDS/single.a\$GPUFLEET_ATTEMPT.tmp && mv $PIDS/single.a\$GPUFLEET_ATTEMPT.tmp $PIDS/single.a\$GPUFLEET_ATTEMPT &&
  exec sleep 1000
EOF

alive() { kill -0 "$1" 2>/dev/null; }
gone() { ! kill -0 "$1" 2>/dev/null; }

GANG="$(submit_job "$WORK/gang.yaml")"
WATCH_JOBS+=("$GANG")
wait_until "gang job $GANG runs" 30 job_state_is "$GANG" running
wait_until "both gang processes started" 30 test -s "$PIDS/gang.a1.p0" -a -s "$PIDS/gang.a1.p1"
SINGLE="$(submit_job "$WORK/single.yaml")"
WATCH_JOBS+=("$SINGLE")
wait_until "single job $SINGLE runs" 30 job_state_is "$SINGLE" running
wait_until "the single job's process started" 30 test -s "$PIDS/single.a1"

mapfile -t GANG_NODES < <(job_nodes "$GANG")
[[ "${#GANG_NODES[@]}" == 2 && "${GANG_NODES[0]}" != "${GANG_NODES[1]}" ]] ||
  fail "gang $GANG should hold one GPU on each of node-a and node-b, got placement: ${GANG_NODES[*]}"
SURVIVOR="$(job_nodes "$SINGLE")"
[[ "$SURVIVOR" == node-a || "$SURVIVOR" == node-b ]] || fail "single job $SINGLE placed on '$SURVIVOR'"
if [[ "$SURVIVOR" == node-a ]]; then VICTIM=node-b; else VICTIM=node-a; fi
# The gang part on the surviving node, by rank.
if [[ "${GANG_NODES[0]}" == "$SURVIVOR" ]]; then SURVIVING_RANK=0; else SURVIVING_RANK=1; fi
SURVIVING_PID="$(cat "$PIDS/gang.a1.p$SURVIVING_RANK")"
LOST_PID="$(cat "$PIDS/gang.a1.p$((1 - SURVIVING_RANK))")"
SINGLE_PID="$(cat "$PIDS/single.a1")"
alive "$SURVIVING_PID" || fail "gang part $SURVIVING_RANK (pid $SURVIVING_PID) is not running"
alive "$SINGLE_PID" || fail "single job process (pid $SINGLE_PID) is not running"
echo "gang $GANG on ${GANG_NODES[*]}; single $SINGLE on $SURVIVOR; losing $VICTIM"

cluster_lose_agent "$VICTIM"
wait_until "the gang part on $VICTIM (pid $LOST_PID) is gone with its machine" 10 gone "$LOST_PID"

wait_until "node $VICTIM shows lost in 'gpufleet nodes'" 20 node_is "$VICTIM" lost
wait_until "the gang part on $SURVIVOR (pid $SURVIVING_PID) got the stop signal and exited" 30 gone "$SURVIVING_PID"
wait_until "gang $GANG is pending again" 30 job_state_is "$GANG" pending
HISTORY="$(job_history "$GANG")"
echo "gang history:"
echo "$HISTORY" | sed 's/^/  /'
grep -q -- "-> stopping: .*lost" <<<"$HISTORY" || { fail "gang history lacks 'running -> stopping' for the node loss"; }
grep -q -- "stopping -> preempted: .*lost" <<<"$HISTORY" || { fail "gang history lacks 'stopping -> preempted' naming the node loss"; }
grep -q -- "preempted -> pending" <<<"$HISTORY" || { fail "gang history lacks 'preempted -> pending' (requeue)"; }
if grep -q -- "-> failed" <<<"$HISTORY"; then fail "the gang failed instead of being requeued"; fi
[[ "$(job_field "$GANG" "j['attempt']")" == 1 ]] || fail "gang should still be at attempt 1 while pending"
# `status` of the waiting gang names its placement as its last run's, not as where it is now.
"$GPUFLEET" status "$GANG" >"$WORK/gang.status" </dev/null || fail "gpufleet status of the requeued gang"
grep -q "last run: " "$WORK/gang.status" || { cat "$WORK/gang.status" >&2; fail "status of a requeued job shows its old placement as current"; }
[[ "$(node_state "$SURVIVOR")" == up ]] || fail "node $SURVIVOR should stay up, is '$(node_state "$SURVIVOR")'"

# The single-node job on the surviving node ran on, untouched.
job_state_is "$SINGLE" running || fail "single job $SINGLE is '$(job_field "$SINGLE" "j['state']")', expected running"
[[ "$(job_field "$SINGLE" "j['attempt']")" == 1 ]] || fail "single job $SINGLE was restarted"
alive "$SINGLE_PID" || fail "single job's process (pid $SINGLE_PID) is gone"
[[ ! -e "$PIDS/single.a2" ]] || fail "single job $SINGLE started a second attempt"

# A machine with the lost node's name joins: the gang runs again, together, as attempt 2.
AGENT_GPUS=2xH100 AGENT_DIR="$WORK/agents/$VICTIM-replacement" cluster_start_agent "$VICTIM"
wait_until "gang $GANG runs again" 30 job_state_is "$GANG" running
wait_until "both parts of attempt 2 started" 30 test -s "$PIDS/gang.a2.p0" -a -s "$PIDS/gang.a2.p1"
[[ "$(job_field "$GANG" "j['attempt']")" == 2 ]] || fail "gang should run as attempt 2"
for p in 0 1; do
  alive "$(cat "$PIDS/gang.a2.p$p")" || fail "attempt 2 part $p is not running"
  [[ "$(cat "$PIDS/gang.a2.p$p.restarts")" == 1 ]] ||
    fail "attempt 2 part $p saw GPUFLEET_RESTART_COUNT=$(cat "$PIDS/gang.a2.p$p.restarts"), expected 1"
done
mapfile -t NODES2 < <(job_nodes "$GANG")
[[ "${#NODES2[@]}" == 2 && "${NODES2[0]}" != "${NODES2[1]}" ]] || fail "attempt 2 placement: ${NODES2[*]}"
job_state_is "$SINGLE" running && alive "$SINGLE_PID" && [[ "$(job_field "$SINGLE" "j['attempt']")" == 1 ]] ||
  fail "single job $SINGLE was disturbed when the node came back"

echo PASS
