#!/usr/bin/env bash
# The exec provider's scripts for real clouds (examples/providers/{aws,gcp,azure}/) against the
# fake CLIs of src/testing/cloud_cli/ (their state and call log under $FAKE_CLOUD_DIR; nothing
# leaves this machine). For each cloud, given a spot request for a pool "gf", expect:
#   - create prints a valid instance (our id, state booting or running);
#   - the CLI was called with the spot flags, the pool's tag or label, the instance type and zone;
#   - the user data carries the controller's address, the join token and the cloud's notice
#     format, and is valid bash;
#   - list shows the instance, delete takes it away, deleting an unknown id exits 0;
#   - a missing setting fails with a message naming it, before any CLI call.
# Then the AWS scripts run under the real exec provider: a dev cluster whose pool rents through
# them (create), reconciles (list) and releases the instance whose agent never registers (delete).
#
# Usage: cloud_scripts_test.sh PATH/TO/gpufleet REPO_ROOT
source "$(dirname "$0")/lib.sh"

GPUFLEET="${1:?usage: cloud_scripts_test.sh GPUFLEET REPO_ROOT}"
ROOT="${2:?usage: cloud_scripts_test.sh GPUFLEET REPO_ROOT}"
GPUFLEET="$(cd "$(dirname "$GPUFLEET")" && pwd)/$(basename "$GPUFLEET")"
ROOT="$(cd "$ROOT" && pwd)"
export PATH="$ROOT/src/testing/cloud_cli:$PATH"
export FAKE_CLOUD_DIR="$WORK/cloud"
mkdir -p "$FAKE_CLOUD_DIR"
printf 'join-secret-4242\n' >"$WORK/join.token"
printf 'ssh-ed25519 AAAAC3Nza test\n' >"$WORK/id.pub"
export GPUFLEET_POOL=gf GPUFLEET_SERVER=http://10.1.2.3:8471 GPUFLEET_JOIN_TOKEN_FILE="$WORK/join.token"

# calls CLI: the number of logged calls of that CLI.
calls() { "$PYTHON" -c 'import json,sys; print(sum(1 for l in open(sys.argv[1]) if json.loads(l)["cli"] == sys.argv[2]))' \
  "$FAKE_CLOUD_DIR/calls.log" "$1" 2>/dev/null || echo 0; }

# check_instance FILE STATES ID?: FILE holds one instance object with an id (equal to ID when
# given) and a state among STATES (comma-separated), as the exec provider reads it.
check_instance() {
  "$PYTHON" - "$@" <<'PY' || fail "$1: not the instance the exec provider expects"
import json, sys
i = json.load(open(sys.argv[1]))
assert isinstance(i, dict) and i.get("id"), "no id: %r" % i
assert i.get("state") in sys.argv[2].split(","), "state %r, expected one of %s" % (i.get("state"), sys.argv[2])
assert i.get("name") == "gf-test-spot-0", "name %r" % i.get("name")
if len(sys.argv) > 3:
    assert i["id"] == sys.argv[3], "id %r, expected %r" % (i["id"], sys.argv[3])
PY
}

# listed FILE ID: prints the state of ID in the list FILE (a JSON array), "absent" if missing.
listed() {
  "$PYTHON" -c '
import json, sys
items = json.load(open(sys.argv[1]))
assert isinstance(items, list)
print(next((i["state"] for i in items if i["id"] == sys.argv[2]), "absent"))' "$1" "$2"
}

# last_call CLI VERB: the argv of the last logged call of CLI whose argv contains VERB, one
# argument per line, then every file content it read.
last_call() {
  "$PYTHON" -c '
import json, sys
hit = None
for l in open(sys.argv[1]):
    c = json.loads(l)
    if c["cli"] == sys.argv[2] and sys.argv[3] in c["argv"]:
        hit = c
assert hit, "no %s %s call" % (sys.argv[2], sys.argv[3])
print("\n".join(hit["argv"]))
for v in hit["files"].values():
    print(v)' "$FAKE_CLOUD_DIR/calls.log" "$1" "$2"
}

REQUEST='{"name": "gf-test-spot-0", "offer": "test-spot", "gpu_model": "V100", "gpus": 8, "market": "spot",
          "price_per_hour": "7.25", "price_micros_per_hour": 7250000, "zone": "ZONE",
          "labels": {"instance_type": "TYPE", "zone": "ZONE"}}'

# exercise CLOUD CLI TYPE ZONE NOTICE_FORMAT MISSING_VAR FLAG...: the whole round for one cloud.
# FLAGs are fixed strings the create call must contain (spot flag, pool tag/label, ...).
exercise() {
  local cloud="$1" cli="$2" type="$3" zone="$4" format="$5" missing="$6"
  shift 6
  local dir="$ROOT/examples/providers/$cloud" out="$WORK/$cloud"
  local request="${REQUEST//TYPE/$type}"
  request="${request//ZONE/$zone}"

  # create
  RC=0
  "$dir/create.sh" <<<"$request" >"$out.create.out" 2>"$out.create.err" || RC=$?
  expect_rc "$out.create" 0 "$cloud: create"
  check_instance "$out.create.out" booting,running
  local id
  id="$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$out.create.out")"
  last_call "$cli" create >"$out.call" 2>/dev/null || last_call "$cli" run-instances >"$out.call" ||
    fail "$cloud: no create call in the log"
  local f
  for f in "$type" "$zone" "$@"; do expect_contains "$out.call" "$f" "$cloud: the create call"; done
  local ud="$FAKE_CLOUD_DIR/user-data/$(ls -t "$FAKE_CLOUD_DIR/user-data" | head -1)"
  expect_contains "$ud" "join-secret-4242" "$cloud: user data has the join token"
  expect_contains "$ud" "$GPUFLEET_SERVER" "$cloud: user data has the controller"
  expect_contains "$ud" "NOTICE_FORMAT=$format" "$cloud: user data has the notice format"
  expect_contains "$ud" '--spot-notice-format "$NOTICE_FORMAT"' "$cloud: user data passes the notice format"
  expect_contains "$ud" "NODE_NAME=gf-test-spot-0" "$cloud: user data names the node"
  bash -n "$ud" || fail "$cloud: the user data is not valid bash"
  if grep -q -- "--join-token " "$ud"; then fail "$cloud: the join token is on the agent's command line"; fi

  # list: the instance is there (twice: the fakes move their state on at each look)
  run "$out.list" "$dir/list.sh"
  expect_rc "$out.list" 0 "$cloud: list"
  [[ "$(listed "$out.list.out" "$id")" == booting || "$(listed "$out.list.out" "$id")" == running ]] ||
    { show "$out.list"; fail "$cloud: list does not show $id booting or running"; }
  run "$out.list" "$dir/list.sh"
  [[ "$(listed "$out.list.out" "$id")" == running ]] || { show "$out.list"; fail "$cloud: $id is not running"; }

  # delete, then it is terminating or gone, and gone at the next look
  RC=0
  "$dir/delete.sh" <<<"{\"id\": \"$id\"}" >"$out.delete.out" 2>"$out.delete.err" || RC=$?
  expect_rc "$out.delete" 0 "$cloud: delete"
  run "$out.list" "$dir/list.sh"
  [[ "$(listed "$out.list.out" "$id")" =~ ^(terminating|absent)$ ]] || { show "$out.list"; fail "$cloud: deleted $id is still up"; }
  run "$out.list" "$dir/list.sh"
  [[ "$(listed "$out.list.out" "$id")" == absent ]] || { show "$out.list"; fail "$cloud: deleted $id is still listed"; }

  # deleting what the cloud does not know is fine
  local unknown="$id"
  case "$cloud" in
    aws) unknown="i-0123456789abcdef0" ;;
    gcp) unknown="$zone/gf-never-was" ;;
    azure) unknown="gf-never-was" ;;
  esac
  RC=0
  "$dir/delete.sh" <<<"{\"id\": \"$unknown\"}" >"$out.delete2.out" 2>"$out.delete2.err" || RC=$?
  expect_rc "$out.delete2" 0 "$cloud: deleting an unknown id"

  # a missing setting: a clear message, and no call at all
  local before after
  before="$(calls "$cli")"
  RC=0
  env -u "$missing" "$dir/create.sh" <<<"$request" >"$out.missing.out" 2>"$out.missing.err" || RC=$?
  [[ "$RC" != 0 ]] || fail "$cloud: create without $missing succeeded"
  expect_contains "$out.missing.err" "$missing is not set" "$cloud: create without $missing"
  after="$(calls "$cli")"
  [[ "$before" == "$after" ]] || fail "$cloud: create without $missing still called $cli"

  # the fake refuses flags it does not know, as the CLI does
  run "$out.bad" "$cli" "$(head -1 "$out.call")" "$(sed -n 2p "$out.call")" --no-such-flag
  [[ "$RC" == 2 ]] || { show "$out.bad"; fail "$cloud: the fake $cli accepted an unknown flag"; }
}

# AWS
export AWS_REGION=us-east-1 GPUFLEET_AWS_AMI=ami-0fake GPUFLEET_AWS_SUBNET=subnet-0fake \
  GPUFLEET_AWS_SECURITY_GROUP=sg-0fake GPUFLEET_AWS_INSTANCE_PROFILE=gpufleet-node
exercise aws aws p3.16xlarge us-east-1a aws GPUFLEET_AWS_AMI \
  '"MarketType": "spot"' '"Key": "gpufleet:pool", "Value": "gf"' '"Key": "Name", "Value": "gf-test-spot-0"' \
  '"HttpTokens": "required"' 'http://169.254.169.254/latest/meta-data/spot/instance-action'
# A spot interruption: terminated, with EC2's reason, until deleted.
RC=0
"$ROOT/examples/providers/aws/create.sh" <<<"${REQUEST//TYPE/p3.16xlarge}" >"$WORK/aws.c2.out" 2>"$WORK/aws.c2.err" || RC=$?
expect_rc "$WORK/aws.c2" 0 "aws: second create"
ID2="$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$WORK/aws.c2.out")"
aws ec2 fake-interrupt --instance-id "$ID2" || fail "aws: fake-interrupt"
run "$WORK/aws.l2" "$ROOT/examples/providers/aws/list.sh"
[[ "$(listed "$WORK/aws.l2.out" "$ID2")" == terminated ]] || { show "$WORK/aws.l2"; fail "aws: interrupted $ID2 is not terminated"; }
expect_contains "$WORK/aws.l2.out" "Server.SpotInstanceTermination" "aws: the interruption's reason"

# GCP
export GPUFLEET_GCP_PROJECT=fake-project GPUFLEET_GCP_IMAGE_FAMILY=common-cu124 \
  GPUFLEET_GCP_IMAGE_PROJECT=deeplearning-platform-release
exercise gcp gcloud n1-standard-64 us-central1-a gcp GPUFLEET_GCP_PROJECT \
  '--provisioning-model' 'SPOT' 'gpufleet-pool=gf' 'type=nvidia-tesla-v100,count=8' \
  'http://metadata.google.internal/computeMetadata/v1/instance/preempted'
# Names GCE would refuse fail before the call.
RC=0
GPUFLEET_POOL=GF "$ROOT/examples/providers/gcp/create.sh" <<<"${REQUEST//gf-/GF-}" >"$WORK/gcp.upper.out" \
  2>"$WORK/gcp.upper.err" || RC=$?
[[ "$RC" == 2 ]] || fail "gcp: an upper-case name was not refused"
expect_contains "$WORK/gcp.upper.err" "lowercase" "gcp: an upper-case name"

# Azure
export GPUFLEET_AZ_RESOURCE_GROUP=gpufleet-rg GPUFLEET_AZ_IMAGE=microsoft-dsvm:ubuntu-hpc:2204:latest \
  GPUFLEET_AZ_SUBNET=/subscriptions/0/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/v/subnets/s \
  GPUFLEET_AZ_SSH_PUBLIC_KEY="$WORK/id.pub"
exercise azure az Standard_ND40rs_v2 eastus-1 azure GPUFLEET_AZ_RESOURCE_GROUP \
  '--priority' 'Spot' '--eviction-policy' 'Delete' 'gpufleet-pool=gf' '--zone' \
  'http://169.254.169.254/metadata/scheduledevents?api-version=2020-07-01'

# Through the real exec provider: a dev cluster whose pool rents with the AWS scripts. The
# instance never boots an agent (nothing boots here), so after boot_timeout the pool deletes it.
export GPUFLEET_CONFIG="$WORK/config.yaml"
unset GPUFLEET_SERVER GPUFLEET_TOKEN
rm -rf "$FAKE_CLOUD_DIR" && mkdir -p "$FAKE_CLOUD_DIR"
cat >"$WORK/aws-pool.yaml" <<YAML
provider:
  kind: exec
  create: [$ROOT/examples/providers/aws/create.sh]
  delete: [$ROOT/examples/providers/aws/delete.sh]
  list:   [$ROOT/examples/providers/aws/list.sh]
  timeout: 30s
  env:
    PATH: '$PATH'
    FAKE_CLOUD_DIR: '$FAKE_CLOUD_DIR'
    GPUFLEET_POOL: gf
    GPUFLEET_SERVER: '{server}'
    GPUFLEET_JOIN_TOKEN_FILE: '{join_token_file}'
    AWS_REGION: us-east-1
    GPUFLEET_AWS_AMI: ami-0fake
    GPUFLEET_AWS_SUBNET: subnet-0fake
    GPUFLEET_AWS_SECURITY_GROUP: sg-0fake
offers:
  - catalog: {cloud: aws, region: us-east-1, instance_type: p4d.24xlarge, market: spot}
max_nodes: 1
boot_timeout: 3s
reconcile_interval: 1s
YAML
PORT="$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$GPUFLEET" dev --data-dir "$WORK/data" --port "$PORT" --agents 0 --pool "$WORK/aws-pool.yaml" \
  --config "$GPUFLEET_CONFIG" >"$WORK/dev.log" 2>&1 &
DEV_PID=$!
trap 'kill "$DEV_PID" 2>/dev/null; wait "$DEV_PID" 2>/dev/null; [[ -n "${KEEP_WORK:-}" ]] || rm -rf "$WORK"' EXIT
wait_for_while "$DEV_PID" "$WORK/dev.log" "the dev cluster" "$GPUFLEET" pool
run "$WORK/submit" "$GPUFLEET" run --gpus 1 -- true
expect_rc "$WORK/submit" 0 "submitting a job to the pool"
logged() { grep -q -- "$1" "$FAKE_CLOUD_DIR/calls.log" 2>/dev/null; }
wait_for_while "$DEV_PID" "$WORK/dev.log" "the pool's run-instances" logged '"run-instances"'
wait_for_while "$DEV_PID" "$WORK/dev.log" "the pool's describe-instances" logged '"describe-instances"'
wait_for_while "$DEV_PID" "$WORK/dev.log" "the pool's terminate-instances after boot_timeout" logged '"terminate-instances"'
last_call aws run-instances >"$WORK/pool.call"
expect_contains "$WORK/pool.call" "p4d.24xlarge" "the pool's create call"
expect_contains "$WORK/pool.call" '"MarketType": "spot"' "the pool's create call"
expect_contains "$WORK/pool.call" "--spot-notice-format" "the pool's user data"
expect_contains "$WORK/pool.call" "http://127.0.0.1:" "the pool's user data names the controller"
if grep -q "exited with code\|output is wrong" "$WORK/dev.log"; then
  grep "exited with code\|output is wrong" "$WORK/dev.log" | head -5 >&2
  fail "the exec provider could not use the AWS scripts"
fi
echo "PASS: cloud scripts (aws, gcp, azure) against the fake CLIs, and the AWS scripts under the exec provider"
