#!/usr/bin/env bash
# Given the shipped catalog (data/catalog/offers.csv), expect `gpufleet offers` to list only what
# the filters ask for, cheapest first, with suspect fallback prices hidden unless asked for, and
# `gpufleet select` to rank by expected cost to complete: a job without checkpoints is steered off
# spot where interruptions would cost more than spot saves, a checkpointing one onto it, and to say
# for each candidate the GPU speed it used (step times, MLPerf table, datasheet); errors in the job
# file name file, line and field.
#
# Usage: offers_cli_test.sh PATH/TO/gpufleet SOURCE_DIR
source "$(dirname "$0")/lib.sh"

GPUFLEET="${1:?usage: offers_cli_test.sh GPUFLEET SOURCE_DIR}"
SRC="${2:?usage: offers_cli_test.sh GPUFLEET SOURCE_DIR}"
CATALOG="$SRC/data/catalog/offers.csv"
[[ -f "$CATALOG" ]] || fail "the shipped catalog $CATALOG is missing"

# --- offers: filters and order -------------------------------------------------------------
run "$WORK/h100" "$GPUFLEET" offers --catalog "$CATALOG" --gpu h100 --count 8 --region 'europe-*' --limit 0 -o json
expect_rc "$WORK/h100" 0 "gpufleet offers --gpu h100 --count 8 --region 'europe-*'"
"$PYTHON" - "$WORK/h100.out" <<'PY' || fail "offers JSON breaks its filters or order"
import fnmatch, json, sys
d = json.load(open(sys.argv[1]))
offers = d["offers"]
assert offers, "no European 8xH100 offers"
assert d["shown"] == len(offers) == d["matching"], (d["shown"], d["matching"])
for o in offers:
    assert o["gpu"] == "H100" and o["gpus"] == 8, o
    assert fnmatch.fnmatchcase(o["region"], "europe-*") or fnmatch.fnmatchcase(o["zone"], "europe-*"), o
    assert "suspect-price" not in o["flags"] or o["market"] == "spot", o
    want = o["spot_usd_per_hour"] if o["market"] == "spot" else o["on_demand_usd_per_hour"]
    assert o["usd_per_hour"] == want, o
prices = [o["usd_per_hour"] for o in offers]
assert prices == sorted(prices), "not cheapest first"
kinds = {w["kind"] for w in d["warnings"]}
assert any(k.startswith("unknown GPU model") for k in kinds), kinds
assert any(k.startswith("spot at or above on-demand") for k in kinds), kinds
PY

# Spot only, per-GPU order.
run "$WORK/spot" "$GPUFLEET" offers --catalog "$CATALOG" --gpu A100-80GB --market spot --sort price-per-gpu --limit 0 -o json
expect_rc "$WORK/spot" 0 "gpufleet offers --market spot --sort price-per-gpu"
"$PYTHON" - "$WORK/spot.out" <<'PY' || fail "spot offers JSON is wrong"
import json, sys
offers = json.load(open(sys.argv[1]))["offers"]
assert offers and all(o["market"] == "spot" for o in offers)
per_gpu = [o["usd_per_gpu_hour"] for o in offers]
assert per_gpu == sorted(per_gpu)
for o in offers:
    assert o["spot_interruptions_per_hour"] > 0, o
    if o["on_demand_usd_per_hour"] is not None:
        assert o["spot_usd_per_hour"] < o["on_demand_usd_per_hour"], o
PY

# --region and --cloud take comma lists, as plan's do: the same rows as the flags repeated. A
# Vast region whose name holds commas is taken whole.
run "$WORK/commas" "$GPUFLEET" offers --catalog "$CATALOG" --gpu h100 --count 8 --cloud aws,gcp \
  --region 'us-east-1, us-west-2,us-central1*' --limit 0 -o json
expect_rc "$WORK/commas" 0 "gpufleet offers --region with a comma list"
run "$WORK/repeated" "$GPUFLEET" offers --catalog "$CATALOG" --gpu h100 --count 8 --cloud aws --cloud gcp \
  --region us-east-1 --region us-west-2 --region 'us-central1*' --limit 0 -o json
run "$WORK/vastregion" "$GPUFLEET" offers --catalog "$CATALOG" --region 'Czechia, CZ, EU' --limit 0 -o json
expect_rc "$WORK/vastregion" 0 "gpufleet offers --region with a Vast region's name"
"$PYTHON" - "$WORK/commas.out" "$WORK/repeated.out" "$WORK/vastregion.out" <<'PY' || fail "offers --region/--cloud comma lists"
import json, sys
commas, repeated, vast = (json.load(open(p)) for p in sys.argv[1:4])
places = {(o["cloud"], o["region"]) for o in commas["offers"]}
assert places == {("aws", "us-east-1"), ("aws", "us-west-2"), ("gcp", "us-central1")}, places
assert commas["offers"] == repeated["offers"], "a comma list differs from the flag repeated"
assert vast["offers"] and {o["region"] for o in vast["offers"]} == {"Czechia, CZ, EU"}, vast["offers"][:2]
PY

# Suspect fallback prices (GCP's 33.60609 H100x8 rows) appear only with --include-suspect.
run "$WORK/hidden" "$GPUFLEET" offers --catalog "$CATALOG" -q --gpu H100 --count 8 --cloud gcp --market on-demand --limit 0
expect_rc "$WORK/hidden" 0 "gpufleet offers --cloud gcp"
expect_contains "$WORK/hidden.out" "with suspect fallback prices hidden" "suspect prices are hidden and counted"
if grep -q "suspect-price" "$WORK/hidden.out"; then fail "a suspect price was shown without --include-suspect"; fi
run "$WORK/shown" "$GPUFLEET" offers --catalog "$CATALOG" -q --gpu H100 --count 8 --cloud gcp --market on-demand --limit 0 --include-suspect
expect_contains "$WORK/shown.out" "suspect-price" "--include-suspect shows flagged prices"

# A cloud the catalog does not have is a typo, not an empty answer.
run "$WORK/badcloud" "$GPUFLEET" offers --catalog "$CATALOG" -q --cloud awz
expect_rc "$WORK/badcloud" 2 "an unknown cloud"
expect_contains "$WORK/badcloud.err" "--cloud: the catalog has no cloud 'awz' (did you mean 'aws'?); it has aws, azure, gcp" \
  "offers --cloud names the catalog's clouds"
# So is a region or glob that no region or zone of the catalog matches.
run "$WORK/badregion" "$GPUFLEET" offers --catalog "$CATALOG" -q --region mars-1
expect_rc "$WORK/badregion" 2 "an unknown region"
expect_contains "$WORK/badregion.err" "--region: the catalog has no region or zone 'mars-1'; its clouds name regions like aws 'us-east-1'" \
  "offers --region says no region matches and how regions are named"
run "$WORK/typoregion" "$GPUFLEET" offers --catalog "$CATALOG" -q --region us-est-1
expect_rc "$WORK/typoregion" 2 "a misspelt region"
expect_contains "$WORK/typoregion.err" "--region: the catalog has no region or zone 'us-est-1' (did you mean 'us-east-1'" \
  "offers --region suggests the near regions"
run "$WORK/badglob" "$GPUFLEET" offers --catalog "$CATALOG" -q --region 'eruope-*'
expect_rc "$WORK/badglob" 2 "a glob that matches nothing"
expect_contains "$WORK/badglob.err" "--region: the pattern 'eruope-*' matches no region or zone of the catalog (did you mean 'europe-*'?)" \
  "offers --region says a glob matches nothing"
run "$WORK/badgpu" "$GPUFLEET" offers --catalog "$CATALOG" --gpu Z80
expect_rc "$WORK/badgpu" 2 "an unknown GPU"
expect_contains "$WORK/badgpu.err" "unknown GPU model 'Z80'" "an unknown GPU is named"

# --- select: spot rework decides the market ---------------------------------------------------
# The clouds without published interruption rates (0.02/h each); AWS's advisor puts p4de in its
# "<5%" bucket, at which even 200 h without checkpoints pays off on spot.
cat >"$WORK/nockpt.yaml" <<'YAML'
name: pretrain-no-checkpoints
resources: {gpus: 8, gpu_type: [A100-80GB]}
estimate: "200h on A100"
profile: compute
regions: ["us-*"]
clouds: [gcp, azure, lambda]
YAML
cat >"$WORK/ckpt.yaml" <<'YAML'
name: pretrain-checkpoints
resources: {gpus: 8, gpu_type: [A100-80GB]}
estimate: "200h on A100"
profile: compute
regions: ["us-*"]
clouds: [gcp, azure, lambda]
checkpoint: {interval: 30m}
YAML
run "$WORK/nockpt" "$GPUFLEET" select "$WORK/nockpt.yaml" --catalog "$CATALOG" -o json
expect_rc "$WORK/nockpt" 0 "gpufleet select (no checkpoints)"
run "$WORK/ckpt" "$GPUFLEET" select "$WORK/ckpt.yaml" --catalog "$CATALOG" -o json
expect_rc "$WORK/ckpt" 0 "gpufleet select (checkpoints)"
"$PYTHON" - "$WORK/nockpt.out" "$WORK/ckpt.out" <<'PY' || fail "select does not weigh spot rework"
import json, sys
no, ck = (json.load(open(p)) for p in sys.argv[1:3])
for d in (no, ck):
    r = d["ranked"]
    assert r, d["reason"]
    costs = [c["expected_cost_usd"] for c in r]
    assert costs == sorted(costs), costs
    for c in r:
        assert c["gpu"] == "A100-80GB" and c["gpus"] >= 8 and c["region"].startswith("us"), c
        total = c["compute_usd"] + c["rework_usd"] + c["restart_usd"]
        assert abs(total - c["expected_cost_usd"]) < 1e-6, c
        assert abs(c["compute_usd"] - round(c["usd_per_hour"] * c["runtime_hours"], 2)) < 0.05, c
    assert d["saving_vs_cheapest_hourly_usd"] >= 0
    assert d["cheapest_hourly"]["usd_per_hour"] <= min(c["usd_per_hour"] for c in r)
# 200 h without checkpoints: spot loses; the $/h rule still picks spot and pays much more.
assert no["ranked"][0]["market"] == "on-demand", no["ranked"][0]
assert no["cheapest_hourly"]["market"] == "spot", no["cheapest_hourly"]
assert no["saving_vs_cheapest_hourly_usd"] > 0
# The same job checkpointing every 30 min: spot wins and its rework is small.
w = ck["ranked"][0]
assert w["market"] == "spot", w
assert w["rework_usd"] + w["restart_usd"] < 0.2 * w["compute_usd"], w
assert w["expected_cost_usd"] < no["ranked"][0]["expected_cost_usd"]
PY

run "$WORK/text" "$GPUFLEET" select "$WORK/ckpt.yaml" --catalog "$CATALOG" -q
expect_rc "$WORK/text" 0 "gpufleet select (text)"
expect_contains "$WORK/text.out" "cheapest expected cost:" "select says why the winner won"
expect_contains "$WORK/text.out" "EXPECTED" "select prints the ranking"

# Nothing fits: exit 3 and the reasons.
printf 'resources: {gpus: 8, gpu_type: [H100]}\nestimate: 10h on H100\nmax_hourly_cost: 0.5\n' >"$WORK/none.yaml"
run "$WORK/none" "$GPUFLEET" select "$WORK/none.yaml" --catalog "$CATALOG" -q
expect_rc "$WORK/none" 3 "select with no feasible offer"
expect_contains "$WORK/none.out" "no offer holds the job (see rejected)" "select points at the rejections"
expect_contains "$WORK/none.out" "rejected: " "the rejections are under the name the reason gives"
expect_contains "$WORK/none.out" "over max_hourly_cost" "the rejections are listed"
expect_contains "$WORK/none.out" "caps: max_hourly_cost \$0.50/h, deadline none" "the header shows the caps"
run "$WORK/nonej" "$GPUFLEET" select "$WORK/none.yaml" --catalog "$CATALOG" -q -o json
"$PYTHON" - "$WORK/nonej.out" <<'PY' || fail "select -o json: the job object lacks its caps"
import json, sys
j = json.load(open(sys.argv[1]))["job"]
assert j["max_hourly_cost_usd"] == 0.5 and j["deadline_hours"] is None, j
assert j["regions"] == [] and j["clouds"] == [] and j["constraints"] == {}, j
PY

# A cloud, region or constraint value the catalog has no offer for is a typo in the job file: an
# error naming it, a near match and the known ones (exit 2), not "no offer holds the job" (exit 3).
for case in "clouds: [awz]|clouds: the catalog has no cloud 'awz' (did you mean 'aws'?); it has aws, azure, gcp, lambda, nebius, oci, vast" \
            "clouds: [AWS]|clouds: the catalog has no cloud 'AWS' (did you mean 'aws'?)" \
            "constraints: {geo: EU}|constraints.geo: no offer has geo 'EU' (did you mean 'eu'?); geo is one of af, asia" \
            "constraints: {continent: eu}|constraints.continent: no offer has the label 'continent'; offers have cloud, geo, region, zone" \
            "regions: [mars-1]|regions: the catalog has no region or zone 'mars-1'" \
            "regions: ['eruope-*']|regions: the pattern 'eruope-*' matches no region or zone of the catalog (did you mean 'europe-*'?)"; do
  printf 'resources: {gpus: 8, gpu_type: [H100]}\nestimate: 10h on H100\n%s\n' "${case%%|*}" >"$WORK/unknown.yaml"
  run "$WORK/unknown" "$GPUFLEET" select "$WORK/unknown.yaml" --catalog "$CATALOG" -q
  expect_rc "$WORK/unknown" 2 "select with ${case%%|*}"
  expect_contains "$WORK/unknown.err" "unknown.yaml: ${case#*|}" "select names the unknown value of ${case%%|*}"
done

# Errors name file, line and field.
printf 'name: x\nresources:\n  gpus: eight\nestimate: 10h on A100\n' >"$WORK/bad.yaml"
run "$WORK/bad" "$GPUFLEET" select "$WORK/bad.yaml" --catalog "$CATALOG"
expect_rc "$WORK/bad" 2 "a bad job file"
expect_contains "$WORK/bad.err" "bad.yaml:3:9: resources.gpus: must be a number, got 'eight'" "the error says where"
# select reads the job file with submit's schema: a misspelt field is an error, not ignored.
printf 'resources: {gpus: 1}\nestimate: 1h on A100\nregion: [us-*]\n' >"$WORK/typo.yaml"
run "$WORK/typo" "$GPUFLEET" select "$WORK/typo.yaml" --catalog "$CATALOG" -q
expect_rc "$WORK/typo" 2 "a misspelt job field"
expect_contains "$WORK/typo.err" "typo.yaml:3:1: region: unknown field (did you mean 'regions'?)" "select suggests the field"
printf 'resources: {gpus: 1}\nrun: python3 train.py\n' >"$WORK/noest.yaml"
run "$WORK/noest" "$GPUFLEET" select "$WORK/noest.yaml" --catalog "$CATALOG" -q
expect_rc "$WORK/noest" 2 "a job without an estimate"
expect_contains "$WORK/noest.err" "noest.yaml:1:1: estimate: missing" "select asks for the estimate"

run "$WORK/help" "$GPUFLEET" select --help
expect_rc "$WORK/help" 0 "gpufleet select --help"
expect_contains "$WORK/help.out" "Examples:" "select --help has examples"
run "$WORK/ohelp" "$GPUFLEET" offers --help
expect_contains "$WORK/ohelp.out" "gpufleet offers --gpu H100 --count 8" "offers --help has examples"

# --- known rows of the shipped catalog --------------------------------------------------------
# GPU names the raw catalogs got wrong or left ambiguous, the g2 shapes one L4 fits, the outlier
# flag and the catalog's date. GPUFLEET_TODAY fixes "today" so that the age is stable.
export GPUFLEET_TODAY=2026-12-04
run "$WORK/all" "$GPUFLEET" offers --catalog "$CATALOG" --limit 0 --include-suspect -o json
expect_rc "$WORK/all" 0 "gpufleet offers --limit 0 -o json"
"$PYTHON" - "$WORK/all.out" <<'PY' || fail "the shipped catalog's known rows are wrong"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["prices_as_of"] == "2026-05-20" and d["catalog_age_days"] == 198, (d["prices_as_of"], d["catalog_age_days"])
assert d["catalog_age"] == "prices as of 2026-05-20 (198 days old)", d["catalog_age"]
rows = {}
for o in d["offers"]:
    rows.setdefault((o["cloud"], o["instance_type"], o["zone"] or o["region"]), o)
def row(cloud, itype, where):
    assert (cloud, itype, where) in rows, ("missing", cloud, itype, where)
    return rows[(cloud, itype, where)]
# AWS p4de is 8 x A100 80GB ("640 GB HBM2e"); p3dn is 8 x V100 32GB.
p4de = row("aws", "p4de.24xlarge", "us-east-1")
assert (p4de["gpu"], p4de["gpus"], p4de["gpu_mem_mib"], p4de["on_demand_usd_per_hour"]) == ("A100-80GB", 8, 81920, 27.44705), p4de
assert not [o for o in d["offers"] if o["instance_type"] == "p4de.24xlarge" and o["gpu"] != "A100-80GB"]
assert row("aws", "p3dn.24xlarge", "us-east-1")["gpu"] == "V100-32GB"
assert row("aws", "p4d.24xlarge", "us-east-1")["gpu"] == "A100"
# Azure's NC H100 v5 shapes carry the 94 GB H100 NVL; ND96isr_H100_v5 stays the SXM part.
assert row("azure", "Standard_NC40ads_H100_v5", "eastus")["gpu"] == "H100-NVL"
nc80 = row("azure", "Standard_NC80adis_H100_v5", "eastus")
assert (nc80["gpu"], nc80["gpus"], nc80["gpu_mem_mib"]) == ("H100-NVL", 2, 96256), nc80
assert row("azure", "Standard_ND96isr_H100_v5", "eastus")["gpu"] == "H100"
# PCIe and NVL cards named as such get their own models.
pcie = row("lambda", "gpu_1x_h100_pcie", "us-east-1")
assert (pcie["gpu"], pcie["on_demand_usd_per_hour"]) == ("H100-PCIe", 3.29), pcie
assert row("lambda", "gpu_1x_h100_sxm5", "us-east-1")["gpu"] == "H100"
assert row("vast", "1x-H100_NVL-32-65536", "Bulgaria, BG, EU")["gpu"] == "H100-NVL"
assert all(o["gpu"] == "H100" for o in d["offers"] if "H100_SXM" in o["instance_type"])
# Every 1-GPU g2 shape is an offer; g2-standard-4 is the cheapest 1 x L4 machine in us-central1-a.
for t in ("g2-standard-4", "g2-standard-8", "g2-standard-12", "g2-standard-16", "g2-standard-32"):
    o = row("gcp", t, "us-central1-a")
    assert (o["gpu"], o["gpus"]) == ("L4", 1), o
g2_4 = row("gcp", "g2-standard-4", "us-central1-a")
assert (g2_4["vcpus"], g2_4["mem_mib"]) == (4, 16384), g2_4
l4 = [o for o in d["offers"] if o["gpu"] == "L4" and o["gpus"] == 1 and o["zone"] == "us-central1-a" and o["market"] == "on-demand"]
assert min(l4, key=lambda o: o["usd_per_hour"])["instance_type"] == "g2-standard-4", l4
# Spot outliers: p4de at 90 % off is flagged in the field and the flags; a usual discount is not.
spot = {(o["instance_type"], o["zone"] or o["region"]): o for o in d["offers"] if o["market"] == "spot"}
for where in ("eu-central-1", "ap-northeast-1"):
    o = spot[("p4de.24xlarge", where)]
    assert o["spot_outlier"] and "spot-outlier" in o["flags"], o
assert not spot[("p4d.24xlarge", "us-east-1")]["spot_outlier"]
assert spot[("a3-highgpu-8g", "europe-north1-c")]["spot_outlier"]
assert any(w["kind"].startswith("spot price outlier") for w in d["warnings"])
PY

# The table says the date and age, marks outliers and explains the mark (golden output).
run "$WORK/golden" "$GPUFLEET" offers --catalog "$CATALOG" -q --gpu A100-80GB --count 8 --cloud aws --limit 0
expect_rc "$WORK/golden" 0 "gpufleet offers --gpu A100-80GB --cloud aws"
diff -u "$SRC/tests/data/cli/offers_aws_a100_80gb.golden" "$WORK/golden.out" >&2 ||
  fail "gpufleet offers output differs from tests/data/cli/offers_aws_a100_80gb.golden"

# Names a user copies are never cut: the table's columns are as wide as the longest value shown
# (Nebius's 32-character instance types; select's OFFER column with Lambda's asia-northeast-1
# and -2, which used to read the same).
run "$WORK/long" "$GPUFLEET" offers --catalog "$CATALOG" -q --gpu H100 --count 8 --cloud nebius --market on-demand
expect_rc "$WORK/long" 0 "gpufleet offers --cloud nebius"
expect_contains "$WORK/long.out" "nebius eu-north1   gpu-h100-sxm_8gpu-128vcpu-1600gb 8xH100" "offers shows whole instance types"
cat >"$WORK/asia.yaml" <<'YAML'
resources: {gpus: 8, gpu_type: [H100]}
estimate: "10h on H100"
market: on-demand
clouds: [lambda]
regions: ["asia-northeast-*"]
YAML
run "$WORK/asia" "$GPUFLEET" select "$WORK/asia.yaml" --catalog "$CATALOG" -q
expect_rc "$WORK/asia" 0 "gpufleet select in asia-northeast"
for region in asia-northeast-1 asia-northeast-2; do
  expect_contains "$WORK/asia.out" "1 x lambda gpu_8x_h100_sxm5 (8x H100) on-demand $region 1.00x" "select shows whole regions"
done

# A catalog without the date says its age is unknown; a bad GPUFLEET_TODAY is refused.
awk '!/^#/ && n++ < 5' "$CATALOG" >"$WORK/undated.csv"
run "$WORK/undated" "$GPUFLEET" offers --catalog "$WORK/undated.csv" -q --limit 1
expect_rc "$WORK/undated" 0 "gpufleet offers on an undated catalog"
expect_contains "$WORK/undated.out" "prices as of: age unknown" "an undated catalog says so"
run "$WORK/undatedj" "$GPUFLEET" offers --catalog "$WORK/undated.csv" --limit 1 -o json
"$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["prices_as_of"] is None and d["catalog_age_days"] is None, d' \
  "$WORK/undatedj.out" || fail "an undated catalog's JSON age is not null"
GPUFLEET_TODAY=yesterday run "$WORK/badtoday" "$GPUFLEET" offers --catalog "$CATALOG" -q --limit 1
expect_rc "$WORK/badtoday" 2 "a malformed GPUFLEET_TODAY"
expect_contains "$WORK/badtoday.err" "GPUFLEET_TODAY must be a date YYYY-MM-DD, got 'yesterday'" "the bad date is named"

# select ranks outliers after the other offers unless told to trust them.
cat >"$WORK/p4de.yaml" <<'YAML'
resources: {gpus: 8, gpu_type: [A100-80GB]}
estimate: "10h on A100"
profile: compute
checkpoint: {interval: 30m}
market: spot
clouds: [aws]
YAML
run "$WORK/ranked" "$GPUFLEET" select "$WORK/p4de.yaml" --catalog "$CATALOG" -o json --limit 10
expect_rc "$WORK/ranked" 0 "gpufleet select (spot outliers)"
run "$WORK/trusted" "$GPUFLEET" select "$WORK/p4de.yaml" --catalog "$CATALOG" -o json --limit 10 --trust-spot-outliers
expect_rc "$WORK/trusted" 0 "gpufleet select --trust-spot-outliers"
"$PYTHON" - "$WORK/ranked.out" "$WORK/trusted.out" <<'PY' || fail "select does not rank spot outliers last"
import json, sys
ranked, trusted = (json.load(open(p)) for p in sys.argv[1:3])
r = ranked["ranked"]
flags = [c["spot_outlier"] for c in r]
assert flags == sorted(flags), flags          # every outlier after every other offer
assert not r[0]["spot_outlier"] and r[0]["region"] in ("us-east-1", "us-west-2"), r[0]
assert r[-1]["spot_outlier"] and r[-1]["ranked_last_as_spot_outlier"], r[-1]
assert not ranked["cheapest_hourly"]["spot_outlier"], ranked["cheapest_hourly"]
t = trusted["ranked"]
assert t[0]["spot_outlier"] and not t[0]["ranked_last_as_spot_outlier"], t[0]
assert t[0]["expected_cost_usd"] < r[0]["expected_cost_usd"]
assert ranked["prices_as_of"] == "2026-05-20"
PY
run "$WORK/rankedtxt" "$GPUFLEET" select "$WORK/p4de.yaml" --catalog "$CATALOG" -q --limit 10
expect_contains "$WORK/rankedtxt.out" "prices as of 2026-05-20 (198 days old)" "select says the catalog's age"
expect_contains "$WORK/rankedtxt.out" "! spot-outlier:" "select explains the outlier mark"
run "$WORK/shelp" "$GPUFLEET" select --help
expect_contains "$WORK/shelp.out" "--trust-spot-outliers" "select --help names the trust flag"

# --- select: which GPU speed it used ------------------------------------------------------------
# Measured MLPerf ratios (data/gpu_speeds.csv) where both GPUs have rows, the job's own step times
# over them, the datasheet for GPUs the table lacks; every candidate says which.
cat >"$WORK/speeds.yaml" <<'YAML'
resources: {gpus: 8, gpu_type: [A100, H100, L4, B200]}
estimate: "10h on A100"
workload: training-vision
profile: compute
checkpoint: {interval: 30m}
market: on-demand
clouds: [gcp]
regions: [us-central1]
YAML
run "$WORK/tbl" "$GPUFLEET" select "$WORK/speeds.yaml" --catalog "$CATALOG" -o json --limit 20
expect_rc "$WORK/tbl" 0 "gpufleet select (speed table)"
run "$WORK/meas" "$GPUFLEET" select "$WORK/speeds.yaml" --catalog "$CATALOG" -o json --limit 20 \
  --step-time A100=0.42s --step-time H100=230ms
expect_rc "$WORK/meas" 0 "gpufleet select --step-time"
"$PYTHON" - "$WORK/tbl.out" "$WORK/meas.out" <<'PY' || fail "select does not say which GPU speed it used"
import json, sys
tbl, meas = (json.load(open(p)) for p in sys.argv[1:3])
assert tbl["job"]["workload"] == "training-vision" and tbl["job"]["step_time_seconds"] == {}, tbl["job"]
assert tbl["speeds"].endswith("data/gpu_speeds.csv"), tbl["speeds"]
def by_gpu(d):
    out = {}
    for c in d["ranked"]:
        out.setdefault(c["gpu"], (c["speed_vs_reference"], c["speed_source"], c["speed_confidence"]))
    return out
t = by_gpu(tbl)
assert t["H100"] == (1.846, "mlperf:training-vision", "medium"), t["H100"]   # ResNet-50, Training v3.0
assert t["L4"] == (0.283, "mlperf:default", "low"), t["L4"]                  # no training-vision row
assert t["A100"] == (1.0, "mlperf:training-vision", "high"), t["A100"]
assert t["B200"][1] == "datasheet" and t["B200"][2] is None and t["B200"][0] > 5, t["B200"]
m = by_gpu(meas)
assert meas["job"]["step_time_seconds"] == {"A100": 0.42, "H100": 0.23}, meas["job"]
assert m["H100"] == (round(0.42 / 0.23, 3), "measured", None), m["H100"]
assert m["A100"][1] == "measured" and m["L4"][1] == "mlperf:default", m
for d in (tbl, meas):
    for c in d["ranked"]:
        assert abs(c["runtime_hours"] - 10 / c["speed_vs_reference"]) < 0.01, c
PY

# The table with the speed and its source (golden output).
cp "$WORK/speeds.yaml" "$WORK/speeds-step.yaml"
printf 'step_time: {A100: 0.42s, H100: 0.23s}\n' >>"$WORK/speeds-step.yaml"
(cd "$WORK" && "$GPUFLEET" select speeds-step.yaml --catalog "$CATALOG" -q --limit 10) >"$WORK/sgolden.out" 2>"$WORK/sgolden.err" ||
  fail "gpufleet select (golden) failed: $(cat "$WORK/sgolden.err")"
diff -u "$SRC/tests/data/cli/select_speeds.golden" "$WORK/sgolden.out" >&2 ||
  fail "gpufleet select output differs from tests/data/cli/select_speeds.golden"

# Unknown workload classes and bad step times are refused, naming what is known or wrong.
printf 'resources: {gpus: 1}\nestimate: 1h on A100\nworkload: training-nlp\n' >"$WORK/badclass.yaml"
run "$WORK/badclass" "$GPUFLEET" select "$WORK/badclass.yaml" --catalog "$CATALOG" -q
expect_rc "$WORK/badclass" 2 "an unknown workload class"
expect_contains "$WORK/badclass.err" \
  "badclass.yaml:3:11: workload: unknown workload class 'training-nlp'; known: default, inference-vision, training-recsys, training-vision" \
  "the known classes are listed"
run "$WORK/badstep" "$GPUFLEET" select "$WORK/speeds.yaml" --catalog "$CATALOG" -q --step-time H100
expect_rc "$WORK/badstep" 2 "--step-time without a duration"
expect_contains "$WORK/badstep.err" "--step-time must read MODEL=DURATION such as H100=0.23s, got 'H100'" "the bad flag is named"
run "$WORK/badgpustep" "$GPUFLEET" select "$WORK/speeds.yaml" --catalog "$CATALOG" -q --step-time Z80=1s
expect_contains "$WORK/badgpustep.err" "--step-time: unknown GPU model 'Z80'" "an unknown step-time GPU is named"
printf 'gpu,workload_class,ratio_vs_a100\nA100,default,1\nH100,default,fast\n' >"$WORK/badspeeds.csv"
run "$WORK/badspeeds" "$GPUFLEET" select "$WORK/speeds.yaml" --catalog "$CATALOG" -q --speeds "$WORK/badspeeds.csv"
expect_rc "$WORK/badspeeds" 2 "a bad speed table"
expect_contains "$WORK/badspeeds.err" "badspeeds.csv:3: ratio_vs_a100 must be a positive number, got 'fast'" "the table error says where"
# Found from outside the source tree too: $GPUFLEET_SPEEDS, else the source tree the binary came from.
if (cd / && GPUFLEET_SPEEDS="$WORK/badspeeds.csv" "$GPUFLEET" select "$WORK/speeds.yaml" --catalog "$CATALOG" -q) \
  >/dev/null 2>"$WORK/envspeeds.err"; then
  fail "GPUFLEET_SPEEDS was not read"
fi
expect_contains "$WORK/envspeeds.err" "badspeeds.csv:3:" "GPUFLEET_SPEEDS names the table"
(cd / && "$GPUFLEET" select "$WORK/speeds.yaml" --catalog "$CATALOG" -o json) >"$WORK/fromroot.out" ||
  fail "select run from / does not find the speed table"
"$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["speeds"].endswith("/data/gpu_speeds.csv") and d["ranked"][0]["speed_source"], d["speeds"]' \
  "$WORK/fromroot.out" || fail "select run from / used no speed table"

echo "PASS: gpufleet offers and select on the shipped catalog"
