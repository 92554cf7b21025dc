#!/usr/bin/env bash
# Bad input to `gpufleet`: expect a non-zero exit status and a message that says what is wrong
# and where, before any simulation runs. Exit status 2 is bad input: the command line or a file
# or value given (src/cli/exit_codes.h).
#
# Usage: cli_errors_test.sh PATH/TO/gpufleet SOURCE_DIR CASE
#   CASE: missing_trace | bad_columns | unknown_policy | malformed_row | skip_bad_rows |
#         no_cluster | unknown_flag | policies_json | out_of_range | output_clash | spot_only_pool
source "$(dirname "$0")/lib.sh"

GPUFLEET="${1:?usage: cli_errors_test.sh GPUFLEET SOURCE_DIR CASE}"
SRC="${2:?usage: cli_errors_test.sh GPUFLEET SOURCE_DIR CASE}"
CASE="${3:?usage: cli_errors_test.sh GPUFLEET SOURCE_DIR CASE}"
TINY="$SRC/tests/data/cli/tiny.csv"
BAD_ROW="$SRC/tests/data/cli/bad_row.csv"
COLUMNS="id=name,submit=arrive,duration=secs,gpus=ngpu,team=group"
R="$WORK/r"

# Given a command that must fail, expect no report on stdout.
expect_no_report() {
  if [[ -s "$R.out" ]]; then
    show "$R"
    fail "$1: printed a report on stdout although it failed"
  fi
}

case "$CASE" in
  missing_trace)
    # Given a trace path that does not exist, expect exit 2 and the path in the message.
    missing="$WORK/no such dir/trace.csv"
    run "$R" "$GPUFLEET" sim --trace "$missing" --cluster-gpus 8
    expect_rc "$R" 2 "missing trace file"
    expect_contains "$R.err" "$missing" "missing trace file"
    expect_no_report "missing trace file"
    ;;

  out_of_range)
    # Given a directory as the trace, a cluster larger than a cluster file may hold, a load
    # factor that is not a number, and a negative cluster, expect exit 2 with what is wrong,
    # each before any replay (no report, no crash).
    run "$R" "$GPUFLEET" sim --trace "$WORK" --cluster-gpus 8
    expect_rc "$R" 2 "a directory as the trace"
    expect_contains "$R.err" "is a directory" "a directory as the trace"
    expect_no_report "a directory as the trace"
    run "$R" "$GPUFLEET" sim --trace "$TINY" --cluster-gpus 2147483647
    expect_rc "$R" 2 "a huge cluster"
    expect_contains "$R.err" "--cluster-gpus must be 1.." "a huge cluster"
    run "$R" "$GPUFLEET" sim --trace "$TINY" --cluster-gpus -8
    expect_rc "$R" 2 "a negative cluster"
    # Team quotas in --policy-opt past the cluster's GPUs, as the cluster YAML's teams are checked.
    run "$R" "$GPUFLEET" sim --trace "$TINY" --columns "$COLUMNS" --cluster-gpus 16 --policy fair-share \
      --policy-opt quota.x=1000
    expect_rc "$R" 2 "quotas past the cluster"
    expect_contains "$R.err" "quotas add up to 1000 GPUs but the cluster has only 16" "quotas past the cluster"
    expect_no_report "quotas past the cluster"
    # A port out of range is refused before anything starts (99999 listened on 34463, -1 on 8470).
    for port in 99999 -1; do
      run "$R" timeout 20 "$GPUFLEET" dev --port "$port" --agents 0 --data-dir "$WORK/dev-$port" \
        --config "$WORK/dev-$port.yaml"
      expect_rc "$R" 2 "dev --port $port"
      expect_contains "$R.err" "--port" "dev --port $port"
    done
    # A negative seed is no seed (it was taken as 2^64 - 1).
    run "$R" "$GPUFLEET" sim --trace "$TINY" --columns "$COLUMNS" --cluster-gpus 8 --seed -1
    expect_rc "$R" 2 "sim --seed -1"
    expect_contains "$R.err" "--seed" "sim --seed -1"
    # A bad --cpus for dev's agents is refused before anything is written (it made the data dir,
    # its tokens and the CLI config first).
    run "$R" timeout 20 "$GPUFLEET" dev --cpus 0-1 --agents 1 --data-dir "$WORK/dev-cpus" --config "$WORK/dev-cpus.yaml"
    expect_rc "$R" 2 "dev --cpus 0-1"
    expect_contains "$R.err" "--cpus" "dev --cpus 0-1"
    [[ ! -e "$WORK/dev-cpus" && ! -e "$WORK/dev-cpus.yaml" ]] || fail "dev --cpus 0-1 wrote its data dir or CLI config"
    # --max-jobs 0 or -5 is no number of jobs (it ran the whole trace).
    for mj in 0 -5; do
      run "$R" "$GPUFLEET" sim --trace "$TINY" --cluster-gpus 8 --max-jobs "$mj"
      expect_rc "$R" 2 "--max-jobs $mj"
      expect_contains "$R.err" "--max-jobs" "--max-jobs $mj"
      expect_no_report "--max-jobs $mj"
    done
    for lf in nan inf 1e-15 0; do
      run "$R" "$GPUFLEET" sim --trace "$TINY" --cluster-gpus 8 --load-factor "$lf"
      expect_rc "$R" 2 "--load-factor $lf"
      expect_contains "$R.err" "--load-factor must be from 0.001 to 1000" "--load-factor $lf"
      expect_no_report "--load-factor $lf"
    done
    # A heartbeat under 100 ms is refused (a fleet would do little else); so is a --lost-after
    # that is not longer, naming both.
    run "$R" timeout 20 "$GPUFLEET" dev --heartbeat 1ms --lost-after 2ms --agents 0 --data-dir "$WORK/dev-hb" \
      --config "$WORK/dev-hb.yaml"
    expect_rc "$R" 2 "dev --heartbeat 1ms"
    expect_contains "$R.err" "--heartbeat: at least 100ms" "dev --heartbeat 1ms"
    run "$R" timeout 20 "$GPUFLEET" dev --heartbeat 2s --lost-after 1s --agents 0 --data-dir "$WORK/dev-lost" \
      --config "$WORK/dev-lost.yaml"
    expect_rc "$R" 2 "dev --lost-after 1s"
    expect_contains "$R.err" "--lost-after: 1s is not longer than --heartbeat (2s)" "dev --lost-after 1s"
    # A --since that reaches back before 1970 is refused by the CLI (the server answered with its
    # own words about a negative since_ms); one that is no positive duration repeats the value.
    for cmd in cost audit; do
      run "$R" "$GPUFLEET" "$cmd" --since 2562048h --server http://127.0.0.1:9
      expect_rc "$R" 2 "$cmd --since 2562048h"
      expect_contains "$R.err" "--since 2562048h reaches back before 1970: at most" "$cmd --since 2562048h"
      run "$R" "$GPUFLEET" "$cmd" --since=-5m --server http://127.0.0.1:9
      expect_rc "$R" 2 "$cmd --since -5m"
      expect_contains "$R.err" "got '-5m'" "$cmd --since -5m"
    done
    ;;

  bad_columns)
    # Given a column map with an unknown field, expect exit 2 and the field named.
    run "$R" "$GPUFLEET" sim --trace "$TINY" --columns "id=name,submit=arrive,duration=secs,gpus=ngpu,colour=group" \
      --cluster-gpus 8
    expect_rc "$R" 2 "--columns with an unknown field"
    expect_contains "$R.err" "colour" "--columns with an unknown field"
    expect_no_report "--columns with an unknown field"
    # Given a map that points a field at a column the file lacks, expect the column and field named.
    run "$R" "$GPUFLEET" sim --trace "$TINY" --columns "id=name,submit=arrived_at,duration=secs,gpus=ngpu" \
      --cluster-gpus 8
    expect_rc "$R" 2 "--columns naming a missing column"
    expect_contains "$R.err" "arrived_at" "--columns naming a missing column"
    expect_contains "$R.err" "submit" "--columns naming a missing column"
    # Given a map without a required field, expect that field named.
    run "$R" "$GPUFLEET" sim --trace "$TINY" --columns "id=name,submit=arrive,duration=secs" --cluster-gpus 8
    expect_rc "$R" 2 "--columns without gpus"
    expect_contains "$R.err" "gpus" "--columns without gpus"
    ;;

  unknown_policy)
    # Given an unknown policy, expect exit 2 and every known policy listed (as `policies` names them).
    run "$WORK/p" "$GPUFLEET" policies -o json
    expect_rc "$WORK/p" 0 "gpufleet policies -o json"
    names=$("$PYTHON" -c 'import json,sys; print(" ".join(p["name"] for p in json.load(open(sys.argv[1]))))' "$WORK/p.out") ||
      fail "gpufleet policies -o json is not a JSON list of {name, ...}"
    [[ -n "$names" ]] || fail "gpufleet policies lists no policies"
    for flags in "--policy round-robin" "--compare fifo,round-robin"; do
      # shellcheck disable=SC2086 # flags is two words on purpose
      run "$R" "$GPUFLEET" sim --trace "$TINY" --columns "$COLUMNS" --cluster-gpus 8 $flags
      expect_rc "$R" 2 "unknown policy ($flags)"
      expect_contains "$R.err" "round-robin" "unknown policy ($flags)"
      for name in $names; do
        expect_contains "$R.err" "$name" "unknown policy ($flags) lists the known ones"
      done
      expect_no_report "unknown policy ($flags)"
    done
    # --policy with --compare, an empty --compare or an empty name in it: which runs were meant
    # is not clear, so nothing runs.
    for flags in "--policy las --compare fifo" "--compare=" "--compare fifo,,las"; do
      # shellcheck disable=SC2086 # flags is one or two words on purpose
      run "$R" "$GPUFLEET" sim --trace "$TINY" --columns "$COLUMNS" --cluster-gpus 8 $flags
      expect_rc "$R" 2 "ambiguous policies ($flags)"
      expect_no_report "ambiguous policies ($flags)"
    done
    expect_contains "$R.err" "--compare: an empty policy name" "--compare with an empty name says so"
    ;;

  malformed_row)
    # Given a CSV whose 4th line has a duration of 'sixty', expect exit 2 naming file:line and the value.
    run "$R" "$GPUFLEET" sim --trace "$BAD_ROW" --columns "$COLUMNS" --cluster-gpus 8
    expect_rc "$R" 2 "malformed CSV row"
    expect_contains "$R.err" "bad_row.csv:4:" "malformed CSV row"
    expect_contains "$R.err" "sixty" "malformed CSV row"
    expect_no_report "malformed CSV row"
    # A NUL byte in the value is shown escaped, and the message goes on past it.
    printf 'name,arrive,secs,ngpu,group\na,0,6\0006,1,t\n' >"$WORK/nul.csv"
    run "$R" "$GPUFLEET" sim --trace "$WORK/nul.csv" --columns "$COLUMNS" --cluster-gpus 8
    expect_rc "$R" 2 "a NUL byte in a CSV value"
    expect_contains "$R.err" "got '6\\x006'" "a NUL byte in a CSV value"
    ;;

  skip_bad_rows)
    # Given the same CSV and --skip-bad-rows, expect exit 0, a "skipped" note, and the 3 good jobs.
    run "$R" "$GPUFLEET" sim --trace "$BAD_ROW" --columns "$COLUMNS" --cluster-gpus 8 --skip-bad-rows -o json
    expect_rc "$R" 0 "--skip-bad-rows"
    expect_contains "$R.err" "skipped 1 bad row" "--skip-bad-rows"
    "$PYTHON" -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if (r["jobs"], r["finished"]) == (3, 3) else 1)' \
      "$R.out" || { show "$R"; fail "--skip-bad-rows: expected a report of the 3 good jobs"; }
    ;;

  no_cluster)
    # Given neither --cluster nor --cluster-gpus, expect exit 2 and a hint at both.
    run "$R" "$GPUFLEET" sim --trace "$TINY" --columns "$COLUMNS"
    expect_rc "$R" 2 "no cluster"
    expect_contains "$R.err" "--cluster" "no cluster"
    expect_contains "$R.err" "--cluster-gpus" "no cluster"
    expect_no_report "no cluster"
    ;;

  unknown_flag)
    # Given a flag that does not exist, expect exit 2 (a usage error) naming the flag.
    run "$R" "$GPUFLEET" sim --trace "$TINY" --columns "$COLUMNS" --cluster-gpus 8 --frobnicate
    expect_rc "$R" 2 "unknown flag"
    expect_contains "$R.err" "--frobnicate" "unknown flag"
    expect_no_report "unknown flag"
    ;;

  policies_json)
    # Given `gpufleet policies -o json`, expect valid JSON: a list with a name and help per policy, fifo first.
    run "$R" "$GPUFLEET" policies -o json
    expect_rc "$R" 0 "gpufleet policies -o json"
    "$PYTHON" -m json.tool "$R.out" >/dev/null 2>"$WORK/json.err" ||
      { cat "$WORK/json.err" >&2; show "$R"; fail "gpufleet policies -o json is not valid JSON"; }
    "$PYTHON" - "$R.out" <<'PY' || fail "gpufleet policies -o json: expected a list of {name, help, options} with fifo"
import json, sys
table = json.load(open(sys.argv[1]))
assert isinstance(table, list) and table, table
assert all(isinstance(p, dict) and p.get("name") and p.get("help") and "options" in p for p in table), table
assert "fifo" in [p["name"] for p in table], table
PY
    ;;

  output_clash)
    # Given an output on the trace itself, two outputs on one file, and --compare outputs of a
    # hidden file name, expect exit 2 naming the file and the trace left as it was, then per-policy
    # names that keep the hidden name whole (.jobs.fifo, not .fifo.jobs).
    cp "$TINY" "$WORK/trace.csv"
    before=$(sha256sum "$WORK/trace.csv")
    run "$R" "$GPUFLEET" sim --trace "$WORK/trace.csv" --columns "$COLUMNS" --cluster-gpus 8 --jobs-out "$WORK/./trace.csv"
    expect_rc "$R" 2 "output on the trace"
    expect_contains "$R.err" "is the --trace file" "output on the trace"
    [[ $(sha256sum "$WORK/trace.csv") == "$before" ]] || fail "output on the trace: the trace was changed"
    # The same through a hard link, and an output on --gpu-specs; plan's --apply on its trace.
    ln "$WORK/trace.csv" "$WORK/linked.csv"
    run "$R" "$GPUFLEET" sim --trace "$WORK/linked.csv" --columns "$COLUMNS" --cluster-gpus 8 --jobs-out "$WORK/trace.csv"
    expect_rc "$R" 2 "output on a hard link of the trace"
    expect_contains "$R.err" "is the --trace file" "output on a hard link of the trace"
    cp "$SRC/data/gpu_specs.csv" "$WORK/specs.csv"
    run "$R" "$GPUFLEET" sim --trace "$TINY" --columns "$COLUMNS" --cluster-gpus 8 --gpu-specs "$WORK/specs.csv" \
      --series-out "$WORK/specs.csv"
    expect_rc "$R" 2 "output on --gpu-specs"
    expect_contains "$R.err" "is the --gpu-specs file" "output on --gpu-specs"
    run "$R" "$GPUFLEET" plan --trace "$WORK/linked.csv" --columns "$COLUMNS" --apply "$WORK/trace.csv" --force
    expect_rc "$R" 2 "plan --apply on its trace"
    expect_contains "$R.err" "is the --trace file, which the plan reads" "plan --apply on its trace"
    [[ $(sha256sum "$WORK/trace.csv") == "$before" ]] || fail "an output on an input: the trace was changed"
    # A report that cannot be written (a full disk) is a failure, not exit 0.
    if [[ -w /dev/full ]]; then
      rc=0
      "$GPUFLEET" sim --trace "$TINY" --columns "$COLUMNS" --cluster-gpus 8 -o json >/dev/full 2>"$WORK/full.err" || rc=$?
      [[ $rc == 1 ]] || fail "a report written to a full disk: exit status $rc, expected 1"
      expect_contains "$WORK/full.err" "could not write the output to standard output" "a report written to a full disk"
    fi
    run "$R" "$GPUFLEET" sim --trace "$TINY" --columns "$COLUMNS" --cluster-gpus 8 --compare fifo,las \
      --jobs-out "$WORK/x.csv" --series-out "$WORK/x.csv"
    expect_rc "$R" 2 "two outputs on one file"
    expect_contains "$R.err" "two outputs would be written to $WORK/x.fifo.csv" "two outputs on one file"
    [[ ! -e "$WORK/x.fifo.csv" ]] || fail "two outputs on one file: a file was written"
    pushd "$WORK" >/dev/null
    run "$R" "$GPUFLEET" sim --trace "$TINY" --columns "$COLUMNS" --cluster-gpus 8 --compare fifo,las --jobs-out .jobs
    popd >/dev/null
    expect_rc "$R" 0 "hidden output name"
    [[ -s "$WORK/.jobs.fifo" && -s "$WORK/.jobs.las" ]] || fail "hidden output name: expected .jobs.fifo and .jobs.las"
    # A Gavel throughputs file with a trace that is not Gavel's is said to go unused.
    echo '{}' >"$WORK/rates.json"
    run "$R" "$GPUFLEET" sim --trace "$TINY" --columns "$COLUMNS" --cluster-gpus 8 --gavel-throughputs "$WORK/rates.json"
    expect_rc "$R" 0 "gavel throughputs with a csv trace"
    expect_contains "$R.err" "--gavel-throughputs is not used" "gavel throughputs with a csv trace"
    ;;

  spot_only_pool)
    # Given an autoscaled pool whose only offer is spot, taken back often, and a job of 10 hours:
    # expect the job to finish on spot (it used to fall back to on-demand capacity the pool does
    # not offer and wait for good, the run ending with it unfinished and nothing said).
    cat >"$WORK/spot.yaml" <<'YAML'
autoscale:
  offers:
    - {name: sp, gpu: H100, gpus: 8, price_per_hour: 20, market: spot, interruptions_per_hour: 0.3}
YAML
    printf '{"id":"long","team":"t","submit":0,"work":36000,"gpus":8}\n{"id":"short","team":"t","submit":0,"work":600,"gpus":8}\n' \
      >"$WORK/long.jsonl"
    run "$R" "$GPUFLEET" sim --trace "$WORK/long.jsonl" --cluster "$WORK/spot.yaml" --no-progress -o json
    expect_rc "$R" 0 "spot-only pool"
    "$PYTHON" - "$R.out" <<'PY' || { show "$R"; fail "spot-only pool: expected both jobs finished after spot interruptions"; }
import json, sys
s = json.load(open(sys.argv[1]))
assert s["jobs"] == 2 and s["finished"] == 2 and s["never_ran"] == 0, s
assert s["spot_interruptions"] >= 2, s
PY
    ;;

  *)
    fail "unknown case '$CASE'"
    ;;
esac

echo "PASS: $CASE"
