#!/usr/bin/env bash
# Given the shipped environment presets (data/environments.yaml), expect `gpufleet environments`
# to list every preset with its PyTorch, CUDA, minimum driver, architectures and image (as a table
# and as JSON); given a node (--driver with --gpu or --cc), to say for each preset "yes" or why
# not, in the scheduler's words (an R525 driver is too old for CUDA 12.4); with --runnable to list
# only what the node can run; and a bad flag (unknown GPU, a version that is not one) to exit 2
# with a message naming it.
#
# Usage: environments_cli_test.sh PATH/TO/gpufleet SOURCE_DIR
source "$(dirname "$0")/lib.sh"

GPUFLEET="${1:?usage: environments_cli_test.sh GPUFLEET SOURCE_DIR}"
SRC="${2:?usage: environments_cli_test.sh GPUFLEET SOURCE_DIR}"
TABLE="$SRC/data/environments.yaml"
[[ -f "$TABLE" ]] || fail "the shipped presets $TABLE are missing"

# --- the listing ------------------------------------------------------------------------------
run "$WORK/list" "$GPUFLEET" environments --environments "$TABLE"
expect_rc "$WORK/list" 0 "gpufleet environments"
head -1 "$WORK/list.out" >"$WORK/header"
for col in NAME PYTORCH CUDA "MIN DRIVER" ARCHS IMAGE; do
  expect_contains "$WORK/header" "$col" "the table's header"
done
if grep -q RUNS "$WORK/header"; then fail "a RUNS column without a node to check"; fi
grep -qE '^pytorch-2\.5-cu124 +2\.5\.1 +12\.4 +550\.54\.14 +5\.0,6\.0,7\.0,7\.5,8\.0,8\.6,9\.0 +pytorch/pytorch:2\.5\.1-cuda12\.4-cudnn9-runtime *$' \
  "$WORK/list.out" || { show "$WORK/list"; fail "the pytorch-2.5-cu124 row is not as the table says"; }
grep -qE '^pytorch-2\.7-cpu +2\.7\.1 +- +- +- +- *$' "$WORK/list.out" ||
  { show "$WORK/list"; fail "the CPU-only row does not show '-' for CUDA, driver, archs and image"; }
rows=$(($(wc -l <"$WORK/list.out") - 1))
want=$(grep -c '^  - name:' "$TABLE")
[[ "$rows" == "$want" ]] || fail "the table lists $rows environments, the file holds $want"

# The default table (no --environments) is the shipped one when run from the source tree.
pushd "$SRC" >/dev/null
run "$WORK/default" env -u GPUFLEET_ENVIRONMENTS "$GPUFLEET" environments
popd >/dev/null
expect_rc "$WORK/default" 0 "gpufleet environments (default table)"
cmp -s "$WORK/default.out" "$WORK/list.out" || fail "the default table differs from data/environments.yaml"

# --- JSON ---------------------------------------------------------------------------------------
run "$WORK/json" "$GPUFLEET" environments --environments "$TABLE" -o json
expect_rc "$WORK/json" 0 "gpufleet environments -o json"
"$PYTHON" - "$WORK/json.out" "$TABLE" <<'PY' || fail "environments JSON is wrong"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["source"] == sys.argv[2], d["source"]
assert "node" not in d, "a node block without a node"
envs = {e["name"]: e for e in d["environments"]}
e = envs["pytorch-2.5-cu124"]
assert (e["pytorch"], e["cuda"], e["min_driver"]) == ("2.5.1", "12.4", "550.54.14"), e
assert e["archs"] == ["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"], e["archs"]
assert e["image"] == "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", e
assert "cu124" in e["pip"] and e["python"], e
assert "runs" not in e and "why_not" not in e, e
cpu = envs["pytorch-2.7-cpu"]
assert cpu["cuda"] == "" and cpu["archs"] == [], cpu
PY

# --- a node: an R525 driver with an A100 -------------------------------------------------------
run "$WORK/old" "$GPUFLEET" environments --environments "$TABLE" --driver 525.60.13 --gpu A100
expect_rc "$WORK/old" 0 "gpufleet environments --driver 525.60.13 --gpu A100"
expect_contains "$WORK/old.out" "RUNS" "the RUNS column"
expect_contains "$WORK/old.out" "driver 525.60.13, A100 (compute capability 8.0): runs 3 of $want" "the node's summary"
grep -E '^pytorch-2\.5-cu124 ' "$WORK/old.out" >"$WORK/old.row" || fail "no pytorch-2.5-cu124 row"
expect_contains "$WORK/old.row" "driver 525.60.13 too old for CUDA 12.4 (pytorch-2.5-cu124); needs >= 550.54.14" \
  "an R525 driver is too old for pytorch-2.5-cu124"
grep -qE '^pytorch-2\.1-cu118 .* yes$' "$WORK/old.out" || { show "$WORK/old"; fail "cu118 (R520+) runs on 525.60.13"; }
grep -qE '^pytorch-2\.7-cpu .* yes$' "$WORK/old.out" || { show "$WORK/old"; fail "the CPU-only build runs anywhere"; }

# The same in JSON, and --cc 8.0 gives what --gpu A100 does.
run "$WORK/oldjson" "$GPUFLEET" environments --environments "$TABLE" --driver 525.60.13 --cc 8.0 -o json
expect_rc "$WORK/oldjson" 0 "gpufleet environments --driver 525.60.13 --cc 8.0 -o json"
"$PYTHON" - "$WORK/oldjson.out" <<'PY' || fail "the compatibility JSON is wrong"
import json, sys
d = json.load(open(sys.argv[1]))
n = d["node"]
assert (n["driver"], n["gpu"], n["compute_capability"], n["runs"]) == ("525.60.13", None, "8.0", 3), n
envs = {e["name"]: e for e in d["environments"]}
e = envs["pytorch-2.5-cu124"]
assert e["runs"] is False, e
assert e["why_not"] == "driver 525.60.13 too old for CUDA 12.4 (pytorch-2.5-cu124); needs >= 550.54.14", e
assert envs["pytorch-2.7-cu118"]["runs"] is True and envs["pytorch-2.7-cu118"]["why_not"] is None
assert sorted(k for k, e in envs.items() if e["runs"]) == ["pytorch-2.1-cu118", "pytorch-2.7-cpu", "pytorch-2.7-cu118"]
PY

# A new driver on a K80 (3.7): only the cu118 builds carry its kernels; the others say so.
run "$WORK/k80" "$GPUFLEET" environments --environments "$TABLE" --driver 570.86.15 --gpu K80
expect_rc "$WORK/k80" 0 "gpufleet environments --gpu K80"
grep -E '^pytorch-2\.5-cu124 ' "$WORK/k80.out" >"$WORK/k80.row" || fail "no pytorch-2.5-cu124 row for the K80"
expect_contains "$WORK/k80.row" "GPU architecture 3.7 (compute capability of GPU 0) is not in pytorch-2.5-cu124's builds" \
  "a K80 has no kernels in pytorch-2.5-cu124"

# --- --runnable ---------------------------------------------------------------------------------
run "$WORK/runnable" "$GPUFLEET" environments --environments "$TABLE" --driver 525.60.13 --gpu A100 --runnable
expect_rc "$WORK/runnable" 0 "gpufleet environments --runnable"
names=$(awk 'NR > 2 {print $1}' "$WORK/runnable.out" | tr '\n' ' ')
[[ "$names" == "pytorch-2.7-cu118 pytorch-2.1-cu118 pytorch-2.7-cpu " ]] ||
  { show "$WORK/runnable"; fail "--runnable on 525.60.13 + A100 lists '$names'"; }
if grep -q "too old" "$WORK/runnable.out"; then fail "--runnable lists an environment the node cannot run"; fi
run "$WORK/b200" "$GPUFLEET" environments --environments "$TABLE" --driver 570.86.15 --gpu B200 --runnable -o json
expect_rc "$WORK/b200" 0 "gpufleet environments --gpu B200 --runnable -o json"
"$PYTHON" - "$WORK/b200.out" <<'PY' || fail "--runnable JSON on a B200 is wrong"
import json, sys
d = json.load(open(sys.argv[1]))
assert [e["name"] for e in d["environments"]] == ["pytorch-2.7-cu128", "pytorch-2.7-cpu"], d["environments"]
assert all(e["runs"] for e in d["environments"])
PY
run "$WORK/nodriver" "$GPUFLEET" environments --environments "$TABLE" --driver none --runnable
expect_rc "$WORK/nodriver" 0 "gpufleet environments --driver none --runnable"
[[ $(awk 'NR > 2 {print $1}' "$WORK/nodriver.out") == "pytorch-2.7-cpu" ]] ||
  { show "$WORK/nodriver"; fail "a node without a driver runs only the CPU-only build"; }

# --- errors: exit 2, naming what is wrong ---------------------------------------------------------
expect_error() {  # NAME WANT-ON-STDERR ARGS...
  local name="$1" want="$2"
  shift 2
  run "$WORK/$name" "$GPUFLEET" environments --environments "$TABLE" "$@"
  expect_rc "$WORK/$name" 2 "gpufleet environments $*"
  expect_contains "$WORK/$name.err" "$want" "gpufleet environments $*"
  [[ ! -s "$WORK/$name.out" ]] || { show "$WORK/$name"; fail "gpufleet environments $*: printed a table on error"; }
}
expect_error badgpu "unknown GPU model 'Z80'" --driver 550.54.15 --gpu Z80
expect_error notnvidia "GPU model 'MI300X' is not an NVIDIA GPU" --driver 550.54.15 --gpu MI300X
expect_error baddriver "--driver must be an NVIDIA driver version like 550.54.15" --driver 550.x --gpu A100
expect_error emptydriver "--driver must be an NVIDIA driver version" --driver '' --gpu A100
expect_error badcc "--cc must be a compute capability like 8.0" --driver 550.54.15 --cc eight
expect_error ccmajor "--cc must be a compute capability like 8.0" --driver 550.54.15 --cc 8
expect_error nodriver "--gpu and --cc need --driver too" --gpu A100
expect_error runnable "--runnable needs the node" --runnable
expect_error output "-o must be table or json, got 'yaml'" -o yaml
expect_error both "excludes" --driver 550.54.15 --gpu A100 --cc 8.0

# A table that is not there is bad input (exit 2), naming the file.
run "$WORK/missing" "$GPUFLEET" environments --environments "$WORK/nope.yaml"
expect_rc "$WORK/missing" 2 "gpufleet environments --environments (missing file)"
expect_contains "$WORK/missing.err" "$WORK/nope.yaml" "the missing table is named"

# --- help teaches -----------------------------------------------------------------------------------
run "$WORK/help" "$GPUFLEET" environments --help
expect_rc "$WORK/help" 0 "gpufleet environments --help"
for word in Examples: --driver --gpu --cc --runnable "-o json" nvidia-smi "environment: pytorch-2.5-cu124"; do
  expect_contains "$WORK/help.out" "$word" "gpufleet environments --help"
done
run "$WORK/top" "$GPUFLEET" --help
expect_contains "$WORK/top.out" "environments" "gpufleet --help lists the command"

echo "PASS: gpufleet environments ($want presets; compatibility, --runnable, JSON and errors)"
