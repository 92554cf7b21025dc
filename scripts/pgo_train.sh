#!/usr/bin/env bash
# The training replays of the release build (scripts/build_release.sh): runs an instrumented
# gpufleet over what users replay, so that its profiles cover every policy and the paths their
# options take: each policy of `gpufleet policies` on the first 20,000 Philly jobs, LAS with the
# option sets whose searches and ranks differ, fair-share with team quotas, srtf on 4-GPU nodes
# with node failures and restart overhead, several GPU models and node sizes, the autoscaled
# pool, and the Alibaba and Tiresias traces. A replay that fails stops the training (a profile
# of a half-run would mislead the compiler).
#
#   scripts/pgo_train.sh build-release/src/gpufleet
set -euo pipefail
cd "$(dirname "$0")/.."

BIN="${1:?usage: pgo_train.sh PATH/TO/instrumented/gpufleet}"
PHILLY=data/traces/philly/philly.csv
C=examples/clusters
slice=(--max-jobs 20000)

policies=$("$BIN" policies | awk '/^[a-z]/ { print $1 }')
if [[ -z "$policies" ]]; then
  echo "pgo_train: $BIN policies listed no policy" >&2
  exit 1
fi
runs=()
for policy in $policies; do
  runs+=("--trace $PHILLY --cluster-gpus 480 --policy $policy ${slice[*]}")
done
runs+=(
  "--trace $PHILLY --cluster-gpus 480 --policy las --policy-opt victims=worst-rank"
  "--trace $PHILLY --cluster-gpus 480 --policy las --policy-opt fit=first ${slice[*]}"
  "--trace $PHILLY --cluster-gpus 480 --policy las --policy-opt min_run=30m ${slice[*]}"
  "--trace $PHILLY --cluster-gpus 480 --policy las --policy-opt order=entry ${slice[*]}"
  "--trace $PHILLY --cluster-gpus 480 --policy fair-share --policy-opt quota.ee9e8c=100,quota.7f04ca=100,quota.b436b2=100 ${slice[*]}"
  "--trace $PHILLY --cluster-gpus 480 --gpus-per-node 4 --policy srtf --node-mtbf 200 --restart-overhead 2m ${slice[*]}"
  "--trace $PHILLY --cluster $C/hetero.yaml --policy las --max-jobs 10000"
  "--trace $PHILLY --cluster $C/philly-like.yaml --policy backfill ${slice[*]}"
  "--trace $PHILLY --cluster $C/autoscale-v100.yaml --policy fifo ${slice[*]}"
  "--trace data/traces/alibaba-gpu-v2023/openb_pod_list_gpuspec33.csv --skip-bad-rows --cluster-gpus 480 --policy las"
  "--trace data/traces/tiresias/60_job.csv --cluster-gpus 480 --policy las"
)
err=$(mktemp)
trap 'rm -f "$err"' EXIT
for args in "${runs[@]}"; do
  read -r -a argv <<< "$args"
  if ! "$BIN" sim "${argv[@]}" --no-progress -o json > /dev/null 2> "$err"; then
    echo "pgo_train: replay failed: gpufleet sim $args" >&2
    tail -n 5 "$err" >&2
    exit 1
  fi
done
echo "pgo_train: ${#runs[@]} replays" >&2
