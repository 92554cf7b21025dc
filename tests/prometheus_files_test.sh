#!/usr/bin/env bash
# The Prometheus and Grafana files of examples/ are what users load as they are:
#   - examples/prometheus/gpufleet-alerts.yml passes `promtool check rules`, and its unit tests
#     (gpufleet-alerts.test.yml: each rule fires, stays quiet and resolves) pass `promtool test
#     rules`; examples/prometheus/prometheus.yml passes `promtool check config` (with its token and
#     CA file paths pointed at files that exist);
#   - every query of examples/grafana/gpufleet-dashboard.json and of the rules names only metrics
#     (and labels) of tests/data/metrics_sample.txt, a /metrics page with one sample of each series
#     the controller exports (scripts/check_grafana.py); the sample holds every series of that list;
#   - scripts/check_grafana.py accepts tricky but valid queries and reports, naming the panel or
#     rule, each kind of mistake it is for: an unknown metric, a histogram's base name, an
#     undefined variable, a hard-coded datasource, an unbalanced bracket, an unknown label;
#   - where a Prometheus binary is installed: a real Prometheus that scrapes the sample page loads
#     the rules and answers every query of the dashboard and the rules without an error, and the
#     checker reports one it cannot evaluate.
# Skipped (exit 77) where promtool is not installed (apt-get install prometheus).
#
# Usage: prometheus_files_test.sh REPO_ROOT
REPO="${1:?usage: prometheus_files_test.sh REPO_ROOT}"
PROMTOOL="${PROMTOOL:-$(command -v promtool || true)}"
if [[ -z "$PROMTOOL" ]]; then
  echo "SKIP: promtool not found (apt-get install prometheus)"
  exit 77
fi
source "$REPO/tests/lib.sh"

RULES="$REPO/examples/prometheus/gpufleet-alerts.yml"
RULE_TESTS="$REPO/examples/prometheus/gpufleet-alerts.test.yml"
CONFIG="$REPO/examples/prometheus/prometheus.yml"
DASHBOARD="$REPO/examples/grafana/gpufleet-dashboard.json"
SAMPLE="$REPO/tests/data/metrics_sample.txt"
CHECKER="$REPO/scripts/check_grafana.py"

# 1. promtool: the rules, their unit tests, the example configuration.
run "$WORK/check_rules" "$PROMTOOL" check rules "$RULES"
expect_rc "$WORK/check_rules" 0 "promtool check rules gpufleet-alerts.yml"
expect_contains "$WORK/check_rules.out" "SUCCESS: 11 rules found" "promtool check rules gpufleet-alerts.yml"
if grep -qi "warn\|lint" "$WORK/check_rules.out" "$WORK/check_rules.err"; then
  show "$WORK/check_rules"
  fail "promtool check rules gpufleet-alerts.yml is not clean"
fi

run "$WORK/test_rules" "$PROMTOOL" test rules "$RULE_TESTS"
expect_rc "$WORK/test_rules" 0 "promtool test rules gpufleet-alerts.test.yml"
expect_contains "$WORK/test_rules.out" "SUCCESS" "promtool test rules gpufleet-alerts.test.yml"

mkdir -p "$WORK/config"
cp "$CONFIG" "$RULES" "$WORK/config/"
: >"$WORK/config/metrics.token"
: >"$WORK/config/ca.pem"
sed -i -e "s#/etc/prometheus/gpufleet-metrics.token#$WORK/config/metrics.token#" \
  -e "s#/etc/gpufleet/ca.pem#$WORK/config/ca.pem#" "$WORK/config/prometheus.yml"
run "$WORK/check_config" "$PROMTOOL" check config "$WORK/config/prometheus.yml"
expect_rc "$WORK/check_config" 0 "promtool check config prometheus.yml"
expect_contains "$WORK/check_config.out" "SUCCESS: 11 rules found" "promtool check config prometheus.yml (its rule file)"

# 2. The sample page holds every series the controller exports, and the dashboard's and the rules'
# queries name only metrics and labels it has.
for name in DCGM_FI_DEV_GPU_UTIL DCGM_FI_DEV_FB_USED DCGM_FI_DEV_FB_FREE DCGM_FI_DEV_GPU_TEMP \
  DCGM_FI_DEV_POWER_USAGE gpufleet_build_info gpufleet_jobs gpufleet_jobs_finished_total \
  gpufleet_queue_length gpufleet_queue_oldest_wait_seconds gpufleet_gpus gpufleet_gpus_allocated \
  gpufleet_gpus_allocated_idle gpufleet_nodes gpufleet_node_heartbeat_age_seconds \
  gpufleet_node_spot_notice gpufleet_node_quarantined gpufleet_node_storage_fault gpufleet_node_disk_free_bytes \
  gpufleet_node_disk_size_bytes gpufleet_scheduler_pass_duration_seconds_bucket \
  gpufleet_submit_duration_seconds_bucket gpufleet_store_commit_duration_seconds_bucket \
  gpufleet_api_requests_total gpufleet_team_spend_dollars gpufleet_team_budget_dollars \
  gpufleet_team_budget_remaining_dollars gpufleet_pool_instances gpufleet_spot_interruptions_total \
  gpufleet_preemptions_total gpufleet_job_restarts_total gpufleet_job_last_activity_age_seconds \
  gpufleet_job_stall_timeout_seconds gpufleet_job_progress_step gpufleet_alert gpufleet_alerts; do
  grep -qE "^$name(\{| )" "$SAMPLE" || fail "tests/data/metrics_sample.txt has no sample of $name"
done

run "$WORK/check" "$PYTHON" "$CHECKER" "$DASHBOARD" --rules "$RULES" --metrics "$SAMPLE" --strict-labels
expect_rc "$WORK/check" 0 "check_grafana.py on the dashboard and the rules against the sample /metrics"
expect_contains "$WORK/check.out" ": OK" "check_grafana.py on the dashboard and the rules"

# 3. The checker itself: valid queries that only look odd pass...
cat >"$WORK/good.json" <<'JSON'
{
  "templating": {"list": [
    {"type": "datasource", "name": "datasource", "query": "prometheus"},
    {"type": "query", "name": "Hostname", "includeAll": true, "allValue": ".*",
     "datasource": {"type": "prometheus", "uid": "${datasource}"},
     "query": {"query": "label_values(DCGM_FI_DEV_GPU_UTIL{team=~\"$team\"}, Hostname)", "refId": "A"}},
    {"type": "query", "name": "team", "datasource": "$datasource", "query": "label_values(team)"},
    {"type": "custom", "name": "k", "query": "5,10", "current": {"value": "5"}}
  ]},
  "panels": [
    {"type": "row", "title": "collapsed", "id": 1, "collapsed": true, "panels": [
      {"title": "tricky", "id": 2, "datasource": {"type": "prometheus", "uid": "${datasource}"}, "targets": [
        {"refId": "A", "expr": "label_replace(DCGM_FI_DEV_GPU_UTIL{Hostname=~\"${Hostname:regex}\"}, \"host\", \"$1\", \"Hostname\", \"(.*)\")"},
        {"refId": "B", "expr": "sum without (gpu, UUID) (DCGM_FI_DEV_GPU_TEMP) * on (Hostname) group_left (modelName) max by (Hostname) (DCGM_FI_DEV_POWER_USAGE offset 5m)"},
        {"refId": "C", "expr": "{__name__=\"gpufleet_queue_length\"} @ end() # a comment: not_a_metric\n + ignoring(x) sum(gpufleet_jobs{team=~\"[[team]]\", state!~\"a}b\"})"},
        {"refId": "D", "expr": "topk($k, sum by (le) (increase(gpufleet_submit_duration_seconds_bucket[$__range])))"},
        {"refId": "E", "expr": "up{job=\"gpufleet-controller\"} == bool 0 or vector(0) and ALERTS{alertstate=\"firing\"}"},
        {"refId": "F", "expr": "gpufleet:gpu_util:avg5m > 0.5 unless 1e3 < Inf"}
      ]}
    ]}
  ]
}
JSON
cat >"$WORK/good_rules.yml" <<'YAML'
groups:
  - name: g
    rules:
      - record: gpufleet:gpu_util:avg5m
        expr: avg by (Hostname) (avg_over_time(DCGM_FI_DEV_GPU_UTIL[5m]))
      - expr: "sum(gpufleet_queue_length)
          > 3"
        alert: QuotedAndNameAfter
      - alert: Folded
        expr: >-
          gpufleet_queue_oldest_wait_seconds
            > 60 # not a comment inside a block
        annotations:
          description: '{{ with query "sum(gpufleet_gpus)" }}{{ . | first | value }}{{ end }}'
YAML
run "$WORK/good" "$PYTHON" "$CHECKER" "$WORK/good.json" --rules "$WORK/good_rules.yml" --metrics "$SAMPLE" --strict-labels
expect_rc "$WORK/good" 0 "check_grafana.py on valid queries that only look odd"
expect_contains "$WORK/good.out" "check_grafana: 11 queries" "check_grafana.py finds every query of the valid files"

# ... and each kind of mistake is reported, naming where it is.
cat >"$WORK/bad.json" <<'JSON'
{
  "templating": {"list": [
    {"type": "datasource", "name": "datasource", "query": "prometheus"},
    {"type": "query", "name": "team", "datasource": {"type": "prometheus", "uid": "${datasource}"},
     "definition": "label_values(gpufleet_team_spend, team)", "query": "label_values(gpufleet_team_spend, team)"}
  ]},
  "panels": [
    {"title": "typo", "id": 1, "datasource": {"type": "prometheus", "uid": "${datasource}"}, "targets": [
      {"refId": "A", "expr": "avg(DCGM_FI_DEV_GPU_UTILIZATION)"}]},
    {"title": "base name", "id": 2, "datasource": {"type": "prometheus", "uid": "${datasource}"}, "targets": [
      {"refId": "A", "expr": "rate(gpufleet_submit_duration_seconds[5m])"}]},
    {"title": "undefined variable", "id": 3, "datasource": {"type": "prometheus", "uid": "${datasource}"}, "targets": [
      {"refId": "A", "expr": "sum(gpufleet_jobs{team=~\"$teams\"})"}]},
    {"title": "hard-coded", "id": 4, "datasource": {"type": "prometheus", "uid": "P1809F7CD0C75ACF3"}, "targets": [
      {"refId": "A", "expr": "sum(gpufleet_gpus)"}]},
    {"title": "unbalanced", "id": 5, "datasource": {"type": "prometheus", "uid": "${datasource}"}, "targets": [
      {"refId": "A", "expr": "sum(rate(gpufleet_api_requests_total[5m])"}]},
    {"title": "label", "id": 6, "datasource": {"type": "prometheus", "uid": "${datasource}"}, "targets": [
      {"refId": "B", "expr": "DCGM_FI_DEV_GPU_TEMP{hostname=\"node1\"}"}]}
  ]
}
JSON
cat >"$WORK/bad_rules.yml" <<'YAML'
groups:
  - name: g
    rules:
      - alert: Typo
        expr: gpufleet_node_heartbeat_age > 30
        annotations:
          description: '{{ with query "sum(gpufleet_queue_len)" }}{{ . | first | value }}{{ end }}'
YAML
run "$WORK/bad" "$PYTHON" "$CHECKER" "$WORK/bad.json" --rules "$WORK/bad_rules.yml" --metrics "$SAMPLE" --strict-labels
expect_rc "$WORK/bad" 1 "check_grafana.py on mistakes"
for want in \
  'panel "typo" (id 1), query A: metric DCGM_FI_DEV_GPU_UTILIZATION is not in the exposition (did you mean DCGM_FI_DEV_GPU_UTIL?)' \
  'panel "base name" (id 2), query A: gpufleet_submit_duration_seconds is a histogram' \
  'panel "undefined variable" (id 3), query A: uses $teams, which is no variable of the dashboard' \
  "panel \"hard-coded\" (id 4): hard-coded datasource uid 'P1809F7CD0C75ACF3'" \
  "panel \"unbalanced\" (id 5), query A: cannot parse" \
  'panel "label" (id 6), query B: DCGM_FI_DEV_GPU_TEMP has no label hostname' \
  'variable $team: metric gpufleet_team_spend is not in the exposition (did you mean gpufleet_team_spend_dollars?)' \
  'alert Typo (line 5): metric gpufleet_node_heartbeat_age is not in the exposition' \
  'template query (line 7): metric gpufleet_queue_len is not in the exposition' \
  'check_grafana: 9 queries in 1 dashboard(s) and 1 rule file(s), checked for syntax, metric names: 9 problem(s)'; do
  expect_contains "$WORK/bad.out" "$want" "check_grafana.py on mistakes"
done
# Without --strict-labels a label the sample lacks is no problem (a live page may have no allocated GPU).
run "$WORK/bad_lax" "$PYTHON" "$CHECKER" "$WORK/bad.json" --metrics "$SAMPLE"
expect_rc "$WORK/bad_lax" 1 "check_grafana.py on mistakes, without --strict-labels"
if grep -q "has no label" "$WORK/bad_lax.out"; then
  show "$WORK/bad_lax"
  fail "check_grafana.py checks labels without --strict-labels"
fi
run "$WORK/usage" "$PYTHON" "$CHECKER" --metrics "$SAMPLE"
expect_rc "$WORK/usage" 2 "check_grafana.py with neither a dashboard nor --rules"

# 4. A real Prometheus scraping the sample page answers every query of the dashboard and rules.
PROMETHEUS="${PROMETHEUS:-$(command -v prometheus || true)}"
if [[ -z "$PROMETHEUS" ]]; then
  echo "note: no prometheus binary; skipped the queries against a real Prometheus"
  echo PASS
  exit 0
fi
free_port() {
  "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
mkdir -p "$WORK/www" "$WORK/prom"
cp "$SAMPLE" "$WORK/www/metrics"
cp "$RULES" "$WORK/prom/"
web_port="$(free_port)"
"$PYTHON" -m http.server --bind 127.0.0.1 --directory "$WORK/www" "$web_port" >"$WORK/http.log" 2>&1 &
web_pid=$!
prom_port="$(free_port)"
cat >"$WORK/prom/prometheus.yml" <<YAML
global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [gpufleet-alerts.yml]
scrape_configs:
  - job_name: gpufleet-controller
    static_configs: [{targets: ["127.0.0.1:$web_port"]}]
YAML
"$PROMETHEUS" --config.file="$WORK/prom/prometheus.yml" --storage.tsdb.path="$WORK/prom/data" \
  --web.listen-address="127.0.0.1:$prom_port" >"$WORK/prometheus.log" 2>&1 &
prom_pid=$!
trap 'kill $prom_pid $web_pid 2>/dev/null || true; wait $prom_pid $web_pid 2>/dev/null || true; rm -rf "$WORK"' EXIT
scraped() {
  curl -sf --max-time 2 "http://127.0.0.1:$prom_port/api/v1/query?query=gpufleet_build_info" | grep '"version"' >/dev/null
}
# Up to 60 s: Prometheus starts slowly on a loaded machine.
start=$SECONDS
until scraped; do
  kill -0 "$prom_pid" 2>/dev/null || { cat "$WORK/prometheus.log" >&2; fail "Prometheus exited"; }
  ((SECONDS - start < 60)) || { tail -20 "$WORK/prometheus.log" >&2; fail "Prometheus did not scrape the sample page within 60 s"; }
  sleep 0.2
done
echo "Prometheus scraped the sample page after $((SECONDS - start)) s"

run "$WORK/live" "$PYTHON" "$CHECKER" "$DASHBOARD" --rules "$RULES" --prometheus "http://127.0.0.1:$prom_port"
expect_rc "$WORK/live" 0 "check_grafana.py --prometheus on the dashboard and the rules"
curl -sf --max-time 5 "http://127.0.0.1:$prom_port/api/v1/rules" >"$WORK/rules.json" ||
  fail "Prometheus does not list its rules"
"$PYTHON" - "$WORK/rules.json" <<'PY' || fail "Prometheus did not load every rule of gpufleet-alerts.yml"
import json, sys
rules = [r for g in json.load(open(sys.argv[1]))["data"]["groups"] for r in g["rules"]]
assert len(rules) == 11, [r["name"] for r in rules]
bad = [(r["name"], r.get("lastError")) for r in rules if r.get("health") == "err"]
assert not bad, bad
PY
cat >"$WORK/eval_error.json" <<'JSON'
{"panels": [{"title": "no range", "id": 7, "targets": [{"refId": "A", "expr": "rate(gpufleet_queue_length)"}]}]}
JSON
run "$WORK/eval_error" "$PYTHON" "$CHECKER" "$WORK/eval_error.json" --prometheus "http://127.0.0.1:$prom_port"
expect_rc "$WORK/eval_error" 1 "check_grafana.py --prometheus on a query Prometheus cannot evaluate"
expect_contains "$WORK/eval_error.out" 'panel "no range" (id 7), query A: Prometheus: bad_data:' \
  "check_grafana.py --prometheus on a query Prometheus cannot evaluate"
echo PASS
