#!/usr/bin/env bash
# Replays the bundled traces with two gpufleet binaries and compares every run's per-job CSV
# (start, finish, preemptions and GPU model of every job) and JSON summary byte for byte: a
# speed-up must not change a decision. The runs cover every policy and the option sets and
# clusters where preemption searches, ranks and placement take different paths (the 480-GPU
# Philly replays of every policy are also pinned by tests/philly_reference_test.sh).
#
#   scripts/compare_decisions.sh BEFORE/gpufleet AFTER/gpufleet
#   QUICK=1 scripts/compare_decisions.sh A B     # the first 20,000 jobs of each Philly run
#
# Prints one line per run (same / DIFFERENT) and exits 1 if any run differs or fails.
set -uo pipefail

A=${1:?usage: compare_decisions.sh BEFORE_BIN AFTER_BIN}
B=${2:?usage: compare_decisions.sh BEFORE_BIN AFTER_BIN}
for bin in "$A" "$B"; do [[ -x $bin ]] || { echo "compare_decisions.sh: $bin is not executable" >&2; exit 2; }; done
A=$(realpath "$A")
B=$(realpath "$B")
cd "$(dirname "$0")/.." || exit 2
PHILLY=data/traces/philly/philly.csv
ALIBABA=data/traces/alibaba-gpu-v2023/openb_pod_list_gpuspec33.csv
TIRESIAS=data/traces/tiresias/60_job.csv
C=examples/clusters
limit=()
[[ -n ${QUICK:-} ]] && limit=(--max-jobs 20000)

# name|arguments after `sim` (the trace included)
RUNS=(
  "las|--trace $PHILLY --cluster-gpus 480 --policy las ${limit[*]}"
  "las-hetero|--trace $PHILLY --cluster $C/hetero.yaml --policy las --max-jobs 20000"
  "las-philly-like|--trace $PHILLY --cluster $C/philly-like.yaml --policy las ${limit[*]}"
  "las-small-h100|--trace $PHILLY --cluster $C/small-h100.yaml --policy las --max-jobs 20000"
  "las-worst-rank-first-fit|--trace $PHILLY --cluster-gpus 480 --policy las --policy-opt victims=worst-rank,fit=first ${limit[*]}"
  "las-worst-rank|--trace $PHILLY --cluster-gpus 480 --policy las --policy-opt victims=worst-rank ${limit[*]}"
  "las-min-run-thresholds|--trace $PHILLY --cluster-gpus 480 --policy las --policy-opt min_run=10m,thresholds=1000,5000,20000 ${limit[*]}"
  "las-min-run-30m|--trace $PHILLY --cluster-gpus 480 --policy las --policy-opt min_run=30m ${limit[*]}"
  "las-order-entry|--trace $PHILLY --cluster-gpus 480 --policy las --policy-opt order=entry ${limit[*]}"
  "las-fit-first|--trace $PHILLY --cluster-gpus 480 --policy las --policy-opt fit=first ${limit[*]}"
  "las-4-gpu-nodes|--trace $PHILLY --cluster-gpus 480 --gpus-per-node 4 --policy las ${limit[*]}"
  "las-failures-overhead|--trace $PHILLY --cluster-gpus 480 --policy las --node-mtbf 200 --restart-overhead 2m ${limit[*]}"
  "las-hetero-worst-rank|--trace $PHILLY --cluster $C/hetero.yaml --policy las --policy-opt victims=worst-rank --max-jobs 10000"
  "srtf|--trace $PHILLY --cluster-gpus 480 --policy srtf ${limit[*]}"
  "srtf-hetero|--trace $PHILLY --cluster $C/hetero.yaml --policy srtf --max-jobs 20000"
  "srtf-worst-rank|--trace $PHILLY --cluster-gpus 480 --policy srtf --policy-opt victims=worst-rank ${limit[*]}"
  "priority-aging|--trace $PHILLY --cluster-gpus 480 --policy priority --policy-opt aging=1h ${limit[*]}"
  "priority-worst-rank|--trace $PHILLY --cluster-gpus 480 --policy priority --policy-opt victims=worst-rank ${limit[*]}"
  "priority-hetero-worst-rank|--trace $PHILLY --cluster $C/hetero.yaml --policy priority --policy-opt victims=worst-rank --max-jobs 20000"
  "fair-share-quotas|--trace $PHILLY --cluster-gpus 480 --policy fair-share --policy-opt quota.ee9e8c=100,quota.7f04ca=100,quota.b436b2=100 ${limit[*]}"
  "fair-share-quotas-hetero|--trace $PHILLY --cluster $C/hetero.yaml --policy fair-share --policy-opt quota.ee9e8c=8,quota.7f04ca=8,quota.b436b2=8 --max-jobs 20000"
  "fifo-autoscaled|--trace $PHILLY --cluster $C/autoscale-v100.yaml --policy fifo ${limit[*]}"
  "backfill-wide-loaded|--trace $PHILLY --cluster-gpus 4800 --load-factor 10 --policy backfill ${limit[*]}"
  "fair-share-wide-loaded|--trace $PHILLY --cluster-gpus 4800 --load-factor 10 --policy fair-share ${limit[*]}"
  "backfill-philly-like|--trace $PHILLY --cluster $C/philly-like.yaml --policy backfill ${limit[*]}"
  "las-alibaba|--trace $ALIBABA --skip-bad-rows --cluster-gpus 480 --policy las"
  "fifo-alibaba|--trace $ALIBABA --skip-bad-rows --cluster-gpus 480 --policy fifo"
  "las-tiresias|--trace $TIRESIAS --cluster-gpus 480 --policy las"
)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bad=0
for entry in "${RUNS[@]}"; do
  name=${entry%%|*}
  read -r -a args <<< "${entry#*|}"
  for side in a b; do
    bin=$A
    [[ $side == b ]] && bin=$B
    if ! "$bin" sim "${args[@]}" --no-progress -o json --jobs-out "$work/$name.$side.csv" > "$work/$name.$side.json" 2> "$work/$name.$side.err"; then
      echo "FAILED     $name ($bin): $(tail -n 1 "$work/$name.$side.err")"
      bad=1
      continue 2
    fi
  done
  if cmp -s "$work/$name.a.csv" "$work/$name.b.csv" && cmp -s "$work/$name.a.json" "$work/$name.b.json"; then
    echo "same       $name"
  else
    echo "DIFFERENT  $name"
    bad=1
  fi
done
exit $bad
