#!/usr/bin/env bash
# Given the bundled Philly trace (82,247 jobs) on 480 GPUs, expect every policy to make exactly
# the decisions recorded in tests/data/philly_reference.sha256: the SHA-256 of each run's per-job
# CSV (starts, finishes, preemptions, GPU model of every job). The references were computed
# before the scheduler core was made faster; a speed-up that changes any decision (a tie broken
# another way, a victim chosen differently) changes a hash.
#
# Runs: each policy of `gpufleet policies` with its default options, and fair-share with three
# team quotas of 100 GPUs (the three teams with the most GPU time in the trace), the setting
# under which fair-share ranks move with usage and reclaims happen. Then las on other clusters
# (several GPU models, node sizes and racks) and with other options. Then the autoscaled replay
# (examples/clusters/autoscale-v100.yaml): its per-job CSV and the summary's cost, interruption
# and autoscaling lines (what the pool rented and released, and when, decides them).
#
# Usage: philly_reference_test.sh PATH/TO/gpufleet SOURCE_DIR
source "$(dirname "$0")/lib.sh"

GPUFLEET="${1:?usage: philly_reference_test.sh GPUFLEET SOURCE_DIR}"
SRC="${2:?usage: philly_reference_test.sh GPUFLEET SOURCE_DIR}"
TRACE="$SRC/data/traces/philly/philly.csv"
REFERENCE="$SRC/tests/data/philly_reference.sha256"
[[ -f "$TRACE" ]] || fail "missing bundled trace $TRACE"
[[ -f "$REFERENCE" ]] || fail "missing reference hashes $REFERENCE"

# name -> policy arguments
declare -A RUNS=(
  [fifo]="--policy fifo"
  [backfill]="--policy backfill"
  [priority]="--policy priority"
  [fair-share]="--policy fair-share"
  [las]="--policy las"
  [sjf]="--policy sjf"
  [srtf]="--policy srtf"
  [fair-share-quotas]="--policy fair-share --policy-opt quota.ee9e8c=100,quota.7f04ca=100,quota.b436b2=100"
)

# Every policy the binary offers has a reference run.
run "$WORK/policies" "$GPUFLEET" policies
expect_rc "$WORK/policies" 0 "gpufleet policies"
for p in $(awk '/^[a-z]/ { print $1 }' "$WORK/policies.out"); do
  [[ -n "${RUNS[$p]:-}" ]] || fail "policy $p has no reference run in this test"
done

failures=()
for name in $(printf '%s\n' "${!RUNS[@]}" | sort); do
  want=$(awk -v n="$name" '$1 !~ /^#/ && $2 == n { print $1 }' "$REFERENCE")
  [[ -n "$want" ]] || fail "no reference hash for $name in $REFERENCE"
  # shellcheck disable=SC2086
  run "$WORK/$name" "$GPUFLEET" sim --trace "$TRACE" --cluster-gpus 480 ${RUNS[$name]} --no-progress \
    --jobs-out "$WORK/$name.csv"
  expect_rc "$WORK/$name" 0 "gpufleet sim ${RUNS[$name]}"
  got=$(sha256sum "$WORK/$name.csv" | awk '{ print $1 }')
  [[ "$got" == "$want" ]] || failures+=("$name: per-job CSV sha256 $got, reference $want")
done

# Preemption searches on clusters of several GPU models, sizes, markets and racks, and with the
# other victim order and first fit (the first jobs of the trace, to keep the test short).
declare -A CLUSTER_RUNS=(
  [las-hetero-5000]="--max-jobs 5000 --cluster $SRC/examples/clusters/hetero.yaml --policy las"
  [las-philly-like]="--cluster $SRC/examples/clusters/philly-like.yaml --policy las"
  [las-worst-rank-first-fit-20000]="--max-jobs 20000 --cluster-gpus 480 --policy las --policy-opt victims=worst-rank,fit=first"
)
for name in $(printf '%s\n' "${!CLUSTER_RUNS[@]}" | sort); do
  want=$(awk -v n="$name" '$1 !~ /^#/ && $2 == n { print $1 }' "$REFERENCE")
  [[ -n "$want" ]] || fail "no reference hash for $name in $REFERENCE"
  # shellcheck disable=SC2086
  run "$WORK/$name" "$GPUFLEET" sim --trace "$TRACE" ${CLUSTER_RUNS[$name]} --no-progress --jobs-out "$WORK/$name.csv"
  expect_rc "$WORK/$name" 0 "gpufleet sim ${CLUSTER_RUNS[$name]}"
  got=$(sha256sum "$WORK/$name.csv" | awk '{ print $1 }')
  [[ "$got" == "$want" ]] || failures+=("$name: per-job CSV sha256 $got, reference $want")
done

run "$WORK/autoscaled" "$GPUFLEET" sim --trace "$TRACE" --cluster "$SRC/examples/clusters/autoscale-v100.yaml" \
  --no-progress --jobs-out "$WORK/autoscaled.csv"
expect_rc "$WORK/autoscaled" 0 "gpufleet sim --cluster autoscale-v100.yaml"
for name in autoscaled autoscaled-pool; do
  want=$(awk -v n="$name" '$1 !~ /^#/ && $2 == n { print $1 }' "$REFERENCE")
  [[ -n "$want" ]] || fail "no reference hash for $name in $REFERENCE"
  if [[ "$name" == autoscaled ]]; then
    got=$(sha256sum "$WORK/autoscaled.csv" | awk '{ print $1 }')
  else
    got=$(grep -E '^(cost|cost by market|interruptions|autoscaling) ' "$WORK/autoscaled.out" | sha256sum | awk '{ print $1 }')
  fi
  [[ "$got" == "$want" ]] || failures+=("$name: sha256 $got, reference $want")
done
((${#failures[@]} == 0)) || fail "decisions differ from the reference: ${failures[*]}"

echo "PASS: Philly gives the reference output under all ${#RUNS[@]} policy runs, ${#CLUSTER_RUNS[@]} runs on other clusters and the autoscaled replay"
