#!/usr/bin/env bash
# Given the walkthrough of docs/providers.md (a dev cluster with no nodes of its own and the
# example local pool), expect its commands to print what the page says they print: the run's
# lines, the pool's offers, and the instance it rented (its name, state and offer; its age and
# idle time vary). The expected output is read from the page itself.
#
# Usage: providers_walkthrough_test.sh PATH/TO/gpufleet REPO_ROOT
source "$(dirname "$0")/lib.sh"

GPUFLEET="${1:?usage: providers_walkthrough_test.sh GPUFLEET REPO_ROOT}"
ROOT="${2:?usage: providers_walkthrough_test.sh GPUFLEET REPO_ROOT}"
export GPUFLEET_CONFIG="$WORK/config.yaml"
unset GPUFLEET_SERVER GPUFLEET_TOKEN

PORT="$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
DEV_PID=""
cleanup() {
  if [[ -n "$DEV_PID" ]]; then
    kill "$DEV_PID" 2>/dev/null || true
    wait "$DEV_PID" 2>/dev/null || true
  fi
  # The rented agents outlive the controller, as cloud machines would: end the ones this test's
  # pool started (their data lives under $WORK).
  local pid
  for pid in $(pgrep -f -- "--data-dir $WORK/data/cloud/agents/" || true); do kill "$pid" 2>/dev/null || true; done
  for ((i = 0; i < 100; i++)); do pgrep -f -- "--data-dir $WORK/data/cloud/agents/" >/dev/null || break; sleep 0.1; done
  rm -rf "$WORK"
}
trap cleanup EXIT

"$GPUFLEET" dev --data-dir "$WORK/data" --port "$PORT" --agents 0 --pool "$ROOT/examples/pools/local.yaml" \
  --config "$GPUFLEET_CONFIG" >"$WORK/dev.log" 2>&1 &
DEV_PID=$!
for ((i = 0; i < 300; i++)); do
  "$GPUFLEET" pool >/dev/null 2>&1 && break
  kill -0 "$DEV_PID" 2>/dev/null || { cat "$WORK/dev.log" >&2; fail "gpufleet dev exited"; }
  sleep 0.1
done

# The walkthrough: each command line with the "# " lines after it, its expected output.
"$PYTHON" - "$ROOT/docs/providers.md" "$WORK/steps" <<'PY'
import os, re, sys
text = open(sys.argv[1]).read()
section = text[text.index("### Walkthrough on one machine"):]
block = re.findall(r"```sh\n(.*?)```", section, re.S)[1]
steps, out = [], sys.argv[2]
os.makedirs(out)
for line in block.splitlines():
    if line.startswith("# "):
        steps[-1][1].append(line[2:])
    elif line == "#":
        steps[-1][1].append("")
    elif line.strip():
        steps.append((line.split("   #")[0].split("  #")[0].strip(), []))
for i, (cmd, expect) in enumerate(steps):
    open(f"{out}/{i}.cmd", "w").write(cmd + "\n")
    open(f"{out}/{i}.expect", "w").write("\n".join(expect) + ("\n" if expect else ""))
PY
[[ -s "$WORK/steps/0.cmd" ]] || fail "no walkthrough found in docs/providers.md"

# Jobs run as the agents' job user: from a directory every user may enter.
for cmd in "$WORK"/steps/*.cmd; do
  step="${cmd%.cmd}"
  [[ -s "$step.expect" ]] || continue
  (cd /tmp && PATH="$(dirname "$GPUFLEET"):$PATH" bash "$cmd") >"$step.out" 2>&1 </dev/null ||
    { cat "$step.out" >&2; fail "walkthrough step '$(cat "$cmd")' failed"; }
  "$PYTHON" - "$step.expect" "$step.out" "$(cat "$cmd")" <<'PY' || fail "walkthrough step '$(cat "$cmd")' prints other than docs/providers.md says"
import re, sys
want = open(sys.argv[1]).read().splitlines()
got = open(sys.argv[2]).read().splitlines()
cmd = sys.argv[3]
def fail(msg):
    sys.stderr.write("--- %s\n--- the page says:\n%s\n--- it printed:\n%s\n%s\n" % (cmd, "\n".join(want), "\n".join(got), msg))
    sys.exit(1)
if " pool" in cmd:
    # Tables: rows compared on their columns, the instance rows on NAME, STATE and OFFER.
    def rows(lines):
        return [l.split() for l in lines if l.strip()]
    w, g = rows(want), rows(got)
    if len(w) != len(g):
        fail("not the same rows")
    instances = False
    for a, b in zip(w, g):
        if a[0] == "NAME":
            instances = True
        if (a[:3] if instances else a) != (b[:3] if instances else b):
            fail("row %s differs from %s" % (b, a))
else:
    # Lines of a gang's parts come in any order.
    if sorted(want) != sorted(got):
        fail("other lines")
PY
done
echo PASS
