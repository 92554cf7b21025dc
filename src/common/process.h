// Child processes: detached ones that may outlive us (the local provider's instances) and
// commands run to completion (the exec provider's scripts, the burn-in suite). Plain functions;
// safe to call from any thread, but a process belongs to whoever started it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace gpufleet {

// A process that may outlive its parent. `start_ticks` (field 22 of /proc/PID/stat) tells a
// recorded pid apart from a later process that got the same number.
struct ProcessHandle {
  int pid = 0;  // also the process group and session id: it leads its own session
  uint64_t start_ticks = 0;
};

// Starts argv in its own session (setsid), stdin from /dev/null, stdout and stderr appended to
// `log_path`. Fails when the program cannot be executed.
Result<ProcessHandle> SpawnDetached(const std::vector<std::string>& argv, const std::string& log_path);

// Whether the process is still there (a zombie counts as gone, and is reaped when it is a child
// of this process). A pid now held by a different process counts as gone.
bool ProcessAlive(const ProcessHandle& process);

// Whether any process of the group is left (zombies included).
bool GroupAlive(int pgid);

// Signals the whole process group; a gone group is not an error.
void SignalGroup(int pgid, int sig);

struct CommandOptions {
  std::string stdin_text;
  Duration timeout = Duration::Seconds(120);
  std::map<std::string, std::string> env;  // added to this process's environment
  // Kill the command (SIGKILL) when this process dies first, so that a killed agent leaves no
  // burn-in running on GPUs it no longer answers for. (The signal follows the thread that forked:
  // RunCommand waits on that thread, so the command cannot outlive it otherwise.)
  bool die_with_parent = false;
};

struct CommandResult {
  int exit_code = -1;    // when it exited
  int signal = 0;        // when a signal ended it
  bool timed_out = false;  // killed (with its process group) when the timeout ran out
  std::string stdout_text, stderr_text;

  bool ok() const { return !timed_out && signal == 0 && exit_code == 0; }
  // "exited with code 3", "killed by signal 9", "timed out after 2s".
  std::string Describe(Duration timeout) const;
};

// Runs argv to completion in its own process group, feeding stdin_text and collecting stdout and
// stderr. Stops reading when the command exits, even if a process it left behind still holds its
// output open. Waits in real time; the timeout kills the whole group. Fails only when it cannot
// start the command.
Result<CommandResult> RunCommand(const std::vector<std::string>& argv, const CommandOptions& options);

}  // namespace gpufleet
