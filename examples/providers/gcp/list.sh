#!/usr/bin/env bash
# The exec provider's list call on Compute Engine: every VM labelled gpufleet-pool=$GPUFLEET_POOL,
# in all zones, as a JSON array of instances. GCE statuses map to ours: PROVISIONING, STAGING
# and REPAIRING -> booting, RUNNING -> running, STOPPING and SUSPENDING -> terminating,
# TERMINATED and SUSPENDED -> terminated. A preempted Spot VM is deleted by GCE, so it leaves the
# list (its agent reported the notice before).
set -euo pipefail
fail() { echo "gcp/list.sh: $*" >&2; exit 2; }
[[ -n "${GPUFLEET_POOL:-}" ]] || fail "GPUFLEET_POOL is not set (the pool's name_prefix)"
[[ -n "${GPUFLEET_GCP_PROJECT:-}" ]] || fail "GPUFLEET_GCP_PROJECT is not set"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
gcloud compute instances list --project "$GPUFLEET_GCP_PROJECT" --filter "labels.gpufleet-pool=$GPUFLEET_POOL" \
  --format json >"$tmp"
python3 -c '
import json, sys
states = {"PROVISIONING": "booting", "STAGING": "booting", "RUNNING": "running", "REPAIRING": "booting",
          "STOPPING": "terminating", "SUSPENDING": "terminating", "SUSPENDED": "terminated", "TERMINATED": "terminated"}
result = []
for i in json.load(open(sys.argv[1])):
    zone = i["zone"].rsplit("/", 1)[-1]
    sched = i.get("scheduling", {})
    inst = {"id": "%s/%s" % (zone, i["name"]), "name": i["name"], "state": states.get(i.get("status", ""), "booting"),
            "created": i["creationTimestamp"], "zone": zone,
            "market": "spot" if sched.get("provisioningModel") == "SPOT" or sched.get("preemptible") else "on-demand",
            "labels": {"instance_type": i.get("machineType", "").rsplit("/", 1)[-1]}}
    if inst["state"] == "running" and i.get("lastStartTimestamp"):
        inst["started"] = i["lastStartTimestamp"]
    if inst["state"] == "terminated":
        inst["end_reason"] = i.get("statusMessage") or ("preempted or stopped" if inst["market"] == "spot" else "stopped")
    result.append(inst)
json.dump(result, sys.stdout)
print()' "$tmp"
