#!/usr/bin/env bash
# Given a build folder, expect `cmake --install BUILD --prefix DIR` to put a working gpufleet in
# DIR/bin, and scripts/install.sh to link the built binary into GPUFLEET_BIN_DIR (replacing its
# own earlier link, never a file).
#
# Usage: install_test.sh BUILD_DIR REPO_ROOT
source "$(dirname "$0")/lib.sh"

BUILD="${1:?usage: install_test.sh BUILD_DIR REPO_ROOT}"
ROOT="${2:?usage: install_test.sh BUILD_DIR REPO_ROOT}"

run "$WORK/cmake" cmake --install "$BUILD" --prefix "$WORK/prefix"
expect_rc "$WORK/cmake" 0 "cmake --install"
[[ -x "$WORK/prefix/bin/gpufleet" ]] || fail "cmake --install put no bin/gpufleet under the prefix"
run "$WORK/help" "$WORK/prefix/bin/gpufleet" --help
expect_rc "$WORK/help" 0 "the installed gpufleet --help"
expect_contains "$WORK/help.out" "dev" "the installed gpufleet lists its subcommands"

run "$WORK/link" env BUILD_DIR="$BUILD" GPUFLEET_BIN_DIR="$WORK/bin" bash "$ROOT/scripts/install.sh"
expect_rc "$WORK/link" 0 "scripts/install.sh"
[[ -L "$WORK/bin/gpufleet" ]] || fail "scripts/install.sh made no link"
[[ "$(readlink -f "$WORK/bin/gpufleet")" == "$(readlink -f "$BUILD/src/gpufleet")" ]] ||
  fail "the link does not point at the built binary"
expect_contains "$WORK/link.err" "not on your PATH" "install.sh says when its folder is not on PATH"
run "$WORK/again" env BUILD_DIR="$BUILD" GPUFLEET_BIN_DIR="$WORK/bin" bash "$ROOT/scripts/install.sh"
expect_rc "$WORK/again" 0 "scripts/install.sh run twice"
rm "$WORK/bin/gpufleet"
echo "not a link" >"$WORK/bin/gpufleet"
run "$WORK/file" env BUILD_DIR="$BUILD" GPUFLEET_BIN_DIR="$WORK/bin" bash "$ROOT/scripts/install.sh"
expect_rc "$WORK/file" 1 "scripts/install.sh over a file"
[[ "$(cat "$WORK/bin/gpufleet")" == "not a link" ]] || fail "scripts/install.sh replaced a file"
echo PASS
