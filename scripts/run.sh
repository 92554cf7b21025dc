#!/usr/bin/env bash
# The main job: set up a fresh Debian 12 machine, build gpufleet, and run a whole cluster on this
# machine with `gpufleet dev` -- the controller (HTTP API on 127.0.0.1:8470, scheduler, SQLite
# store) and one node agent with 8 fake H100 GPUs -- then write the CLI config so that, in another
# terminal, `gpufleet run --gpus 1 -- echo hello` works at once. Ctrl-C stops it.
#
#   bash scripts/run.sh                                   # the default dev cluster
#   bash scripts/run.sh --agents 2 --fake-gpus 4xA100     # extra args go to `gpufleet dev`
#   bash scripts/run.sh --policy las --port 9000
#
# After the build, scripts/install.sh links the binary onto PATH (/usr/local/bin/gpufleet as root,
# else ~/.local/bin), so `gpufleet ...` works as written in another terminal.
#
# Environment: BUILD_DIR (default build) is where scripts/build.sh builds and where the binary is
# taken from; GPUFLEET_BIN_DIR where scripts/install.sh puts the link. scripts/replay_philly.sh
# runs the trace replay that was the main job before the live cluster.
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
# Not fatal: without the link the dev cluster still runs, and its banner gives the binary's path.
bash scripts/install.sh || echo "run.sh: gpufleet is not on PATH; run it as $bin" >&2
exec "$bin" dev "$@"
