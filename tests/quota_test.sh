#!/usr/bin/env bash
# Given a dev cluster with one 2-GPU node and team vision limited by `gpufleet quota` to 1 GPU
# without borrowing, expect vision's second 1-GPU job to wait although a GPU is free, `explain`
# to say it is the quota, another team's job to take the free GPU, `gpufleet quota` to show the
# quota and the load (table and -o json), a pending-job limit to refuse a further submit with the
# reason, a user's token to be refused setting a quota, and --clear to let the waiting job start.
#
# Usage: quota_test.sh PATH/TO/gpufleet
source "$(dirname "$0")/lib.sh"

GPUFLEET="${1:?usage: quota_test.sh GPUFLEET}"
export HOME="$WORK/home"
mkdir -p "$HOME"
unset GPUFLEET_CONFIG GPUFLEET_SERVER GPUFLEET_TOKEN GPUFLEET_CA_CERT XDG_CONFIG_HOME
cd "$WORK"
"$GPUFLEET" dev --data-dir "$WORK/data" --port 0 --agents 1 --fake-gpus 2xH100 \
  --job-user "$(id -un)" --allow-root-jobs >"$WORK/dev.log" 2>&1 &
DEV_PID=$!
trap 'kill $DEV_PID 2>/dev/null; wait $DEV_PID 2>/dev/null; rm -rf "$WORK"' EXIT
wait_for() { wait_for_while "$DEV_PID" "$WORK/dev.log" "$@"; }
state_of() { "$GPUFLEET" status "$1" -o json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["state"])'; }
is_running() { [[ "$(state_of "$1")" == running ]]; }
wait_for "node dev-1" sh -c "'$GPUFLEET' nodes -o json | grep -q '\"state\": \"up\"'"

VISION="$("$GPUFLEET" token create --role user --team vision --subject alice | grep -o 'gf_user_[0-9a-f]*' | head -1)"
NLP="$("$GPUFLEET" token create --role user --team nlp --subject bob | grep -o 'gf_user_[0-9a-f]*' | head -1)"
[[ -n "$VISION" && -n "$NLP" ]] || fail "gpufleet token create printed no token"

run "$WORK/set" "$GPUFLEET" quota vision --gpus 1 --no-borrow
expect_rc "$WORK/set" 0 "gpufleet quota vision --gpus 1 --no-borrow"
run "$WORK/user-set" env GPUFLEET_TOKEN="$VISION" "$GPUFLEET" quota vision --gpus 8
[[ "$RC" != 0 ]] || fail "a user's token set a quota"

submit() { GPUFLEET_TOKEN="$1" "$GPUFLEET" run --gpus 1 --name "$2" -- sleep 300 | grep -o 'job [0-9]*' | head -1 | cut -d' ' -f2; }
V1="$(submit "$VISION" v1)"
wait_for "vision's first job to run" is_running "$V1"
V2="$(submit "$VISION" v2)"
run "$WORK/explain" "$GPUFLEET" explain "$V2"
expect_contains "$WORK/explain.out" "quota: team vision is over its quota, borrowing not allowed" \
  "explain names the quota as what holds vision's second job"
[[ "$(state_of "$V2")" == pending ]] || fail "vision's second job runs past its 1-GPU quota"
N1="$(submit "$NLP" n1)"
wait_for "nlp's job to take the free GPU" is_running "$N1"
[[ "$(state_of "$V2")" == pending ]] || fail "vision's second job started past its quota"

run "$WORK/list" "$GPUFLEET" quota
expect_rc "$WORK/list" 0 "gpufleet quota"
grep -E '^vision +1 any +no +1 ' "$WORK/list.out" >/dev/null || { show "$WORK/list"; fail "gpufleet quota does not show vision's quota and use"; }
run "$WORK/json" "$GPUFLEET" quota vision -o json
"$PYTHON" - "$WORK/json.out" <<'PY' || fail "gpufleet quota -o json is wrong"
import json, sys
t = json.load(open(sys.argv[1]))["teams"]
assert len(t) == 1 and t[0]["team"] == "vision", t
assert t[0]["gpus"] == 1 and t[0]["borrow"] is False and t[0]["running_jobs"] == 1 and t[0]["pending_jobs"] == 1, t
PY

run "$WORK/limit" "$GPUFLEET" quota vision --max-pending 1
expect_rc "$WORK/limit" 0 "gpufleet quota vision --max-pending 1"
run "$WORK/refused" env GPUFLEET_TOKEN="$VISION" "$GPUFLEET" run --gpus 1 --name v3 -- true
[[ "$RC" != 0 ]] || fail "a submit past vision's pending-job limit was taken"
expect_contains "$WORK/refused.err" "may have at most 1" "the refusal says the pending-job limit"

run "$WORK/clear" "$GPUFLEET" quota vision --clear
expect_rc "$WORK/clear" 0 "gpufleet quota vision --clear"
"$GPUFLEET" cancel "$N1" >/dev/null
wait_for "vision's second job to start once the quota is cleared" is_running "$V2"
echo PASS
