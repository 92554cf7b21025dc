#!/usr/bin/env bash
# The web dashboard in headless Chromium. Given a live cluster on 127.0.0.1 (a controller and two
# agents with fake GPUs that replay telemetry, priced, one team with a budget) running a job that
# prints a known line, a job waiting in the queue and a second team's job, expect the page
# (tests/web/ui_test.js) to refuse a bad token, log in with the admin token, show the nodes × GPUs
# heat-map and the running job, the job's page with the known log line and a GPU chart, cancel the
# job from that page, show the nodes, teams and pool pages (the pool's "none" as a message), and
# log out; a viewer's token to be told, in the API's words, that it may not cancel a job — with no
# JavaScript error on the way.
#
# Exits 77 (skipped) when node (18 or newer), npm or Chromium is missing: scripts/setup.sh
# installs them. Installs tests/web's pinned npm packages (`npm ci`) when they are missing or
# stale. GPUFLEET_SCREENSHOTS=DIR also writes the docs' screenshots (docs/img) into DIR.
#
# Usage: web_ui_test.sh PATH/TO/gpufleet REPO_ROOT
GPUFLEET="${1:?usage: web_ui_test.sh GPUFLEET REPO_ROOT}"
ROOT="$(cd "${2:?usage: web_ui_test.sh GPUFLEET REPO_ROOT}" && pwd)"
GPUFLEET="$(cd "$(dirname "$GPUFLEET")" && pwd)/$(basename "$GPUFLEET")"
if [[ -n "${GPUFLEET_SCREENSHOTS:-}" ]]; then
  mkdir -p "$GPUFLEET_SCREENSHOTS"
  GPUFLEET_SCREENSHOTS="$(cd "$GPUFLEET_SCREENSHOTS" && pwd)"
fi
source "$(dirname "$0")/cluster_lib.sh"

skip() {
  echo "SKIP: $* (scripts/setup.sh installs it)"
  exit 77
}
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
command -v node >/dev/null 2>&1 || skip "node is not installed"
command -v npm >/dev/null 2>&1 || skip "npm is not installed"
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' ||
  skip "node $(node --version) is older than 18"
[[ -x "$CHROMIUM" ]] || skip "Chromium is not installed at $CHROMIUM"

# The pinned packages, installed again when package-lock.json changed since the last install.
WEB="$ROOT/tests/web"
STAMP="$WEB/node_modules/.gpufleet-lock"
if [[ ! -f "$STAMP" ]] || ! cmp -s "$STAMP" "$WEB/package-lock.json"; then
  echo "installing tests/web's npm packages (npm ci)"
  (cd "$WEB" && npm ci --no-audit --no-fund --loglevel=error) >"$WORK/npm.log" 2>&1 ||
    { cat "$WORK/npm.log" >&2; fail "npm ci in tests/web failed"; }
  cp "$WEB/package-lock.json" "$STAMP"
fi

# --- The cluster -----------------------------------------------------------------------------
# Heartbeats every second, so telemetry and the GPU chart move while the test watches.
cluster_start_server --heartbeat 1s
# Telemetry to replay, one line per heartbeat (a second). gpu-a: GPU 0 is the coolest when the
# jobs are placed (placement prefers cool GPUs), so the test's job lands there; it then gets busy
# and warm, while the other three idle. gpu-b: both GPUs busy (the other team's job); GPU 0 runs
# past the hot-GPU limit (80 °C) after half a minute, an alert where the controller has them.
"$PYTHON" - "$WORK/gpu-a.txt" "$WORK/gpu-b.txt" <<'PY'
import math, sys
ramp = lambda t, lo, hi, t0, t1: lo + (hi - lo) * min(1.0, max(0.0, (t - t0) / (t1 - t0)))
with open(sys.argv[1], "w") as f:
    for t in range(900):
        busy = int(ramp(t, 0, 1, 12, 16) * (88 + 9 * math.sin(t / 3.0)))
        f.write("; ".join([
            f"gpu=0 {busy} {int(ramp(t, 500, 61000, 12, 16))} {int(ramp(t, 30, 71, 12, 40))} {int(ramp(t, 60, 640, 12, 16))}",
            "gpu=1 2 900 36 75", "gpu=2 0 0 35 70", "gpu=3 0 0 34 70"]) + "\n")
with open(sys.argv[2], "w") as f:
    for t in range(900):
        u = int(max(0, min(100, 95 + 5 * math.sin(t / 5.0))))
        f.write(f"gpu=0 {u} 78000 {int(ramp(t, 62, 86, 10, 34))} 390; gpu=1 {u - 3} 77000 {int(ramp(t, 58, 74, 0, 20))} 385\n")
PY
AGENT_GPUS=4xH100 cluster_start_agent gpu-a --fake-telemetry "$WORK/gpu-a.txt" --price-per-hour 24 \
  --label zone=a
AGENT_GPUS=2xA100-80GB cluster_start_agent gpu-b --fake-telemetry "$WORK/gpu-b.txt" --price-per-hour 6 \
  --market spot --label zone=b

cd "$WORK"
submitted() { grep -o 'job [0-9]*' "$1" | head -1 | cut -d' ' -f2; }
MARKER="gpufleet-web-ui-test: step 1 of 600, loss 2.303"
# The known line first, a line with bytes that are not UTF-8 (later reads must start where the
# API says, not where the text's length says), then a line a second, so the page has output to
# follow as it arrives.
cat >"$WORK/train.sh" <<EOF
echo '$MARKER'
printf 'two bytes that are not UTF-8: \\377\\376\\n'
i=1
while [ \$i -lt 600 ]; do sleep 1; i=\$((i + 1)); echo "gpufleet-web-ui-test: step \$i of 600"; done
EOF
"$GPUFLEET" run --gpus 1 --gpu-type H100 --team vision --name resnet-demo -- sh train.sh \
  >"$WORK/job.out" 2>&1 || { cat "$WORK/job.out" >&2; fail "gpufleet run"; }
JOB="$(submitted "$WORK/job.out")"
[[ -n "$JOB" ]] || { cat "$WORK/job.out" >&2; fail "gpufleet run printed no job id"; }
WATCH_JOBS+=("$JOB")
"$GPUFLEET" run --gpus 2 --gpu-type A100-80GB --team nlp --name llm-finetune -- sleep 600 >"$WORK/nlp.out" 2>&1 ||
  { cat "$WORK/nlp.out" >&2; fail "gpufleet run (nlp)"; }
OTHER_JOB="$(submitted "$WORK/nlp.out")"
"$GPUFLEET" run --gpus 4 --gpu-type H100 --team nlp --name llm-pretrain -- sleep 600 >"$WORK/wait.out" 2>&1 ||
  { cat "$WORK/wait.out" >&2; fail "gpufleet run (the job that waits)"; }
"$GPUFLEET" budget vision --hard 500 --soft 400 --period monthly >/dev/null || fail "gpufleet budget vision"
"$GPUFLEET" budget nlp --hard 2000 --soft 0.001 >/dev/null || fail "gpufleet budget nlp"
"$GPUFLEET" quota nlp --gpus 2 --model A100-80GB --max-pending 20 >/dev/null || fail "gpufleet quota nlp"
VIEWER="$("$GPUFLEET" token create --role viewer --subject carol | grep -o 'gf_user_[0-9a-f]*' | head -1)"
[[ -n "$VIEWER" ]] || fail "gpufleet token create --role viewer printed no token"
wait_until "job $JOB runs" 60 job_state_is "$JOB" running
wait_until "job $OTHER_JOB runs" 60 job_state_is "$OTHER_JOB" running

# --- The browser -----------------------------------------------------------------------------
start=$SECONDS
UI_URL="$URL" UI_TOKEN="$TOKEN" UI_VIEWER_TOKEN="$VIEWER" UI_JOB="$JOB" UI_OTHER_JOB="$OTHER_JOB" UI_MARKER="$MARKER" \
  CHROMIUM="$CHROMIUM" GPUFLEET_SCREENSHOTS="${GPUFLEET_SCREENSHOTS:-}" node "$WEB/ui_test.js" ||
  fail "the dashboard test (ui_test.js) failed"
job_state_is "$JOB" cancelled || fail "job $JOB is $(job_field "$JOB" "j['state']") after the page cancelled it"
job_state_is "$OTHER_JOB" running || fail "job $OTHER_JOB is $(job_field "$OTHER_JOB" "j['state']") after a viewer's cancel"
echo "the browser steps took $((SECONDS - start)) s"
echo PASS
