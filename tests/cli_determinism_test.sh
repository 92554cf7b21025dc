#!/usr/bin/env bash
# Given the Tiresias 60-job trace on 16 GPUs, expect `gpufleet sim --compare fifo,las` to give
# byte-identical output when run twice: the JSON report, each policy's per-job and series CSV,
# and the SVG plot. The policies of --compare run in parallel threads, so also expect FIFO's
# per-job CSV from --compare to equal the one from a run of --policy fifo alone.
#
# Usage: cli_determinism_test.sh PATH/TO/gpufleet SOURCE_DIR
source "$(dirname "$0")/lib.sh"

GPUFLEET="${1:?usage: cli_determinism_test.sh GPUFLEET SOURCE_DIR}"
SRC="${2:?usage: cli_determinism_test.sh GPUFLEET SOURCE_DIR}"
TRACE="$SRC/data/traces/tiresias/60_job.csv"
[[ -f "$TRACE" ]] || fail "missing bundled trace $TRACE"

sim_into() {
  local dir="$1"
  shift
  mkdir -p "$dir"
  run "$dir/sim" "$GPUFLEET" sim --trace "$TRACE" --cluster-gpus 16 --no-progress \
    --jobs-out "$dir/jobs.csv" --series-out "$dir/series.csv" "$@"
  expect_rc "$dir/sim" 0 "gpufleet sim $*"
}

for r in run1 run2; do
  sim_into "$WORK/$r" --compare fifo,las -o json --plot "$WORK/$r/plot.svg"
done

for f in sim.out jobs.fifo.csv jobs.las.csv series.fifo.csv series.las.csv plot.svg; do
  expect_same "$WORK/run1/$f" "$WORK/run2/$f" "two identical runs"
done

# What was compared is a real result, not two empty reports.
"$PYTHON" - "$WORK/run1" <<'PY' || fail "the --compare report or CSVs do not hold the expected runs"
import csv, json, sys
d = sys.argv[1]
report = json.load(open(d + "/sim.out"))
assert isinstance(report, list) and len(report) == 2, report
assert report[0]["policy"].startswith("fifo") and report[1]["policy"].startswith("las"), report
for run in report:
    assert run["jobs"] == 60 and run["finished"] == 60, run
for p in ("fifo", "las"):
    rows = list(csv.DictReader(open("%s/jobs.%s.csv" % (d, p))))
    assert len(rows) == 60 and all(r["finish"] for r in rows), p
svg = open(d + "/plot.svg").read()
assert svg.lstrip().startswith("<svg") or svg.lstrip().startswith("<?xml"), svg[:80]
assert svg.rstrip().endswith("</svg>"), svg[-80:]
PY

# A policy's result does not depend on the other policies run beside it.
sim_into "$WORK/alone" --policy fifo -o json
expect_same "$WORK/run1/jobs.fifo.csv" "$WORK/alone/jobs.csv" "fifo alone vs. fifo in --compare"
expect_same "$WORK/run1/series.fifo.csv" "$WORK/alone/series.csv" "fifo alone vs. fifo in --compare"

echo "PASS: sim --compare fifo,las is byte-for-byte repeatable (report, jobs CSVs, series CSVs, SVG)"
