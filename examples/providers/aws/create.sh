#!/usr/bin/env bash
# The exec provider's create call on AWS EC2: one instance per request, with `aws ec2 run-instances`.
# stdin: the instance request (JSON, docs/providers.md); stdout: {"id": "i-...", "state": "booting", ...}.
# The instance type is the request's label instance_type (catalog offers set it); the zone, when it
# is an availability zone (us-east-1a), is the placement. Settings come from the environment; see
# README.md. Errors go to stderr with a non-zero exit, before anything is created when a setting
# is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "aws/create.sh: $*" >&2; exit 2; }
for v in GPUFLEET_POOL GPUFLEET_SERVER GPUFLEET_JOIN_TOKEN_FILE GPUFLEET_AWS_AMI GPUFLEET_AWS_SUBNET \
         GPUFLEET_AWS_SECURITY_GROUP; do
  [[ -n "${!v:-}" ]] || fail "$v is not set (examples/providers/aws/README.md lists the settings)"
done
region="${AWS_REGION:-${AWS_DEFAULT_REGION:-}}"
[[ -n "$region" ]] || fail "AWS_REGION is not set (the region to rent in, e.g. us-east-1)"
[[ -r "$GPUFLEET_JOIN_TOKEN_FILE" && -s "$GPUFLEET_JOIN_TOKEN_FILE" ]] ||
  fail "GPUFLEET_JOIN_TOKEN_FILE: cannot read '$GPUFLEET_JOIN_TOKEN_FILE' (the controller's join.token)"
command -v aws >/dev/null || fail "the AWS CLI (aws) is not on PATH"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The request, checked, as shell assignments (every value shlex-quoted), and the user data.
cat >"$tmp/request.json"
python3 - "$tmp/request.json" "$here/user-data.sh" "$tmp/user-data" <<'PY' >"$tmp/vars" || exit 2
import json, os, re, shlex, sys
def fail(msg):
    sys.stderr.write("aws/create.sh: %s\n" % msg)
    sys.exit(2)
try:
    req = json.load(open(sys.argv[1]))
except ValueError as e:
    fail("stdin is not a JSON request: %s" % e)
name, pool = req.get("name", ""), os.environ["GPUFLEET_POOL"]
if not name.startswith(pool + "-"):
    fail("instance name '%s' does not start with GPUFLEET_POOL '%s-' (the pool's name_prefix)" % (name, pool))
labels = req.get("labels") or {}
itype = labels.get("instance_type", "")
if not itype:
    fail("the request has no label instance_type (use a catalog: offer, or give the offer labels: {instance_type: p4d.24xlarge})")
market = req.get("market", "on-demand")
if market not in ("on-demand", "spot", "reserved"):
    fail("unknown market '%s'" % market)
zone = req.get("zone", "")
# One subnet, or one per zone ("us-east-1a=subnet-1,us-east-1b=subnet-2"; zone IDs such as
# use1-az4 work too): a subnet lies in one availability zone, so it decides where the instance is.
subnet = os.environ["GPUFLEET_AWS_SUBNET"]
if "=" in subnet:
    subnets = dict(kv.split("=", 1) for kv in subnet.split(",") if "=" in kv)
    if zone not in subnets:
        fail("GPUFLEET_AWS_SUBNET has no subnet for zone '%s' (it has: %s)" % (zone, ", ".join(sorted(subnets))))
    subnet = subnets[zone]
token = open(os.environ["GPUFLEET_JOIN_TOKEN_FILE"]).read().strip()
node_labels = ["zone=" + zone] if zone else []
node_labels += ["%s=%s" % kv for kv in sorted(labels.items()) if kv[0] != "zone"]
values = {
    "SERVER": os.environ["GPUFLEET_SERVER"], "JOIN_TOKEN": token, "NAME": name, "MARKET": market,
    "PRICE_PER_HOUR": str(req.get("price_per_hour", "0")), "INSTALL_URL": os.environ.get("GPUFLEET_INSTALL_URL", ""),
}
text = open(sys.argv[2]).read()
for k, v in values.items():
    text = text.replace("@%s@" % k, shlex.quote(v))
text = text.replace("@LABELS@", " ".join(shlex.quote(l) for l in node_labels))
with open(sys.argv[3], "w") as f:
    f.write(text)
tags = [{"Key": "Name", "Value": name}, {"Key": "gpufleet:pool", "Value": pool}, {"Key": "gpufleet:zone", "Value": zone},
        {"Key": "gpufleet:offer", "Value": req.get("offer", "")}, {"Key": "gpufleet:market", "Value": market}]
out = {
    "name": name, "market": market, "itype": itype, "zone": zone, "subnet": subnet,
    "tags": json.dumps([{"ResourceType": "instance", "Tags": tags}, {"ResourceType": "volume", "Tags": tags}]),
    "placement": json.dumps({"AvailabilityZone": zone}) if re.match(r"^[a-z]{2}(-[a-z]+)+-\d[a-z]$", zone) else "",
}
for k, v in out.items():
    print("%s=%s" % (k, shlex.quote(v)))
PY
source "$tmp/vars"

args=(ec2 run-instances --region "$region" --output json
      --image-id "$GPUFLEET_AWS_AMI" --instance-type "$itype" --count 1
      --subnet-id "$subnet" --security-group-ids $GPUFLEET_AWS_SECURITY_GROUP
      --user-data "file://$tmp/user-data"
      --tag-specifications "$tags"
      --instance-initiated-shutdown-behavior terminate
      --metadata-options '{"HttpTokens": "required", "HttpEndpoint": "enabled", "HttpPutResponseHopLimit": 1}')
[[ -n "$placement" ]] && args+=(--placement "$placement")
[[ -n "${GPUFLEET_AWS_KEY_NAME:-}" ]] && args+=(--key-name "$GPUFLEET_AWS_KEY_NAME")
[[ -n "${GPUFLEET_AWS_INSTANCE_PROFILE:-}" ]] &&
  args+=(--iam-instance-profile "{\"Name\": \"$GPUFLEET_AWS_INSTANCE_PROFILE\"}")
[[ -n "${GPUFLEET_AWS_ROOT_VOLUME_GB:-}" ]] &&
  args+=(--block-device-mappings "[{\"DeviceName\": \"${GPUFLEET_AWS_ROOT_DEVICE:-/dev/xvda}\", \"Ebs\": {\"VolumeSize\": $GPUFLEET_AWS_ROOT_VOLUME_GB, \"VolumeType\": \"gp3\", \"DeleteOnTermination\": true}}]")
if [[ "$market" == spot ]]; then
  # One-time spot, terminated on interruption: EC2 posts the notice two minutes before.
  args+=(--instance-market-options '{"MarketType": "spot", "SpotOptions": {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"}}')
fi
aws "${args[@]}" >"$tmp/out"

python3 - "$tmp/out" "$name" "$market" "$zone" <<'PY'
import json, sys
out = json.load(open(sys.argv[1]))
i = out["Instances"][0]
print(json.dumps({"id": i["InstanceId"], "name": sys.argv[2], "state": "booting", "market": sys.argv[3],
                  "zone": sys.argv[4] or i.get("Placement", {}).get("AvailabilityZone", ""),
                  "created": i["LaunchTime"]}))
PY
