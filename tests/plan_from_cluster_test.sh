#!/usr/bin/env bash
# Given a controller on 127.0.0.1 with one fake 8 x H100 agent that ran three jobs (real
# processes), expect:
#   - `gpufleet plan --from-cluster --since 1w --apply pool.yaml` to plan from the controller's own
#     history (the config file's server and token, as every client command) and write a pool file
#     that a second `gpufleet server --pool pool.yaml` loads and serves (`gpufleet pool` lists the
#     plan's offers);
#   - the `history -o jsonl` export of the same jobs to plan the same with --trace;
#   - a second --apply to refuse to replace the file (exit 2, file unchanged) unless --force;
#   - `plan --help` to teach --from-cluster and --apply with an example of each;
#   - under a week of history without --since, no finished jobs, an unreachable controller and a
#     refused token to fail with the fix in the message (exit 2, 2, 3, 3) and write nothing.
#
# Usage: plan_from_cluster_test.sh PATH/TO/gpufleet
GPUFLEET="${1:?usage: plan_from_cluster_test.sh GPUFLEET}"
source "$(dirname "$0")/cluster_lib.sh"

# --- plan --help teaches both flags ----------------------------------------------------------
run "$WORK/help" "$GPUFLEET" plan --help
expect_rc "$WORK/help" 0 "plan --help"
for text in --from-cluster --since --apply --force --pool-provider "--apply pool.yaml" "gpufleet server --pool pool.yaml"; do
  expect_contains "$WORK/help.out" "$text" "plan --help teaches $text"
done

cluster_start_server
AGENT_GPUS=8xH100 cluster_start_agent node-a
for i in 1 2 3; do
  run "$WORK/run$i" "$GPUFLEET" run --gpus 8 --name "train-$i" -- true
  expect_rc "$WORK/run$i" 0 "gpufleet run $i"
done
finished() {
  [[ "$("$GPUFLEET" history -o json | json_get "sum(1 for x in j['jobs'] if x['state'] == 'succeeded')")" == 3 ]]
}
wait_until "the three jobs succeeded" 30 finished

# One instance type, so the plan's prices are known: 8 x H100 on demand and on spot.
cat >"$WORK/offers.csv" <<'CSV'
cloud,region,zone,instance_type,accelerator,gpu_count,gpu_mem_mib,vcpus,ram_gib,ondemand_usd_h,host_usd_h,spot_usd_h,spot_kind,aws_interruption_bucket
aws,us-east-1,,p5.48xlarge,H100,8,,192,2048,98.32,,39.328,estimated,2
CSV
PLAN=("$GPUFLEET" plan --catalog "$WORK/offers.csv" --frontier none --threads 1 --no-progress)

# --- Under a week of history: the fix is --since ---------------------------------------------
run "$WORK/short" "${PLAN[@]}" --from-cluster --apply "$WORK/pool.yaml"
expect_rc "$WORK/short" 2 "plan --from-cluster on minutes of history"
expect_contains "$WORK/short.err" "--since 1w" "the short-history error names the fix"
[[ ! -e "$WORK/pool.yaml" ]] || fail "a failed plan wrote pool.yaml"

# --- Plan from the cluster, apply ------------------------------------------------------------
run "$WORK/plan" "${PLAN[@]}" --from-cluster --since 1w -o json --apply "$WORK/pool.yaml"
expect_rc "$WORK/plan" 0 "plan --from-cluster --since 1w --apply"
expect_contains "$WORK/plan.err" "3 finished jobs" "plan --from-cluster says what it read"
expect_contains "$WORK/plan.err" "Run it:  gpufleet server --pool $WORK/pool.yaml" "plan --apply says how to run the pool"
"$PYTHON" - "$WORK/plan.out" "$WORK/pool.yaml" "$URL" <<'PY' || { show "$WORK/plan"; cat "$WORK/pool.yaml" >&2; fail "the plan or the pool file is wrong"; }
import json, sys
r = json.load(open(sys.argv[1]))
assert r["trace"] == "the cluster at " + sys.argv[3], r["trace"]
assert r["jobs"] == 3 and r["models"][0]["gpu_model"] == "H100", (r["jobs"], r["models"][0]["gpu_model"])
assert r["history"]["hours"] >= 168, r["history"]
text = open(sys.argv[2]).read()
assert "instance_type: 'p5.48xlarge'" in text and "market: on-demand" in text and "price_per_hour: 98.32" in text, text
rec = next(s for s in r["verification"] if s["recommended"])
assert "min_nodes: %d\n" % rec["reserved_nodes"] in text, (rec, text)
PY

# --- The export of the same jobs plans the same with --trace ------------------------------------
run "$WORK/jsonl" "$GPUFLEET" history -o jsonl
expect_rc "$WORK/jsonl" 0 "history -o jsonl"
# (On the hour: the planner counts demand by the hour and refuses a --from off it.)
from="$("$PYTHON" -c 'import datetime as d; print((d.datetime.now(d.timezone.utc) - d.timedelta(days=7, hours=1)).strftime("%Y-%m-%dT%H:00:00Z"))')"
run "$WORK/trace" "${PLAN[@]}" --trace "$WORK/jsonl.out" --from "$from" -o json
expect_rc "$WORK/trace" 0 "plan --trace on the history -o jsonl export"
"$PYTHON" - "$WORK/plan.out" "$WORK/trace.out" <<'PY' || fail "plan --trace of the export differs from plan --from-cluster"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["jobs"] == b["jobs"] == 3, (a["jobs"], b["jobs"])
assert a["models"][0]["forecast"]["history_gpu_hours"] == b["models"][0]["forecast"]["history_gpu_hours"], (a["models"][0]["forecast"], b["models"][0]["forecast"])
PY

# --- An existing file is replaced only with --force ------------------------------------------
cp "$WORK/pool.yaml" "$WORK/pool.before"
echo "# mine" >>"$WORK/pool.yaml"
run "$WORK/again" "${PLAN[@]}" --from-cluster --since 1w --apply "$WORK/pool.yaml"
expect_rc "$WORK/again" 2 "plan --apply over an existing file"
expect_contains "$WORK/again.err" "--force" "the refusal names --force"
tail -1 "$WORK/pool.yaml" | grep -x "# mine" >/dev/null || fail "plan --apply changed a file it refused to replace"
run "$WORK/force" "${PLAN[@]}" --from-cluster --since 1w --apply "$WORK/pool.yaml" --force
expect_rc "$WORK/force" 0 "plan --apply --force"
! grep -q "# mine" "$WORK/pool.yaml" || fail "plan --apply --force did not replace the file"
ls -A "$WORK" | grep '\.tmp-' >/dev/null && fail "plan --apply left a temporary file behind"

# --- Errors: the fix in the message, nothing written -----------------------------------------
run "$WORK/team" "${PLAN[@]}" --from-cluster --since 1w --team nobody --apply "$WORK/none.yaml"
expect_rc "$WORK/team" 2 "plan --from-cluster with no finished jobs"
expect_contains "$WORK/team.err" "no finished job that ran of team nobody" "the empty-history error"
run "$WORK/down" "${PLAN[@]}" --from-cluster --server "http://127.0.0.1:$(free_port)" --apply "$WORK/none.yaml"
expect_rc "$WORK/down" 3 "plan --from-cluster with no controller there"
expect_contains "$WORK/down.err" "cannot reach the controller" "the unreachable error"
run "$WORK/token" "${PLAN[@]}" --from-cluster --token wrong --apply "$WORK/none.yaml"
expect_rc "$WORK/token" 3 "plan --from-cluster with a refused token"
expect_contains "$WORK/token.err" "token was refused" "the refused-token error"
[[ ! -e "$WORK/none.yaml" ]] || fail "a failed plan wrote none.yaml"

# --- The written file runs: a second controller with --pool serves its offers ------------------
port="$(free_port)"
agent_port="$(free_port)"
mkdir -p "$WORK/pooled"
setsid "$GPUFLEET" server --data-dir "$WORK/pooled" --listen "127.0.0.1:$port" --agent-listen "127.0.0.1:$agent_port" \
  --pool "$WORK/pool.yaml" </dev/null >"$WORK/pooled/server.log" 2>&1 &
POOLED_PID=$!
AGENT_PID[pooled-server]=$POOLED_PID  # torn down with the rest on exit
pool_served() {
  kill -0 "$POOLED_PID" || { cat "$WORK/pooled/server.log" >&2; fail "gpufleet server --pool pool.yaml exited"; }
  [[ -s "$WORK/pooled/admin.token" ]] &&
    "$GPUFLEET" pool -o json --server "http://127.0.0.1:$port" --token "$(cat "$WORK/pooled/admin.token")" >"$WORK/pool.json"
}
deadline=$((SECONDS + 30))
until pool_served 2>/dev/null; do
  kill -0 "$POOLED_PID" 2>/dev/null || { cat "$WORK/pooled/server.log" >&2; fail "gpufleet server --pool pool.yaml exited"; }
  ((SECONDS < deadline)) || fail "gpufleet server --pool pool.yaml did not serve its pool within 30s"
  sleep 0.1
done
"$PYTHON" - "$WORK/pool.json" "$WORK/pool.yaml" <<'PY' || { cat "$WORK/pool.json" >&2; fail "the running pool is not the written one"; }
import json, re, sys
p = json.load(open(sys.argv[1]))
names = sorted(o["name"] for o in p["offers"])
written = sorted(re.findall(r"^  - name: (\S+)$", open(sys.argv[2]).read(), re.M))
assert names == written and names, (names, written)
PY
echo PASS
