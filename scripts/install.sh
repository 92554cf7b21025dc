#!/usr/bin/env bash
# Puts `gpufleet` on PATH, so the README's commands work as written in any terminal: a symlink
# to the built binary ($BUILD_DIR/src/gpufleet) in a bin directory on PATH. scripts/run.sh runs it
# after each build.
#
#   bash scripts/install.sh                     # /usr/local/bin as root, else ~/.local/bin
#   GPUFLEET_BIN_DIR=~/bin bash scripts/install.sh
#
# A link rather than a copy, so a rebuild is picked up at once. It replaces an earlier link, never
# a file. For a copy in a prefix of your choice: cmake --install build --prefix /opt/gpufleet
# (the binary lands in /opt/gpufleet/bin).
#
# Environment: BUILD_DIR (default build), GPUFLEET_BIN_DIR (where the link goes).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BUILD_DIR="${BUILD_DIR:-build}"
if [[ ! -x "$BUILD_DIR/src/gpufleet" ]]; then
  echo "install: $BUILD_DIR/src/gpufleet is not built; run bash scripts/build.sh first" >&2
  exit 1
fi
bin="$(cd "$BUILD_DIR/src" && pwd -P)/gpufleet"

if [[ -n "${GPUFLEET_BIN_DIR:-}" ]]; then
  dir="$GPUFLEET_BIN_DIR"
elif [[ "$(id -u)" -eq 0 ]]; then
  dir=/usr/local/bin
else
  dir="$HOME/.local/bin"
fi
mkdir -p "$dir"
link="$dir/gpufleet"
if [[ -e "$link" && ! -L "$link" ]]; then
  echo "install: $link exists and is not a link; leaving it (remove it, or set GPUFLEET_BIN_DIR)" >&2
  exit 1
fi
ln -sfn "$bin" "$link"
echo "install: $link -> $bin"
case ":$PATH:" in
  *":$dir:"*) ;;
  *) echo "install: $dir is not on your PATH: add it (export PATH=\"$dir:\$PATH\"), or run $bin" >&2 ;;
esac
