#!/usr/bin/env bash
# Given a two-week JSON Lines trace (a steady base of two 8-GPU jobs every hour, weekday bursts of
# two more) and a one-instance catalog, expect `gpufleet plan -o json` (spot capped at half the
# work) to try the spot shares 0, 25 % and 50 %, reserve whole nodes, replay the history on
# exactly those nodes, on the plan's neighbours and on three baselines, and recommend the cheapest
# replay that meets the SLO, never dearer than a baseline that meets it; SVG charts that parse as
# XML; reserved priced from the catalog's 1-year price where the offer has one, else a ratio, and
# said so; --no-spot-teams kept off spot in the plan and the replay, and a team the trace lacks
# refused; --substitute V100:A100 planning V100 work on A100s and showing the plan without
# substitution; and bad flags (a cloud or region the catalog lacks among them) to fail with exit 2
# and say which flag.
#
# Usage: cli_plan_test.sh PATH/TO/gpufleet
source "$(dirname "$0")/lib.sh"

GPUFLEET="${1:?usage: cli_plan_test.sh GPUFLEET}"

"$PYTHON" - "$WORK/jobs.jsonl" <<'PY'
import json, sys
monday = 1704067200  # 2024-01-01 00:00 UTC
with open(sys.argv[1], "w") as f:
    for h in range(2 * 168):
        kinds = ["base-a", "base-b"]
        if (h // 24) % 7 < 5 and 10 <= h % 24 < 14:
            kinds += ["burst-a", "burst-b"]
        for k in kinds:
            f.write(json.dumps({"id": f"{k}-{h}", "submit": monday + h * 3600, "work": 3600,
                                "gpus_per_node": 8, "nodes": 1}) + "\n")
PY
cat >"$WORK/offers.csv" <<'CSV'
cloud,region,zone,instance_type,accelerator,gpu_count,gpu_mem_mib,vcpus,ram_gib,ondemand_usd_h,host_usd_h,spot_usd_h,spot_kind,aws_interruption_bucket
aws,us-east-1,,p3.16xlarge,V100,8,,64,488,24.48,,4.1616,estimated,4
aws,eu-west-2,,p3.16xlarge,V100,8,,64,488,28.712,,24.11808,estimated,4
CSV

PLAN=("$GPUFLEET" plan --trace "$WORK/jobs.jsonl" --catalog "$WORK/offers.csv" --default-gpu V100 --region us-east-1
      --frontier 1h,4h,24h --threads 2 --no-progress)

run "$WORK/plan" "${PLAN[@]}" --spot-share 0.5 -o json --plots "$WORK/plots"
expect_rc "$WORK/plan" 0 "gpufleet plan -o json"
"$PYTHON" - "$WORK/plan.out" <<'PY' || { show "$WORK/plan"; fail "gpufleet plan -o json: unexpected report"; }
import json, sys
r = json.load(open(sys.argv[1]))
m = r["models"][0]
assert m["gpu_model"] == "V100", m["gpu_model"]
assert m["plan"]["reserved_nodes"] >= 1 and m["plan"]["reserved_gpus"] == 8 * m["plan"]["reserved_nodes"], m["plan"]
assert m["prices_usd_per_gpu_hour"]["on_demand"] == 3.06, m["prices_usd_per_gpu_hour"]
assert r["location"] == {"cloud": "aws", "region": "us-east-1", "places_priced": 1}, r["location"]
assert m["forecast"]["backtest"]["wape"] < 0.01, m["forecast"]["backtest"]
methods = {x["method"]: x for x in m["forecast"]["methods"]}
assert len(methods) == 6 and [k for k, x in methods.items() if x["naive"]] == ["naive-4w-mean", "naive-last-week"], methods
assert m["forecast"]["backtest"]["wape"] == min(x["wape"] for x in methods.values()), m["forecast"]
assert m["forecast"]["method"] in methods and m["forecast"]["backtest"]["folds"] == 1, m["forecast"]
assert r["plan"]["cost_usd"] >= r["plan"]["lp_bound_usd"] > 0, r["plan"]
assert [p["slo_wait_s"] for p in r["frontier"]] == [3600, 14400, 86400], r["frontier"]
assert [s["share"] for s in r["spot_shares"]] == [0, 0.25, 0.5], r["spot_shares"]
assert r["plan"]["spot_share"] == 0.5, r["plan"]
v = {s["name"]: s for s in r["verification"]}
assert list(v)[0] == "plan" and "plan, reserved +1" in v, list(v)
assert [s["name"] for s in r["verification"] if s["kind"] == "baseline"] == [
    "all on-demand", "all reserved (peak)", "all spot (on-demand fallback)"], list(v)
rec = r["recommendation"]
best = v[rec["name"]]
assert best["recommended"] and best["meets_slo"] and best["slo_wait_s"] <= 3600, best
for s in r["verification"]:
    assert s["recommended"] == (s["name"] == rec["name"]), s["name"]
    if s["meets_slo"] and s["within_caps"]:
        assert best["summary"]["cost_usd"] <= s["summary"]["cost_usd"], (rec["name"], s["name"])
assert [b["name"] for b in rec["vs_baselines"]] == ["all on-demand", "all reserved (peak)", "all spot (on-demand fallback)"]
for b in rec["vs_baselines"]:
    assert abs(b["saving_usd"] - (b["cost_usd"] - best["summary"]["cost_usd"])) < 1e-6, b
plan = v["plan"]
assert plan["reserved_nodes"] == m["plan"]["reserved_nodes"], (plan["reserved_nodes"], m["plan"])
assert plan["summary"]["cost_by_market_usd"]["reserved"] > 0, plan["summary"]
assert plan["summary"]["finished"] == plan["summary"]["jobs"] == r["jobs"], plan["summary"]
assert plan["summary"]["cost_usd"] < v["all on-demand"]["summary"]["cost_usd"], v
assert 0 < plan["cost_ratio_to_on_demand"] < 1, plan["cost_ratio_to_on_demand"]
assert v["all reserved (peak)"]["summary"]["nodes_rented"] == 0
PY
for svg in demand-V100.svg cost-by-market.svg cost-vs-slo.svg; do
  [[ -s "$WORK/plots/$svg" ]] || fail "gpufleet plan --plots: $svg not written"
  "$PYTHON" -c 'import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); assert d.documentElement.tagName == "svg"' \
    "$WORK/plots/$svg" || fail "gpufleet plan --plots: $svg does not parse as SVG"
done

# The text report carries the same sections.
run "$WORK/text" "${PLAN[@]}" --no-baselines
expect_rc "$WORK/text" 0 "gpufleet plan (text)"
for s in "WAPE by method" "naive-last-week" "LP lower bound" "Cost against the SLO wait" "Verification" "reserved" "spot shares tried" \
         "Recommendation (*)"; do
  expect_contains "$WORK/text.out" "$s" "gpufleet plan text report"
done

# Without --region both regions are planned and every price comes from the cheaper plan's one;
# --compare-clouds lists it per cloud.
run "$WORK/clouds" "$GPUFLEET" plan --trace "$WORK/jobs.jsonl" --catalog "$WORK/offers.csv" --default-gpu V100 \
  --frontier none --no-verify --compare-clouds --no-progress -o json
expect_rc "$WORK/clouds" 0 "gpufleet plan --compare-clouds"
"$PYTHON" - "$WORK/clouds.out" <<'PY' || { show "$WORK/clouds"; fail "gpufleet plan --compare-clouds: unexpected report"; }
import json, sys
r = json.load(open(sys.argv[1]))
assert r["location"] == {"cloud": "aws", "region": "us-east-1", "places_priced": 2}, r["location"]
p = r["models"][0]["prices_usd_per_gpu_hour"]
assert p["on_demand_offer"].startswith("aws us-east-1 ") and p["spot_offer"].startswith("aws us-east-1 "), p
assert [(c["cloud"], c["region"], c["chosen"]) for c in r["clouds"]] == [("aws", "us-east-1", True)], r["clouds"]
PY
run "$WORK/clouds_text" "$GPUFLEET" plan --trace "$WORK/jobs.jsonl" --catalog "$WORK/offers.csv" --default-gpu V100 \
  --frontier none --no-verify --compare-clouds --no-progress
expect_rc "$WORK/clouds_text" 0 "gpufleet plan --compare-clouds (text)"
expect_contains "$WORK/clouds_text.out" "The plan per cloud" "gpufleet plan --compare-clouds (text)"
expect_contains "$WORK/clouds_text.out" "all from aws us-east-1" "gpufleet plan --compare-clouds (text)"

# Bad flags: exit 2, naming the flag.
bad() {  # bad NAME TEXT ARGS...
  local name="$1" text="$2"
  shift 2
  run "$WORK/$name" "${PLAN[@]}" "$@"
  expect_rc "$WORK/$name" 2 "gpufleet plan $*"
  expect_contains "$WORK/$name.err" "$text" "gpufleet plan $*"
}
bad quantile "--slo-quantile" --slo-quantile 1.5
bad band "--band-quantile" --band-quantile 1
bad term "--reserved-term must be 1y or 3y" --reserved-term 2y
bad ratio "--reserved-ratio" --reserved-ratio 1.2
bad wait "--slo-p95-wait" --slo-p95-wait soon
bad share "--spot-share" --spot-share -0.1
bad gpu "unknown GPU model 'V1OO'" --gpu V1OO
bad from "--from" --from 2024-13-01
bad from_half_hour "--from: 2017-10-01T05:30:00Z is not on the hour (the planner counts demand by the hour): give 2017-10-01T05:00:00Z or 2017-10-01T06:00:00Z" --from 2017-10-01T05:30:00Z
bad to_offset "--to: 2017-10-01T05:00:00+05:30 is not on the hour" --to 2017-10-01T05:00:00+05:30
bad unknown_flag "--reserve" --reserve 3
bad frontier_over_wait "--frontier: 4h is over --max-wait (2h)" --max-wait 2h

# --max-wait alone under the default frontier's last wait (24h): the default's waits over it are
# left out (a frontier the user gave must keep within it, above).
run "$WORK/max_wait" "$GPUFLEET" plan --trace "$WORK/jobs.jsonl" --catalog "$WORK/offers.csv" --default-gpu V100 \
  --region us-east-1 --threads 2 --no-progress --no-verify --slo-wait 2h --max-wait 2h -o json
expect_rc "$WORK/max_wait" 0 "gpufleet plan --max-wait 2h with the default frontier"
"$PYTHON" - "$WORK/max_wait.out" <<'PY' || { show "$WORK/max_wait"; fail "gpufleet plan --max-wait 2h: expected the frontier cut at 2h"; }
import json, sys
r = json.load(open(sys.argv[1]))
assert [p["slo_wait_s"] for p in r["frontier"]] == [3600, 7200], r["frontier"]
PY

# Reserved prices: the catalog's 1-year price where the offer has one (here $15.12/h for 8 GPUs,
# $1.89 per GPU-hour), named as such; the ratio for 3 years, with --reserved-ratio, and for the
# catalog above, which has no reserved column at all (written before it existed).
{ head -1 "$WORK/offers.csv" | sed 's/$/,reserved_1y_usd_h/'
  echo "aws,us-east-1,,p3.16xlarge,V100,8,,64,488,24.48,,4.1616,estimated,4,15.12"
  echo "aws,eu-west-2,,p3.16xlarge,V100,8,,64,488,28.712,,24.11808,estimated,4,"; } >"$WORK/reserved.csv"
reserved() {  # reserved NAME CATALOG ARGS... -> NAME.out
  local name="$1" catalog="$2"
  shift 2
  run "$WORK/$name" "$GPUFLEET" plan --trace "$WORK/jobs.jsonl" --catalog "$catalog" --default-gpu V100 \
    --region us-east-1 --frontier none --no-verify --no-progress "$@"
  expect_rc "$WORK/$name" 0 "gpufleet plan $*"
}
check_reserved() {  # check_reserved NAME USD_PER_GPU_HOUR SOURCE FROM_CATALOG
  "$PYTHON" - "$WORK/$1.out" "$2" "$3" "$4" <<'PY' || { show "$WORK/$1"; fail "gpufleet plan: reserved price of $1"; }
import json, sys
r = json.load(open(sys.argv[1]))
p = r["models"][0]["prices_usd_per_gpu_hour"]
want, source, from_catalog = float(sys.argv[2]), sys.argv[3], sys.argv[4] == "true"
assert abs(p["reserved"] - want) < 1e-9, p
assert p["reserved_price"]["source"] == source and p["reserved_price"]["from_catalog"] == from_catalog, p
assert abs(p["reserved_price"]["ratio_to_on_demand"] - want / p["on_demand"]) < 1e-6, p
assert (p["reserved_price"]["offer"] == "aws us-east-1 p3.16xlarge") == from_catalog, p
PY
}
reserved res_catalog "$WORK/reserved.csv" -o json
check_reserved res_catalog 1.89 "catalog (AWS 1-year no-upfront)" true
reserved res_3y "$WORK/reserved.csv" --reserved-term 3y -o json
check_reserved res_3y 1.377 "ratio 0.45 of on-demand" false
reserved res_own "$WORK/reserved.csv" --reserved-ratio 0.6 -o json
check_reserved res_own 1.836 "ratio 0.60 of on-demand" false
reserved res_old "$WORK/offers.csv" -o json
check_reserved res_old 1.9278 "ratio 0.63 of on-demand" false
reserved res_text "$WORK/reserved.csv"
expect_contains "$WORK/res_text.out" "reserved 1y at the catalog's price where published, else 0.63 x on-demand" "plan text: how reserved is priced"
expect_contains "$WORK/res_text.out" "reserved \$1.890 (catalog (AWS 1-year no-upfront): aws us-east-1 p3.16xlarge)" "plan text: the reserved price's source"

# --no-spot-teams: the same history with the base-a jobs in team "prod" and the rest in "research";
# prod is kept off spot in the plan and in every replay, and reported; a team the trace does not
# name is bad input that lists the trace's teams.
"$PYTHON" - "$WORK/jobs.jsonl" "$WORK/teams.jsonl" <<'PY'
import json, sys
with open(sys.argv[2], "w") as out:
    for line in open(sys.argv[1]):
        j = json.loads(line)
        j["team"] = "prod" if j["id"].startswith("base-a-") else "research"
        out.write(json.dumps(j) + "\n")
PY
TEAMS=("$GPUFLEET" plan --trace "$WORK/teams.jsonl" --catalog "$WORK/offers.csv" --default-gpu V100 --region us-east-1
       --frontier none --threads 2 --no-progress --spot-share 1)
run "$WORK/teams" "${TEAMS[@]}" --no-spot-teams prod --no-neighbours -o json
expect_rc "$WORK/teams" 0 "gpufleet plan --no-spot-teams prod"
"$PYTHON" - "$WORK/teams.out" <<'PY' || { show "$WORK/teams"; fail "gpufleet plan --no-spot-teams: unexpected report"; }
import json, sys
r = json.load(open(sys.argv[1]))
ns = r["no_spot"]
# prod: 8 GPUs every hour of two weeks = 336 jobs, 2,688 of 6,016 GPU-hours.
assert ns["teams"] == ["prod"] and ns["team_jobs"] == 336 and ns["marked_jobs"] == 0, ns
assert abs(ns["team_gpu_hours"] - 2688) < 1e-6 and abs(ns["team_share_of_demand"] - 2688 / 6016) < 1e-9, ns
assert r["options"]["no_spot_teams"] == ["prod"], r["options"]
m = r["models"][0]
planned = sum(m["forecast"]["planned_gpu_hours_per_hour"])
assert m["plan"]["spot_gpu_hours"] <= planned * (1 - 2688 / 6016) + 1e-6, (m["plan"], planned)
assert m["plan"]["reserved_gpus"] >= 8, m["plan"]
v = {s["name"]: s for s in r["verification"]}
# Every replay leaves prod's 336 of the 752 jobs off spot, the all-spot baseline included.
assert abs(v["all spot (on-demand fallback)"]["spot_job_share"] - 416 / 752) < 1e-9, v["all spot (on-demand fallback)"]
assert all(s["spot_job_share"] <= 416 / 752 + 1e-9 for s in r["verification"]), r["verification"]
PY
run "$WORK/teams_text" "${TEAMS[@]}" --no-spot-teams prod --no-verify
expect_rc "$WORK/teams_text" 0 "gpufleet plan --no-spot-teams prod (text)"
expect_contains "$WORK/teams_text.out" "Kept off spot (reserved and on-demand only, in the plan and the replay): team prod, 336 jobs, 2688 GPU-h = 44.7 % of the demand" \
  "gpufleet plan --no-spot-teams (text)"
run "$WORK/teams_bad" "${TEAMS[@]}" --no-spot-teams prod,prdo --no-verify
expect_rc "$WORK/teams_bad" 2 "gpufleet plan --no-spot-teams with a team the trace does not name"
expect_contains "$WORK/teams_bad.err" "gpufleet plan: --no-spot-teams: team 'prdo' does not occur in the history (its teams: prod, research)" \
  "gpufleet plan --no-spot-teams with a team the trace does not name"

# --substitute: with an 8 x A100 instance cheaper than the V100 one (AWS p4d.24xlarge against
# p3.16xlarge), V100 work may move to A100s: the A100 is planned with no work of its own, the
# moved work is reported (JSON and text), the plan without substitution is shown and replayed,
# and malformed or unknown pairs are bad input that names the flag.
cat >"$WORK/offers_a100.csv" <<'CSV'
cloud,region,zone,instance_type,accelerator,gpu_count,gpu_mem_mib,vcpus,ram_gib,ondemand_usd_h,host_usd_h,spot_usd_h,spot_kind,aws_interruption_bucket
aws,us-east-1,,p3.16xlarge,V100,8,,64,488,24.48,,4.1616,estimated,4
aws,us-east-1,,p4d.24xlarge,A100,8,,96,1152,21.957642,,,,
CSV
SUB=("$GPUFLEET" plan --trace "$WORK/jobs.jsonl" --catalog "$WORK/offers_a100.csv" --default-gpu V100 --region us-east-1
     --frontier none --threads 2 --no-progress --spot-share 0)
run "$WORK/sub" "${SUB[@]}" --substitute V100:A100 -o json
expect_rc "$WORK/sub" 0 "gpufleet plan --substitute V100:A100"
"$PYTHON" - "$WORK/sub.out" <<'PY' || { show "$WORK/sub"; fail "gpufleet plan --substitute: unexpected report"; }
import json, sys
r = json.load(open(sys.argv[1]))
m = {x["gpu_model"]: x for x in r["models"]}
assert list(m) == ["V100", "A100"], list(m)
assert m["A100"]["forecast"]["history_gpu_hours"] == 0, m["A100"]["forecast"]
takes = m["A100"]["substitutes_for"]
assert len(takes) == 1 and takes[0]["from"] == "V100" and takes[0]["work_per_gpu_hour"] > 1.5, takes
moved = m["V100"]["plan"]["moved_to"]
assert len(moved) == 1 and moved[0]["to"] == "A100" and moved[0]["gpu_hours_of_work"] > 0, moved
assert abs(m["A100"]["plan"]["foreign_gpu_hours"] - moved[0]["gpu_hours_of_work"] / takes[0]["work_per_gpu_hour"]) < 1e-3, m["A100"]["plan"]
assert m["A100"]["plan"]["reserved_gpus"] >= 8, m["A100"]["plan"]
w = r["plan_without_substitution"]
assert w["reserved_gpus"] == {"V100": 16, "A100": 0}, w
assert r["plan"]["cost_usd"] < w["cost_usd"], (r["plan"], w)
v = {s["name"]: s for s in r["verification"]}
assert "plan without substitution" in v and v["plan without substitution"]["kind"] == "candidate", list(v)
rec = v[r["recommendation"]["name"]]
assert all(rec["summary"]["cost_usd"] <= s["summary"]["cost_usd"] + 1e-6
           for s in r["verification"] if s["meets_slo"] and s["within_caps"]), r["recommendation"]
PY
run "$WORK/sub_text" "${SUB[@]}" --substitute V100:A100 --no-verify
expect_rc "$WORK/sub_text" 0 "gpufleet plan --substitute (text)"
expect_contains "$WORK/sub_text.out" "V100 work on A100: " "gpufleet plan --substitute (text): the moved work"
expect_contains "$WORK/sub_text.out" "without substitution (each model's work on its own GPUs): " \
  "gpufleet plan --substitute (text): the plan without substitution"
run "$WORK/sub_bad" "${SUB[@]}" --substitute V100-A100 --no-verify
expect_rc "$WORK/sub_bad" 2 "gpufleet plan --substitute without a colon"
expect_contains "$WORK/sub_bad.err" "--substitute: expected FROM:TO" "gpufleet plan --substitute without a colon"
run "$WORK/sub_unknown" "${SUB[@]}" --substitute V100:Z99 --no-verify
expect_rc "$WORK/sub_unknown" 2 "gpufleet plan --substitute with an unknown model"
expect_contains "$WORK/sub_unknown.err" "--substitute: unknown GPU model 'Z99'" "gpufleet plan --substitute with an unknown model"

# A cloud or region the catalog lacks is a bad flag naming the known ones, not an unpriced model.
run "$WORK/bad_cloud" "$GPUFLEET" plan --trace "$WORK/jobs.jsonl" --catalog "$WORK/offers.csv" --default-gpu V100 \
  --cloud awz --no-verify --frontier none --no-progress
expect_rc "$WORK/bad_cloud" 2 "gpufleet plan --cloud awz"
expect_contains "$WORK/bad_cloud.err" "--cloud: the catalog has no cloud 'awz' (did you mean 'aws'?); it has aws" \
  "gpufleet plan --cloud awz names --cloud and the catalog's clouds"
run "$WORK/bad_region" "$GPUFLEET" plan --trace "$WORK/jobs.jsonl" --catalog "$WORK/offers.csv" --default-gpu V100 \
  --region us-east-1,eu-wset-2 --no-verify --frontier none --no-progress
expect_rc "$WORK/bad_region" 2 "gpufleet plan --region with a typo"
expect_contains "$WORK/bad_region.err" "--region: the catalog has no region 'eu-wset-2' (did you mean 'eu-west-2'?)" \
  "gpufleet plan --region names the region and the near one"

# A trace that is not there is bad input (2), like a bad flag, and names the file.
run "$WORK/missing" "$GPUFLEET" plan --trace "$WORK/nope.jsonl" --catalog "$WORK/offers.csv" --no-progress
expect_rc "$WORK/missing" 2 "gpufleet plan with a missing trace"
expect_contains "$WORK/missing.err" "nope.jsonl" "gpufleet plan with a missing trace"

echo "PASS: gpufleet plan (json, text, plots, bad flags)"
