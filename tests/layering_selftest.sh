#!/usr/bin/env bash
# Given small src/ trees that break one layering rule each, expect scripts/check_layering.py to
# exit 1 and name the file and line; given a tree that follows the rules (including the things
# that only look like violations), expect exit 0.
#
# Usage: layering_selftest.sh PATH/TO/check_layering.py
source "$(dirname "$0")/lib.sh"

CHECKER="${1:?usage: layering_selftest.sh PATH/TO/check_layering.py}"
[[ -f "$CHECKER" ]] || fail "no checker at $CHECKER"

# A tree that follows every rule.
clean_tree() {
  local src="$1"
  mkdir -p "$src"/{common,model,sched/policy,testing,sim,cli}
  printf '#pragma once\nnamespace gpufleet {}\n' >"$src/common/status.h"
  printf '#pragma once\n#include "common/status.h"\n#include <string>\n' >"$src/model/types.h"
  cat >"$src/sched/clock.h" <<'CC'
#pragma once
#include <chrono>
#include "common/status.h"
#include "model/types.h"
// The live controller wraps std::chrono::steady_clock; the core never calls time(nullptr) itself.
class Clock { public: virtual ~Clock() = default; };
class Harness { public: Clock& clock() { return *clock_; } int time() const; Clock* clock_; };
inline const char* kNote = "not std::chrono::system_clock";
inline long kDayMs = 86'400'000;
inline int Use(Harness& h) { h.clock(); return h.time(); }
CC
  printf '#include "sched/clock.h"\n#include "sched/policy/fifo.h"\n#include "CLI/CLI.hpp"\n' >"$src/sched/policy/fifo.cc"
  printf '#pragma once\n#include "sched/clock.h"\n' >"$src/sched/policy/fifo.h"
  printf '#include "sched/policy/fifo.h"\n#include "testing/fakes.h"\n' >"$src/sched/policy/fifo_test.cc"
  printf '#pragma once\n#include "sched/clock.h"\n#include <chrono>\n' >"$src/testing/fakes.h"
  printf '#include "testing/fakes.h"\n#include <ctime>\nlong Now() { return std::time(nullptr); }\n' >"$src/testing/fakes.cc"
  printf '#include "sched/clock.h"\n#include "model/types.h"\n#include "sim/local.h"\n#include "local.h"\n' >"$src/sim/simulator.cc"
  printf '#pragma once\n' >"$src/sim/local.h"
  printf '#include "sim/local.h"\n#include "sched/clock.h"\n' >"$src/cli/cli.cc"
  printf '#include "cli/cli.h"\nint main() {}\n' >"$src/main.cc"
}

n=0
# expect_violation FILE_TO_ADD LINE EXPECTED_TEXT: writes stdin to FILE_TO_ADD in a fresh clean
# tree and expects the checker to fail with "FILE_TO_ADD:LINE:" and EXPECTED_TEXT.
expect_violation() {
  local file="$1" line="$2" text="$3"
  n=$((n + 1))
  local src="$WORK/case$n/src"
  clean_tree "$src"
  mkdir -p "$(dirname "$src/$file")"
  cat >"$src/$file"
  run "$WORK/case$n" "$PYTHON" "$CHECKER" "$src"
  expect_rc "$WORK/case$n" 1 "case $n ($file)"
  expect_contains "$WORK/case$n.out" "$src/$file:$line:" "case $n ($file) names file:line"
  expect_contains "$WORK/case$n.out" "$text" "case $n ($file) explains"
}

# The clean tree passes.
clean_tree "$WORK/clean/src"
run "$WORK/clean" "$PYTHON" "$CHECKER" "$WORK/clean/src"
expect_rc "$WORK/clean" 0 "a tree that follows the rules"

# The core reaches outward.
expect_violation sched/scheduler.cc 3 'may not include "sim/simulator.h"' <<'CC'
#include "sched/clock.h"

#include "sim/simulator.h"
CC
expect_violation sched/policy/las.cc 2 'may not include "cli/cli.h"' <<'CC'
#include "sched/clock.h"
#include "cli/cli.h"
CC
expect_violation model/types.cc 1 'may not include "sched/clock.h"' <<'CC'
#include "sched/clock.h"
CC
expect_violation common/status.cc 1 'may not include "model/types.h"' <<'CC'
#  include "model/types.h"
CC
expect_violation sim/trace.cc 1 'may not include "cli/cli.h"' <<'CC'
#include "cli/cli.h"
CC
expect_violation testing/fakes2.cc 1 'may not include "sim/local.h"' <<'CC'
#include "sim/local.h"
CC
# Fakes are for tests: production code of sched may not include them.
expect_violation cli/db.cc 2 'may not include <libpq-fe.h>: only src/store/' <<'CC'
#include "sim/local.h"
#include <libpq-fe.h>
CC
expect_violation sched/policy/fair_share.cc 1 'may not include "testing/fakes.h"' <<'CC'
#include "testing/fakes.h"
CC
expect_violation main.cc 2 'may not include "sim/local.h"' <<'CC'
#include "cli/cli.h"
#include "sim/local.h"
CC
# A new folder needs a rule.
expect_violation queue/broker.cc 1 'no layering rule for src/queue/' <<'CC'
#include "common/status.h"
CC
# The store must not reach the scheduler core, the agent must not reach the controller.
expect_violation store/sqlite_store.cc 1 'may not include "sched/scheduler.h"' <<'CC'
#include "sched/scheduler.h"
CC
expect_violation agent/agent.cc 1 'may not include "controller/engine.h"' <<'CC'
#include "controller/engine.h"
CC
# The core reads the OS clock.
expect_violation sched/scheduler.cc 4 'steady_clock' <<'CC'
#include <chrono>
#include "sched/clock.h"
int64_t Now() {
  return std::chrono::steady_clock::now().time_since_epoch().count();
}
CC
expect_violation sched/policy/sjf.cc 2 'system_clock' <<'CC'
#include <chrono>
using Wall = std::chrono::system_clock;
CC
expect_violation sched/cluster_view.cc 3 'time(' <<'CC'
#include <ctime>
// Comments may say time(nullptr); code may not:
long Stamp() { return time(nullptr); }
CC
expect_violation sched/policy/priority.cc 3 'std::time(' <<'CC'
#include <ctime>
long Stamp() {
  return std::time(nullptr) + 1;
}
CC
expect_violation sched/event.h 2 'gettimeofday(' <<'CC'
#include <sys/time.h>
inline void F(timeval* tv) { gettimeofday(tv, nullptr); }
CC

# Several violations: every one is listed.
src="$WORK/many/src"
clean_tree "$src"
printf '#include "sim/local.h"\n#include "cli/cli.h"\n' >"$src/sched/two.cc"
run "$WORK/many" "$PYTHON" "$CHECKER" "$src"
expect_rc "$WORK/many" 1 "two violations"
expect_contains "$WORK/many.out" "$src/sched/two.cc:1:" "first of two violations"
expect_contains "$WORK/many.out" "$src/sched/two.cc:2:" "second of two violations"
expect_contains "$WORK/many.out" "2 violation(s)" "violation count"

# Bad usage is not a pass.
run "$WORK/usage" "$PYTHON" "$CHECKER" "$WORK/no-such-dir"
expect_rc "$WORK/usage" 2 "a missing src dir"

echo "PASS: check_layering.py: clean tree passes, $n violating trees fail with file:line"
