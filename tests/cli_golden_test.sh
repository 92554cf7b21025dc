#!/usr/bin/env bash
# Given tests/data/cli/tiny.csv (8 jobs, columns mapped with --columns) on one 8-GPU A100 node
# under strict FIFO, expect the exact schedule worked out by hand below; then the same for a
# Gavel-format trace, and clear reports of bad submit times and of jobs that can never run.
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

# Given the hand-written Gavel trace tests/data/traces/gavel_small.trace (tab-separated, work in
# steps) with its throughputs file on one 4-GPU V100 node under strict FIFO, expect the schedule
# worked out by hand. Work = total_steps / steps-per-second on v100 (the reference GPU, speed 1):
#
#   job  type              gpus  arrive  steps/rate      work   why                      start  finish
#   1    ResNet-18 bs64     1       0    6000/10          600   cluster empty                0     600
#   2    Transformer bs32   1       0    1200/4           300   3 GPUs free                  0     300
#   3    LM bs20            4      60    15000/25         600   needs all 4: waits for 1   600    1200
#   4    ResNet-18 bs64     2     120    5400/18          300   strict FIFO: behind 3     1200    1500
#   5    Transformer bs32   1     900    400/4            100   behind 3 and 4            1200    1300
GAVEL="$SRC/tests/data/traces/gavel_small.trace"
run "$WORK/gavel" "$GPUFLEET" sim --trace "$GAVEL" --gavel-throughputs "$SRC/tests/data/traces/gavel_throughputs.json" \
  --cluster-gpus 4 --gpus-per-node 4 --gpu V100 --policy fifo --no-progress -o json --jobs-out "$WORK/gavel.csv"
expect_rc "$WORK/gavel" 0 "gpufleet sim on gavel_small.trace"
# plan reads a Gavel trace with the same flags (this one spans an hour: too short to forecast).
run "$WORK/gavel_plan" "$GPUFLEET" plan --trace "$GAVEL" --gavel-throughputs "$SRC/tests/data/traces/gavel_throughputs.json" \
  --gpu V100 --no-verify
expect_rc "$WORK/gavel_plan" 2 "gpufleet plan on gavel_small.trace"
expect_contains "$WORK/gavel_plan.err" "the history spans 1 hour" "plan read the Gavel trace"
"$PYTHON" - "$WORK/gavel.csv" "$WORK/gavel.out" <<'PY'
import csv, json, sys
rows = {r["id"]: r for r in csv.DictReader(open(sys.argv[1]))}
want = {"1": (0, 600), "2": (0, 300), "3": (600, 1200), "4": (1200, 1500), "5": (1200, 1300)}
def secs(iso):
    # 1970-01-01T00:MM:SSZ (whole seconds in this schedule)
    h, m, s = iso[11:19].split(":")
    return int(h) * 3600 + int(m) * 60 + int(s)
problems = []
for job, (start, finish) in want.items():
    r = rows.get(job)
    if r is None:
        problems.append("job %s missing" % job)
        continue
    got = (secs(r["first_start"]), secs(r["finish"]))
    if got != (start, finish):
        problems.append("job %s ran %s, expected %s" % (job, got, (start, finish)))
report = json.load(open(sys.argv[2]))
if (report["finished"], report["makespan_s"], report["never_ran"]) != (5, 1500.0, 0):
    problems.append("report: finished %s, makespan %s, never ran %s" % (report["finished"], report["makespan_s"], report["never_ran"]))
if problems:
    print("FAIL: the FIFO schedule of gavel_small.trace differs from the hand-worked one:", file=sys.stderr)
    for p in problems:
        print("  " + p, file=sys.stderr)
    sys.exit(1)
PY

# Given a trace with one negative submit time, or one datetime among second offsets, expect an
# error naming file:line and the field, no report, and no per-job file written.
printf 'name,arrive,secs,ngpu,group\na,100,10,1,x\nb,-5,10,1,x\n' >"$WORK/negative.csv"
printf 'name,arrive,secs,ngpu,group\na,100,10,1,x\nb,2017-10-09T07:01:55Z,10,1,x\n' >"$WORK/mixed.csv"
for bad in negative mixed; do
  run "$WORK/$bad" "$GPUFLEET" sim --trace "$WORK/$bad.csv" --columns "$COLUMNS" --cluster-gpus 8 --no-progress \
    --jobs-out "$WORK/$bad-jobs.csv"
  expect_rc "$WORK/$bad" 2 "a $bad submit time"
  expect_contains "$WORK/$bad.err" "$bad.csv:3: arrive: " "a $bad submit time"
  [[ ! -s "$WORK/$bad.out" && ! -e "$WORK/$bad-jobs.csv" ]] || fail "a $bad submit time: a report or jobs CSV was written"
done

# Given a job larger than the cluster, expect exit 0, the job named with its reason in the
# report and on stderr, and its wait left out of the queueing delay.
printf 'name,arrive,secs,ngpu,group\nsmall,0,10,1,x\nhuge,0,10,128,x\n' >"$WORK/huge.csv"
run "$WORK/huge" "$GPUFLEET" sim --trace "$WORK/huge.csv" --columns "$COLUMNS" --cluster-gpus 8 --no-progress
expect_rc "$WORK/huge" 0 "a job larger than the cluster"
expect_contains "$WORK/huge.out" "jobs              2 (1 finished, 1 never ran)" "a job larger than the cluster"
expect_contains "$WORK/huge.out" "1 x can never run: needs 16 A100 node(s) with 8 GPUs but only 1 such node(s) exist: huge" \
  "a job larger than the cluster"
expect_contains "$WORK/huge.err" "1 job(s) never ran" "a job larger than the cluster"
expect_contains "$WORK/huge.out" "queueing delay    avg 0s " "a job larger than the cluster"

echo "PASS: strict FIFO schedules of tiny.csv and gavel_small.trace match the hand-worked ones; bad times and never-run jobs are reported"
