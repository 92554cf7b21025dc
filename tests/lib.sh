# Helpers for the tests/*.sh integration tests. Source it; then call the helpers below.
#
# Tests call python as "$PYTHON" (ctest passes the interpreter CMake found; default python3).
# Each test script runs under `set -euo pipefail`, works in its own temporary folder ($WORK,
# removed on exit), and fails with one clear line that starts with "FAIL:".
# To test a command's output for a pattern, let grep read all of it (`cmd | grep PAT >/dev/null`,
# not `grep -q`): under pipefail a `grep -q` that stops at the first match can leave the writer
# to die of SIGPIPE, and the pipeline then fails although it matched.

set -euo pipefail

PYTHON="${PYTHON:-python3}"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/gpufleet-test.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
# Jobs may run as another user (nobody, under a root agent): let them through to their folders.
chmod 711 "$WORK"
# The CLI remembers which of several controllers leads under $XDG_CACHE_HOME: the test's own.
export XDG_CACHE_HOME="$WORK/.cache"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# run OUT_PREFIX CMD...: runs CMD with no stdin, stdout to OUT_PREFIX.out, stderr to OUT_PREFIX.err;
# sets RC to its exit status (never fails itself).
run() {
  local prefix="$1"
  shift
  RC=0
  "$@" </dev/null >"$prefix.out" 2>"$prefix.err" || RC=$?
}

# show OUT_PREFIX: prints what a run said, for failure messages.
show() {
  echo "--- stdout ($1.out):" >&2
  head -c 4000 "$1.out" >&2 || true
  echo "--- stderr ($1.err):" >&2
  head -c 4000 "$1.err" >&2 || true
}

# expect_rc OUT_PREFIX WANT WHAT: fails unless the last run exited with WANT.
expect_rc() {
  if [[ "$RC" != "$2" ]]; then
    show "$1"
    fail "$3: exit status $RC, expected $2"
  fi
}

# expect_contains FILE TEXT WHAT: fails unless FILE contains TEXT (fixed string).
expect_contains() {
  if ! grep -qF -- "$2" "$1"; then
    echo "--- $1:" >&2
    head -c 4000 "$1" >&2 || true
    fail "$3: expected to find '$2' in $(basename "$1")"
  fi
}

# expect_same A B WHAT: byte-for-byte comparison.
expect_same() {
  [[ -s "$1" ]] || fail "$3: $1 is missing or empty"
  [[ -s "$2" ]] || fail "$3: $2 is missing or empty"
  if ! cmp -s "$1" "$2"; then
    diff -u "$1" "$2" | head -40 >&2 || true
    fail "$3: $(basename "$1") differs between runs (cmp: $(cmp "$1" "$2" 2>&1 || true))"
  fi
}

# wait_for_while PID LOG WHAT CMD...: polls CMD (every 0.1 s, up to 30 s) until it succeeds;
# fails, printing LOG, if process PID (a dev cluster, a server) exits first or time runs out.
wait_for_while() {
  local pid="$1" log="$2" what="$3" i
  shift 3
  for ((i = 0; i < 300; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; fail "the process $pid exited while waiting for $what"; }
    sleep 0.1
  done
  cat "$log" >&2
  fail "timed out waiting for $what"
}

# A free TCP port on 127.0.0.1 (the kernel's pick; free when asked).
free_local_port() {
  "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# dev_start GPUFLEET DATA_DIR PORT [FLAGS...]: `gpufleet dev` in $WORK (jobs run in the folder
# they were submitted from), its CLI config at $GPUFLEET_CONFIG, jobs as the current user, its
# output appended to $WORK/dev.log; DEV_PID is its pid. dev_stop ends it (TERM, then waits);
# dev_wait WHAT CMD... is wait_for_while on it.
DEV_PID=""
dev_start() {
  local gpufleet="$1" data="$2" port="$3"
  shift 3
  (cd "$WORK" && exec "$gpufleet" dev --data-dir "$data" --port "$port" --config "$GPUFLEET_CONFIG" \
    --job-user "$(id -un)" --allow-root-jobs "$@") >>"$WORK/dev.log" 2>&1 &
  DEV_PID=$!
}
dev_stop() {
  if [[ -n "$DEV_PID" ]]; then
    kill "$DEV_PID" 2>/dev/null || true
    wait "$DEV_PID" 2>/dev/null || true
    DEV_PID=""
  fi
}
dev_wait() { wait_for_while "$DEV_PID" "$WORK/dev.log" "$@"; }
