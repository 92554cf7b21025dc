// What gpufleet-shim (shim_main.cc) reports to the launcher (launcher.cc) on its report pipe
// when the shim or the job fails before the job's exec: one ChildError, then the shim exits.
#pragma once

#include <signal.h>

namespace gpufleet::agent::shim {

enum class Stage : int {
  kStdio = 1, kChdir, kSetgroups, kSetgid, kSetuid, kExec, kSetsid, kCgroup, kParentDeath, kFork,
  kStoppingNotice, kSubreaper
};

// Sent by the launcher to the shim alone (not its group) when a stop of the part begins. The
// shim then outlives the job's own process until every process below it has gone, so that the
// agent's death during the stop's grace still takes what the job left running with it. (SIGRTMAX
// is the parent-death signal.)
inline int StoppingNotice() { return SIGRTMAX - 1; }

struct ChildError {
  Stage stage;
  int err;
};

}  // namespace gpufleet::agent::shim
