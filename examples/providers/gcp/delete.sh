#!/usr/bin/env bash
# The exec provider's delete call on Compute Engine: `gcloud compute instances delete --async`.
# stdin: {"id": "ZONE/NAME"} (create.sh's ids). A VM GCE does not know ("was not found") is gone
# already: exit 0, since delete is idempotent.
set -euo pipefail
fail() { echo "gcp/delete.sh: $*" >&2; exit 2; }
[[ -n "${GPUFLEET_GCP_PROJECT:-}" ]] || fail "GPUFLEET_GCP_PROJECT is not set"
read -r zone name < <(python3 -c '
import json, re, sys
try:
    i = json.load(sys.stdin)["id"]
except (ValueError, KeyError, TypeError) as e:
    sys.exit("gcp/delete.sh: stdin must be {\"id\": \"ZONE/NAME\"}: %s" % e)
m = re.match(r"^([a-z0-9-]+)/([a-z][-a-z0-9]*)$", i)
if not m:
    sys.exit("gcp/delete.sh: %r is not an id of create.sh (ZONE/NAME)" % i)
print(m.group(1), m.group(2))') || true
[[ -n "${name:-}" ]] || exit 2
if ! out=$(gcloud compute instances delete "$name" --project "$GPUFLEET_GCP_PROJECT" --zone "$zone" --quiet --async \
             --format json 2>&1); then
  case "$out" in
    *"was not found"*) exit 0 ;;
  esac
  echo "$out" >&2
  exit 1
fi
