#!/usr/bin/env bash
# Acceptance burn-in on a live cluster (the suite's CPU/gloo path on this machine's PyTorch): a
# controller with --burn-in required and three fake-GPU agents. The test asserts that
#   - a healthy node runs the suite when it registers, takes no work until it passed, and then
#     runs the job that waited for it (the job started after the burn-in's report);
#   - a deliberately slowed node (--fake-faults slow=20: the suite measures 20x less) is
#     quarantined against the fleet's median, says why in `gpufleet nodes` and
#     `gpufleet nodes NODE`, and never takes work: a second job waits for the healthy node;
#   - a node whose GPU reports uncorrected ECC errors is quarantined for its health;
#   - `gpufleet node check NODE` runs it again (audited), and is refused on a node with running
#     jobs;
#   - `gpufleet node check` on this machine passes with exit 0, and fails with exit 1 for faults;
#   - options of a local check given with NODE are refused (they would be ignored), and
#     `node check NODE --wait` ends with exit 2 (no verdict) when the node is lost during its burn-in.
#
# Usage: node_check_test.sh GPUFLEET_BINARY REPO_ROOT
GPUFLEET="$1"
REPO="$2"
source "$REPO/tests/cluster_lib.sh"

TORCH_PYTHON="${TORCH_PYTHON:-/usr/bin/python3}"
if ! "$TORCH_PYTHON" -c 'import torch' 2>/dev/null; then
  echo "SKIP: $TORCH_PYTHON cannot import torch (apt-get install python3-torch)"
  exit 77
fi
export GPUFLEET_BURNIN_SUITE="$REPO/scripts/burnin.py"
BURN_IN=(--burn-in-python "$TORCH_PYTHON" --burn-in-quick)

# acceptance NAME: the node's acceptance as /v1/nodes reports it.
acceptance() {
  api GET /v1/nodes | json_get "next((n['acceptance'] for n in j['nodes'] if n['name'] == '$1'), '')"
}
acceptance_is() { [[ "$(acceptance "$1")" == "$2" ]]; }

# 1. The local check: this machine, fake GPUs, the CPU path.
run "$WORK/r1" "$GPUFLEET" node check --fake-gpus 2xT4 --device cpu --python "$TORCH_PYTHON" --quick
expect_rc "$WORK/r1" 0 "a healthy local check passes"
expect_contains "$WORK/r1.out" "PASSED" "the verdict"
expect_contains "$WORK/r1.out" "matmul_fp32" "the suite's figures"
run "$WORK/r2" "$GPUFLEET" node check --fake-gpus 2xT4 --fake-faults "gpu=1 ecc=2" --device cpu --python "$TORCH_PYTHON" --quick -o json
expect_rc "$WORK/r2" 1 "a node with ECC errors fails"
cat "$WORK/r2.out" | "$PYTHON" -c '
import json, sys
r = json.load(sys.stdin)
assert r["passed"] is False, r
assert any("GPU 1: 2 uncorrected ECC errors" in p for p in r["problems"]), r["problems"]
assert r["path"] == "cpu" and r["health"][1]["ecc_uncorrected"] == 2, r' || fail "node check -o json: $(cat "$WORK/r2.out")"
run "$WORK/r3" "$GPUFLEET" node check --fake-gpus 2xT4 --fake-faults "gpu=7 ecc=1" --python "$TORCH_PYTHON"
expect_rc "$WORK/r3" 2 "bad faults are a usage error"
expect_contains "$WORK/r3.err" "GPU 7 does not exist" "the message names the bad entry"

# 2. The cluster.
cluster_start_server --heartbeat 200ms --lost-after 8s --burn-in required
cat >"$WORK/job.yaml" <<XEOF
name: waits-for-acceptance
resources: {gpus: 2}
run: exec sleep 1000
XEOF
# Submitted before any node joined: it may run only once a node passed.
FIRST="$(submit_job "$WORK/job.yaml")"
WATCH_JOBS+=("$FIRST")
AGENT_GPUS=2xT4 cluster_start_agent node-a "${BURN_IN[@]}"
wait_until "node-a passes its burn-in" 90 acceptance_is node-a passed
wait_until "job $FIRST runs" 30 job_state_is "$FIRST" running
[[ "$(job_nodes "$FIRST")" == node-a ]] || fail "job $FIRST should run on node-a"
"$PYTHON" - "$(api GET /v1/nodes)" "$(job_json "$FIRST")" <<'XEOF' || fail "the job started before node-a's burn-in finished"
import json, sys
nodes = json.loads(sys.argv[1])["nodes"]
job = json.loads(sys.argv[2])
burn = next(n for n in nodes if n["name"] == "node-a")["burn_in"]
assert burn["passed"] and burn["path"] == "cpu", burn
started = min(t["at_ms"] for t in job["history"] if t["to"] in ("starting", "running"))
assert started >= burn["at_ms"], (started, burn["at_ms"])
XEOF

# A slowed node: judged against node-a's figures (the fleet median), quarantined.
AGENT_GPUS=2xT4 cluster_start_agent node-b "${BURN_IN[@]}" --fake-faults "slow=20"
wait_until "node-b is quarantined" 90 acceptance_is node-b quarantined
run "$WORK/r4" "$GPUFLEET" nodes
expect_contains "$WORK/r4.out" "quarantined" "STATE shows the quarantine"
run "$WORK/r5" "$GPUFLEET" nodes node-b
expect_rc "$WORK/r5" 0 "nodes NODE"
expect_contains "$WORK/r5.out" "FAILED" "the verdict"
expect_contains "$WORK/r5.out" "fleet median (1 node)" "the reference is the fleet's"
expect_contains "$WORK/r5.out" "acceptance quarantined" "the node's acceptance"

# An ECC fault.
AGENT_GPUS=2xT4 cluster_start_agent node-c "${BURN_IN[@]}" --fake-faults "gpu=0 ecc=5"
wait_until "node-c is quarantined" 90 acceptance_is node-c quarantined
api GET /v1/nodes | json_get "next(n['acceptance_reason'] for n in j['nodes'] if n['name'] == 'node-c')" \
  >"$WORK/reason"
grep -q "GPU 0: 5 uncorrected ECC errors" "$WORK/reason" || fail "node-c's reason: $(cat "$WORK/reason")"

# Undraining a quarantined node does not pass it off as up.
run "$WORK/r5u" "$GPUFLEET" undrain node-c
expect_rc "$WORK/r5u" 0 "undrain node-c"
expect_contains "$WORK/r5u.out" "node node-c is undrained, but quarantined" "undrain names the quarantine"
expect_contains "$WORK/r5u.out" "gpufleet node check node-c --wait" "undrain says how to clear it"

# Quarantined nodes take no work: a second job waits for node-a, though node-b and node-c are idle.
SECOND="$(submit_job "$WORK/job.yaml")"
WATCH_JOBS+=("$SECOND")
run "$WORK/r6" "$GPUFLEET" cancel "$FIRST"
expect_rc "$WORK/r6" 0 "cancel the first job"
wait_until "job $SECOND runs" 30 job_state_is "$SECOND" running
[[ "$(job_nodes "$SECOND")" == node-a ]] || fail "job $SECOND ran on $(job_nodes "$SECOND"), a quarantined node"

# Checking again: refused while jobs run there; allowed on an idle node, and audited.
run "$WORK/r7" "$GPUFLEET" node check node-a
expect_rc "$WORK/r7" 1 "a check on a busy node is refused"
expect_contains "$WORK/r7.err" "drain the node first" "the refusal says what to do"
run "$WORK/r8" "$GPUFLEET" node check node-b --wait -o json
expect_rc "$WORK/r8" 1 "node-b fails again"
json_get "j['acceptance']" <"$WORK/r8.out" | grep -x quarantined >/dev/null || fail "node check --wait: $(cat "$WORK/r8.out")"
run "$WORK/r9" "$GPUFLEET" audit -o json
expect_contains "$WORK/r9.out" "node.check" "the re-check is in the audit log"

# Options that shape a local check mean nothing for a registered node's: refused, nothing asked.
run "$WORK/r10" "$GPUFLEET" node check node-b --threshold 0.5
expect_rc "$WORK/r10" 2 "--threshold with NODE is a usage error"
expect_contains "$WORK/r10.err" "--threshold applies to a check of this machine only" "the refusal names the option"
run "$WORK/r11" "$GPUFLEET" node check --wait
expect_rc "$WORK/r11" 2 "--wait without NODE is a usage error"

# A node whose suite cannot run (no such interpreter): quarantined, but no verdict on its GPUs,
# so the wait exits 2 as a local check would; without --wait, -o json answers in JSON.
AGENT_GPUS=1xT4 cluster_start_agent node-d --burn-in-python /nonexistent/python3 --burn-in-quick
wait_until "node-d is quarantined" 90 acceptance_is node-d quarantined
run "$WORK/r13" "$GPUFLEET" node check node-d -o json
expect_rc "$WORK/r13" 0 "node check node-d -o json"
json_get "j['acceptance']" <"$WORK/r13.out" | grep -x checking >/dev/null || fail "node check -o json: $(cat "$WORK/r13.out")"
wait_until "node-d's second check is judged" 90 acceptance_is node-d quarantined
run "$WORK/r14" timeout 120 "$GPUFLEET" node check node-d --wait
expect_rc "$WORK/r14" 2 "a check whose suite cannot run is no verdict (exit 2)"

# A node lost while it owes its burn-in: the wait ends with the loss, not never. (Its agent is
# frozen first, so the check is asked while the node is up and can never report.) A second check
# asked meanwhile says it replaces the first.
kill -STOP "${AGENT_PID[node-c]}"
run "$WORK/r11b" "$GPUFLEET" node check node-c
expect_rc "$WORK/r11b" 0 "a check of a frozen node is asked"
run "$WORK/r12" timeout 120 "$GPUFLEET" node check node-c --wait
expect_contains "$WORK/r12.err" "node node-c was running a burn-in already; this one replaces it" \
  "a second check says it replaces the first"
expect_rc "$WORK/r12" 2 "the wait for a node lost during its burn-in ends (no verdict: exit 2)"
expect_contains "$WORK/r12.err" "node node-c was lost during its burn-in" "the wait says why it ended"
cluster_lose_agent node-c

echo PASS
