#!/usr/bin/env bash
# Given the repository's examples, expect every example cluster to carry prices (the README says
# they do: a run on each reports what it cost), and the README's CLI tour to write its files into
# its own folder ($out), never into the directory it runs from (the repository).
#
# Usage: examples_test.sh PATH/TO/gpufleet REPO_ROOT
source "$(dirname "$0")/lib.sh"

GPUFLEET="${1:?usage: examples_test.sh GPUFLEET REPO_ROOT}"
ROOT="${2:?usage: examples_test.sh GPUFLEET REPO_ROOT}"

for cluster in "$ROOT"/examples/clusters/*.yaml; do
  name="$(basename "$cluster" .yaml)"
  run "$WORK/$name" "$GPUFLEET" sim --trace "$ROOT/tests/data/traces/tiresias_small.csv" --cluster "$cluster" -o json
  expect_rc "$WORK/$name" 0 "gpufleet sim on examples/clusters/$name.yaml"
  "$PYTHON" - "$WORK/$name.out" <<'PY' || fail "examples/clusters/$name.yaml has no prices: a run on it costs nothing"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc.get("cost_usd", 0) > 0, doc.get("cost_usd")
PY
done

# The tour: every file it writes (redirections, --jobs-out, --plot) goes under $out.
"$PYTHON" - "$ROOT/README.md" <<'PY' || fail "the README's tour writes files into the directory it runs from"
import re, sys
text = open(sys.argv[1]).read()
tour = text[text.index("## A tour of the CLI"):]
block = re.search(r"```sh\n(.*?)```", tour, re.S).group(1)
assert re.search(r"^out=/tmp/\S+; mkdir -p \$out$", block, re.M), "the tour makes no folder of its own"
targets = re.findall(r"(?:--jobs-out|--plot|>)\s+(\S+)", block)
assert targets, "the tour writes nothing?"
bad = [t for t in targets if not t.startswith("$out/")]
assert not bad, bad
PY
echo PASS
