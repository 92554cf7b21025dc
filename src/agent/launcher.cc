#include "agent/launcher.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "common/fd.h"

extern char** environ;

namespace gpufleet::agent {
namespace {

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

const char* SignalName(int sig) {
  switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGUSR1: return "SIGUSR1";
    case SIGSEGV: return "SIGSEGV";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGXCPU: return "SIGXCPU";
    default: return nullptr;
  }
}

// What the child failed at before exec; sent to the parent over the CLOEXEC pipe.
enum class Stage : int { kStdio = 1, kChdir, kSetgroups, kSetgid, kSetuid, kExec };

struct ChildError {
  Stage stage;
  int err;
};



// Everything the child needs, prepared before fork so that the child allocates nothing.
struct ChildPlan {
  std::vector<std::string> argv_storage, env_storage;
  std::vector<char*> argv, envp;
  const char* workdir = nullptr;
  bool switch_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  int log_fd = -1, null_fd = -1, err_fd = -1;
};

[[noreturn]] void ChildFail(int err_fd, Stage stage) {
  ChildError e{stage, errno};
  ssize_t unused = write(err_fd, &e, sizeof e);
  (void)unused;
  _exit(127);
}

// Runs in the child between fork and exec: async-signal-safe calls only.
[[noreturn]] void RunChild(const ChildPlan& p) {
  // Default dispositions and an empty mask: the agent's own signal handling must not leak into
  // the job (an ignored SIGPIPE or a blocked SIGTERM would change how it dies).
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);
  }
  sigset_t empty;
  sigemptyset(&empty);
  sigprocmask(SIG_SETMASK, &empty, nullptr);

  if (setsid() < 0) ChildFail(p.err_fd, Stage::kStdio);
  if (dup2(p.null_fd, 0) < 0 || dup2(p.log_fd, 1) < 0 || dup2(p.log_fd, 2) < 0) {
    ChildFail(p.err_fd, Stage::kStdio);
  }
  // Keep only 0..2 and the error pipe. The pipe moves to 3 (dup2 clears FD_CLOEXEC; set it again).
  int err_fd = p.err_fd;
  if (err_fd != 3) {
    if (dup2(err_fd, 3) < 0) ChildFail(err_fd, Stage::kStdio);
    err_fd = 3;
  }
  if (fcntl(err_fd, F_SETFD, FD_CLOEXEC) < 0) ChildFail(err_fd, Stage::kStdio);
  if (close_range(4, ~0U, 0) < 0) {
    for (int fd = 4; fd < 65536; ++fd) close(fd);
  }
  if (p.workdir != nullptr && chdir(p.workdir) < 0) ChildFail(err_fd, Stage::kChdir);
  if (p.switch_user) {
    if (setgroups(p.groups.size(), p.groups.data()) < 0) ChildFail(err_fd, Stage::kSetgroups);
    if (setgid(p.gid) < 0) ChildFail(err_fd, Stage::kSetgid);
    if (setuid(p.uid) < 0) ChildFail(err_fd, Stage::kSetuid);
  }
  environ = const_cast<char**>(p.envp.data());
  execvp(p.argv[0], p.argv.data());
  ChildFail(err_fd, Stage::kExec);
}

std::string DescribeChildError(const ChildError& e, const LaunchSpec& spec) {
  std::string what;
  switch (e.stage) {
    case Stage::kStdio: what = "redirect stdio for " + spec.argv[0]; break;
    case Stage::kChdir: what = "chdir " + spec.workdir; break;
    case Stage::kSetgroups: what = "setgroups for user " + spec.user; break;
    case Stage::kSetgid: what = "setgid for user " + spec.user; break;
    case Stage::kSetuid: what = "setuid to user " + spec.user; break;
    case Stage::kExec: what = "exec " + spec.argv[0]; break;
  }
  return what + ": " + ErrnoText(e.err);
}

// Creates `dir` and its missing parents; returns the directories it created, outermost first.
Result<std::vector<std::filesystem::path>> MakeDirs(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> missing;
  for (std::filesystem::path p = dir; !p.empty(); p = p.parent_path()) {
    std::error_code ec;
    if (std::filesystem::exists(p, ec)) break;
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  std::reverse(missing.begin(), missing.end());
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::Unavailable("create directory " + dir.string() + ": " + ec.message());
  return missing;
}

void ReapBlocking(int pid) {
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

std::string Exit::Describe() const {
  std::string s;
  if (signal != 0) {
    const char* name = SignalName(signal);
    s = "killed by signal " + std::to_string(signal) + (name ? std::string(" (") + name + ")" : "");
  } else {
    s = "exited with code " + std::to_string(exit_code);
  }
  if (killed_after_grace) {
    s += ", killed after the stop's grace ran out";
  } else if (stopped) {
    s += ", after a stop";
  }
  return s;
}

ProcessLauncher::~ProcessLauncher() {
  for (auto& [key, part] : parts_) {
    kill(-part.pid, SIGKILL);
    ReapBlocking(part.pid);
  }
}

Result<int> ProcessLauncher::Launch(const LaunchSpec& spec) {
  if (spec.key.empty()) return Status::InvalidArgument("launch: the key must not be empty");
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return Status::InvalidArgument("launch " + spec.key + ": argv must name a program");
  }
  if (spec.log_path.empty()) {
    return Status::InvalidArgument("launch " + spec.key + ": a log path is required");
  }
  if (parts_.count(spec.key)) {
    return Status::AlreadyExists("launch " + spec.key + ": a part with this key is running");
  }

  ChildPlan plan;
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    env[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
  }

  if (!spec.user.empty()) {
    if (geteuid() != 0) {
      return Status::FailedPrecondition("launch " + spec.key + ": running a job as user '" +
                                        spec.user + "' needs the agent to run as root");
    }
    std::vector<char> buf(16384);
    struct passwd pw;
    struct passwd* found = nullptr;
    int rc = getpwnam_r(spec.user.c_str(), &pw, buf.data(), buf.size(), &found);
    if (rc != 0 || found == nullptr) {
      return Status::FailedPrecondition("launch " + spec.key + ": unknown user '" + spec.user +
                                        "'" + (rc != 0 ? ": " + ErrnoText(rc) : ""));
    }
    plan.switch_user = true;
    plan.uid = pw.pw_uid;
    plan.gid = pw.pw_gid;
    // initgroups' list, computed here because initgroups itself is not safe after fork.
    int n = 64;
    plan.groups.resize(n);
    while (getgrouplist(pw.pw_name, pw.pw_gid, plan.groups.data(), &n) < 0) {
      plan.groups.resize(n);
    }
    plan.groups.resize(n);
    env["HOME"] = pw.pw_dir;
    env["USER"] = pw.pw_name;
    env["LOGNAME"] = pw.pw_name;
  }
  for (const auto& [k, v] : spec.env) env[k] = v;

  for (const auto& a : spec.argv) plan.argv_storage.push_back(a);
  for (auto& a : plan.argv_storage) plan.argv.push_back(a.data());
  plan.argv.push_back(nullptr);
  for (const auto& [k, v] : env) plan.env_storage.push_back(k + "=" + v);
  for (auto& e : plan.env_storage) plan.envp.push_back(e.data());
  plan.envp.push_back(nullptr);

  if (!spec.workdir.empty()) {
    GF_ASSIGN_OR_RETURN(auto created, MakeDirs(spec.workdir));
    if (plan.switch_user) {
      for (const auto& dir : created) {
        if (chown(dir.c_str(), plan.uid, plan.gid) < 0) {
          return Status::Unavailable("chown " + dir.string() + " to " + spec.user + ": " +
                                     ErrnoText(errno));
        }
      }
    }
    plan.workdir = spec.workdir.c_str();
  }

  std::filesystem::path log_dir = std::filesystem::path(spec.log_path).parent_path();
  if (!log_dir.empty()) {
    GF_ASSIGN_OR_RETURN(auto unused, MakeDirs(log_dir));
    (void)unused;
  }
  UniqueFd log_fd(LiftFd(open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)));
  if (log_fd.get() < 0) {
    return Status::Unavailable("open log " + spec.log_path + ": " + ErrnoText(errno));
  }
  UniqueFd null_fd(LiftFd(open("/dev/null", O_RDONLY | O_CLOEXEC)));
  if (null_fd.get() < 0) return Status::Unavailable("open /dev/null: " + ErrnoText(errno));
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) < 0) return Status::Unavailable("pipe: " + ErrnoText(errno));
  UniqueFd err_read(LiftFd(pipe_fds[0]));
  UniqueFd err_write(LiftFd(pipe_fds[1]));
  if (err_read.get() < 0 || err_write.get() < 0) {
    return Status::Unavailable("pipe: " + ErrnoText(errno));
  }
  plan.log_fd = log_fd.get();
  plan.null_fd = null_fd.get();
  plan.err_fd = err_write.get();

  pid_t pid = fork();
  if (pid < 0) return Status::Unavailable("fork for " + spec.key + ": " + ErrnoText(errno));
  if (pid == 0) RunChild(plan);

  err_write.Reset();
  ChildError child_error{};
  size_t got = 0;
  while (got < sizeof child_error) {
    ssize_t n = read(err_read.get(), reinterpret_cast<char*>(&child_error) + got,
                     sizeof child_error - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > 0) {
    // The child failed before exec and exits at once; reap it so no zombie stays behind.
    ReapBlocking(pid);
    if (got < sizeof child_error) {
      return Status::Internal("launch " + spec.key + ": short error report from the child");
    }
    return Status::InvalidArgument(DescribeChildError(child_error, spec));
  }

  Part part;
  part.key = spec.key;
  part.pid = pid;
  part.seq = next_seq_++;
  parts_.emplace(spec.key, std::move(part));
  return static_cast<int>(pid);
}

Status ProcessLauncher::Signal(const std::string& key, int sig) {
  auto it = parts_.find(key);
  if (it == parts_.end()) return Status::NotFound("no running part " + key);
  // The leader is not reaped until Poll, so its pid (the group id) cannot have been reused.
  if (kill(-it->second.pid, sig) < 0 && errno != ESRCH) {
    return Status::Internal("kill " + key + " (group " + std::to_string(it->second.pid) +
                            "): " + ErrnoText(errno));
  }
  return Status::Ok();
}

Status ProcessLauncher::Stop(const std::string& key, int sig, Duration grace, Time now) {
  auto it = parts_.find(key);
  if (it == parts_.end()) return Status::NotFound("no running part " + key);
  Part& part = it->second;
  part.stopping = true;
  Time deadline = now + grace;
  if (!part.kill_at || deadline < *part.kill_at) part.kill_at = deadline;
  return Signal(key, sig);
}

std::vector<Exit> ProcessLauncher::Poll(Time now) {
  std::vector<const Part*> order;
  for (const auto& [key, part] : parts_) order.push_back(&part);
  std::sort(order.begin(), order.end(), [](const Part* a, const Part* b) { return a->seq < b->seq; });

  std::vector<Exit> exits;
  std::vector<std::string> done;
  for (const Part* part : order) {
    // Look without reaping first: while the leader is a zombie its pid cannot be reused, so the
    // group kill below cannot hit a stranger.
    siginfo_t info;
    std::memset(&info, 0, sizeof info);
    if (waitid(P_PID, part->pid, &info, WEXITED | WNOHANG | WNOWAIT) < 0 || info.si_pid == 0) {
      continue;
    }
    kill(-part->pid, SIGKILL);  // whatever the leader left behind in its group
    int status = 0;
    while (waitpid(part->pid, &status, 0) < 0 && errno == EINTR) {
    }
    Exit e;
    e.key = part->key;
    e.pid = part->pid;
    if (WIFSIGNALED(status)) {
      e.signal = WTERMSIG(status);
    } else {
      e.exit_code = WEXITSTATUS(status);
    }
    e.stopped = part->stopping;
    e.killed_after_grace = part->killed;
    exits.push_back(std::move(e));
    done.push_back(part->key);
  }
  for (const auto& key : done) parts_.erase(key);

  for (auto& [key, part] : parts_) {
    if (part.kill_at && *part.kill_at <= now && !part.killed) {
      kill(-part.pid, SIGKILL);
      part.killed = true;
    }
  }
  return exits;
}

std::vector<Running> ProcessLauncher::List() const {
  std::vector<Running> out;
  for (const auto& [key, part] : parts_) {
    out.push_back(Running{part.key, part.pid, part.stopping, part.kill_at});
  }
  std::sort(out.begin(), out.end(), [this](const Running& a, const Running& b) {
    return parts_.at(a.key).seq < parts_.at(b.key).seq;
  });
  return out;
}

}  // namespace gpufleet::agent
