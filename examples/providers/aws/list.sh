#!/usr/bin/env bash
# The exec provider's list call on AWS EC2: every instance tagged gpufleet:pool=$GPUFLEET_POOL, as
# a JSON array of instances. EC2 states map to ours: pending -> booting, running -> running,
# shutting-down and stopping -> terminating, stopped and terminated -> terminated. Instances this
# pool terminated itself (Client.UserInitiatedShutdown) are left out once terminated: they were
# deleted; the ones EC2 ended (a spot interruption) stay, with EC2's reason, until deleted.
set -euo pipefail
fail() { echo "aws/list.sh: $*" >&2; exit 2; }
[[ -n "${GPUFLEET_POOL:-}" ]] || fail "GPUFLEET_POOL is not set (the pool's name_prefix)"
region="${AWS_REGION:-${AWS_DEFAULT_REGION:-}}"
[[ -n "$region" ]] || fail "AWS_REGION is not set (the region the pool rents in)"
filters=$(python3 -c 'import json, sys; print(json.dumps([{"Name": "tag:gpufleet:pool", "Values": [sys.argv[1]]}]))' \
  "$GPUFLEET_POOL")
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
aws ec2 describe-instances --region "$region" --output json --filters "$filters" >"$tmp"
python3 -c '
import json, sys
states = {"pending": "booting", "running": "running", "shutting-down": "terminating", "stopping": "terminating",
          "stopped": "terminated", "terminated": "terminated"}
result = []
for r in json.load(open(sys.argv[1])).get("Reservations", []):
    for i in r.get("Instances", []):
        tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
        ec2_state = i["State"]["Name"]
        reason = i.get("StateReason") or {}
        if ec2_state == "terminated" and reason.get("Code") == "Client.UserInitiatedShutdown":
            continue
        inst = {"id": i["InstanceId"], "name": tags.get("Name", ""), "state": states.get(ec2_state, "booting"),
                "created": i["LaunchTime"], "offer": tags.get("gpufleet:offer", ""),
                "market": "spot" if i.get("InstanceLifecycle") == "spot" else tags.get("gpufleet:market", "on-demand"),
                "zone": tags.get("gpufleet:zone") or i.get("Placement", {}).get("AvailabilityZone", ""),
                "labels": {"instance_type": i.get("InstanceType", "")}}
        if inst["state"] == "running":
            inst["started"] = i["LaunchTime"]
        if inst["state"] == "terminated":
            inst["end_reason"] = reason.get("Message") or i.get("StateTransitionReason", "") or ec2_state
        result.append(inst)
json.dump(result, sys.stdout)
print()' "$tmp"
