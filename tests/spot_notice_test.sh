#!/usr/bin/env bash
# Spot interruption notice on a live cluster: a controller and two agents (fake GPUs, market spot).
# The provider's notice endpoint is served on 127.0.0.1 in the AWS instance-action format (404,
# then 200 with {"action": "terminate", "time": ...}); only node-1 polls it (--spot-notice-url).
# A checkpointing job (a shell loop that saves its counter on SIGTERM and resumes from it) runs
# on node-1 (the only node when it is submitted). When the endpoint announces the termination:
#   - node-1 drains: `gpufleet nodes -o json` shows it draining with the notice, the table says
#     reclaiming;
#   - the job gets its checkpoint signal (its checkpoint file appears) and is requeued:
#     running -> stopping -> preempted -> pending, the reason naming the spot interruption notice;
#   - it runs again on node-2 as attempt 2, resumes from its checkpoint and succeeds.
#
# Usage: spot_notice_test.sh GPUFLEET_BINARY REPO_ROOT
GPUFLEET="$1"
REPO="$2"
source "$REPO/tests/cluster_lib.sh"

MARK="$WORK/marks"
CKPT="$WORK/ckpt"
mkdir -p "$MARK" "$CKPT"

# The notice endpoint: 404 until $WORK/notice.json exists, then 200 with its content.
cat >"$WORK/notice_server.py" <<'PY'
import http.server, os, sys
port, doc = int(sys.argv[1]), sys.argv[2]
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path != "/latest/meta-data/spot/instance-action" or not os.path.exists(doc):
            self.send_response(404); self.end_headers(); return
        body = open(doc, "rb").read()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
PY
NOTICE_PORT="$(free_port)"
NOTICE_URL="http://127.0.0.1:$NOTICE_PORT/latest/meta-data/spot/instance-action"
"$PYTHON" "$WORK/notice_server.py" "$NOTICE_PORT" "$WORK/notice.json" </dev/null >"$WORK/notice_server.log" 2>&1 &
NOTICE_PID=$!
trap 'rc=$?; set +e; kill "$NOTICE_PID" 2>/dev/null; (exit $rc); cluster_cleanup' EXIT
endpoint_says() { [[ "$(curl -s -o /dev/null -w '%{http_code}' "$NOTICE_URL")" == "$1" ]]; }
wait_until "the notice endpoint answers 404" 20 endpoint_says 404

cluster_start_server --heartbeat 200ms --lost-after 10s
cluster_start_agent node-1 --market spot --spot-notice-url "$NOTICE_URL" --spot-notice-interval 200ms

# Counts in 0.1 s steps; on SIGTERM saves the count and exits. Attempt 2 and later resume from the
# checkpoint and finish after 5 more steps.
cat >"$WORK/ckpt.yaml" <<EOF
name: ckpt
resources: {gpus: 1}
market: spot
checkpoint: {dir: $CKPT, signal: SIGTERM, grace: 20s}
run: |
  n=0
  if [ -f "\$GPUFLEET_CHECKPOINT_DIR/counter" ]; then n=\$(cat "\$GPUFLEET_CHECKPOINT_DIR/counter"); fi
  start=\$n
  echo "attempt \$GPUFLEET_ATTEMPT on \$(basename \$PWD) starts at \$n"
  echo \$n > $MARK/start.a\$GPUFLEET_ATTEMPT
  echo \$GPUFLEET_RESTART_COUNT > $MARK/restarts.a\$GPUFLEET_ATTEMPT
  trap 'echo \$n > "\$GPUFLEET_CHECKPOINT_DIR/counter.tmp" && mv "\$GPUFLEET_CHECKPOINT_DIR/counter.tmp" "\$GPUFLEET_CHECKPOINT_DIR/counter"; echo "checkpointed \$n"; exit 0' TERM
  while :; do
    n=\$((n + 1))
    echo \$n > $MARK/progress.a\$GPUFLEET_ATTEMPT
    if [ "\$GPUFLEET_ATTEMPT" -ge 2 ] && [ \$n -ge \$((start + 5)) ]; then echo "done at \$n"; exit 0; fi
    sleep 0.1 & wait \$!
  done
EOF

JOB="$(submit_job "$WORK/ckpt.yaml")"
WATCH_JOBS+=("$JOB")
wait_until "job $JOB runs" 30 job_state_is "$JOB" running
progress_at_least() { [[ -s "$MARK/progress.a$1" && "$(cat "$MARK/progress.a$1")" -ge "$2" ]]; }
wait_until "job $JOB has counted a little (its trap is set)" 30 progress_at_least 1 3
[[ "$(job_nodes "$JOB")" == node-1 ]] || fail "job $JOB should run on node-1, runs on '$(job_nodes "$JOB")'"

cluster_start_agent node-2 --market spot
[[ "$(node_state node-1)" == up ]] || fail "node-1 should be up before the notice, is '$(node_state node-1)'"
job_state_is "$JOB" running || fail "job $JOB should still run before the notice"

# The provider announces the termination two minutes ahead.
NOTICE_TIME="$("$PYTHON" -c 'import datetime, time
print(datetime.datetime.fromtimestamp(int(time.time()) + 120, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))')"
NOTICE_MS="$("$PYTHON" -c 'import calendar, sys, time
print(calendar.timegm(time.strptime(sys.argv[1], "%Y-%m-%dT%H:%M:%SZ")) * 1000)' "$NOTICE_TIME")"
printf '{"action": "terminate", "time": "%s"}' "$NOTICE_TIME" >"$WORK/notice.json.tmp"
mv "$WORK/notice.json.tmp" "$WORK/notice.json"
wait_until "the notice endpoint answers 200" 10 endpoint_says 200

wait_until "node-1 drains" 20 node_is node-1 draining
NOTICE_JSON="$("$GPUFLEET" nodes -o json </dev/null | json_get "[n.get('notice') for n in j['nodes'] if n['name'] == 'node-1'][0]")"
[[ "$(echo "$NOTICE_JSON" | json_get "j['action']")" == terminate ]] || fail "node-1's notice: $NOTICE_JSON"
[[ "$(echo "$NOTICE_JSON" | json_get "j['time_ms']")" == "$NOTICE_MS" ]] ||
  fail "node-1's notice time: $NOTICE_JSON, expected time_ms $NOTICE_MS ($NOTICE_TIME)"
"$GPUFLEET" nodes </dev/null | grep -E '^node-1 +reclaiming ' >/dev/null ||
  fail "'gpufleet nodes' should show node-1 reclaiming: $("$GPUFLEET" nodes </dev/null)"

wait_until "job $JOB got its checkpoint signal and saved its counter" 30 test -s "$CKPT/counter"
SAVED="$(cat "$CKPT/counter")"
[[ "$SAVED" -ge 3 ]] || fail "checkpoint holds '$SAVED', expected the count reached before the notice"
wait_until "job $JOB succeeds" 60 job_state_is "$JOB" succeeded

HISTORY="$(job_history "$JOB")"
echo "job history:"
echo "$HISTORY" | sed 's/^/  /'
REASON="the provider is reclaiming the node (spot interruption notice)"
grep -qF -- "running -> stopping: stopped: $REASON" <<<"$HISTORY" || fail "history lacks 'running -> stopping' for the notice"
grep -qF -- "stopping -> preempted: stopped: $REASON" <<<"$HISTORY" || fail "history lacks 'stopping -> preempted' naming the notice"
grep -qF -- "preempted -> pending" <<<"$HISTORY" || fail "history lacks 'preempted -> pending' (requeue)"
[[ "$(job_field "$JOB" "j['attempt']")" == 2 ]] || fail "job $JOB should have succeeded as attempt 2"
[[ "$(job_nodes "$JOB")" == node-2 ]] || fail "attempt 2 should have run on node-2, ran on '$(job_nodes "$JOB")'"
[[ "$(cat "$MARK/start.a2")" == "$SAVED" ]] ||
  fail "attempt 2 started at $(cat "$MARK/start.a2"), expected to resume from checkpoint $SAVED"
[[ "$(cat "$MARK/restarts.a2")" == 1 ]] || fail "attempt 2 saw GPUFLEET_RESTART_COUNT=$(cat "$MARK/restarts.a2")"
[[ "$(cat "$MARK/progress.a2")" == "$((SAVED + 5))" ]] || fail "attempt 2 ended at $(cat "$MARK/progress.a2")"

# node-1 stays drained; only node-1 polled the endpoint.
[[ "$(node_state node-1)" == draining ]] || fail "node-1 should stay draining, is '$(node_state node-1)'"
[[ "$(node_state node-2)" == up ]] || fail "node-2 should be up, is '$(node_state node-2)'"
grep -q "spot interruption notice" "$WORK/agents/node-1/agent.log" || fail "node-1's agent did not log the notice"
if grep -qi "spot" "$WORK/agents/node-2/agent.log"; then fail "node-2 polls for spot notices without --spot-notice-url"; fi

echo PASS
