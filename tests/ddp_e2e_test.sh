#!/usr/bin/env bash
# Real DDP end to end: a controller and three agents (separate processes, one fake GPU each) run
# tests/ddp/train.py, a 2-node PyTorch DDP training on the gloo backend, started by gpufleet with
# its environment (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, GPUFLEET_CHECKPOINT_DIR, ...).
#   (a) a reference run, uninterrupted: it succeeds and records the SHA-256 of its final parameters;
#   (b) the same job with its own checkpoint directory: once it has checkpointed step 10, the
#       machine of rank 0 vanishes (kill -9 of its agent and of the job processes it started).
#       The job must be stopped and requeued (running -> stopping -> preempted -> pending, the
#       reason naming the node loss), restart as attempt 2 on the two surviving nodes with
#       GPUFLEET_RESTART_COUNT=1, resume from its checkpoint, succeed, and end with parameters
#       bit-identical to the reference run's.
# DDP_PEER_LOSS_WAIT=SECONDS passes --peer-loss-wait to train.py: the rank whose peer vanished then
# waits for the stop signal (as NCCL ranks hang) instead of exiting at once (gloo's behaviour, the
# default), which separates the engine's handling of that early exit from the rest of the path.
# Needs PyTorch for TORCH_PYTHON (default /usr/bin/python3, Debian's python3-torch); without it
# the test is skipped (exit 77).
#
# Usage: ddp_e2e_test.sh GPUFLEET_BINARY REPO_ROOT
GPUFLEET="$1"
REPO="$2"
TORCH_PYTHON="${TORCH_PYTHON:-/usr/bin/python3}"
if ! "$TORCH_PYTHON" -c 'import torch.distributed' 2>/dev/null; then
  echo "SKIP: $TORCH_PYTHON cannot import torch (apt-get install python3-torch)"
  exit 77
fi
source "$REPO/tests/cluster_lib.sh"

TRAIN="$REPO/tests/ddp/train.py"
STEPS=60

# 5 s, not less: on a loaded 2-core machine (torch ranks beside other tests) a surviving agent's
# heartbeats have been seen to pause over 2 s, and a spurious loss restarts the job a third time.
cluster_start_server --heartbeat 200ms --lost-after 5s
cluster_start_agent node-a
cluster_start_agent node-b
cluster_start_agent node-c

# job_file NAME CKPT_DIR [TRAIN FLAGS...]
job_file() {
  local name="$1" dir="$2" extra="" a
  shift 2
  for a in "$@"; do extra+=", \"$a\""; done
  cat <<EOF
name: $name
resources: {gpus: 1, nodes: 2}
checkpoint: {dir: $dir, grace: 5s}
run: [$TORCH_PYTHON, $TRAIN, --steps, "$STEPS", --checkpoint-every, "5"$extra]
EOF
}

finished() { job_state_in "$1" succeeded failed cancelled; }

# (a) The reference.
job_file ddp-ref "$WORK/ref" >"$WORK/ref.yaml"
T0=$SECONDS
REF="$(submit_job "$WORK/ref.yaml")"
WATCH_JOBS+=("$REF")
wait_until "reference job $REF finishes" 150 finished "$REF"
job_state_is "$REF" succeeded || fail "reference job $REF ended '$(job_field "$REF" "j['state']")'"
[[ -s "$WORK/ref/final.sha256" ]] || fail "reference run wrote no final.sha256"
REF_SHA="$(cat "$WORK/ref/final.sha256")"
echo "reference: job $REF succeeded in $((SECONDS - T0))s, parameters sha256 $REF_SHA"

# (b) The same training, interrupted by the loss of a machine.
job_file ddp-resume "$WORK/resume" --step-delay 0.25 --peer-loss-wait "${DDP_PEER_LOSS_WAIT:-0}" >"$WORK/resume.yaml"
T0=$SECONDS
JOB="$(submit_job "$WORK/resume.yaml")"
WATCH_JOBS+=("$JOB")
wait_until "job $JOB checkpoints step 10" 120 test -s "$WORK/resume/ckpt-000010.pt"
job_state_is "$JOB" running || fail "job $JOB should be running, is '$(job_field "$JOB" "j['state']")'"
mapfile -t NODES1 < <(job_nodes "$JOB")
[[ "${#NODES1[@]}" == 2 && "${NODES1[0]}" != "${NODES1[1]}" ]] || fail "job $JOB placement: ${NODES1[*]}"
VICTIM="${NODES1[0]}"  # rank 0: the node MASTER_ADDR points at
echo "job $JOB runs on ${NODES1[*]}; losing $VICTIM (rank 0) after checkpoint 10"
cluster_lose_agent "$VICTIM"

wait_until "node $VICTIM shows lost" 20 node_is "$VICTIM" lost
attempt_two() { [[ "$(job_field "$JOB" "j['attempt']")" == 2 ]] || finished "$JOB"; }
wait_until "job $JOB restarts or ends" 60 attempt_two
wait_until "job $JOB finishes" 150 finished "$JOB"
echo "job $JOB ended '$(job_field "$JOB" "j['state']")' $((SECONDS - T0))s after its submission"

HISTORY="$(job_history "$JOB")"
echo "job $JOB history:"
echo "$HISTORY" | sed 's/^/  /'
if grep -q -- "-> failed" <<<"$HISTORY"; then
  fail "job $JOB failed instead of being requeued after the loss of $VICTIM (see its history above: a gang part \
that exits because its peer vanished, before the node is declared lost, must not fail the job)"
fi
grep -q -- "-> stopping: .*lost" <<<"$HISTORY" ||
  fail "job $JOB was not stopped for the node loss (no '-> stopping: ... lost' in its history)"
grep -q -- "stopping -> preempted: .*lost" <<<"$HISTORY" ||
  fail "job $JOB was not preempted for the node loss (no 'stopping -> preempted: ... lost'): a gang part whose peer vanished must not fail the job"
grep -q -- "preempted -> pending" <<<"$HISTORY" || fail "job $JOB was not requeued (no 'preempted -> pending')"
job_state_is "$JOB" succeeded || fail "job $JOB ended '$(job_field "$JOB" "j['state']")', expected succeeded"
[[ "$(job_field "$JOB" "j['attempt']")" == 2 ]] || fail "job $JOB should have succeeded as attempt 2"
mapfile -t NODES2 < <(job_nodes "$JOB")
[[ "${#NODES2[@]}" == 2 && "${NODES2[0]}" != "${NODES2[1]}" ]] || fail "attempt 2 placement: ${NODES2[*]}"
for n in "${NODES2[@]}"; do
  [[ "$n" != "$VICTIM" ]] || fail "attempt 2 ran on the lost node $VICTIM"
done

"$GPUFLEET" logs --attempt 1 "$JOB" </dev/null >"$WORK/attempt1.log" 2>&1 || true
"$GPUFLEET" logs --attempt 2 "$JOB" </dev/null >"$WORK/attempt2.log" 2>&1 || true
expect_contains "$WORK/attempt1.log" "[rank 0] start: world_size=2" "attempt 1 logs"
expect_contains "$WORK/attempt1.log" "restart_count=0" "attempt 1 logs"
for r in 0 1; do
  grep -q "\[rank $r\] start: .*restart_count=1" "$WORK/attempt2.log" ||
    { cat "$WORK/attempt2.log" >&2; fail "attempt 2 rank $r did not see GPUFLEET_RESTART_COUNT=1"; }
done
RESUMED="$(sed -n 's/.*\[rank 0\] resumed from checkpoint at step \([0-9]*\).*/\1/p' "$WORK/attempt2.log" | head -n 1)"
[[ -n "$RESUMED" && "$RESUMED" -ge 10 && "$RESUMED" -lt "$STEPS" ]] ||
  { cat "$WORK/attempt2.log" >&2; fail "attempt 2 did not resume from a checkpoint at step >= 10 (got '$RESUMED')"; }
echo "attempt 2 resumed from step $RESUMED on ${NODES2[*]}"

[[ -s "$WORK/resume/final.sha256" ]] || fail "the resumed run wrote no final.sha256"
SHA="$(cat "$WORK/resume/final.sha256")"
[[ "$SHA" == "$REF_SHA" ]] ||
  fail "final parameters differ from the uninterrupted run's: sha256 $SHA, reference $REF_SHA"
echo "final parameters equal the reference's: $SHA"
echo PASS
