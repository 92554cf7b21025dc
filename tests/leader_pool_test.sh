#!/usr/bin/env bash
# The agents a pool rents follow a takeover (docs/operations.md). Two controllers A and B share one
# throwaway PostgreSQL and one pool file (the local provider: renting starts a `gpufleet agent`
# with fake GPUs, detached from the controller), each started with --agent-urls naming both agent
# listeners. A leads and rents a node for a queued job; the agent it starts is given both URLs.
# kill -9 of A: B takes over, adopts the instance from the store (no second rent), the rented
# agent re-registers with B and the job keeps its process and attempt.
#
# Usage: leader_pool_test.sh PATH/TO/gpufleet PATH/TO/gpufleet-test-postgres
GPUFLEET="${1:?usage: leader_pool_test.sh GPUFLEET GPUFLEET_TEST_POSTGRES}"
PG_TOOL="${2:?usage: leader_pool_test.sh GPUFLEET GPUFLEET_TEST_POSTGRES}"
source "$(dirname "$0")/cluster_lib.sh"

CLOUD="$WORK/cloud"
mkdir -p "$CLOUD"
# Agents the pool starts are not children of any controller: find them by their data directory.
pool_agents() { pgrep -f -- "--data-dir $CLOUD/agents/" || true; }
OTHER_PIDS=()
coproc PG { exec "$PG_TOOL" 2>"$WORK/pg.err"; }
PG_TOOL_PID=$PG_PID
stop_all() {
  local pid
  for pid in "${OTHER_PIDS[@]}"; do _kill_tree_groups "$pid"; done
  for pid in $(pool_agents); do _kill_tree_groups "$pid"; done
  exec {PG[1]}>&- 2>/dev/null || true
  wait "$PG_TOOL_PID" 2>/dev/null || true
}
trap 'rc=$?; set +e; stop_all; (exit $rc); cluster_cleanup' EXIT
CLUSTER_LOGS=("$WORK/A/server.log" "$WORK/B/server.log" "$CLOUD/logs")
read -r -t 120 PG_URL <&"${PG[0]}" || fail "could not start PostgreSQL: $(cat "$WORK/pg.err")"

for name in A B; do
  eval "${name}_PORT=$(free_port)"
  eval "${name}_AGENT_PORT=$(free_port)"
  eval "${name}_URL=http://127.0.0.1:\$${name}_PORT"
  eval "${name}_AGENT_URL=http://127.0.0.1:\$${name}_AGENT_PORT"
done

cat >"$WORK/pool.yaml" <<XEOF2
provider:
  kind: local
  state_dir: $CLOUD
  agent_command: ['{gpufleet}', agent, --server, '{server}', --join-token-file, '{join_token_file}',
                  --name, '{name}', --data-dir, '{state_dir}/agents/{name}', --fake-gpus, '{gpus}x{gpu_model}',
                  --market, '{market}', --price-per-hour, '{price_per_hour}', --max-disconnected, 60s,
                  --job-user, root, --allow-root-jobs, --workdir-root, /]
  boot_delay: 1s
  stop_grace: 2s
offers:
  - {name: od, gpu: H100, gpus: 1, market: on-demand, price_per_hour: 3, boot_estimate: 1s}
idle_duration: 60s
boot_timeout: 60s
reconcile_interval: 1s
XEOF2

# start_controller NAME: on its ports and data directory, both agent URLs for rented agents.
start_controller() {
  local name="$1" port agent_port
  port="$(eval echo "\$${name}_PORT")"
  agent_port="$(eval echo "\$${name}_AGENT_PORT")"
  mkdir -p "$WORK/$name"
  setsid "$GPUFLEET" server --data-dir "$WORK/$name" --listen "127.0.0.1:$port" \
    --agent-listen "127.0.0.1:$agent_port" --store "$PG_URL" --leader-lease 2s \
    --heartbeat 200ms --lost-after 15s --pool "$WORK/pool.yaml" --agent-urls "$A_AGENT_URL,$B_AGENT_URL" \
    </dev/null >"$WORK/$name/server.log" 2>&1 &
  OTHER_PIDS+=("$!")
  eval "${name}_PID=$!"
}
health_is() { [[ "$(curl -s -o /dev/null -w '%{http_code}' "$1/v1/health")" == "$2" ]]; }
pool_names() { api GET /v1/pool | json_get "','.join(sorted(i['name'] for i in j['instances']))"; }

# --agent-urls is checked before anything starts.
run "$WORK/bad" "$GPUFLEET" server --data-dir "$WORK/bad" --listen 127.0.0.1:0 --pool "$WORK/pool.yaml" \
  --agent-urls "127.0.0.1:1"
[[ "$RC" != 0 ]] || fail "a bad --agent-urls was taken"
grep -q -- "--agent-urls: the controller URL '127.0.0.1:1' must start with http://" "$WORK/bad.err" ||
  { show "$WORK/bad"; fail "the message for a bad --agent-urls"; }

start_controller A
wait_until "A leads" 30 health_is "$A_URL" 200
start_controller B
wait_until "B stands by" 30 health_is "$B_URL" 503
URL="$A_URL"
TOKEN="$(cat "$WORK/A/admin.token")"
export GPUFLEET_CONFIG="$WORK/cli-config.yaml"
printf 'server: [%s, %s]\ntoken: %s\n' "$A_URL" "$B_URL" "$TOKEN" >"$GPUFLEET_CONFIG"
unset GPUFLEET_SERVER GPUFLEET_TOKEN

keeper_submit
wait_until "job $JOB runs on a rented node" 60 job_state_is "$JOB" running
keeper_started
RENTED="$(pool_names)"
[[ -n "$RENTED" && "$RENTED" != *,* ]] || fail "A's pool: $(api GET /v1/pool)"
AGENT="$(pool_agents | head -1)"
[[ -n "$AGENT" ]] || fail "no rented agent process"
tr '\0' ' ' <"/proc/$AGENT/cmdline" | grep -- "--server $A_AGENT_URL,$B_AGENT_URL " >/dev/null ||
  fail "the rented agent's command line: $(tr '\0' ' ' <"/proc/$AGENT/cmdline")"

# kill -9 of A (not of the rented agent, which runs on its own machine as far as A knows).
kill -9 "$A_PID"
killed_at=$SECONDS
wait_until "B leads after kill -9 of A" 30 health_is "$B_URL" 200
echo "takeover after kill -9: $((SECONDS - killed_at)) s (lease 2s)"
URL="$B_URL"
wait_until "the rented agent reports to B" 30 bash -c "grep -q 'registered as .* with $B_AGENT_URL' '$CLOUD'/logs/*.log"
wait_until "the rented node is up on B" 30 node_is "$RENTED" up
keeper_kept
# B adopted A's instance: the same one, and no second rent.
[[ "$(pool_names)" == "$RENTED" ]] || fail "B's pool: $(api GET /v1/pool)"
[[ "$(ls "$CLOUD/instances" | wc -l)" == 1 ]] || fail "the provider's instances: $(ls "$CLOUD/instances")"
kill -0 "$AGENT" 2>/dev/null || fail "the rented agent $AGENT is gone"

echo "PASS: a rented agent given both controllers' agent URLs follows the takeover; B adopts the instance and the job keeps its process"
