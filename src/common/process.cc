#include "common/process.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

#include "common/exec_child.h"
#include "common/fd.h"

extern char** environ;

namespace gpufleet {
namespace {

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }


// Moves fd to a number >= 3 (with FD_CLOEXEC) so that the child's dup2 onto 0..2 cannot clobber it.

// argv and envp prepared before fork, so that the child allocates nothing.
struct ExecPlan {
  std::vector<std::string> argv_storage, env_storage;
  std::vector<char*> argv, envp;

  ExecPlan(const std::vector<std::string>& args, const std::map<std::string, std::string>& extra_env) {
    argv_storage = args;
    for (auto& a : argv_storage) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::map<std::string, std::string> env;
    for (char** e = environ; e && *e; ++e) {
      std::string kv(*e);
      size_t eq = kv.find('=');
      if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    for (const auto& [k, v] : extra_env) env[k] = v;
    for (const auto& [k, v] : env) env_storage.push_back(k + "=" + v);
    for (auto& e : env_storage) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
};

// Runs in the child after fork: async-signal-safe calls only. Default signal dispositions, an
// empty mask, the given stdio, every other descriptor closed except the CLOEXEC error pipe.
// With `parent` > 0, the child is killed when that process dies (and exits at once if it died
// before the child could ask).
[[noreturn]] void ExecChild(const ExecPlan& plan, bool new_session, int in_fd, int out_fd, int err_fd,
                            int report_fd, pid_t parent) {
  exec_child::ResetSignals();
  int e = 0;
  if (parent > 0 && prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) {
    e = errno;
  } else if (parent > 0 && getppid() != parent) {
    e = ESRCH;  // the parent is gone already
  } else if (new_session ? setsid() < 0 : setpgid(0, 0) < 0) {
    e = errno;
  } else if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) {
    e = errno;
  } else if (int fd = exec_child::KeepOnlyStdioAndReport(report_fd); fd < 0) {
    _exit(127);  // no way left to report
  } else {
    report_fd = fd;
    environ = const_cast<char**>(plan.envp.data());
    execvp(plan.argv[0], plan.argv.data());
    e = errno;
  }
  ssize_t unused = write(report_fd, &e, sizeof e);
  (void)unused;
  _exit(127);
}

// Forks and execs; returns the pid once exec succeeded (the CLOEXEC pipe closes) or the errno
// the child reported.
Result<int> ForkExec(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                     bool new_session, int in_fd, int out_fd, int err_fd, bool die_with_parent = false) {
  if (argv.empty() || argv[0].empty()) return Status::InvalidArgument("no program to run");
  ExecPlan plan(argv, env);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) < 0) return Status::Unavailable("pipe: " + ErrnoText(errno));
  UniqueFd report_read(LiftFd(fds[0])), report_write(LiftFd(fds[1]));
  const pid_t parent = die_with_parent ? getpid() : 0;
  pid_t pid = fork();
  if (pid < 0) return Status::Unavailable("fork: " + ErrnoText(errno));
  if (pid == 0) ExecChild(plan, new_session, in_fd, out_fd, err_fd, report_write.get(), parent);
  report_write.Reset();
  int child_errno = 0;
  ssize_t n;
  while ((n = read(report_read.get(), &child_errno, sizeof child_errno)) < 0 && errno == EINTR) {
  }
  if (n > 0) {
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return Status::InvalidArgument("cannot run " + argv[0] + ": " + ErrnoText(child_errno));
  }
  return static_cast<int>(pid);
}

// Fields of /proc/PID/stat after the command name: state (3) and start time (22).
struct ProcStat {
  char state = 0;
  uint64_t start_ticks = 0;
};

std::optional<ProcStat> ReadProcStat(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return std::nullopt;
  std::string line;
  std::getline(in, line);
  size_t paren = line.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream rest(line.substr(paren + 1));
  ProcStat st;
  rest >> st.state;
  std::string field;
  for (int i = 4; i <= 21 && rest >> field; ++i) {
  }
  if (!(rest >> st.start_ticks)) return std::nullopt;
  return st;
}

void SetNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Reads what is there without blocking; returns false at EOF.
bool Drain(int fd, std::string& into) {
  char buf[8192];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      into.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0;  // EAGAIN: open and empty; 0: EOF
  }
}

}  // namespace

Result<ProcessHandle> SpawnDetached(const std::vector<std::string>& argv, const std::string& log_path) {
  UniqueFd log(LiftFd(open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)));
  if (log.get() < 0) return Status::Unavailable("open " + log_path + ": " + ErrnoText(errno));
  UniqueFd null(LiftFd(open("/dev/null", O_RDONLY | O_CLOEXEC)));
  if (null.get() < 0) return Status::Unavailable("open /dev/null: " + ErrnoText(errno));
  GF_ASSIGN_OR_RETURN(int pid, ForkExec(argv, {}, /*new_session=*/true, null.get(), log.get(), log.get()));
  ProcessHandle h;
  h.pid = pid;
  if (auto st = ReadProcStat(pid)) h.start_ticks = st->start_ticks;
  return h;
}

bool ProcessAlive(const ProcessHandle& process) {
  if (process.pid <= 0) return false;
  auto st = ReadProcStat(process.pid);
  if (!st) return false;
  if (process.start_ticks != 0 && st->start_ticks != process.start_ticks) return false;
  if (st->state == 'Z' || st->state == 'X') {
    // Ours to reap when we started it; otherwise its parent will.
    waitpid(process.pid, nullptr, WNOHANG);
    return false;
  }
  return true;
}

bool GroupAlive(int pgid) { return pgid > 0 && (kill(-pgid, 0) == 0 || errno == EPERM); }

void SignalGroup(int pgid, int sig) {
  if (pgid > 0) kill(-pgid, sig);
}

std::string CommandResult::Describe(Duration timeout) const {
  if (timed_out) return "timed out after " + FormatDuration(timeout) + " and was killed";
  if (signal != 0) return "was killed by signal " + std::to_string(signal);
  return "exited with code " + std::to_string(exit_code);
}

Result<CommandResult> RunCommand(const std::vector<std::string>& argv, const CommandOptions& options) {
  int in_fds[2], out_fds[2], err_fds[2];
  if (pipe2(in_fds, O_CLOEXEC) < 0) return Status::Unavailable("pipe: " + ErrnoText(errno));
  UniqueFd in_read(LiftFd(in_fds[0])), in_write(LiftFd(in_fds[1]));
  if (pipe2(out_fds, O_CLOEXEC) < 0) return Status::Unavailable("pipe: " + ErrnoText(errno));
  UniqueFd out_read(LiftFd(out_fds[0])), out_write(LiftFd(out_fds[1]));
  if (pipe2(err_fds, O_CLOEXEC) < 0) return Status::Unavailable("pipe: " + ErrnoText(errno));
  UniqueFd err_read(LiftFd(err_fds[0])), err_write(LiftFd(err_fds[1]));

  GF_ASSIGN_OR_RETURN(int pid, ForkExec(argv, options.env, /*new_session=*/false, in_read.get(),
                                        out_write.get(), err_write.get(), options.die_with_parent));
  in_read.Reset();
  out_write.Reset();
  err_write.Reset();
  SetNonBlocking(in_write.get());
  SetNonBlocking(out_read.get());
  SetNonBlocking(err_read.get());

  // A script that does not read its stdin must not kill us with SIGPIPE. Blocked in this thread
  // only (the process-wide disposition belongs to the program) and discarded afterwards.
  sigset_t pipe_set, old_mask, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
  sigpending(&pending);
  const bool pipe_was_pending = sigismember(&pending, SIGPIPE) == 1;

  CommandResult result;
  size_t written = 0;
  if (options.stdin_text.empty()) in_write.Reset();
  bool out_open = true, err_open = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.timeout.millis());
  int status = 0;
  bool exited = false;
  while (!exited) {
    pollfd fds[3];
    int n = 0;
    if (in_write.get() >= 0) fds[n++] = {in_write.get(), POLLOUT, 0};
    if (out_open) fds[n++] = {out_read.get(), POLLIN, 0};
    if (err_open) fds[n++] = {err_read.get(), POLLIN, 0};
    // Wake at least every 50 ms to notice the exit of a command whose output a leftover process
    // still holds open.
    poll(fds, n, 50);
    if (in_write.get() >= 0) {
      ssize_t w = write(in_write.get(), options.stdin_text.data() + written, options.stdin_text.size() - written);
      if (w > 0) written += static_cast<size_t>(w);
      if ((w < 0 && errno != EAGAIN && errno != EINTR) || written == options.stdin_text.size()) in_write.Reset();
    }
    if (out_open) out_open = Drain(out_read.get(), result.stdout_text);
    if (err_open) err_open = Drain(err_read.get(), result.stderr_text);
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      exited = true;
    } else if (std::chrono::steady_clock::now() >= deadline) {
      kill(-pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      result.timed_out = true;
      exited = true;
    }
  }
  if (out_open) Drain(out_read.get(), result.stdout_text);
  if (err_open) Drain(err_read.get(), result.stderr_text);
  if (!pipe_was_pending) {
    const struct timespec zero = {0, 0};
    while (sigtimedwait(&pipe_set, nullptr, &zero) > 0) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  } else if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  }
  return result;
}

}  // namespace gpufleet
