#!/usr/bin/env bash
# Autoscaling on the local provider (an emulated cloud: renting starts a `gpufleet agent` with fake
# GPUs after a boot delay, spot instances get interrupted on a replayed schedule with an AWS-format
# notice). A controller starts with no nodes and a pool of two offers: 1 x H100 spot at $1/h and
# 1 x H100 on-demand at $3/h.
#   1. A queue triggers the right rental: a checkpointing job makes the pool rent the cheaper spot
#      node (`gpufleet pool` lists it, as JSON and as a table); the job runs there.
#   2. A spot interruption moves it: the provider's notice reaches the agent, the node drains, the
#      job saves its counter and is requeued; after one spot interruption the job falls back to
#      on-demand, so the pool rents an on-demand node, where the job resumes from its checkpoint
#      (attempt 2) and succeeds. The interrupted instance's node leaves the cluster.
#   3. Idle nodes are released: the on-demand node, idle for idle_duration, is released; no
#      instance and no agent process is left.
#   4. A hard budget stops admission: a team whose budget is spent gets no new start and no rent,
#      while another team's job rents a node and runs.
#   5. Nothing leaks after a controller restart: the controller is killed (-9) while that job
#      runs; restarted on the same data directory and pool it adopts the instance (no second
#      rent, the job keeps attempt 1), and once the job ends the node is released and nothing is
#      left: no instance record, no agent process.
#   6. A team's budget stops a rented node's bill: team gamma ($0.15 hard budget) runs a 1-GPU
#      job that only an 8-GPU $36/h node can take; the node is billed whole to gamma (its 7 idle
#      GPUs as rented-idle cost), so the team is stopped after about 13 s (its stop lead: the
#      job's 1 s grace and the server's 1 s release lead), the job is stopped and held, the node
#      released at once, and gamma's bill stops growing (rate 0) near its budget.
#
# Usage: pool_local_test.sh GPUFLEET_BINARY REPO_ROOT
GPUFLEET="$1"
REPO="$2"
source "$REPO/tests/cluster_lib.sh"

CLOUD="$WORK/cloud"
MARK="$WORK/marks"
CKPT="$WORK/ckpt"
mkdir -p "$MARK" "$CKPT" "$CLOUD"
NOTICE_PORT="$(free_port)"
T0_MS="$("$PYTHON" -c 'import time; print(int(time.time() * 1000))')"

# Agents the pool starts are not children of this script: find them by their data directory.
pool_agents() { pgrep -f -- "--data-dir $CLOUD/agents/" || true; }
kill_pool_agents() {
  local pid
  for pid in $(pool_agents); do kill -9 -- "-$pid" 2>/dev/null || kill -9 "$pid" 2>/dev/null || true; done
}
trap 'rc=$?; set +e; kill_pool_agents; (exit $rc); cluster_cleanup' EXIT

cat >"$WORK/pool.yaml" <<EOF
provider:
  kind: local
  state_dir: $CLOUD
  agent_command: ['{gpufleet}', agent, --server, '{server}', --join-token-file, '{join_token_file}',
                  --name, '{name}', --data-dir, '{state_dir}/agents/{name}', --fake-gpus, '{gpus}x{gpu_model}',
                  --market, '{market}', --price-per-hour, '{price_per_hour}', --label, 'zone={zone}',
                  --spot-notice-url, '{notice_url}', --spot-notice-interval, 200ms, --max-disconnected, 60s,
                  --job-user, root, --allow-root-jobs, --workdir-root, /]
  boot_delay: 1s
  stop_grace: 2s
  notice_port: $NOTICE_PORT
  notice_lead: 4s
  interruptions:
    schedule: [{after: 2s, instance: 0}]
offers:
  - {name: spot, gpu: H100, gpus: 1, market: spot, price_per_hour: 1, boot_estimate: 1s, zone: a}
  - {name: od, gpu: H100, gpus: 1, market: on-demand, price_per_hour: 3, boot_estimate: 1s, zone: a}
  - {name: big, gpu: H100, gpus: 8, market: on-demand, price_per_hour: 36, boot_estimate: 1s, zone: b}
idle_duration: 3s
boot_timeout: 60s
reconcile_interval: 2s
spot_fallback_after_preemptions: 1
EOF

cluster_start_server --heartbeat 200ms --lost-after 10s --budget-release-lead 1s --pool "$WORK/pool.yaml"

pool_json() { api GET /v1/pool; }
pool_count() { pool_json | json_get "len(j['instances'])"; }
pool_has() { [[ "$(pool_json | json_get "sorted(i['name'] for i in j['instances'])")" == "$1" ]]; }
cloud_records() { ls "$CLOUD/instances" 2>/dev/null | wc -l; }
nothing_left() { [[ "$(pool_count)" == 0 && "$(cloud_records)" == 0 && -z "$(pool_agents)" ]]; }

# --- 1. the queue triggers a rental of the cheaper offer ----------------------------------------
cat >"$WORK/ckpt.yaml" <<EOF
name: ckpt
team: alpha
resources: {gpus: 1}
checkpoint: {dir: $CKPT, signal: SIGTERM, grace: 20s}
run: |
  n=0
  if [ -f "\$GPUFLEET_CHECKPOINT_DIR/counter" ]; then n=\$(cat "\$GPUFLEET_CHECKPOINT_DIR/counter"); fi
  start=\$n
  echo \$n > $MARK/start.a\$GPUFLEET_ATTEMPT
  trap 'echo \$n > "\$GPUFLEET_CHECKPOINT_DIR/counter.tmp" && mv "\$GPUFLEET_CHECKPOINT_DIR/counter.tmp" "\$GPUFLEET_CHECKPOINT_DIR/counter"; exit 0' TERM
  while :; do
    n=\$((n + 1))
    echo \$n > $MARK/progress.a\$GPUFLEET_ATTEMPT
    if [ "\$GPUFLEET_ATTEMPT" -ge 2 ] && [ \$n -ge \$((start + 5)) ]; then exit 0; fi
    sleep 0.1 & wait \$!
  done
EOF
JOB="$(submit_job "$WORK/ckpt.yaml")"
WATCH_JOBS+=("$JOB")
wait_until "the pool rents a spot node for job $JOB" 30 pool_has '["gf-spot-0"]'
[[ "$(pool_json | json_get "j['instances'][0]['for_jobs']")" == "[$JOB]" ]] ||
  fail "gf-spot-0 should be rented for job $JOB: $(pool_json)"
grep -qF gf-spot-0 <<<"$("$GPUFLEET" pool -o json </dev/null | json_get "[i['name'] for i in j['instances']]")" ||
  fail "gpufleet pool -o json should list gf-spot-0: $("$GPUFLEET" pool -o json </dev/null)"
grep -qE "^gf-spot-0 +(creating|booting|up|draining) +spot " <<<"$("$GPUFLEET" pool </dev/null)" ||
  fail "the gpufleet pool table should name gf-spot-0 and its offer: $("$GPUFLEET" pool </dev/null)"
wait_until "job $JOB runs" 30 job_state_is "$JOB" running
[[ "$(job_nodes "$JOB")" == gf-spot-0 ]] || fail "job $JOB should run on gf-spot-0, runs on '$(job_nodes "$JOB")'"
echo "step 1: the queue rented gf-spot-0 (spot, \$1/h); job $JOB runs there"

# --- 2. the spot interruption moves the job; it resumes on on-demand ---------------------------
wait_until "job $JOB saved its counter on the notice" 30 test -s "$CKPT/counter"
SAVED="$(cat "$CKPT/counter")"
wait_until "job $JOB succeeds" 60 job_state_is "$JOB" succeeded
HISTORY="$(job_history "$JOB")"
grep -qF "spot interruption notice" <<<"$HISTORY" || fail "history does not name the notice: $HISTORY"
[[ "$(job_field "$JOB" "j['attempt']")" == 2 ]] || fail "job $JOB should have succeeded as attempt 2: $HISTORY"
NODE2="$(job_nodes "$JOB")"
[[ "$NODE2" == gf-od-* ]] || fail "attempt 2 should have run on a rented on-demand node, ran on '$NODE2'"
[[ "$(cat "$MARK/start.a2")" == "$SAVED" ]] || fail "attempt 2 started at $(cat "$MARK/start.a2"), not at checkpoint $SAVED"
wait_until "the interrupted node gf-spot-0 leaves the cluster" 30 node_is gf-spot-0 gone
echo "step 2: interrupted on gf-spot-0 at $SAVED, resumed on $NODE2 as attempt 2 and succeeded"

# --- 3. idle nodes are released ------------------------------------------------------------------
wait_until "the idle node $NODE2 is released" 30 node_is "$NODE2" gone
wait_until "no instance, record or agent is left" 30 nothing_left
grep -q "pool: releasing $NODE2: idle for" "$SERVER_DIR/server.log" || fail "server.log should say why $NODE2 was released"
echo "step 3: $NODE2 released after idle_duration; nothing left"

# --- 4. a spent hard budget stops admission (and renting) --------------------------------------
api POST /v1/teams/alpha/budget "{\"hard\": 0.000001, \"since_ms\": $T0_MS}" >/dev/null
over_hard() { [[ "$(api GET /v1/cost | json_get "[t['over_hard'] for t in j['teams'] if t['team'] == 'alpha'][0]")" == true ]]; }
over_hard || fail "team alpha should be over its hard budget: $(api GET /v1/cost)"
cat >"$WORK/alpha.yaml" <<EOF
name: held
team: alpha
resources: {gpus: 1}
run: echo never
EOF
cat >"$WORK/beta.yaml" <<EOF
name: beta-job
team: beta
resources: {gpus: 1}
run: |
  touch $MARK/beta.started
  while [ ! -f $MARK/beta.go ]; do sleep 0.1; done
EOF
HELD="$(submit_job "$WORK/alpha.yaml")"
BETA="$(submit_job "$WORK/beta.yaml")"
WATCH_JOBS+=("$HELD" "$BETA")
wait_until "job $BETA (team beta) runs on a rented node" 30 job_state_is "$BETA" running
BETA_NODE="$(job_nodes "$BETA")"
[[ "$(pool_count)" == 1 ]] || fail "only beta's job should have a rented node: $(pool_json)"
[[ "$(pool_json | json_get "j['instances'][0]['for_jobs']")" == "[$BETA]" ]] || fail "rented for: $(pool_json)"
job_state_is "$HELD" pending || fail "job $HELD of team alpha should be held, is $(job_field "$HELD" "j['state']")"
grep -q "team alpha has reached its hard budget" <<<"$("$GPUFLEET" explain "$HELD" </dev/null)" ||
  fail "explain should name the budget: $("$GPUFLEET" explain "$HELD" </dev/null)"
"$GPUFLEET" cancel "$HELD" </dev/null >/dev/null
echo "step 4: team alpha's job held by its budget, nothing rented for it; team beta's job runs on $BETA_NODE"

# --- 5. kill -9 the controller; restart; nothing leaks ------------------------------------------
kill -9 -- "-$SERVER_PID" 2>/dev/null || kill -9 "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=""
PORT="${URL##*:}"
setsid "$GPUFLEET" server --data-dir "$SERVER_DIR" --listen "127.0.0.1:$PORT" --agent-listen "${AGENT_URL#http://}" \
  --heartbeat 200ms --lost-after 10s --budget-release-lead 1s --pool "$WORK/pool.yaml" </dev/null >>"$SERVER_DIR/server.log" 2>&1 &
SERVER_PID=$!
wait_until "the restarted server answers" 30 curl -sf "$URL/v1/health"
wait_until "the restarted pool adopts $BETA_NODE" 30 pool_has "[\"$BETA_NODE\"]"
touch "$MARK/beta.go"
wait_until "job $BETA succeeds" 60 job_state_is "$BETA" succeeded
[[ "$(job_field "$BETA" "j['attempt']")" == 1 ]] || fail "job $BETA should have kept attempt 1 across the restart"
wait_until "the idle node $BETA_NODE is released" 30 node_is "$BETA_NODE" gone
wait_until "no instance, record or agent is left after the restart" 30 nothing_left
RENTS="$(grep -c "pool: rented" "$SERVER_DIR/server.log")"
[[ "$RENTS" == 3 ]] || fail "expected 3 rentals in all (spot, on-demand, beta's), server.log has $RENTS"
echo "step 5: after kill -9 and restart, $BETA_NODE was adopted, released when idle; nothing leaked"

# --- 6. a team's budget stops a rented node's bill -----------------------------------------------
NOW_MS="$("$PYTHON" -c 'import time; print(int(time.time() * 1000))')"
api POST /v1/teams/gamma/budget "{\"hard\": 0.15, \"since_ms\": $NOW_MS}" >/dev/null
cat >"$WORK/gamma.yaml" <<EOF
name: gamma-job
team: gamma
resources: {gpus: 1}
constraints: {zone: b}
checkpoint: {signal: SIGTERM, grace: 1s}
run: |
  touch $MARK/gamma.started
  trap 'exit 0' TERM
  while :; do sleep 0.1 & wait \$!; done
EOF
GAMMA="$(submit_job "$WORK/gamma.yaml")"
WATCH_JOBS+=("$GAMMA")
gamma() { api GET /v1/cost | json_get "[t for t in j['teams'] if t['team'] == 'gamma'][0]$1"; }
big_rented() { [[ "$(pool_json | json_get "[i['offer'] for i in j['instances']]")" == '["big"]' ]]; }
wait_until "the pool rents the 8-GPU node for job $GAMMA" 30 big_rented
BIG="$(pool_json | json_get "j['instances'][0]['name']")"
[[ "$(pool_json | json_get "j['instances'][0]['team']")" == gamma ]] || fail "$BIG should be billed to gamma: $(pool_json)"
wait_until "job $GAMMA runs on $BIG" 30 test -f "$MARK/gamma.started"
[[ "$(gamma "['rate_micros_per_hour']")" == 36000000 ]] || fail "gamma should pay the whole node, \$36/h: $(api GET /v1/cost)"
hard_stopped() { [[ "$(gamma "['hard_stop']")" == true ]]; }
not_billed() { [[ "$(gamma "['rate_micros_per_hour']")" == 0 ]]; }
wait_until "team gamma's hard budget stops it" 60 hard_stopped
wait_until "$BIG is released" 30 node_is "$BIG" gone
wait_until "nothing is billed to gamma any more" 30 not_billed
SPENT="$(gamma "['spent_micros']")"
IDLE="$(gamma "['rented_idle_micros']")"
# The stop lead keeps the bill at the budget when the job exits within its grace and the pool
# releases within the lead; a loaded machine may be a few seconds late ($0.01/s), not minutes.
(( SPENT >= 100000 && SPENT <= 250000 )) || fail "gamma should have spent about \$0.15, spent $SPENT micro-USD"
(( IDLE > SPENT / 2 )) || fail "most of gamma's bill should be the node's 7 idle GPUs: idle $IDLE of $SPENT"
job_state_is "$GAMMA" pending || fail "job $GAMMA should be held, is $(job_field "$GAMMA" "j['state']")"
grep -q "team gamma was stopped by its hard budget" <<<"$("$GPUFLEET" explain "$GAMMA" </dev/null)" ||
  fail "explain should name the budget: $("$GPUFLEET" explain "$GAMMA" </dev/null)"
grep -E "^gamma " <<<"$("$GPUFLEET" cost --team gamma </dev/null)" | grep "hard budget reached: stopped" >/dev/null ||
  fail "gpufleet cost should show gamma stopped: $("$GPUFLEET" cost --team gamma </dev/null)"
# The total names the rented nodes' idle part beside the jobs' cost (the bill is both).
[[ "$(api GET "/v1/cost?team=gamma" | json_get "j['rented_idle_micros']")" == "$(gamma "['rented_idle_micros']")" ]] ||
  fail "/v1/cost's rented_idle_micros should be gamma's: $(api GET "/v1/cost?team=gamma")"
grep -q "of rented nodes no job used (RENTED IDLE): " <<<"$("$GPUFLEET" cost --team gamma </dev/null)" ||
  fail "gpufleet cost's total should name the rented-idle part: $("$GPUFLEET" cost --team gamma </dev/null)"
grep -q "pool: releasing $BIG: .*hard budget" "$SERVER_DIR/server.log" || fail "server.log should say why $BIG went"
[[ "$(pool_count)" == 0 ]] || fail "nothing should be rented for the held job: $(pool_json)"
"$GPUFLEET" cancel "$GAMMA" </dev/null >/dev/null
wait_until "no instance, record or agent is left" 30 nothing_left
echo "step 6: gamma's \$0.15 budget stopped its job and released the 8-GPU node $BIG; spent $SPENT micro-USD ($IDLE rented-idle)"
echo PASS
