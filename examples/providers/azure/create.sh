#!/usr/bin/env bash
# The exec provider's create call on Azure: `az vm create` in one resource group.
# stdin: the instance request (JSON, docs/providers.md); stdout: {"id": "NAME", "state": ..., ...}.
# The VM size is the request's label instance_type (catalog offers set it). The request's zone is
# a region (eastus: --location), a zone number (1: --zone) or both (eastus-1). Spot requests get
# --priority Spot --eviction-policy Delete --max-price -1 (pay up to the on-demand price; evicted
# for capacity, not price). The call waits until Azure has placed the VM, so a capacity error
# fails the create (the pool then tries another offer). Settings come from the environment; see
# README.md. A missing setting fails before anything is created.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "azure/create.sh: $*" >&2; exit 2; }
for v in GPUFLEET_POOL GPUFLEET_SERVER GPUFLEET_JOIN_TOKEN_FILE GPUFLEET_AZ_RESOURCE_GROUP GPUFLEET_AZ_IMAGE \
         GPUFLEET_AZ_SUBNET GPUFLEET_AZ_SSH_PUBLIC_KEY; do
  [[ -n "${!v:-}" ]] || fail "$v is not set (examples/providers/azure/README.md lists the settings)"
done
[[ -r "$GPUFLEET_JOIN_TOKEN_FILE" && -s "$GPUFLEET_JOIN_TOKEN_FILE" ]] ||
  fail "GPUFLEET_JOIN_TOKEN_FILE: cannot read '$GPUFLEET_JOIN_TOKEN_FILE' (the controller's join.token)"
[[ -r "$GPUFLEET_AZ_SSH_PUBLIC_KEY" ]] || fail "GPUFLEET_AZ_SSH_PUBLIC_KEY: cannot read '$GPUFLEET_AZ_SSH_PUBLIC_KEY'"
command -v az >/dev/null || fail "the Azure CLI (az) is not on PATH"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/request.json"
python3 - "$tmp/request.json" "$here/user-data.sh" "$tmp/custom-data" <<'PY' >"$tmp/vars" || exit 2
import json, os, re, shlex, sys
def fail(msg):
    sys.stderr.write("azure/create.sh: %s\n" % msg)
    sys.exit(2)
try:
    req = json.load(open(sys.argv[1]))
except ValueError as e:
    fail("stdin is not a JSON request: %s" % e)
name, pool = req.get("name", ""), os.environ["GPUFLEET_POOL"]
if not name.startswith(pool + "-"):
    fail("instance name '%s' does not start with GPUFLEET_POOL '%s-' (the pool's name_prefix)" % (name, pool))
if not re.match(r"^[A-Za-z0-9][A-Za-z0-9-]{0,62}[A-Za-z0-9]$", name):
    fail("'%s': Azure VM names are letters, digits and '-', at most 64" % name)
labels = req.get("labels") or {}
size = labels.get("instance_type", "")
if not size:
    fail("the request has no label instance_type (use a catalog: offer, or give the offer labels: {instance_type: Standard_ND96asr_v4})")
market = req.get("market", "on-demand")
zone = req.get("zone", "")
location, az_zone = "", ""
m = re.match(r"^([a-z0-9]+)-([1-3])$", zone)
if m:
    location, az_zone = m.group(1), m.group(2)
elif re.match(r"^[1-3]$", zone):
    az_zone = zone
elif re.match(r"^[a-z0-9]+$", zone):
    location = zone
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
out = {"name": name, "market": market, "size": size, "zone": zone, "location": location, "az_zone": az_zone,
       "offer": req.get("offer", "")}
for k, v in out.items():
    print("%s=%s" % (k, shlex.quote(v)))
PY
source "$tmp/vars"

args=(vm create --resource-group "$GPUFLEET_AZ_RESOURCE_GROUP" --name "$name" --output json --only-show-errors
      --image "$GPUFLEET_AZ_IMAGE" --size "$size"
      --subnet "$GPUFLEET_AZ_SUBNET" --public-ip-address "" --nsg ""
      --admin-username "${GPUFLEET_AZ_ADMIN_USER:-azureuser}" --ssh-key-values "$GPUFLEET_AZ_SSH_PUBLIC_KEY"
      --custom-data "$tmp/custom-data"
      --os-disk-size-gb "${GPUFLEET_AZ_OS_DISK_GB:-200}" --os-disk-delete-option Delete --nic-delete-option Delete
      --tags "gpufleet-pool=$GPUFLEET_POOL" "gpufleet-name=$name" "gpufleet-offer=$offer" "gpufleet-market=$market"
             "gpufleet-zone=$zone")
[[ -n "$location" ]] && args+=(--location "$location")
[[ -n "$az_zone" ]] && args+=(--zone "$az_zone")
[[ -n "${AZURE_SUBSCRIPTION_ID:-}" ]] && args+=(--subscription "$AZURE_SUBSCRIPTION_ID")
[[ -n "${GPUFLEET_AZ_IDENTITY:-}" ]] && args+=(--assign-identity "$GPUFLEET_AZ_IDENTITY")
if [[ "$market" == spot ]]; then
  # Evicted Spot VMs are deleted (with their disks and NIC): nothing left to pay for. The agent
  # sees a Preempt event in Scheduled Events at least 30 s before.
  args+=(--priority Spot --eviction-policy Delete --max-price -1)
fi
az "${args[@]}" >"$tmp/out"

python3 - "$tmp/out" "$name" "$market" "$zone" <<'PY'
import json, sys
vm = json.load(open(sys.argv[1]))
power = vm.get("powerState", "")
state = "running" if power == "VM running" else "booting"
print(json.dumps({"id": sys.argv[2], "name": sys.argv[2], "market": sys.argv[3], "state": state,
                  "zone": sys.argv[4] or vm.get("location", "")}))
PY
