#!/usr/bin/env bash
# Given two weeks of the bundled Philly trace (2017-10-09 to 2017-10-23, V100 at the shipped
# catalog's AWS us-east-1 prices) and the default spot-share cap, expect `gpufleet plan` to
# recommend a replayed cluster that meets the SLO and that no replayed baseline meeting the SLO
# undercuts: the planner is never beaten by its own baselines on a real history.
#
# Usage: cli_plan_philly_test.sh PATH/TO/gpufleet SOURCE_DIR
source "$(dirname "$0")/lib.sh"

GPUFLEET="${1:?usage: cli_plan_philly_test.sh GPUFLEET SOURCE_DIR}"
SRC="${2:?usage: cli_plan_philly_test.sh GPUFLEET SOURCE_DIR}"
TRACE="$SRC/data/traces/philly/philly.csv"
[[ -f "$TRACE" ]] || fail "missing bundled trace $TRACE"

run "$WORK/plan" "$GPUFLEET" plan --trace "$TRACE" --catalog "$SRC/data/catalog/offers.csv" --gpu V100 \
  --cloud aws --region us-east-1 --from 2017-10-09 --to 2017-10-23 --frontier none --threads 2 --no-progress -o json
expect_rc "$WORK/plan" 0 "gpufleet plan on Philly"
"$PYTHON" - "$WORK/plan.out" <<'PY' || { show "$WORK/plan"; fail "gpufleet plan on Philly: the recommendation is beaten"; }
import json, sys
r = json.load(open(sys.argv[1]))
v = {s["name"]: s for s in r["verification"]}
rec = r["recommendation"]
assert rec is not None, "no recommendation"
best = v[rec["name"]]
assert best["meets_slo"] and best["slo_wait_s"] <= 3600, best
baselines = [s for s in r["verification"] if s["kind"] == "baseline"]
assert len(baselines) == 3, list(v)
for s in r["verification"]:
    if s["meets_slo"] and s["within_caps"]:
        assert best["summary"]["cost_usd"] <= s["summary"]["cost_usd"], (rec["name"], s["name"])
    assert s["summary"]["finished"] == s["summary"]["jobs"], s["name"]
assert [s["share"] for s in r["spot_shares"]] == [0, 0.25, 0.5, 0.75, 1.0], r["spot_shares"]
print("recommended %s: $%.0f; %s" % (rec["name"], rec["cost_usd"],
      ", ".join("%s $%.0f%s" % (b["name"], b["cost_usd"], "" if b["meets_slo"] else " (misses the SLO)")
                for b in rec["vs_baselines"])))
PY
echo "PASS: gpufleet plan on Philly is never beaten by its baselines"
