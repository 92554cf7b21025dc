#!/usr/bin/env bash
# The exec provider's delete call on AWS EC2: `aws ec2 terminate-instances`.
# stdin: {"id": "i-..."}. An id EC2 does not know (InvalidInstanceID.NotFound) is gone already:
# exit 0, since delete is idempotent.
set -euo pipefail
fail() { echo "aws/delete.sh: $*" >&2; exit 2; }
region="${AWS_REGION:-${AWS_DEFAULT_REGION:-}}"
[[ -n "$region" ]] || fail "AWS_REGION is not set (the region the pool rents in)"
id=$(python3 -c '
import json, re, sys
try:
    i = json.load(sys.stdin)["id"]
except (ValueError, KeyError, TypeError) as e:
    sys.exit("aws/delete.sh: stdin must be {\"id\": \"i-...\"}: %s" % e)
if not re.match(r"^i-[0-9a-f]+$", i):
    sys.exit("aws/delete.sh: %r is not an EC2 instance id" % i)
print(i)') || exit 2
if ! out=$(aws ec2 terminate-instances --region "$region" --output json --instance-ids "$id" 2>&1); then
  case "$out" in
    *InvalidInstanceID.NotFound* | *InvalidInstanceID.Malformed*) exit 0 ;;
  esac
  echo "$out" >&2
  exit 1
fi
