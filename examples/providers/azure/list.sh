#!/usr/bin/env bash
# The exec provider's list call on Azure: every VM of $GPUFLEET_AZ_RESOURCE_GROUP tagged
# gpufleet-pool=$GPUFLEET_POOL, as a JSON array of instances (`az vm list --show-details`, for the
# power state). States map to ours: provisioningState Deleting -> terminating, Failed ->
# terminated; else powerState "VM running" -> running, "VM stopping"/"VM deallocating" ->
# terminating, "VM stopped"/"VM deallocated" -> terminated, anything else (starting, creating) ->
# booting. An evicted Spot VM is deleted by Azure (eviction policy Delete), so it leaves the list.
set -euo pipefail
fail() { echo "azure/list.sh: $*" >&2; exit 2; }
[[ -n "${GPUFLEET_POOL:-}" ]] || fail "GPUFLEET_POOL is not set (the pool's name_prefix)"
[[ -n "${GPUFLEET_AZ_RESOURCE_GROUP:-}" ]] || fail "GPUFLEET_AZ_RESOURCE_GROUP is not set"
sub=()
[[ -n "${AZURE_SUBSCRIPTION_ID:-}" ]] && sub=(--subscription "$AZURE_SUBSCRIPTION_ID")
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
az vm list --resource-group "$GPUFLEET_AZ_RESOURCE_GROUP" --show-details --output json --only-show-errors \
  "${sub[@]}" >"$tmp"
python3 -c '
import json, sys
power = {"VM running": "running", "VM stopping": "terminating", "VM deallocating": "terminating",
         "VM stopped": "terminated", "VM deallocated": "terminated"}
result = []
for vm in json.load(open(sys.argv[1])):
    tags = vm.get("tags") or {}
    if tags.get("gpufleet-pool") != sys.argv[2]:
        continue
    prov = vm.get("provisioningState", "")
    state = {"Deleting": "terminating", "Failed": "terminated"}.get(prov) or power.get(vm.get("powerState", ""), "booting")
    inst = {"id": vm["name"], "name": tags.get("gpufleet-name", vm["name"]), "state": state,
            "offer": tags.get("gpufleet-offer", ""), "zone": tags.get("gpufleet-zone") or vm.get("location", ""),
            "market": "spot" if vm.get("priority") in ("Spot", "Low") else "on-demand",
            "labels": {"instance_type": (vm.get("hardwareProfile") or {}).get("vmSize", "")}}
    if vm.get("timeCreated"):
        inst["created"] = vm["timeCreated"]
    if state == "terminated":
        inst["end_reason"] = "provisioning failed" if prov == "Failed" else vm.get("powerState", "")
    result.append(inst)
json.dump(result, sys.stdout)
print()' "$tmp" "$GPUFLEET_POOL"
