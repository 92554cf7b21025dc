#!/usr/bin/env bash
# Given tests/data/cli/tiny.csv (8 jobs, columns mapped with --columns) on one 8-GPU A100 node
# under strict FIFO, expect the exact schedule worked out by hand below.
#
# Semantics used for the hand calculation:
#  - strict FIFO (fifo, backfill off): jobs start in submit order; the first job that cannot
#    start blocks every job behind it, even ones that would fit;
#  - the trace's rows are taken in submit order (ties: file order), wherever they sit in the file;
#  - a job runs for its duration in seconds: the GPU is A100 and the reference GPU is the
#    cluster's first model, so the speed factor is 1;
#  - simulated time starts at the first submit (100 s), so the makespan is last finish - 100 s.
#
#   job      submit gpus  dur   why                                            start   finish
#   train-a    100    4   600   cluster empty                                    100      700
#   train-b    160    8   300   needs the whole node; waits for train-a          700     1000
#   eval-c     220    1    50   4 GPUs free, but strict FIFO: behind train-b    1000     1050
#   tune-d    1010    2   120   (row 6 of the file) 7 GPUs free, queue empty     1010     1130
#   big-e     1020    8    10   (row 5 of the file) waits for eval-c, tune-d    1130     1140
#   probe-f   1030    1   5.5   behind big-e                                    1140     1145.5
#   fill-g    1200    8    60   cluster empty                                   1200     1260
#   late-h    1260    3    40   arrives as fill-g finishes: starts that instant 1260     1300
#
# Usage: cli_golden_test.sh PATH/TO/gpufleet SOURCE_DIR
source "$(dirname "$0")/lib.sh"

GPUFLEET="${1:?usage: cli_golden_test.sh GPUFLEET SOURCE_DIR}"
SRC="${2:?usage: cli_golden_test.sh GPUFLEET SOURCE_DIR}"
TRACE="$SRC/tests/data/cli/tiny.csv"
COLUMNS="id=name,submit=arrive,duration=secs,gpus=ngpu,team=group"

run "$WORK/sim" "$GPUFLEET" sim --trace "$TRACE" --columns "$COLUMNS" --cluster-gpus 8 --policy fifo \
  --no-progress -o json --jobs-out "$WORK/jobs.csv"
expect_rc "$WORK/sim" 0 "gpufleet sim on tiny.csv"

cat >"$WORK/expected.csv" <<'CSV'
id,team,gpus,gpu_milli,submit,first_start,finish,work_s,queued_s,jct_s,preemptions,run_gpu_s,gpu_model
train-a,vision,4,4000,1970-01-01T00:01:40Z,1970-01-01T00:01:40Z,1970-01-01T00:11:40Z,600.000,0.000,600.000,0,2400.000,A100
train-b,nlp,8,8000,1970-01-01T00:02:40Z,1970-01-01T00:11:40Z,1970-01-01T00:16:40Z,300.000,540.000,840.000,0,2400.000,A100
eval-c,vision,1,1000,1970-01-01T00:03:40Z,1970-01-01T00:16:40Z,1970-01-01T00:17:30Z,50.000,780.000,830.000,0,50.000,A100
tune-d,speech,2,2000,1970-01-01T00:16:50Z,1970-01-01T00:16:50Z,1970-01-01T00:18:50Z,120.000,0.000,120.000,0,240.000,A100
big-e,nlp,8,8000,1970-01-01T00:17:00Z,1970-01-01T00:18:50Z,1970-01-01T00:19:00Z,10.000,110.000,120.000,0,80.000,A100
probe-f,vision,1,1000,1970-01-01T00:17:10Z,1970-01-01T00:19:00Z,1970-01-01T00:19:05.500Z,5.500,110.000,115.500,0,5.500,A100
fill-g,nlp,8,8000,1970-01-01T00:20:00Z,1970-01-01T00:20:00Z,1970-01-01T00:21:00Z,60.000,0.000,60.000,0,480.000,A100
late-h,speech,3,3000,1970-01-01T00:21:00Z,1970-01-01T00:21:00Z,1970-01-01T00:21:40Z,40.000,0.000,40.000,0,120.000,A100
CSV

"$PYTHON" - "$WORK/expected.csv" "$WORK/jobs.csv" "$WORK/sim.out" <<'PY'
import csv, json, sys
expected_path, actual_path, report_path = sys.argv[1:]
expected = list(csv.DictReader(open(expected_path)))
actual = list(csv.DictReader(open(actual_path)))
problems = []
# Rows come out in submit order (the trace's order after sorting), one per job.
want_ids = [r["id"] for r in expected]
got_ids = [r.get("id") for r in actual]
if got_ids != want_ids:
    problems.append("job rows: got %s, expected %s (submit order)" % (got_ids, want_ids))
by_id = {r.get("id"): r for r in actual}
for want in expected:
    got = by_id.get(want["id"])
    if got is None:
        continue
    for field, value in want.items():
        if field not in got:
            problems.append("jobs CSV has no column %r" % field)
        elif got[field] != value:
            problems.append("%s.%s = %r, expected %r" % (want["id"], field, got[field], value))

report = json.load(open(report_path))
checks = [("jobs", 8), ("finished", 8), ("makespan_s", 1200.0), ("preemptions", 0),
          ("failures", 0),
          # 2400 + 2400 + 50 + 240 + 80 + 5.5 + 480 + 120 = 5775.5 GPU-seconds
          ("gpu_hours_used", 1.604)]
for key, value in checks:
    if report.get(key) != value:
        problems.append("report %s = %r, expected %r" % (key, report.get(key), value))
# JCTs: 600, 840, 830, 120, 120, 115.5, 60, 40
jct = report.get("jct_s", {})
if jct.get("max") != 840.0 or jct.get("avg") != 340.688:
    problems.append("report jct_s = %r, expected max 840.0 and avg 340.688" % jct)
if problems:
    print("FAIL: the FIFO schedule of tiny.csv on 8 GPUs differs from the hand-worked one:", file=sys.stderr)
    for p in dict.fromkeys(problems):
        print("  " + p, file=sys.stderr)
    sys.exit(1)
PY

echo "PASS: strict FIFO schedule of tiny.csv on one 8-GPU node matches the hand-worked schedule"
