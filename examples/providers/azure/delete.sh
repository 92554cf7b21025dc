#!/usr/bin/env bash
# The exec provider's delete call on Azure: `az vm delete --yes --no-wait` (the VM's OS disk and
# NIC go with it: create.sh set their delete options). stdin: {"id": "NAME"}. A VM Azure does not
# know (ResourceNotFound) is gone already: exit 0, since delete is idempotent.
set -euo pipefail
fail() { echo "azure/delete.sh: $*" >&2; exit 2; }
[[ -n "${GPUFLEET_AZ_RESOURCE_GROUP:-}" ]] || fail "GPUFLEET_AZ_RESOURCE_GROUP is not set"
name=$(python3 -c '
import json, re, sys
try:
    i = json.load(sys.stdin)["id"]
except (ValueError, KeyError, TypeError) as e:
    sys.exit("azure/delete.sh: stdin must be {\"id\": \"NAME\"}: %s" % e)
if not re.match(r"^[A-Za-z0-9][A-Za-z0-9-]*$", i):
    sys.exit("azure/delete.sh: %r is not an id of create.sh (the VM name)" % i)
print(i)') || exit 2
sub=()
[[ -n "${AZURE_SUBSCRIPTION_ID:-}" ]] && sub=(--subscription "$AZURE_SUBSCRIPTION_ID")
if ! out=$(az vm delete --resource-group "$GPUFLEET_AZ_RESOURCE_GROUP" --name "$name" --yes --no-wait \
             --output json --only-show-errors "${sub[@]}" 2>&1); then
  case "$out" in
    *ResourceNotFound* | *"was not found"*) exit 0 ;;
  esac
  echo "$out" >&2
  exit 1
fi
