// What gpufleet-shim (shim_main.cc) reports to the launcher (launcher.cc) on its report pipe
// when the shim or the job fails before the job's exec: one ChildError, then the shim exits.
#pragma once

namespace gpufleet::agent::shim {

enum class Stage : int {
  kStdio = 1, kChdir, kSetgroups, kSetgid, kSetuid, kExec, kSetsid, kCgroup, kParentDeath, kFork
};

struct ChildError {
  Stage stage;
  int err;
};

}  // namespace gpufleet::agent::shim
