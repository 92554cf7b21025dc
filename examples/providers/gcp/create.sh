#!/usr/bin/env bash
# The exec provider's create call on Google Compute Engine: `gcloud compute instances create`.
# stdin: the instance request (JSON, docs/providers.md); stdout: {"id": "ZONE/NAME", "state": ..., ...}.
# The machine type is the request's label instance_type (catalog offers set it), the zone the
# request's zone (a region from the catalog needs GPUFLEET_GCP_ZONE). Spot requests get
# --provisioning-model SPOT --instance-termination-action DELETE. The call waits until GCE has
# placed the VM, so a stockout fails the create (the pool then tries another offer). Settings
# come from the environment; see README.md. A missing setting fails before anything is created.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "gcp/create.sh: $*" >&2; exit 2; }
for v in GPUFLEET_POOL GPUFLEET_SERVER GPUFLEET_JOIN_TOKEN_FILE GPUFLEET_GCP_PROJECT GPUFLEET_GCP_IMAGE_FAMILY \
         GPUFLEET_GCP_IMAGE_PROJECT; do
  [[ -n "${!v:-}" ]] || fail "$v is not set (examples/providers/gcp/README.md lists the settings)"
done
[[ -r "$GPUFLEET_JOIN_TOKEN_FILE" && -s "$GPUFLEET_JOIN_TOKEN_FILE" ]] ||
  fail "GPUFLEET_JOIN_TOKEN_FILE: cannot read '$GPUFLEET_JOIN_TOKEN_FILE' (the controller's join.token)"
command -v gcloud >/dev/null || fail "the Google Cloud CLI (gcloud) is not on PATH"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/request.json"
python3 - "$tmp/request.json" "$here/user-data.sh" "$tmp/startup-script" <<'PY' >"$tmp/vars" || exit 2
import json, os, re, shlex, sys
def fail(msg):
    sys.stderr.write("gcp/create.sh: %s\n" % msg)
    sys.exit(2)
try:
    req = json.load(open(sys.argv[1]))
except ValueError as e:
    fail("stdin is not a JSON request: %s" % e)
name, pool = req.get("name", ""), os.environ["GPUFLEET_POOL"]
if not name.startswith(pool + "-"):
    fail("instance name '%s' does not start with GPUFLEET_POOL '%s-' (the pool's name_prefix)" % (name, pool))
if not re.match(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", name) or not re.match(r"^[a-z0-9_-]{1,63}$", pool):
    fail("'%s': Compute Engine names are lowercase letters, digits and '-' (give the pool and its offers lowercase names)" % name)
labels = req.get("labels") or {}
mtype = labels.get("instance_type", "")
if not mtype:
    fail("the request has no label instance_type (use a catalog: offer, or give the offer labels: {instance_type: a2-highgpu-8g})")
market = req.get("market", "on-demand")
zone = req.get("zone", "")
if not re.match(r"^[a-z]+-[a-z]+\d+-[a-z]$", zone):
    zone = os.environ.get("GPUFLEET_GCP_ZONE", "")
    if not zone:
        fail("the request's zone '%s' is not a Compute Engine zone (us-central1-a); set GPUFLEET_GCP_ZONE" % req.get("zone", ""))
# N1 machine types take their GPUs as accelerators; A2, A3, A4 and G2 types come with theirs.
accelerator = ""
if mtype.startswith("n1-"):
    types = {"V100": "nvidia-tesla-v100", "T4": "nvidia-tesla-t4", "P100": "nvidia-tesla-p100",
             "P4": "nvidia-tesla-p4", "K80": "nvidia-tesla-k80"}
    gpu = labels.get("gcp_accelerator") or types.get(req.get("gpu_model", ""), "")
    if not gpu:
        fail("no Compute Engine accelerator type for GPU '%s' on %s (give the offer labels: {gcp_accelerator: ...})"
             % (req.get("gpu_model", ""), mtype))
    accelerator = "type=%s,count=%d" % (gpu, req.get("gpus", 1))
token = open(os.environ["GPUFLEET_JOIN_TOKEN_FILE"]).read().strip()
node_labels = ["zone=" + req["zone"]] if req.get("zone") else []
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
out = {"name": name, "market": market, "mtype": mtype, "zone": zone, "req_zone": req.get("zone", ""),
       "accelerator": accelerator, "gce_labels": "gpufleet-pool=%s,gpufleet-market=%s" % (pool, market)}
for k, v in out.items():
    print("%s=%s" % (k, shlex.quote(v)))
PY
source "$tmp/vars"

args=(compute instances create "$name" --project "$GPUFLEET_GCP_PROJECT" --zone "$zone" --format json --quiet
      --machine-type "$mtype" --labels "$gce_labels"
      --metadata-from-file "startup-script=$tmp/startup-script"
      --image-family "$GPUFLEET_GCP_IMAGE_FAMILY" --image-project "$GPUFLEET_GCP_IMAGE_PROJECT"
      --boot-disk-size "${GPUFLEET_GCP_BOOT_DISK_GB:-200}GB"
      --maintenance-policy TERMINATE)
[[ -n "$accelerator" ]] && args+=(--accelerator "$accelerator")
[[ -n "${GPUFLEET_GCP_SUBNET:-}" ]] && args+=(--subnet "$GPUFLEET_GCP_SUBNET" --no-address)
if [[ -n "${GPUFLEET_GCP_SERVICE_ACCOUNT:-}" ]]; then
  args+=(--service-account "$GPUFLEET_GCP_SERVICE_ACCOUNT" --scopes cloud-platform)
else
  args+=(--no-service-account --no-scopes)
fi
if [[ "$market" == spot ]]; then
  # Preempted Spot VMs are deleted by GCE (no stopped disks to pay for); the agent sees
  # instance/preempted turn TRUE about 30 s before.
  args+=(--provisioning-model SPOT --instance-termination-action DELETE)
fi
gcloud "${args[@]}" >"$tmp/out"

python3 - "$tmp/out" "$name" "$market" "$req_zone" "$zone" <<'PY'
import json, sys
i = json.load(open(sys.argv[1]))[0]
states = {"PROVISIONING": "booting", "STAGING": "booting", "RUNNING": "running", "REPAIRING": "booting",
          "STOPPING": "terminating", "SUSPENDING": "terminating", "SUSPENDED": "terminated", "TERMINATED": "terminated"}
print(json.dumps({"id": "%s/%s" % (sys.argv[5], i["name"]), "name": sys.argv[2], "market": sys.argv[3],
                  "state": states.get(i.get("status", ""), "booting"), "zone": sys.argv[4] or sys.argv[5],
                  "created": i["creationTimestamp"]}))
PY
