// ProcessLauncher: runs the parts of jobs on this node as real processes and tells the agent
// when they end.
//
// Each part is two processes: a small supervising shim forked from the agent, and the job
// itself, which the shim forks and execs. The shim
//   - calls setsid: it leads the part's session and process group, and its pid is the part's
//     pid (Launch's result, List, Exit.pid), so the job and what it starts share the group;
//   - moves itself into the part's cgroup (below), so the job and all its descendants are born
//     there;
//   - asks the kernel for a signal (SIGRTMAX) when the thread that launched it dies
//     (PR_SET_PDEATHSIG) and then SIGKILLs the part's whole cgroup (cgroup.kill) or, without
//     cgroups, its process group: a `kill -9` of the agent takes its jobs with it, nothing is
//     left running unsupervised (so SIGRTMAX sent to a part kills it);
//   - ignores the signals a graceful stop sends to the group (SIGTERM, SIGINT, SIGHUP, SIGQUIT,
//     SIGUSR1, SIGUSR2, and every other catchable signal that would end or stop it, except the
//     fault signals of its own code), so it outlives the job to report how the job ended;
//     SIGKILL still ends it;
//   - is the subreaper of what the job starts (processes orphaned below the job become its
//     children, reaped as they end);
//   - waits for the job and ends the way the job ended: the same exit code, or the same signal
//     raised against itself (with core dumps off). Exit.exit_code and Exit.signal are the job's.
//     Once Stop has told it a stop began (a signal to the shim alone), it waits on after the
//     job's own process until every process below it has gone (or the grace's SIGKILL), so that
//     an agent killed during the grace still takes them with it; with a cgroup only (without
//     one, the stop's signal does not reach a process that left the group, which would hold the
//     part for the whole grace). A stop whose grace runs out while such processes live on is
//     reported as the SIGKILL that ended them, not the job's own exit.
// The job starts with default signal dispositions and an empty mask, stdin from /dev/null,
// stdout and stderr appended to the log, no other descriptors, in its workdir, as its user.
//
// Containment. With cgroup v2 (the default where it can be used, see LauncherOptions) each part
// has a cgroup of its own: Signal reaches every process in it, including those that left the
// group with setsid or a double fork; the SIGKILL after a stop's grace and the clean-up once the
// shim has exited kill the whole cgroup; memory and CPU limits apply where the cgroup offers the
// controllers. Without cgroups the process group is all there is: a process that calls setsid
// escapes stop and clean-up. CgroupNote() says which applies on this node and why.
//
// The job's environment is not the agent's (which may hold the agent's credentials). It gets:
//   PATH                         the agent's PATH, or "/usr/local/bin:/usr/bin:/bin" when unset
//   LANG, LANGUAGE, LC_*, TZ, TMPDIR   the agent's values, where set
//   HOME, USER, LOGNAME, SHELL   from the passwd entry of the user the part runs as
// and then LaunchSpec.env on top (which may override any of them).
//
// Users. A part runs as LaunchSpec.user, else LauncherOptions.default_user, else as the agent's
// own user. A part that would run as uid 0 is refused unless LauncherOptions.allow_root. An
// agent that is not root runs every part as itself and refuses any other user.
//
// Time comes in as a parameter: Stop records a deadline, and Poll(now) SIGKILLs the parts whose
// deadline has passed. The launcher reads no clock, so the caller decides how time moves.
//
// Children are reaped by pid (waitpid(pid, WNOHANG)), never with waitpid(-1): other children of
// the process are left alone. The destructor kills and reaps every part still running and
// removes their cgroups.
//
// Thread-safety: thread-safe; the agent launches and stops from its command thread while its main
// loop polls. An internal lock guards the table of parts; Launch holds it only to reserve the key
// and to record the part, not across the fork and exec, so a slow exec does not hold up Poll. A
// part is not in List or Poll until Launch has returned its pid. The
// thread that calls Launch must outlive the parts it launched: the kernel's parent-death signal
// follows the thread that forked the shim, not the process, so a launching thread that exits
// kills its parts. Launch is safe to call in a multithreaded process: between fork and exec the
// shim and the job use async-signal-safe calls only, on data prepared before the fork.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/time.h"

namespace gpufleet::agent {

class CgroupTree;

// mkdir -p: creates `dir` (a trailing "/" or "/." left out) and its missing parents (mode 0777
// less the umask) and returns the directories this call made, outermost first: not a level that
// existed or that another process made meanwhile (a ".." level always exists). One stat when
// `dir` exists; otherwise a stat per missing level and the first existing one, and a mkdir per
// missing level. The error names the path.
Result<std::vector<std::filesystem::path>> MakeDirectories(const std::filesystem::path& dir);

// Whether the user (uid, and its groups: the primary one first) could make the folder `dir`
// itself: it exists, or its nearest existing ancestor is a folder that user may write into (as
// the kernel decides by mode: the owner's bits for the owner, else the group's for a member,
// else the others'). `dir` should be resolved (ResolvePath) so that the walk is the kernel's. An
// agent that runs as root makes the folders a job names only where the job's user could, so that
// it never hands that user a folder in another's place (another user's home, /etc). Empty when it
// could; else the nearest existing ancestor, for the error. This is the early check for a clear
// message (ACLs and read-only mounts are not read): the making itself goes through
// RunAsFsIdentity, where the kernel decides.
std::string NotMakeableBy(const std::filesystem::path& dir, uid_t uid, const std::vector<gid_t>& groups);

// `path` made absolute, with links and ".." resolved as far as it exists (std::filesystem::
// weakly_canonical); a trailing separator left out.
Result<std::filesystem::path> ResolvePath(const std::string& path);

// The groups of `user` (the primary group `gid` first), for NotMakeableBy.
std::vector<gid_t> GroupsOf(const std::string& user, gid_t gid);

// Who the kernel takes the calling thread to be when it reads and writes files.
struct FsIdentity {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups (GroupsOf's list will do)
};

// Runs `fn` on the calling thread as `who` for the file system: the thread's file-system uid and
// gid and its supplementary groups are that user's while `fn` runs (root's powers over files go
// with them: the kernel checks every access by the user's permissions) and are given back after.
// Linux keeps these per thread; they are set by system calls of their own, not through the C
// library's setgroups, which would change every thread of the agent. A root agent makes the
// folders a job names this way: each level is looked up, made and changed (chmod) with the
// job's own rights at that instant, so a link the user swaps in between a check and the making
// leads only where that user could write anyway, and what is made is the user's without a chown.
// Needs root (CAP_SETUID and CAP_SETGID) unless `who` is the caller; Unavailable, `fn` not run,
// when the switch is refused. A thread that could not be given its identity back aborts the
// process rather than go on as someone else. A thread `fn` starts would keep the user's identity
// (a new thread takes its creator's): `fn` should start none.
Status RunAsFsIdentity(const FsIdentity& who, const std::function<void()>& fn);

struct LauncherOptions {
  // The user (name) a part runs as when its LaunchSpec.user is empty; "" = the agent's own user.
  std::string default_user;
  // Let parts run as uid 0 (the user root, any other uid-0 account, or the agent's own user when
  // the agent is root and no user is given). Off by default: a job then fails to launch with
  // FailedPrecondition instead of running as root.
  bool allow_root = false;
  // When not empty, a part's workdir (when it has one) must lie in one of these directories,
  // compared after resolving "..", "." and the symlinks of the part of the path that exists.
  std::vector<std::string> workdir_roots;
  // The cgroup v2 directory under which each part gets a cgroup. "" = <the cgroup2 mount><this
  // process's cgroup>/gpufleet/<name>; "off" = no cgroups, process groups only; an absolute path
  // = that directory (created when missing). When cgroups cannot be used (no cgroup2 mount, no
  // permission, read-only), the launcher falls back to process groups; see CgroupNote().
  std::string cgroup_root;
  // Names this launcher's automatic cgroup root, so that two launchers in one process (the
  // agents of a dev cluster) get separate subtrees; "" = "default". KillLeftovers treats every
  // cgroup under the root as its own, so two live launchers must not share a root.
  std::string name;
  // When set, a small record per running part (pid, the pid's start time, process group,
  // cgroup) is kept in this directory from launch until the part is reaped, so that
  // KillLeftovers can find the parts of an agent that died without cleaning up.
  std::string state_dir;
  // The gpufleet-shim executable that stands between the agent and each part (shim_main.cc);
  // "" = next to this executable, else where the build put it.
  std::string shim_path;
};

struct LaunchSpec {
  std::string key;                 // the caller's name for the part ("job-42/0"); unique while running
  std::vector<std::string> argv;   // argv[0] is looked up in PATH (execvp); must not be empty
  std::string workdir;             // created (with parents) if missing; empty = the agent's cwd
  // Added to (and overriding) the environment described at the top of this file. Keys must be
  // non-empty and free of '='; no key or value, and no argv entry, may contain a NUL byte.
  std::map<std::string, std::string> env;
  // Run as this user (name): groups from initgroups' rules, then setgid, setuid. Empty = the
  // launcher's default_user. Switching users needs the agent to run as root. A missing workdir
  // is then made as that user (RunAsFsIdentity), and only where that user could make it.
  std::string user;
  // stdout and stderr are appended here (created with parents, mode 0644). Required.
  std::string log_path;
  // Caps for the part's cgroup (memory.max, cpu.max); 0 = none. Applied only where the cgroup
  // offers the controller (CgroupNote() says whether it does); ignored otherwise.
  int64_t memory_limit_mib = 0;
  int64_t cpu_milli = 0;  // thousandths of a CPU: 1500 = one and a half CPUs
};

// How a part ended.
struct Exit {
  std::string key;
  int pid = 0;
  int exit_code = -1;    // the exit status when it exited; -1 when a signal killed it
  int signal = 0;        // the signal that killed it; 0 when it exited
  bool stopped = false;  // Stop was called for it
  bool killed_after_grace = false;  // Poll sent SIGKILL because the stop's grace ran out
  bool oom_killed = false;  // the kernel's OOM killer killed a process of its cgroup (its memory limit)

  bool success() const { return signal == 0 && exit_code == 0; }
  // "exited with code 3", "killed by signal 9 (SIGKILL)"; with ", after a stop" or
  // ", killed after the stop's grace ran out" appended where they apply.
  std::string Describe() const;
};

struct Running {
  std::string key;
  int pid = 0;                  // the shim's pid, also the process group id
  bool stopping = false;        // Stop was called
  std::optional<Time> kill_at;  // when Poll sends SIGKILL, for a part being stopped
};

class ProcessLauncher {
 public:
  explicit ProcessLauncher(LauncherOptions options = {});
  ~ProcessLauncher();
  ProcessLauncher(const ProcessLauncher&) = delete;
  ProcessLauncher& operator=(const ProcessLauncher&) = delete;

  // Starts the part and returns its pid once the job's exec has succeeded. Errors, with nothing
  // left running: InvalidArgument (empty key or argv, no log path, a NUL byte in argv or env, a
  // bad env key, a negative limit, a workdir outside the allowed roots), AlreadyExists (key
  // still running), FailedPrecondition (unknown user; a user other than the agent's own when
  // the agent is not root; uid 0 without allow_root), Unavailable (the log, workdir, state
  // record or cgroup cannot be made; fork failed) and InvalidArgument for a failure in the
  // shim or the job before exec, with what failed: "exec python3: No such file or directory",
  // "chdir /data/run: Permission denied".
  Result<int> Launch(const LaunchSpec& spec) GF_EXCLUDES(mu_);

  // Sends `sig` to the part's process group and to every other process in its cgroup (each
  // process once). The shim ignores the usual stop signals, so the part's pid stays until Poll
  // reaps it. NotFound for an unknown key.
  Status Signal(const std::string& key, int sig) GF_EXCLUDES(mu_);

  // Signals the part now; if it is still running at `now + grace`, Poll SIGKILLs its cgroup and
  // group. A second Stop sends its signal again and keeps the earlier deadline when that is
  // sooner. NotFound for an unknown key.
  Status Stop(const std::string& key, int sig, Duration grace, Time now) GF_EXCLUDES(mu_);

  // Reaps the parts that have ended (without blocking) and kills whatever they left in their
  // cgroup and group, then SIGKILLs the parts whose stop deadline is at or before `now`.
  // Returns the ended parts in launch order.
  std::vector<Exit> Poll(Time now) GF_EXCLUDES(mu_);

  // The parts not yet reaped, in launch order.
  std::vector<Running> List() const GF_EXCLUDES(mu_);

  // For an agent that starts again after a crash: SIGKILLs and removes every cgroup under this
  // launcher's cgroup root that holds a part this launcher did not start, and every process
  // group whose record in state_dir names a pid that still runs with the recorded start time
  // (so a reused pid is never hit). Records and cgroups of parts that are gone are removed
  // quietly. Returns one line per thing killed. Blocks briefly (bounded) while killed cgroups
  // empty out.
  std::vector<std::string> KillLeftovers() GF_EXCLUDES(mu_);

  // Whether parts are contained by cgroups and whether limits are enforced, and why not:
  // "cgroup v2 at /sys/fs/cgroup/unified/gpufleet/dev-1: parts are contained; memory/cpu limits
  // not enforced: the cgroup offers no memory or cpu controller".
  std::string CgroupNote() const;
  // Which of parts' memory and cpu limits are enforced (cgroup v2 with that controller).
  bool MemoryLimitsEnforced() const;
  bool CpuLimitsEnforced() const;

 private:
  struct Part {
    std::string key;
    int pid = 0;
    uint64_t seq = 0;  // launch order
    bool stopping = false;
    std::optional<Time> kill_at;
    bool killed = false;
    std::string cgroup;  // the part's cgroup directory; empty without cgroups
    std::string record;  // the state record's path; empty without a state_dir
  };
  static void KillPart(const Part& part);
  void RetryCgroupRemovals() GF_REQUIRES(mu_);
  Status SignalLocked(const std::string& key, int sig) GF_REQUIRES(mu_);
  // Removes the cgroup of a part that did not start, or keeps it for a later try.
  void DropCgroup(const std::string& cgroup) GF_EXCLUDES(mu_);

  // Set in the constructor and not changed after: read without the lock.
  const LauncherOptions options_;
  const std::string shim_path_;  // FindShim(options_.shim_path)
  std::unique_ptr<CgroupTree> cgroups_;  // null when parts are not put in cgroups
  std::string cgroup_note_;

  mutable Mutex mu_;
  std::map<std::string, Part> parts_ GF_GUARDED_BY(mu_);
  std::set<std::string> launching_ GF_GUARDED_BY(mu_);  // keys whose Launch is under way
  std::vector<std::string> cgroups_to_remove_ GF_GUARDED_BY(mu_);  // of reaped parts, still busy at the time
  uint64_t next_seq_ GF_GUARDED_BY(mu_) = 0;
};

}  // namespace gpufleet::agent
