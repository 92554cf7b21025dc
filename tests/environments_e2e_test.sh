#!/usr/bin/env bash
# Environment presets on a live cluster: two fake-GPU agents with different drivers, a preset
# table of the test's own (its pip lines run offline). The test asserts that
#   - a job naming an environment no node's driver supports is refused at submit, naming each
#     node's reason ("driver 525.60.13 too old ...");
#   - a job naming one that only the newer node supports runs there, inside the environment
#     (a virtual environment the agent prepared: VIRTUAL_ENV, its python first on PATH), and its
#     history says it was a cold start and how long preparing took;
#   - the node then reports the environment prepared (`gpufleet nodes NODE`), and the next job
#     starts warm;
#   - an agent started with --prewarm has the environment before any job asks for it;
#   - a gang with `network: verified` all-reduces between its nodes before its processes start
#     (its log shows the measured bandwidth).
#
# Usage: environments_e2e_test.sh GPUFLEET_BINARY REPO_ROOT
GPUFLEET="$1"
REPO="$2"
source "$REPO/tests/cluster_lib.sh"

ENV_PYTHON="${TORCH_PYTHON:-/usr/bin/python3}"
"$ENV_PYTHON" -m venv --help >/dev/null 2>&1 || { echo "SKIP: $ENV_PYTHON has no venv module"; exit 77; }

cat >"$WORK/envs.yaml" <<'YEOF'
environments:
  - name: test-cu128
    pytorch: "2.7.1"
    cuda: "12.8"
    min_driver: "570.26"
    archs: ["8.0", "9.0"]
    pip: pip --version
  - name: test-cu124
    pytorch: "2.5.1"
    cuda: "12.4"
    min_driver: "550.54.14"
    archs: ["8.0", "9.0"]
    pip: pip --version
YEOF
cluster_start_server --heartbeat 200ms --environments "$WORK/envs.yaml"
ENV_FLAGS=(--environments "$WORK/envs.yaml" --burn-in-python "$ENV_PYTHON" --burn-in-quick)
AGENT_GPUS=1xA100 cluster_start_agent node-old "${ENV_FLAGS[@]}" --fake-driver 525.60.13/12.0
AGENT_GPUS=1xA100 cluster_start_agent node-new "${ENV_FLAGS[@]}"

# 1. No node can run it: refused at submit, with each node's reason.
cat >"$WORK/cu128.yaml" <<YEOF
name: needs-cu128
environment: test-cu128
resources: {gpus: 1}
run: "true"
YEOF
run "$WORK/r1" "$GPUFLEET" submit "$WORK/cu128.yaml"
expect_rc "$WORK/r1" 2 "an environment no node supports is refused"
expect_contains "$WORK/r1.err" "can never run" "the refusal"
expect_contains "$WORK/r1.err" "node-old: driver 525.60.13 too old for CUDA 12.8" "node-old's reason"
expect_contains "$WORK/r1.err" "node-new: driver 550.54.15 too old for CUDA 12.8" "node-new's reason"
cat >"$WORK/typo.yaml" <<YEOF
name: typo
environment: test-cu12
resources: {gpus: 1}
run: "true"
YEOF
run "$WORK/r2" "$GPUFLEET" submit "$WORK/typo.yaml"
expect_rc "$WORK/r2" 2 "an unknown environment is refused"
expect_contains "$WORK/r2.err" "unknown environment 'test-cu12'" "the refusal names it"
expect_contains "$WORK/r2.err" "typo.yaml:2:14: environment: unknown environment" "the refusal names the field's line and column"

# 2. Only node-new can run test-cu124: the job goes there, cold.
cat >"$WORK/cu124.yaml" <<YEOF
name: in-env
environment: test-cu124
resources: {gpus: 1}
run: python3 -c 'import os, sys; print("PREFIX", sys.prefix); print("VENV", os.environ["VIRTUAL_ENV"])'
YEOF
FIRST="$(submit_job "$WORK/cu124.yaml")"
WATCH_JOBS+=("$FIRST")
wait_until "job $FIRST succeeds" 60 job_state_is "$FIRST" succeeded
[[ "$(job_nodes "$FIRST")" == node-new ]] || fail "job $FIRST ran on $(job_nodes "$FIRST"), not node-new"
job_history "$FIRST" >"$WORK/h1"
grep -q "environment test-cu124 prepared in .* (cold start)" "$WORK/h1" || fail "history of $FIRST: $(cat "$WORK/h1")"
"$GPUFLEET" logs "$FIRST" </dev/null >"$WORK/log1" 2>&1 || true
grep -q "PREFIX $WORK/agents/node-new/envs/test-cu124" "$WORK/log1" || fail "the job's python was not the environment's: $(cat "$WORK/log1")"

# 3. node-new now has it prepared; the next job starts warm.
has_ready() { api GET /v1/nodes | json_get "next(n['environments_ready'] for n in j['nodes'] if n['name'] == '$1')" | grep "$2" >/dev/null; }
wait_until "node-new reports test-cu124 prepared" 30 has_ready node-new test-cu124
run "$WORK/r3" "$GPUFLEET" nodes node-new
expect_contains "$WORK/r3.out" "prepared:     test-cu124" "nodes NODE lists it"
SECOND="$(submit_job "$WORK/cu124.yaml")"
WATCH_JOBS+=("$SECOND")
wait_until "job $SECOND succeeds" 60 job_state_is "$SECOND" succeeded
# Through a file, as above: `grep -q` stops reading at its match, and the writer's next line would
# then fail the pipeline with a broken pipe.
job_history "$SECOND" >"$WORK/h2"
grep -q "environment test-cu124 was ready (warm start)" "$WORK/h2" || fail "history of $SECOND: $(cat "$WORK/h2")"
# /metrics: two starts with an environment, one of them warm (0 s).
api GET /metrics >"$WORK/metrics"
grep -q '^gpufleet_job_environment_seconds_count 2$' "$WORK/metrics" || fail "metrics: $(grep environment "$WORK/metrics")"
grep -q '^gpufleet_job_environment_seconds_bucket{le="0"} 1$' "$WORK/metrics" || fail "metrics: $(grep environment "$WORK/metrics")"

# 4. Prewarm: a new node has it before any job.
AGENT_GPUS=1xA100 cluster_start_agent node-warm "${ENV_FLAGS[@]}" --prewarm test-cu124
wait_until "node-warm reports test-cu124 prepared" 30 has_ready node-warm test-cu124

# 5. A gang that asks for a verified network (needs PyTorch for the all-reduce).
if "$ENV_PYTHON" -c 'import torch' 2>/dev/null; then
  cat >"$WORK/gang.yaml" <<YEOF
name: verified-gang
network: verified
resources: {gpus: 1, nodes: 2}
run: echo "rank \$NODE_RANK of \$NNODES started"
YEOF
  GANG="$(submit_job "$WORK/gang.yaml")"
  WATCH_JOBS+=("$GANG")
  wait_until "gang $GANG succeeds" 120 job_state_is "$GANG" succeeded
  "$GPUFLEET" logs "$GANG" </dev/null >"$WORK/gang.log" 2>&1 || true
  grep -q 'gpufleet: network check: .*"busbw_gbs"' "$WORK/gang.log" || fail "gang log: $(cat "$WORK/gang.log")"
  grep -q "rank 1 of 2 started" "$WORK/gang.log" || fail "gang log: $(cat "$WORK/gang.log")"
fi

echo PASS
