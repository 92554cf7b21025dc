// ProcessLauncher: runs the parts of jobs on this node as real processes and tells the agent
// when they end.
//
// Each part runs as the leader of its own session and process group (setsid), so a signal for
// the part reaches every process it started: Signal, Stop and the SIGKILL after a stop's grace
// go to the whole group (kill(-pgid, sig)). When a leader exits, whatever it left behind in its
// group is killed before the leader is reaped: a part's processes end with it. (A process that
// leaves the group with setsid/setpgid escapes this; containing those needs cgroups.)
//
// Time comes in as a parameter: Stop records a deadline, and Poll(now) sends SIGKILL to groups
// whose deadline has passed. The launcher reads no clock, so the caller decides how time moves.
//
// Children are reaped by pid (waitpid(pid, WNOHANG)), never with waitpid(-1): other children of
// the process are left alone. The destructor kills and reaps every part still running.
//
// Thread-safety: not thread-safe; one thread (the agent loop) owns a launcher. Launch is safe to
// call in a multithreaded process: between fork and exec the child uses async-signal-safe calls
// only, on data prepared before the fork.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace gpufleet::agent {

struct LaunchSpec {
  std::string key;                 // the caller's name for the part ("job-42/0"); unique while running
  std::vector<std::string> argv;   // argv[0] is looked up in PATH (execvp); must not be empty
  std::string workdir;             // created (with parents) if missing; empty = the agent's cwd
  std::map<std::string, std::string> env;  // added to (and overriding) the agent's environment
  // Run as this user (name): groups from initgroups' rules, then setgid, setuid; HOME, USER and
  // LOGNAME follow the user unless `env` sets them. Needs the agent to run as root. Empty = run as
  // the agent's own user. A workdir the launcher creates is handed to the user (chown).
  std::string user;
  // stdout and stderr are appended here (created with parents, mode 0644). Required.
  std::string log_path;
};

// How a part ended.
struct Exit {
  std::string key;
  int pid = 0;
  int exit_code = -1;    // the exit status when it exited; -1 when a signal killed it
  int signal = 0;        // the signal that killed it; 0 when it exited
  bool stopped = false;  // Stop was called for it
  bool killed_after_grace = false;  // Poll sent SIGKILL because the stop's grace ran out

  bool success() const { return signal == 0 && exit_code == 0; }
  // "exited with code 3", "killed by signal 9 (SIGKILL)"; with ", after a stop" or
  // ", killed after the stop's grace ran out" appended where they apply.
  std::string Describe() const;
};

struct Running {
  std::string key;
  int pid = 0;                  // also the process group id
  bool stopping = false;        // Stop was called
  std::optional<Time> kill_at;  // when Poll sends SIGKILL, for a part being stopped
};

class ProcessLauncher {
 public:
  ProcessLauncher() = default;
  ~ProcessLauncher();
  ProcessLauncher(const ProcessLauncher&) = delete;
  ProcessLauncher& operator=(const ProcessLauncher&) = delete;

  // Starts the part and returns its pid once exec has succeeded. Errors: InvalidArgument (empty
  // key or argv, no log path), AlreadyExists (key still running), FailedPrecondition (a user is
  // set but the agent is not root; unknown user), Unavailable (the log or workdir cannot be
  // made; fork failed) and InvalidArgument for a failure in the child before exec, with what
  // failed: "exec python3: No such file or directory", "chdir /data/run: Permission denied".
  Result<int> Launch(const LaunchSpec& spec);

  // Sends `sig` to the part's whole process group. NotFound for an unknown key.
  Status Signal(const std::string& key, int sig);

  // Sends `sig` to the group now; if the part is still running at `now + grace`, Poll kills the
  // group with SIGKILL. A second Stop sends its signal again and keeps the earlier deadline when
  // that is sooner. NotFound for an unknown key.
  Status Stop(const std::string& key, int sig, Duration grace, Time now);

  // Reaps the parts that have ended (without blocking), then sends SIGKILL to the groups whose
  // stop deadline is at or before `now`. Returns the ended parts in launch order.
  std::vector<Exit> Poll(Time now);

  // The parts not yet reaped, in launch order.
  std::vector<Running> List() const;

 private:
  struct Part {
    std::string key;
    int pid = 0;
    uint64_t seq = 0;  // launch order
    bool stopping = false;
    std::optional<Time> kill_at;
    bool killed = false;
  };
  std::map<std::string, Part> parts_;
  uint64_t next_seq_ = 0;
};

}  // namespace gpufleet::agent
