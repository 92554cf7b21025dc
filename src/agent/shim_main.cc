// gpufleet-shim: the process between the agent and a job part, for as long as the part runs.
// The agent starts it with posix_spawn (no copy of the agent's memory: a long-lived fork of a
// large, multithreaded agent made every later write of the agent fault and copy a page, and
// capped job starts near 20 a second); it becomes the leader of the part's process group, joins
// the part's cgroup, forks the job, switches to the job's user, enters its working directory and
// execs it, then waits and ends the way the job ended. It ignores the signals the agent sends
// the group for a graceful stop (they are for the job) and, when the agent dies, kills the part.
// It is the subreaper of what the job starts: processes orphaned below the job become its
// children and are reaped as they end. Once a stop has begun (the launcher's StoppingNotice), it
// waits for all of them after the job's own process has ended, so that the agent's death during
// the stop's grace still kills them; otherwise it ends with the job's process and the agent
// kills what is left.
//
//   gpufleet-shim PARENT_PID DEATH_SIGNAL SWITCH UID GID GROUPS WORKDIR JOIN PROCS KILL -- ARGV...
//
// SWITCH 1: setgroups(GROUPS: comma-separated gids, may be empty), setgid(GID), setuid(UID).
// WORKDIR empty: stay where started. JOIN, PROCS, KILL: 1 when descriptors 4 (the cgroup's
// cgroup.procs, to write), 5 (the same, to read) and 6 (cgroup.kill) are open, else 0.
// Descriptors 0, 1, 2: the job's stdin and its log; 3: the report pipe, on which a failure
// before the job's exec is written as {stage, errno} (launcher.cc reads it; the job's exec closes
// it). The environment is the job's.
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "agent/shim_protocol.h"
#include "common/exec_child.h"

namespace {

using gpufleet::agent::shim::ChildError;
using gpufleet::agent::shim::Stage;
namespace exec_child = gpufleet::exec_child;

constexpr int kReportFd = 3;
constexpr int kJoinFd = 4;
constexpr int kProcsFd = 5;
constexpr int kKillFd = 6;

int g_procs_fd = -1;
int g_kill_fd = -1;

[[noreturn]] void Fail(int err_fd, Stage stage) {
  ChildError e{stage, errno};
  ssize_t unused = write(err_fd, &e, sizeof e);
  (void)unused;
  _exit(127);
}

// Kills the part from inside: the whole cgroup with one write to cgroup.kill (the kernel signals
// every member, the shim included, before the write returns); else each pid cgroup.procs lists,
// re-read until only the shim is left; then the process group, which ends the shim too.
[[noreturn]] void KillPartAndExit() {
  if (g_kill_fd >= 0) {
    ssize_t unused = write(g_kill_fd, "1", 1);
    (void)unused;
  }
  if (g_procs_fd >= 0) {
    const pid_t self = getpid();
    for (int round = 0; round < 64; ++round) {
      bool others = false;
      if (lseek(g_procs_fd, 0, SEEK_SET) < 0) break;
      char buf[512];
      long pid = -1;
      for (ssize_t n; (n = read(g_procs_fd, buf, sizeof buf)) > 0;) {
        for (ssize_t i = 0; i < n; ++i) {
          if (buf[i] >= '0' && buf[i] <= '9') {
            pid = (pid < 0 ? 0 : pid * 10) + (buf[i] - '0');
          } else if (pid > 0) {
            if (pid != self) {
              kill(static_cast<pid_t>(pid), SIGKILL);
              others = true;
            }
            pid = -1;
          }
        }
      }
      if (pid > 0 && pid != self) {
        kill(static_cast<pid_t>(pid), SIGKILL);
        others = true;
      }
      if (!others) break;
    }
  }
  kill(0, SIGKILL);
  _exit(128 + SIGKILL);
}

void OnParentDeath(int) { KillPartAndExit(); }

volatile sig_atomic_t g_stopping = 0;
void OnStoppingNotice(int) { g_stopping = 1; }

// Every signal that would end or stop the shim is ignored, so that what the agent sends to the
// group for a graceful stop reaches only the job; SIGCHLD, SIGCONT and the fault signals of the
// shim's own code stay at their defaults.
bool Ignored(int sig) {
  switch (sig) {
    case SIGKILL: case SIGSTOP: case SIGCHLD: case SIGCONT: case SIGSEGV: case SIGBUS:
    case SIGILL: case SIGFPE: case SIGTRAP: case SIGSYS: case SIGABRT:
      return false;
    default:
      return true;
  }
}

long Number(const char* text) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0') return -1;
  return v;
}

struct Plan {
  pid_t parent = 0;
  int death_signal = 0;
  bool switch_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  const char* workdir = nullptr;
  char** argv = nullptr;
};

// The job: runs in the shim's child until exec.
[[noreturn]] void RunJob(const Plan& p) {
  exec_child::ResetSignals();
  const int err_fd = exec_child::KeepOnlyStdioAndReport(kReportFd);
  if (err_fd < 0) Fail(kReportFd, Stage::kStdio);
  if (p.switch_user) {
    if (setgroups(p.groups.size(), p.groups.data()) < 0) Fail(err_fd, Stage::kSetgroups);
    if (setgid(p.gid) < 0) Fail(err_fd, Stage::kSetgid);
    if (setuid(p.uid) < 0) Fail(err_fd, Stage::kSetuid);
  }
  // After the switch: a working directory the job's user could not enter itself must not be
  // handed to it by the agent's privileges (files below it would become reachable).
  if (p.workdir != nullptr && chdir(p.workdir) < 0) Fail(err_fd, Stage::kChdir);
  execvp(p.argv[0], p.argv);
  Fail(err_fd, Stage::kExec);
}

}  // namespace

int main(int argc, char** argv) {
  // Started with every signal blocked and at its default (posix_spawn), stdio and the report
  // pipe in place. Anything malformed here is the agent's mistake: report it as a stdio failure.
  if (argc < 13 || std::strcmp(argv[11], "--") != 0) {
    errno = EINVAL;
    Fail(kReportFd, Stage::kStdio);
  }
  Plan p;
  p.parent = static_cast<pid_t>(Number(argv[1]));
  p.death_signal = static_cast<int>(Number(argv[2]));
  p.switch_user = std::strcmp(argv[3], "1") == 0;
  p.uid = static_cast<uid_t>(Number(argv[4]));
  p.gid = static_cast<gid_t>(Number(argv[5]));
  for (const char* g = argv[6]; *g != '\0';) {
    char* end = nullptr;
    const unsigned long gid = std::strtoul(g, &end, 10);
    if (end == g || (*end != ',' && *end != '\0')) {
      errno = EINVAL;
      Fail(kReportFd, Stage::kSetgroups);
    }
    p.groups.push_back(static_cast<gid_t>(gid));
    g = *end == ',' ? end + 1 : end;
  }
  p.workdir = argv[7][0] != '\0' ? argv[7] : nullptr;
  const bool join = std::strcmp(argv[8], "1") == 0;
  g_procs_fd = std::strcmp(argv[9], "1") == 0 ? kProcsFd : -1;
  g_kill_fd = std::strcmp(argv[10], "1") == 0 ? kKillFd : -1;
  p.argv = argv + 12;
  if (p.parent <= 0 || p.death_signal <= 0) {
    errno = EINVAL;
    Fail(kReportFd, Stage::kStdio);
  }

  if (setsid() < 0) Fail(kReportFd, Stage::kSetsid);
  if (join && write(kJoinFd, "0", 1) != 1) Fail(kReportFd, Stage::kCgroup);
  if (join) close(kJoinFd);

  struct sigaction on_death;
  std::memset(&on_death, 0, sizeof on_death);
  on_death.sa_handler = OnParentDeath;
  sigfillset(&on_death.sa_mask);
  if (sigaction(p.death_signal, &on_death, nullptr) < 0) Fail(kReportFd, Stage::kParentDeath);
  const int notice = gpufleet::agent::shim::StoppingNotice();
  struct sigaction on_notice;
  std::memset(&on_notice, 0, sizeof on_notice);
  on_notice.sa_handler = OnStoppingNotice;
  on_notice.sa_flags = SA_RESTART;
  if (sigaction(notice, &on_notice, nullptr) < 0) Fail(kReportFd, Stage::kStoppingNotice);
  struct sigaction ign;
  std::memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != p.death_signal && sig != notice && Ignored(sig)) sigaction(sig, &ign, nullptr);
  }
  // Orphans below the job come here rather than to init (not inherited by the job).
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) Fail(kReportFd, Stage::kSubreaper);
  if (prctl(PR_SET_PDEATHSIG, p.death_signal, 0, 0, 0) < 0) Fail(kReportFd, Stage::kParentDeath);
  // The agent may have died before prctl: then no signal comes, and nobody waits for the part.
  if (getppid() != p.parent) KillPartAndExit();

  pid_t job = fork();
  if (job < 0) Fail(kReportFd, Stage::kFork);
  if (job == 0) RunJob(p);
  close(kReportFd);  // the job's copy tells the agent when its exec has happened

  sigset_t empty;
  sigemptyset(&empty);
  sigprocmask(SIG_SETMASK, &empty, nullptr);  // a parent-death signal may be handled from here on
  // Reap every child: the job, and what it orphaned (else they would stay zombies here). Once the
  // job's process has ended, wait on only while a stop is under way and children are left.
  int status = 0;
  bool job_ended = false;
  // (Only with a cgroup: without one the stop's signal reaches only the process group, and a
  // process below the job that left it would hold the part for the whole grace, then escape.)
  const bool may_linger = g_procs_fd >= 0 || g_kill_fd >= 0;
  for (;;) {
    if (job_ended && (g_stopping == 0 || !may_linger)) break;
    int st = 0;
    const pid_t got = waitpid(-1, &st, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == ECHILD && job_ended) break;
      _exit(127);
    }
    if (got == job) {
      status = st;
      job_ended = true;
    }
  }
  if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
  // End the way the job ended, so the agent sees the job's signal. No core dump of the shim.
  int sig = WTERMSIG(status);
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigaction(sig, &dfl, nullptr);
  kill(getpid(), sig);
  _exit(128 + sig);
}
