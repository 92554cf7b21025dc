#!/usr/bin/env bash
# `gpufleet dev --environments FILE`: the agents dev starts prepare the presets of that file (not
# the shipped table the controller would otherwise disagree with). A job naming a preset only the
# file has runs inside the virtual environment its node prepared.
#
# Usage: dev_environments_test.sh PATH/TO/gpufleet
source "$(dirname "$0")/lib.sh"

GPUFLEET="${1:?usage: dev_environments_test.sh GPUFLEET}"
ENV_PYTHON="${TORCH_PYTHON:-/usr/bin/python3}"
"$ENV_PYTHON" -m venv --help >/dev/null 2>&1 || { echo "SKIP: $ENV_PYTHON has no venv module"; exit 77; }
export GPUFLEET_CONFIG="$WORK/config.yaml" GPUFLEET_BURNIN_PYTHON="$ENV_PYTHON"
unset GPUFLEET_SERVER GPUFLEET_TOKEN
cd "$WORK"

cp "$(dirname "$0")/data/environments_offline.yaml" "$WORK/envs.yaml"  # the preset only-in-this-file
PORT="$(free_local_port)"
trap 'dev_stop; rm -rf "$WORK"' EXIT
dev_start "$GPUFLEET" "$WORK/data" "$PORT" --agents 1 --fake-gpus 1xA100 --environments "$WORK/envs.yaml"
dev_wait "the CLI config" test -s "$GPUFLEET_CONFIG"
cat >"$WORK/job.yaml" <<'YEOF'
name: in-env
environment: only-in-this-file
resources: {gpus: 1}
run: python3 -c 'import os; print("VENV", os.environ["VIRTUAL_ENV"])'
YEOF
dev_wait "the node" "$GPUFLEET" nodes dev-1
run "$WORK/sub" "$GPUFLEET" submit "$WORK/job.yaml"
expect_rc "$WORK/sub" 0 "submit of a job naming the file's preset"
JOB="$(sed -n 's/^submitted job \([0-9]*\) .*/\1/p' "$WORK/sub.out")"
[[ -n "$JOB" ]] || fail "submit printed no job id"
ended() {
  local s
  s="$("$GPUFLEET" status "$JOB" -o json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["state"])')"
  [[ "$s" == succeeded || "$s" == failed ]]
}
dev_wait "job $JOB to end" ended
"$GPUFLEET" status "$JOB" -o json >"$WORK/job.json"
expect_contains "$WORK/job.json" '"state": "succeeded"' "the job in the file's preset"
"$GPUFLEET" logs "$JOB" >"$WORK/job.log"
expect_contains "$WORK/job.log" "VENV " "the job ran in a virtual environment"
expect_contains "$WORK/job.log" "only-in-this-file" "the virtual environment is the file's preset"
echo PASS
