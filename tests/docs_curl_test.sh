#!/usr/bin/env bash
# Given a dev cluster (with the example pool, so that GET /v1/pool has one to show), expect every
# curl example of docs/api.md to work as written, run in order as one script: each request is
# answered 2xx. Requests without a body (cancel, drain, undrain) are among them. Before the
# examples run, the cluster gets the jobs they name: 1-11 and 13 end at once, 12 sleeps (the
# examples cancel it); the examples' own submits become 14 (explained later) and 15.
#
# Usage: docs_curl_test.sh PATH/TO/gpufleet REPO_ROOT
source "$(dirname "$0")/lib.sh"

GPUFLEET="${1:?usage: docs_curl_test.sh GPUFLEET REPO_ROOT}"
ROOT="${2:?usage: docs_curl_test.sh GPUFLEET REPO_ROOT}"
REAL_CURL="$(command -v curl)" || fail "curl is not installed"

# The examples read the server and token from ~/.config/gpufleet/config.yaml: a home of our own.
export HOME="$WORK/home"
mkdir -p "$HOME"
unset GPUFLEET_CONFIG GPUFLEET_SERVER GPUFLEET_TOKEN XDG_CONFIG_HOME
cd "$WORK"  # jobs default to the submitter's directory: one their agents allow

PORT="$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
DEV_PID=""
stop_dev() {
  if [[ -n "$DEV_PID" ]]; then
    kill "$DEV_PID" 2>/dev/null || true
    wait "$DEV_PID" 2>/dev/null || true
    DEV_PID=""
  fi
}
trap 'stop_dev; rm -rf "$WORK"' EXIT

# Jobs run as the test's user here (their working directory is the test's own folder).
(cd "$WORK" && exec "$GPUFLEET" dev --data-dir "$WORK/data" --port "$PORT" --agents 1 --fake-gpus 2xH100 \
  --pool "$ROOT/examples/pools/local.yaml" --job-user "$(id -un)" --allow-root-jobs) >"$WORK/dev.log" 2>&1 &
DEV_PID=$!

wait_for() { wait_for_while "$DEV_PID" "$WORK/dev.log" "$@"; }
node_up() { "$GPUFLEET" nodes -o json | grep '"state": "up"' >/dev/null; }
wait_for "the dev cluster's config" test -s "$HOME/.config/gpufleet/config.yaml"
wait_for "node dev-1" node_up

# The jobs the examples name.
for i in $(seq 1 11); do "$GPUFLEET" run --name "seed-$i" -- true >/dev/null; done
"$GPUFLEET" run --name sleeper -- sleep 300 >/dev/null
"$GPUFLEET" run --name seed-13 -- true >/dev/null
state_of() { "$GPUFLEET" status "$1" -o json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["state"])'; }
sleeper_runs() { [[ "$(state_of 12)" == running ]]; }
wait_for "job 12 to run" sleeper_runs
printf 'name: train\nrun: echo training\n' >"$WORK/train.yaml"

# curl as the examples call it, which also records each answer's status and fails on one that is
# not 2xx. A request that hangs fails too (an unread empty body waits out the server's 60 s).
mkdir -p "$WORK/shim"
cat >"$WORK/shim/curl" <<SHIM
#!/usr/bin/env bash
out="\$("$REAL_CURL" --max-time 20 -w '\nstatus=%{http_code}' "\$@")" || { echo "curl \$* failed (exit \$?)" >>"$WORK/curl.log"; exit 28; }
status="\${out##*status=}"
printf '%s\n--- %s: %s\n' "\$out" "\$*" "\$status" >>"$WORK/curl.log"
printf '%s\n' "\${out%$'\n'status=*}"
[[ "\$status" == 2?? ]] || { echo "curl \$*: HTTP \$status" >>"$WORK/curl.log"; exit 22; }
SHIM
chmod +x "$WORK/shim/curl"

# Every ```sh block of the API reference, in order, as one script.
"$PYTHON" - "$ROOT/docs/api.md" >"$WORK/examples.sh" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
print("set -euo pipefail")
for block in re.findall(r"```sh\n(.*?)```", text, re.S):
    print(block)
PY
grep -c curl "$WORK/examples.sh" >/dev/null || fail "no curl examples found in docs/api.md"
if ! (cd "$WORK" && PATH="$WORK/shim:$PATH" bash "$WORK/examples.sh") >"$WORK/examples.out" 2>&1; then
  echo "--- the examples:" >&2
  cat "$WORK/examples.sh" >&2
  echo "--- what curl got:" >&2
  tail -n 40 "$WORK/curl.log" >&2 || true
  fail "a curl example of docs/api.md failed as written"
fi
# Sanity: the requests without a body were among them, and did what they say.
for what in "/v1/jobs/12/cancel" "/v1/nodes/dev-1/drain" "/v1/nodes/dev-1/undrain"; do
  grep -q -- "$what" "$WORK/curl.log" || fail "docs/api.md has no example of POST $what"
done
[[ "$(state_of 12)" == cancelled || "$(state_of 12)" == stopping ]] || fail "job 12 was not cancelled: $(state_of 12)"
echo PASS
