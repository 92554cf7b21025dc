#!/usr/bin/env bash
# Observability end to end, on real parts: a controller and an agent on 127.0.0.1 whose fake GPUs
# replay telemetry (GPU 1 at 90 °C), Debian's Prometheus scraping both, Debian's Alertmanager
# receiving the controller's alerts and passing them to a webhook receiver, and a job that hangs.
# Expect:
#   - /metrics of the controller and of the agent to pass `promtool check metrics`, with the
#     DCGM-exporter series and gpufleet's own; a metrics token to read them and nothing else; a
#     user token to be refused;
#   - Prometheus to scrape both and answer PromQL with the values the fake GPUs report; the
#     shipped rules file and every query of the shipped Grafana dashboard to be valid there;
#   - GpuHot and GpuAllocatedIdle to fire (gpufleet alerts, /v1/alerts), reach Alertmanager, and
#     through it the webhook receiver; the controller's own webhook to get Alertmanager's
#     webhook JSON;
#   - `explain` of a job that needs the hot GPU to say the GPU is too hot for new work;
#   - the job that stops making progress to be flagged JobStalled and restarted (attempt 2).
#
# Usage: observability_test.sh PATH/TO/gpufleet REPO_ROOT
GPUFLEET="${1:?usage: observability_test.sh GPUFLEET REPO_ROOT}"
ROOT="${2:?usage: observability_test.sh GPUFLEET REPO_ROOT}"
for tool in prometheus promtool prometheus-alertmanager curl; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (scripts/setup.sh installs it)"; exit 77; }
done
source "$(dirname "$0")/cluster_lib.sh"

# --- A webhook receiver: appends each POST body as one line to $WORK/hooks/<path>.jsonl.
mkdir -p "$WORK/hooks"
cat >"$WORK/receiver.py" <<'PY'
import http.server, json, os, sys
port, out = int(sys.argv[1]), sys.argv[2]
class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with open(os.path.join(out, self.path.strip("/").replace("/", "_") + ".jsonl"), "ab") as f:
            f.write(json.dumps(json.loads(body)).encode() + b"\n")
        self.send_response(200)
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
PY
RECV_PORT="$(free_port)"
"$PYTHON" "$WORK/receiver.py" "$RECV_PORT" "$WORK/hooks" </dev/null >"$WORK/receiver.log" 2>&1 &
HELPER_PIDS=($!)

# --- Alertmanager, routing everything to the receiver at once.
AM_PORT="$(free_port)"
cat >"$WORK/alertmanager.yml" <<YAML
route:
  receiver: hook
  group_by: [alertname]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs:
      - url: http://127.0.0.1:$RECV_PORT/via-alertmanager
YAML
prometheus-alertmanager --config.file="$WORK/alertmanager.yml" --storage.path="$WORK/am-data" \
  --web.listen-address="127.0.0.1:$AM_PORT" --cluster.listen-address= </dev/null >"$WORK/alertmanager.log" 2>&1 &
HELPER_PIDS+=($!)
stop_helpers() {
  local rc=$?
  set +e  # (a kill or wait that fails must not end the clean-up under errexit)
  kill "${HELPER_PIDS[@]}" 2>/dev/null
  wait "${HELPER_PIDS[@]}" 2>/dev/null
  if ((rc)); then
    for f in "$WORK/alertmanager.log" "$WORK/prometheus.log"; do
      [[ -f "$f" ]] && { echo "--- last lines of ${f##*/}:" >&2; tail -n 15 "$f" >&2; }
    done
  fi
  (exit $rc)
  cluster_cleanup
}
trap stop_helpers EXIT
wait_until "Alertmanager is ready" 30 curl -sf "http://127.0.0.1:$AM_PORT/-/ready"

# --- The cluster. Alert settings short enough for a test; the rest are the defaults.
printf 'idle_for: 2s\nhot_for: 1s\n' >"$WORK/rules.yaml"
cluster_start_server --heartbeat 200ms --lost-after 10s --alert-interval 1s --alert-rules "$WORK/rules.yaml" \
  --alert-webhook "http://127.0.0.1:$AM_PORT/api/v2/alerts" --alert-webhook "http://127.0.0.1:$RECV_PORT/direct"
# GPU 0 idle with 20000 MiB used; GPU 1 busy at 90 °C.
printf '0 20000 45 120; gpu=1 97 60000 90 650\n' >"$WORK/telemetry.txt"
AGENT_METRICS_PORT="$(free_port)"
AGENT_GPUS=2xH100 cluster_start_agent node-1 --fake-telemetry "$WORK/telemetry.txt" \
  --metrics-listen "127.0.0.1:$AGENT_METRICS_PORT"

# A job that reports progress each second until the test lets it hang (the file $WORK/hang-now),
# then hangs; its second attempt finishes.
cat >"$WORK/hang.yaml" <<YAML
name: hang
resources: {gpus: 1}
watchdog: {stall_timeout: 10s, on_stall: restart}
run: |
  if [ "\$GPUFLEET_ATTEMPT" -ge 2 ]; then echo "attempt \$GPUFLEET_ATTEMPT resumes"; exit 0; fi
  echo "attempt \$GPUFLEET_ATTEMPT starts"
  while [ ! -e "$WORK/hang-now" ]; do echo "step=7 loss=0.25" > "\$GPUFLEET_PROGRESS"; sleep 1; done
  exec sleep 600
YAML
HANG="$("$GPUFLEET" submit "$WORK/hang.yaml" | grep -o 'job [0-9]*' | head -1 | cut -d' ' -f2)"
[[ -n "$HANG" ]] || fail "gpufleet submit printed no job id"
WATCH_JOBS+=("$HANG")
wait_until "job $HANG runs" 30 job_state_is "$HANG" running

# promtool_check FILE WHAT: `promtool check metrics` may remark only on the label names the DCGM
# exporter itself uses (modelName, Hostname are camelCase, and dashboards written for it need
# them so); without the DCGM families the page must pass with no remark at all.
promtool_check() {
  promtool check metrics <"$1" >"$1.lint" 2>&1 || true
  if grep -v "^DCGM_FI_DEV_[A-Z_]* label names should be written in 'snake_case' not 'camelCase'\$" "$1.lint" | grep . >/dev/null; then
    cat "$1.lint" >&2
    fail "promtool check metrics finds $2 wrong"
  fi
  grep -v 'DCGM_FI_' "$1" >"$1.own"
  promtool check metrics <"$1.own" >"$1.own.lint" 2>&1 || { cat "$1.own.lint" >&2; fail "promtool check metrics on $2 without the DCGM series"; }
}

# --- /metrics: tokens, format, content.
METRICS_TOKEN="$("$GPUFLEET" token create --role metrics --subject prometheus | grep -o 'gf_user_[0-9a-f]*' | head -1)"
USER_TOKEN="$("$GPUFLEET" token create --role user --team vision --subject alice | grep -o 'gf_user_[0-9a-f]*' | head -1)"
[[ -n "$METRICS_TOKEN" && -n "$USER_TOKEN" ]] || fail "gpufleet token create printed no token"
code() { curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $1" "$URL$2"; }
[[ "$(code "$USER_TOKEN" /metrics)" == 403 ]] || fail "a user token read /metrics"
[[ "$(code "$METRICS_TOKEN" /v1/jobs)" == 403 ]] || fail "a metrics token read /v1/jobs"
[[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/metrics")" == 401 ]] || fail "/metrics answered without a token"
has_progress() {
  curl -sf -H "Authorization: Bearer $METRICS_TOKEN" "$URL/metrics" | grep "^gpufleet_job_progress_step{job_id=\"$HANG\"" >/dev/null
}
wait_until "the job's progress reaches /metrics" 20 has_progress
curl -sf -H "Authorization: Bearer $METRICS_TOKEN" "$URL/metrics" >"$WORK/controller.prom"
promtool_check "$WORK/controller.prom" "the controller's /metrics"
expect_contains "$WORK/controller.prom" "gpufleet_job_progress_step{job_id=\"$HANG\",team=\"default\"} 7" "the job's step"
grep -E '^DCGM_FI_DEV_GPU_TEMP\{gpu="1",UUID="GPU-fake-node-1-1",device="nvidia1",modelName="H100",Hostname="node-1"\} 90$' \
  "$WORK/controller.prom" >/dev/null || { grep DCGM_FI_DEV_GPU_TEMP "$WORK/controller.prom" >&2; fail "GPU 1's temperature series"; }
grep -E "^DCGM_FI_DEV_FB_USED\\{gpu=\"0\",.*Hostname=\"node-1\",job_id=\"$HANG\",team=\"default\"\\} 20000\$" \
  "$WORK/controller.prom" >/dev/null || { grep DCGM_FI_DEV_FB_USED "$WORK/controller.prom" >&2; fail "GPU 0's memory series with its job"; }
expect_contains "$WORK/controller.prom" 'gpufleet_jobs{state="running",team="default"} 1' "jobs by state"
expect_contains "$WORK/controller.prom" 'gpufleet_gpus_allocated_idle{model="H100"} 1' "idle allocated GPUs"
curl -sf "http://127.0.0.1:$AGENT_METRICS_PORT/metrics" >"$WORK/agent.prom" || fail "the agent's /metrics does not answer"
promtool_check "$WORK/agent.prom" "the agent's /metrics"
grep -E "^DCGM_FI_DEV_GPU_UTIL\\{gpu=\"0\",.*Hostname=\"node-1\",job_id=\"$HANG\",team=\"default\"\\} 0\$" "$WORK/agent.prom" >/dev/null ||
  { cat "$WORK/agent.prom" >&2; fail "the agent's GPU 0 series names its job"; }

# The controller's record of the job's GPUs over its run (the dashboard's job chart).
gpus_recorded() {
  api GET "/v1/jobs/$HANG/gpus" |
    json_get "[[s['node'], s['gpu'], s['points'][0][2]] for s in j['series'] if s['points']][:1]" |
    grep -qF '[["node-1", 0, 20000]]'
}
wait_until "GET /v1/jobs/$HANG/gpus has its GPU's samples" 20 gpus_recorded

# --- A real Prometheus scrapes both, with the shipped rules.
PROM_PORT="$(free_port)"
printf '%s' "$METRICS_TOKEN" >"$WORK/metrics.token"
cat >"$WORK/prometheus.yml" <<YAML
global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [$ROOT/examples/prometheus/gpufleet-alerts.yml]
scrape_configs:
  - job_name: gpufleet
    authorization: {credentials_file: $WORK/metrics.token}
    static_configs: [{targets: ["127.0.0.1:${URL##*:}"]}]
  - job_name: gpufleet-agents
    static_configs: [{targets: ["127.0.0.1:$AGENT_METRICS_PORT"]}]
YAML
promtool check config "$WORK/prometheus.yml" >"$WORK/check-config.out" 2>&1 ||
  { cat "$WORK/check-config.out" >&2; fail "promtool check config"; }
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/prom-data" \
  --web.listen-address="127.0.0.1:$PROM_PORT" </dev/null >"$WORK/prometheus.log" 2>&1 &
HELPER_PIDS+=($!)
PROM="http://127.0.0.1:$PROM_PORT"
# promql QUERY: prints the first result's value ("" when none).
promql() {
  curl -sf --get --data-urlencode "query=$1" "$PROM/api/v1/query" |
    "$PYTHON" -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")'
}
promql_is() { [[ "$(promql "$1")" == "$2" ]]; }
wait_until "Prometheus scraped both targets" 60 promql_is 'count(up == 1)' 2
wait_until "PromQL gives GPU 1's temperature" 30 promql_is 'DCGM_FI_DEV_GPU_TEMP{job="gpufleet",Hostname="node-1",gpu="1"}' 90
wait_until "PromQL gives the agent's GPU 1 temperature" 30 promql_is 'DCGM_FI_DEV_GPU_TEMP{job="gpufleet-agents",gpu="1"}' 90
wait_until "PromQL counts the allocated GPUs" 30 promql_is 'sum(gpufleet_gpus_allocated)' 1
"$PYTHON" "$ROOT/scripts/check_grafana.py" "$ROOT/examples/grafana/gpufleet-dashboard.json" --prometheus "$PROM" \
  --metrics "$WORK/controller.prom" >"$WORK/grafana.out" 2>&1 ||
  { cat "$WORK/grafana.out" >&2; fail "the Grafana dashboard's queries do not work against Prometheus"; }
rules_healthy() {
  curl -sf "$PROM/api/v1/rules" | "$PYTHON" -c '
import json, sys
groups = json.load(sys.stdin)["data"]["groups"]
rules = [r for g in groups for r in g["rules"]]
sys.exit(0 if rules and all(r.get("health") == "ok" for r in rules) else 1)'
}
wait_until "Prometheus evaluates every shipped alert rule without error" 30 rules_healthy

# --- Alerts: the controller's engine, Alertmanager, the receiver.
alert_firing() { "$GPUFLEET" alerts -o json | grep "\"name\": \"$1\"" >/dev/null; }
wait_until "GpuHot fires" 30 alert_firing GpuHot
wait_until "GpuAllocatedIdle fires" 30 alert_firing GpuAllocatedIdle
run "$WORK/alerts" "$GPUFLEET" alerts
expect_rc "$WORK/alerts" 0 "gpufleet alerts"
expect_contains "$WORK/alerts.out" "GPU 1 of node node-1 is at 90 °C (limit 80 °C)" "gpufleet alerts shows the hot GPU"
am_has() { curl -sf "http://127.0.0.1:$AM_PORT/api/v2/alerts" | grep "\"alertname\":\"$1\"" >/dev/null; }
wait_until "Alertmanager holds GpuHot" 30 am_has GpuHot
hook_has() { grep -q "\"alertname\": \"$2\"" "$WORK/hooks/$1.jsonl"; }
wait_until "Alertmanager's webhook delivers GpuHot" 30 hook_has via-alertmanager GpuHot
wait_until "the controller's webhook delivers GpuHot" 30 hook_has direct GpuHot
"$PYTHON" - "$WORK/hooks/direct.jsonl" <<'PY' || fail "the controller's webhook JSON is not Alertmanager's webhook format"
import json, sys
msgs = [json.loads(l) for l in open(sys.argv[1])]
m = next(m for m in msgs if any(a["labels"]["alertname"] == "GpuHot" for a in m["alerts"]))
assert m["version"] == "4" and m["status"] in ("firing", "resolved"), m
a = next(a for a in m["alerts"] if a["labels"]["alertname"] == "GpuHot")
assert a["status"] == "firing" and a["labels"]["severity"] == "critical" and a["labels"]["gpu"] == "1", a
assert a["startsAt"].endswith("Z") and a["annotations"]["description"], a
PY
wait_until "Prometheus shows the controller's alerts as gpufleet_alert" 30 \
  promql_is 'count(gpufleet_alert{alertname="GpuHot",alertstate="firing"})' 1

# A second job wants both GPUs: GPU 1 is too hot for new work, and explain says so.
BIG="$("$GPUFLEET" run --gpus 2 --name big -- true | grep -o 'job [0-9]*' | head -1 | cut -d' ' -f2)"
[[ -n "$BIG" ]] || fail "gpufleet run printed no job id"
run "$WORK/explain" "$GPUFLEET" explain "$BIG"
expect_contains "$WORK/explain.out" "limit take no new work until they cool to 75 °C: node-1 GPU 1 (90 °C)" \
  "explain names the hot GPU"
"$GPUFLEET" cancel "$BIG" >/dev/null

# --- The watchdog: no progress, no output, an idle GPU for 10 s -> flagged and restarted.
[[ "$(job_field "$HANG" "j['state']")" == running && "$(job_field "$HANG" "j['attempt']")" == 1 ]] ||
  fail "job $HANG stopped while it was still reporting progress"
touch "$WORK/hang-now"
alert_seen() { "$GPUFLEET" alerts --all -o json | grep "\"name\": \"$1\"" >/dev/null; }
wait_until "the watchdog flags job $HANG" 60 alert_seen JobStalled
wait_until "job $HANG's second attempt runs and succeeds" 60 job_state_is "$HANG" succeeded
job_history "$HANG" >"$WORK/history"
expect_contains "$WORK/history" "requeued: stalled: job $HANG (hang) made no progress" "the history says why it was restarted"
[[ "$(job_field "$HANG" "j['attempt']")" == 2 ]] || fail "job $HANG did not run a second attempt"
run "$WORK/logs" "$GPUFLEET" logs "$HANG"
expect_contains "$WORK/logs.out" "attempt 2 resumes" "the second attempt ran"
echo PASS
