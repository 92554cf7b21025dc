#!/usr/bin/env bash
# Given the shipped catalog (data/catalog/offers.csv), expect `gpufleet offers` to list only what
# the filters ask for, cheapest first, with suspect fallback prices hidden unless asked for, and
# `gpufleet select` to rank by expected cost to complete: a job without checkpoints is steered off
# spot where interruptions would cost more than spot saves, a checkpointing one onto it; errors in
# the job file name file, line and field.
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

# Suspect fallback prices (GCP's 33.60609 H100x8 rows) appear only with --include-suspect.
run "$WORK/hidden" "$GPUFLEET" offers --catalog "$CATALOG" -q --gpu H100 --count 8 --cloud gcp --market on-demand --limit 0
expect_rc "$WORK/hidden" 0 "gpufleet offers --cloud gcp"
expect_contains "$WORK/hidden.out" "with suspect fallback prices hidden" "suspect prices are hidden and counted"
if grep -q "suspect-price" "$WORK/hidden.out"; then fail "a suspect price was shown without --include-suspect"; fi
run "$WORK/shown" "$GPUFLEET" offers --catalog "$CATALOG" -q --gpu H100 --count 8 --cloud gcp --market on-demand --limit 0 --include-suspect
expect_contains "$WORK/shown.out" "suspect-price" "--include-suspect shows flagged prices"

run "$WORK/badgpu" "$GPUFLEET" offers --catalog "$CATALOG" --gpu Z80
expect_rc "$WORK/badgpu" 2 "an unknown GPU"
expect_contains "$WORK/badgpu.err" "unknown GPU model 'Z80'" "an unknown GPU is named"

# --- select: spot rework decides the market ---------------------------------------------------
cat >"$WORK/nockpt.yaml" <<'YAML'
name: pretrain-no-checkpoints
resources: {gpus: 8, gpu_type: [A100-80GB]}
estimate: "200h on A100"
profile: compute
regions: ["us-*"]
YAML
cat >"$WORK/ckpt.yaml" <<'YAML'
name: pretrain-checkpoints
resources: {gpus: 8, gpu_type: [A100-80GB]}
estimate: "200h on A100"
profile: compute
regions: ["us-*"]
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
expect_contains "$WORK/none.out" "over max_hourly_cost" "the rejections are listed"

# Errors name file, line and field.
printf 'name: x\nresources:\n  gpus: eight\nestimate: 10h on A100\n' >"$WORK/bad.yaml"
run "$WORK/bad" "$GPUFLEET" select "$WORK/bad.yaml" --catalog "$CATALOG"
expect_rc "$WORK/bad" 1 "a bad job file"
expect_contains "$WORK/bad.err" "bad.yaml:3: resources.gpus: must be a positive integer, got 'eight'" "the error says where"

run "$WORK/help" "$GPUFLEET" select --help
expect_rc "$WORK/help" 0 "gpufleet select --help"
expect_contains "$WORK/help.out" "Examples:" "select --help has examples"
run "$WORK/ohelp" "$GPUFLEET" offers --help
expect_contains "$WORK/ohelp.out" "gpufleet offers --gpu H100 --count 8" "offers --help has examples"

echo "PASS: gpufleet offers and select on the shipped catalog"
