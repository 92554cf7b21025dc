#!/usr/bin/env bash
# Replays the bundled Microsoft Philly trace (82,247 jobs) on a 480-GPU cluster with three
# policies side by side -- fifo, backfill (EASY) and las (Tiresias) -- prints the comparison table
# and writes the plot to out/philly.svg. Sets up and builds first, like scripts/run.sh.
#
#   bash scripts/replay_philly.sh                                  # the default comparison
#   bash scripts/replay_philly.sh -o json                          # extra args go to `gpufleet sim`
#   bash scripts/replay_philly.sh --compare fifo,las --policy-opt min_run=30m
#   bash scripts/replay_philly.sh --cluster examples/clusters/philly-like.yaml --plot out/big.svg
#
# An extra argument that names --trace, --cluster/--cluster-gpus, --compare/--policy or --plot
# replaces the default for it (gpufleet sim rejects an option given twice). Environment:
# BUILD_DIR (default build) is where scripts/build.sh builds and where the binary is taken from.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
export BUILD_DIR="${BUILD_DIR:-build}"

bash scripts/setup.sh
bash scripts/build.sh

bin="$BUILD_DIR/src/gpufleet"
if [[ ! -x "$bin" ]]; then
  echo "run.sh: $bin was not built (scripts/build.sh should have made it)" >&2
  exit 1
fi

# Which defaults the caller overrides.
has_trace=0 has_cluster=0 has_policy=0 has_plot=0
for arg in "$@"; do
  case "$arg" in
    --trace | --trace=*) has_trace=1 ;;
    --cluster | --cluster=* | --cluster-gpus | --cluster-gpus=*) has_cluster=1 ;;
    --compare | --compare=* | --policy | --policy=*) has_policy=1 ;;
    --plot | --plot=*) has_plot=1 ;;
  esac
done

args=()
((has_trace)) || args+=(--trace data/traces/philly/philly.csv)
((has_cluster)) || args+=(--cluster-gpus 480)
((has_policy)) || args+=(--compare "fifo,backfill,las")
mkdir -p out
((has_plot)) || args+=(--plot out/philly.svg)

echo "+ $bin sim ${args[*]}${*:+ $*}" >&2
exec "$bin" sim "${args[@]}" "$@"
