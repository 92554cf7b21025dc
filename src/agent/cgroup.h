// Cgroup v2 support for the launcher: each part of a job runs in a cgroup of its own under one
// root directory, so that the launcher can signal and kill every process the part started, even
// those that left the part's process group (setsid, double fork), and can cap its memory and CPU.
//
// CgroupTree is the root: it finds where cgroup v2 is mounted (/proc/self/mountinfo, fstype
// cgroup2: /sys/fs/cgroup on pure v2 systems, /sys/fs/cgroup/unified on hybrid ones) and this
// process's own cgroup (the "0::" line of /proc/self/cgroup), creates the root, and turns on the
// memory and cpu controllers for the parts where the parent cgroups offer them.
//
// The free functions act on one part's cgroup directory. They read and write cgroupfs only; the
// launcher decides when to call them. Pids read from cgroup.procs can in principle be reused
// between the read and the kill; cgroup.kill, where the kernel has it (5.14+), has no such race.
//
// Thread-safety: a CgroupTree is an immutable value after Open; the functions keep no state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace gpufleet::agent {

// Where the cgroup2 file system is mounted and which cgroup directory of it is mounted there
// ("/" unless a subtree was bind-mounted).
struct Cgroup2Mount {
  std::string mount_point;
  std::string root;
};

// Parses the text of /proc/self/mountinfo; NotFound when no cgroup2 file system is mounted.
Result<Cgroup2Mount> FindCgroup2Mount(std::string_view mountinfo);

// Parses the text of /proc/self/cgroup: the path of the "0::" line ("/", "/system.slice/x").
// NotFound when there is none (a pure cgroup v1 system).
Result<std::string> FindOwnCgroup(std::string_view proc_self_cgroup);

// A cgroup directory name for a part key: every byte outside [A-Za-z0-9._-] becomes '_', and
// the names "." and ".." become "_" and "__". "job-42.a1.p0#0" -> "job-42.a1.p0_0".
std::string CgroupNameForKey(std::string_view key);

struct CgroupLimits {
  int64_t memory_mib = 0;  // memory.max; 0 = no limit
  int64_t cpu_milli = 0;   // cpu.max, in thousandths of a CPU; 0 = no limit
};

class CgroupTree {
 public:
  // This process's own cgroup directory: <cgroup2 mount><own cgroup>, e.g.
  // "/sys/fs/cgroup/system.slice/gpufleet-agent.service". Reads /proc/self/mountinfo and
  // /proc/self/cgroup; NotFound when cgroup v2 is not mounted or this process is not in it.
  static Result<std::string> OwnDir();

  // The directory the launcher uses when no root is configured:
  // <cgroup2 mount><own cgroup>/gpufleet/<name>-<8 hex digits>, with `name` passed through
  // CgroupNameForKey ("default" when empty) and the digits a hash of `instance` (the agent's
  // state directory; no suffix when empty). Two agents of one name on one machine (two clusters,
  // two tests) get apart directories, so neither takes the other's parts for its own leftovers;
  // one agent restarted on its state directory finds its own again.
  static Result<std::string> AutoRoot(std::string_view name, std::string_view instance = {});

  // Creates `root` (and missing parents) and tries to turn on the memory and cpu controllers in
  // cgroup.subtree_control of every directory from `enable_from` (root itself or an ancestor;
  // empty = root's parent) down to root. Failures there are only remembered for LimitsNote: the
  // cgroup may not offer the controllers, or a directory on the way holds processes (cgroup v2
  // lets only leaf cgroups hold processes once a controller is on). Unavailable, with the
  // reason, when the root cannot be made or is not a writable cgroup v2 directory.
  static Result<CgroupTree> Open(const std::string& root, const std::string& enable_from = "");

  const std::string& root() const { return root_; }
  bool created_root() const { return created_root_; }  // Open made the root directory
  bool limits_memory() const { return limits_memory_; }
  bool limits_cpu() const { return limits_cpu_; }
  // "memory and cpu limits enforced", or which are not and why.
  std::string LimitsNote() const;

  // Makes a new cgroup for a part under the root and writes the limits this tree can enforce.
  // The name is CgroupNameForKey(key), with "-2", "-3", ... appended while a directory of that
  // name exists (another key with the same name, a part not yet cleaned up, a leftover for
  // KillLeftovers): an existing directory is never reused. Returns the directory. Unavailable
  // when it cannot be made or a limit cannot be written.
  Result<std::string> CreatePart(std::string_view key, const CgroupLimits& limits) const;

  // The cgroup directories directly under the root.
  std::vector<std::string> Children() const;

 private:
  std::string root_;
  bool created_root_ = false;
  bool limits_memory_ = false;
  bool limits_cpu_ = false;
  std::string memory_reason_, cpu_reason_;
};

// The pids listed in `dir`/cgroup.procs; empty when there are none or the file cannot be read.
std::vector<int> CgroupPids(const std::string& dir);

// True while `dir` or a cgroup below it holds a live process (cgroup.events "populated 1").
// False when the directory is gone.
bool CgroupPopulated(const std::string& dir);
// How many processes of the cgroup the kernel's OOM killer killed (memory.events' oom_kill; 0
// without a memory controller).
int64_t CgroupOomKills(const std::string& dir);

// Sends `sig` to every process in `dir`/cgroup.procs whose process group is not `skip_pgid`
// (those the caller reaches with kill(-pgid) already, so no process gets the signal twice).
void SignalCgroup(const std::string& dir, int sig, int skip_pgid);

// SIGKILLs every process in `dir` and below: one write of "1" to cgroup.kill, or where the
// kernel lacks it, SIGKILL to each listed pid, re-reading the list until it is empty (at most 64
// rounds). Returns the pids it saw in the list first.
std::vector<int> KillCgroup(const std::string& dir);

// Removes `dir` and the cgroups below it (rmdir, deepest first); OK when it is already gone.
// Unavailable (EBUSY) while processes remain; the caller kills first and may retry.
Status RemoveCgroup(const std::string& dir);

}  // namespace gpufleet::agent
