#!/usr/bin/env bash
# Given small price files in the clouds' documented shapes (tests/data/catalog_refresh: an AWS
# Price List offer file, describe-spot-price-history output and the Spot Advisor feed, a GCP Cloud
# Billing skus page, an Azure Retail Prices page), expect scripts/update_catalog.py to write the
# exact rows of expected_offers.csv, byte for byte on every run, stamped with the files' newest
# date unless told another; the 1-year standard no-upfront reserved rate in reserved_1y_usd_h (the
# other reserved terms and the capacity-reservation SKU left out); Windows, Low Priority,
# commitment and workstation prices left out; rows of other clouds kept from an old catalog when asked; a broken file named with its line;
# and gpufleet to read the result.
#
# Usage: update_catalog_test.sh PATH/TO/gpufleet SOURCE_DIR
source "$(dirname "$0")/lib.sh"

GPUFLEET="${1:?usage: update_catalog_test.sh GPUFLEET SOURCE_DIR}"
SRC="${2:?usage: update_catalog_test.sh GPUFLEET SOURCE_DIR}"
SCRIPT="$SRC/scripts/update_catalog.py"
DATA="$SRC/tests/data/catalog_refresh"

run "$WORK/first" "$PYTHON" "$SCRIPT" --from "$DATA" --out "$WORK/a.csv"
expect_rc "$WORK/first" 0 "update_catalog.py on the fixtures"
diff -u "$DATA/expected_offers.csv" "$WORK/a.csv" >&2 || fail "update_catalog.py rows differ from expected_offers.csv"
expect_contains "$WORK/first.err" "skipped 1 price(s) of azure Standard_NV4as_v4" "unknown shapes are counted"
run "$WORK/second" "$PYTHON" "$SCRIPT" --from "$DATA" --out "$WORK/b.csv"
cmp "$WORK/a.csv" "$WORK/b.csv" || fail "two runs on the same files differ"

run "$WORK/dated" "$PYTHON" "$SCRIPT" --from "$DATA" --out "$WORK/dated.csv" --prices-as-of 2026-06-01
expect_rc "$WORK/dated" 0 "update_catalog.py --prices-as-of"
[[ "$(head -1 "$WORK/dated.csv")" == "# prices_as_of: 2026-06-01" ]] || fail "--prices-as-of is not stamped"
run "$WORK/baddate" "$PYTHON" "$SCRIPT" --from "$DATA" --out "$WORK/x.csv" --prices-as-of June
expect_rc "$WORK/baddate" 2 "a malformed --prices-as-of"

# --keep carries the clouds the files do not cover, and only those.
printf '# prices_as_of: 2026-01-01\ncloud,region,zone,instance_type,accelerator,gpu_count,gpu_mem_mib,vcpus,ram_gib,ondemand_usd_h,host_usd_h,spot_usd_h,spot_kind,aws_interruption_bucket\nlambda,us-east-1,,gpu_1x_h100_pcie,H100-PCIe,1,81920,26,200,3.29,,,,\naws,us-east-1,,p4d.24xlarge,A100,8,,96,1152,99,,,,\n' \
  >"$WORK/old.csv"
run "$WORK/keep" "$PYTHON" "$SCRIPT" --from "$DATA" --out "$WORK/kept.csv" --keep "$WORK/old.csv"
expect_rc "$WORK/keep" 0 "update_catalog.py --keep"
expect_contains "$WORK/kept.csv" "lambda,us-east-1,,gpu_1x_h100_pcie,H100-PCIe,1,81920,26,200,3.29,,,," "--keep carries lambda"
if grep -q "^aws,us-east-1,,p4d.24xlarge,A100,8,,96,1152,99," "$WORK/kept.csv"; then fail "--keep carried a row of a cloud the files cover"; fi

# A file that is not JSON is named with its line.
mkdir -p "$WORK/broken"
cp -r "$DATA/aws" "$WORK/broken/"
printf '{"skus": [\n  {"description": "x",\n  oops\n]}\n' >"$WORK/broken/skus.json"
run "$WORK/broken" "$PYTHON" "$SCRIPT" --from "$WORK/broken" --out "$WORK/y.csv"
expect_rc "$WORK/broken" 1 "a broken price file"
expect_contains "$WORK/broken.err" "skus.json:3: not JSON" "the broken file and line are named"

# gpufleet reads the result: the date, the exact GPU names, zone-level AWS spot.
GPUFLEET_TODAY=2026-05-25 run "$WORK/offers" "$GPUFLEET" offers --catalog "$WORK/a.csv" --limit 0 -o json
expect_rc "$WORK/offers" 0 "gpufleet offers on the refreshed catalog"
"$PYTHON" - "$WORK/offers.out" <<'PY' || fail "gpufleet does not read the refreshed catalog as expected"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["prices_as_of"] == "2026-05-20" and d["catalog_age_days"] == 5, d["catalog_age"]
got = {(o["cloud"], o["instance_type"], o["zone"] or o["region"], o["market"]): o for o in d["offers"]}
o = got[("aws", "p4de.24xlarge", "us-east-1a", "spot")]
assert (o["gpu"], o["usd_per_hour"], o["hazard_source"]) == ("A100-80GB", 9.606468, "aws advisor <5%"), o
assert got[("azure", "Standard_NC40ads_H100_v5", "eastus", "on-demand")]["gpu"] == "H100-NVL"
assert got[("gcp", "g2-standard-4", "us-central1", "on-demand")]["usd_per_hour"] == 0.706824
assert not d["warnings"] or all(not w["kind"].startswith("unknown GPU") for w in d["warnings"]), d["warnings"]
PY
# The reserved column holds the 1-year standard no-upfront rate, not the all-upfront, 3-year or
# convertible terms the fixture also carries.
grep -q "^aws,us-east-1,,p4d.24xlarge,A100,8,,96,1152,21.96,,,,,13.921$" "$WORK/a.csv" ||
  fail "update_catalog.py does not write p4d's 1-year no-upfront rate as reserved_1y_usd_h"

echo "PASS: update_catalog.py rebuilds the catalog from the clouds' price files"
