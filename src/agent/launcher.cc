#include "agent/launcher.h"

#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <spawn.h>
#include <signal.h>
#include <linux/capability.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>

#include "agent/cgroup.h"
#include "agent/shim_protocol.h"
#include "common/check.h"
#include "common/fd.h"
#include "common/strings.h"

extern char** environ;

namespace gpufleet::agent {
namespace {

namespace fs = std::filesystem;

constexpr char kDefaultPath[] = "/usr/local/bin:/usr/bin:/bin";

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

// What the shim reports when it or the job fails before the job's exec (shim_protocol.h).
using shim::ChildError;
using shim::Stage;

// Where gpufleet-shim is: LauncherOptions::shim_path, else next to this executable (the
// installed layout, and the build's for `gpufleet`), else where the build put it.
std::string FindShim(const std::string& configured) {
  if (!configured.empty()) return configured;
  std::error_code ec;
  const fs::path self = fs::canonical("/proc/self/exe", ec);
  if (!ec) {
    const fs::path beside = self.parent_path() / "gpufleet-shim";
    if (access(beside.c_str(), X_OK) == 0) return beside.string();
  }
#ifdef GPUFLEET_SHIM_BUILD_PATH
  if (access(GPUFLEET_SHIM_BUILD_PATH, X_OK) == 0) return GPUFLEET_SHIM_BUILD_PATH;
#endif
  return ec ? std::string("gpufleet-shim") : (self.parent_path() / "gpufleet-shim").string();
}


std::string DescribeChildError(const ChildError& e, const LaunchSpec& spec, const std::string& user,
                               const std::string& cgroup) {
  std::string what;
  switch (e.stage) {
    case Stage::kStdio: what = "redirect stdio for " + spec.argv[0]; break;
    case Stage::kChdir: what = "chdir " + spec.workdir; break;
    case Stage::kSetgroups: what = "setgroups for user " + user; break;
    case Stage::kSetgid: what = "setgid for user " + user; break;
    case Stage::kSetuid: what = "setuid to user " + user; break;
    case Stage::kExec: what = "exec " + spec.argv[0]; break;
    case Stage::kSetsid: what = "setsid for " + spec.argv[0]; break;
    case Stage::kCgroup: what = "join cgroup " + cgroup; break;
    case Stage::kParentDeath: what = "set the parent-death signal for " + spec.argv[0]; break;
    case Stage::kFork: what = "fork the job process for " + spec.argv[0]; break;
    case Stage::kStoppingNotice: what = "set up the stop notice for " + spec.argv[0]; break;
    case Stage::kSubreaper: what = "become the subreaper of " + spec.argv[0]; break;
  }
  std::string out = what + ": " + ErrnoText(e.err);
  if (e.stage == Stage::kExec && (e.err == EACCES || e.err == ENOENT) && spec.argv[0].find('/') == std::string::npos) {
    // execvp looked the name up in PATH: say so, and which PATH (a folder the job's user may not
    // search, such as one under /root, turns "not found" into "Permission denied").
    auto path = spec.env.find("PATH");
    const char* inherited = std::getenv("PATH");
    const std::string searched =
        path != spec.env.end() ? path->second : inherited != nullptr && *inherited != '\0' ? inherited : kDefaultPath;
    // Whether it is anywhere in PATH (looked at as the agent): a name in no folder at all is "not
    // found", whatever execvp said of a folder it could not search on the way.
    std::string found;
    for (const std::string& dir : Split(searched, ':')) {
      const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + spec.argv[0];
      struct stat st {};
      if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
        found = candidate;
        break;
      }
    }
    if (found.empty()) {
      out = what + ": command not found (no file of that name in any PATH folder; PATH=" + searched +
            "; give the command's full path, or set PATH in the job's env)";
    } else {
      out += " (" + found + " is there, but not an executable file" +
             (user.empty() ? std::string() : " that user " + user + " may run, in a folder that user may search") +
             "; PATH=" + searched + ")";
    }
  }
  if (e.stage == Stage::kChdir && e.err == EACCES && !user.empty()) {
    out += " (the job runs as user " + user +
           ", who may not enter it: pick a working directory that user can use, or map the submitter to "
           "another user)";
  }
  return out;
}

void ReapBlocking(int pid) {
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

void Nap() {
  struct timespec ts = {0, 1'000'000};
  nanosleep(&ts, nullptr);
}

// Waits (at most about 2 s) until the killed processes of `dir` have left it, so it can go.
void WaitCgroupEmptied(const std::string& dir) {
  for (int i = 0; i < 2000 && CgroupPopulated(dir); ++i) Nap();
}

// The start time of `pid` (field 22 of /proc/PID/stat, in clock ticks since boot), which tells
// a process apart from a later one with the same pid; nullopt when there is no such process.
std::optional<uint64_t> ProcessStartTime(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  size_t paren = line.rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(paren + 1));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
  }
  return std::nullopt;
}

// What the launcher writes to its state_dir for each running part. The key goes last, so that
// it may hold any byte.
struct PartRecord {
  int pid = 0;
  uint64_t start_time = 0;
  int pgid = 0;
  std::string cgroup;
  std::string key;
};

Status WriteRecord(const std::string& path, const PartRecord& r) {
  std::string tmp = path + ".tmp";
  {
    errno = 0;
    std::ofstream out(tmp, std::ios::trunc);
    out << "pid=" << r.pid << "\nstarttime=" << r.start_time << "\npgid=" << r.pgid
        << "\ncgroup=" << r.cgroup << "\nkey=" << r.key << "\n";
    out.flush();
    if (!out) {
      // (A full disk is the usual cause: the node's data directory needs room.)
      const int err = errno;
      out.close();
      unlink(tmp.c_str());
      return Status::Unavailable("write " + tmp + ": " + (err != 0 ? ErrnoText(err) : std::string("failed")));
    }
  }
  if (rename(tmp.c_str(), path.c_str()) < 0) {
    int err = errno;
    unlink(tmp.c_str());
    return Status::Unavailable("rename " + tmp + " to " + path + ": " + ErrnoText(err));
  }
  return Status::Ok();
}

std::optional<PartRecord> ReadRecord(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  PartRecord r;
  size_t key_at = text.find("\nkey=");
  if (key_at == std::string::npos) return std::nullopt;
  r.key = text.substr(key_at + 5);
  if (!r.key.empty() && r.key.back() == '\n') r.key.pop_back();
  std::istringstream lines(text.substr(0, key_at));
  for (std::string line; std::getline(lines, line);) {
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string name = line.substr(0, eq), value = line.substr(eq + 1);
    if (name == "pid") r.pid = std::atoi(value.c_str());
    if (name == "starttime") r.start_time = std::strtoull(value.c_str(), nullptr, 10);
    if (name == "pgid") r.pgid = std::atoi(value.c_str());
    if (name == "cgroup") r.cgroup = value;
  }
  if (r.pid <= 0 || r.pgid <= 0) return std::nullopt;
  return r;
}

// Who a part runs as.
struct RunAs {
  std::string name;  // for messages; "uid N" when the uid has no passwd entry
  bool switch_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  bool has_passwd = false;
  std::string home, shell;
};

Result<RunAs> ResolveUser(const std::string& key, const std::string& user, bool allow_root) {
  const uid_t self = geteuid();
  RunAs run;
  std::vector<char> buf(16384);
  struct passwd pw;
  struct passwd* found = nullptr;
  if (user.empty()) {
    run.uid = self;
    run.gid = getegid();
    run.name = "uid " + std::to_string(self);
    if (getpwuid_r(self, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
      run.name = pw.pw_name;
      run.has_passwd = true;
    }
  } else {
    int rc = getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found);
    if (rc != 0 || found == nullptr) {
      return Status::FailedPrecondition("launch " + key + ": unknown user '" + user + "'" +
                                        (rc != 0 ? ": " + ErrnoText(rc) : ""));
    }
    run.name = user;
    run.has_passwd = true;
    run.uid = pw.pw_uid;
    run.gid = pw.pw_gid;
    if (self != 0) {
      if (pw.pw_uid != self) {
        return Status::FailedPrecondition("launch " + key + ": running a job as user '" + user +
                                          "' needs the agent to run as root");
      }
    } else {
      run.switch_user = true;
      // initgroups' list, computed here because initgroups itself is not safe after fork.
      run.groups = GroupsOf(pw.pw_name, pw.pw_gid);
    }
  }
  if (run.has_passwd) {
    run.home = pw.pw_dir ? pw.pw_dir : "";
    run.shell = pw.pw_shell && *pw.pw_shell ? pw.pw_shell : "/bin/sh";
  }
  if (run.uid == 0 && !allow_root) {
    return Status::FailedPrecondition("refusing to run " + key +
                                      " as root (uid 0): run the agent with --job-user USER, "
                                      "or --allow-root-jobs");
  }
  return run;
}

// The allowlisted part of the agent's environment, described in launcher.h.
std::map<std::string, std::string> BaseEnvironment(const RunAs& run) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    std::string_view name = kv.substr(0, eq);
    if (name == "PATH" || name == "LANG" || name == "LANGUAGE" || name == "TZ" ||
        name == "TMPDIR" || name.substr(0, 3) == "LC_") {
      env[std::string(name)] = std::string(kv.substr(eq + 1));
    }
  }
  if (env["PATH"].empty()) env["PATH"] = kDefaultPath;
  if (run.has_passwd) {
    env["HOME"] = run.home;
    env["USER"] = run.name;
    env["LOGNAME"] = run.name;
    env["SHELL"] = run.shell;
  }
  return env;
}

Status ValidateStrings(const LaunchSpec& spec) {
  auto has_nul = [](const std::string& s) { return s.find('\0') != std::string::npos; };
  const std::string at = "launch " + spec.key + ": ";
  for (size_t i = 0; i < spec.argv.size(); ++i) {
    if (has_nul(spec.argv[i])) {
      return Status::InvalidArgument(at + "argv[" + std::to_string(i) + "] contains a NUL byte");
    }
  }
  for (const auto& [k, v] : spec.env) {
    if (k.empty()) return Status::InvalidArgument(at + "an environment variable has an empty name");
    if (has_nul(k) || has_nul(v)) {
      return Status::InvalidArgument(at + "environment variable " + k.substr(0, k.find('\0')) +
                                     " contains a NUL byte");
    }
    if (k.find('=') != std::string::npos) {
      return Status::InvalidArgument(at + "environment variable name '" + k + "' contains '='");
    }
  }
  if (has_nul(spec.user) || has_nul(spec.workdir) || has_nul(spec.log_path)) {
    return Status::InvalidArgument(at + "the user, workdir or log path contains a NUL byte");
  }
  if (spec.memory_limit_mib < 0 || spec.cpu_milli < 0) {
    return Status::InvalidArgument(at + "memory_limit_mib and cpu_milli must not be negative");
  }
  if (spec.memory_limit_mib > (int64_t{1} << 40)) {
    return Status::InvalidArgument(at + "memory_limit_mib is out of range");
  }
  if (spec.cpu_milli > (int64_t{1} << 40)) {
    return Status::InvalidArgument(at + "cpu_milli is out of range");
  }
  return Status::Ok();
}

// `p` resolved: absolute, without "." and "..", symlinks of its existing part followed, and no
// trailing slash.
Result<fs::path> Resolve(const std::string& p) {
  std::error_code ec;
  fs::path abs = fs::absolute(p, ec);
  if (!ec) abs = fs::weakly_canonical(abs, ec);
  if (ec) return Status::InvalidArgument("resolve " + p + ": " + ec.message());
  if (!abs.has_filename() && abs != abs.root_path()) abs = abs.parent_path();
  return abs;
}

bool IsWithin(const fs::path& p, const fs::path& root) {
  auto [r, q] = std::mismatch(root.begin(), root.end(), p.begin(), p.end());
  return r == root.end();
}

// The directory the part runs in: spec.workdir, resolved and checked when roots are configured.
Result<std::string> CheckWorkdir(const LaunchSpec& spec, const std::vector<std::string>& roots) {
  if (spec.workdir.empty()) return spec.workdir;
  // Resolved always, so that what is checked and made is what the kernel's walk reaches.
  auto resolved = Resolve(spec.workdir);
  if (!resolved.ok()) {
    return Status::InvalidArgument("launch " + spec.key + ": " + resolved.status().message());
  }
  if (roots.empty()) return resolved->string();
  std::string listed;
  for (const std::string& root : roots) {
    listed += (listed.empty() ? "" : ", ") + root;
    auto root_path = Resolve(root);
    if (root_path.ok() && IsWithin(*resolved, *root_path)) return resolved->string();
  }
  return Status::InvalidArgument("launch " + spec.key + ": workdir " + spec.workdir +
                                 " is outside the allowed roots (" + listed +
                                 "); give a directory under one of them (workdir: in the job file, --workdir for "
                                 "run; the CLI sends the directory it runs in when the job names none)");
}

const char kGroupsOnly[] =
    "parts are contained by their process groups only, so a process that leaves its group "
    "(setsid) escapes stop and clean-up; memory/cpu limits not enforced";

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

Result<std::vector<fs::path>> MakeDirectories(const fs::path& dir) {
  // "a/b/" and "a/b/." are "a/b" (else the same folder would come twice). ".." stays: behind a
  // link it is not where it looks (the kernel's walk decides), and the level it names exists,
  // so it is never one this call makes.
  fs::path target = dir;
  while (target.has_relative_path() && (target.filename().empty() || target.filename() == ".")) {
    target = target.parent_path();
  }
  std::vector<fs::path> missing;  // innermost first
  for (fs::path p = target; !p.empty(); p = p.parent_path()) {
    struct stat st;
    if (::stat(p.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) {
        return Status::Unavailable("create directory " + dir.string() + ": " + p.string() + " is not a directory");
      }
      break;
    }
    const int err = errno;
    // ENOTDIR: a file above it, which the walk up names.
    if (err != ENOENT && err != ENOTDIR) {
      return Status::Unavailable("create directory " + dir.string() + ": " + p.string() + ": " + ErrnoText(err));
    }
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  std::reverse(missing.begin(), missing.end());
  std::vector<fs::path> made;
  for (const fs::path& p : missing) {
    if (::mkdir(p.c_str(), 0777) == 0) {
      made.push_back(p);
      continue;
    }
    const int err = errno;
    struct stat st;
    // Made meanwhile by another thread or process: as good, if it is a folder (not a link to one).
    if (err == EEXIST && ::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;
    return Status::Unavailable("create directory " + p.string() + ": " +
                               (err == EEXIST ? std::string("it exists and is not a directory") : ErrnoText(err)));
  }
  return made;
}

Result<fs::path> ResolvePath(const std::string& path) { return Resolve(path); }

std::vector<gid_t> GroupsOf(const std::string& user, gid_t gid) {
  int n = 64;
  std::vector<gid_t> groups(n);
  if (getgrouplist(user.c_str(), gid, groups.data(), &n) < 0) {
    groups.resize(n);
    if (getgrouplist(user.c_str(), gid, groups.data(), &n) < 0) return {gid};
  }
  groups.resize(n);
  std::erase(groups, gid);
  groups.insert(groups.begin(), gid);
  return groups;
}

namespace {

// setgroups for the calling thread alone: the system call itself, not the C library's wrapper,
// which applies it to every thread of the process. (32-bit x86 and ARM have a 16-bit call by that
// name and the 32-bit one beside it.)
int SetThreadGroups(const std::vector<gid_t>& groups) {
#ifdef SYS_setgroups32
  return static_cast<int>(::syscall(SYS_setgroups32, groups.size(), groups.data()));
#else
  return static_cast<int>(::syscall(SYS_setgroups, groups.size(), groups.data()));
#endif
}

// setfsuid and setfsgid answer the previous value, never an error: an id that did not take is
// read back with an invalid one (-1), which changes nothing.
bool SetThreadFsGid(gid_t gid) {
  ::setfsgid(gid);
  return static_cast<gid_t>(::setfsgid(static_cast<gid_t>(-1))) == gid;
}
bool SetThreadFsUid(uid_t uid) {
  ::setfsuid(uid);
  return static_cast<uid_t>(::setfsuid(static_cast<uid_t>(-1))) == uid;
}

// Whether the calling thread's effective capabilities hold none of the powers over files that
// would let it pass the permission checks of the user it acts as.
bool FileCapabilitiesGone() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  const uint32_t powers = (1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH) | (1u << CAP_FOWNER);
  return (data[0].effective & powers) == 0;
}

// The thread's file-system identity while it is another's: the steps taken (groups, gid, uid),
// undone in the reverse order when it goes out of scope, whatever way that happens. A step that
// cannot be undone leaves the thread as someone else: the process stops there.
class FsIdentitySwitch {
 public:
  FsIdentitySwitch(uid_t uid, gid_t gid, std::vector<gid_t> groups)
      : uid_(uid), gid_(gid), groups_(std::move(groups)) {}
  FsIdentitySwitch(const FsIdentitySwitch&) = delete;
  FsIdentitySwitch& operator=(const FsIdentitySwitch&) = delete;
  ~FsIdentitySwitch() {
    if (steps_ >= 3) CHECK(SetThreadFsUid(uid_)) << "could not give this thread its file-system uid back";
    if (steps_ >= 2) CHECK(SetThreadFsGid(gid_)) << "could not give this thread its file-system gid back";
    if (steps_ >= 1) CHECK(SetThreadGroups(groups_) == 0) << "could not give this thread its groups back";
  }
  // Becomes `who`; false (errno set where the kernel said why) after undoing nothing more than
  // what took.
  bool To(const FsIdentity& who) {
    if (SetThreadGroups(who.groups) != 0) return false;
    steps_ = 1;
    if (!SetThreadFsGid(who.gid)) return false;
    steps_ = 2;
    if (!SetThreadFsUid(who.uid)) return false;
    steps_ = 3;
    return true;
  }

 private:
  uid_t uid_;
  gid_t gid_;
  std::vector<gid_t> groups_;
  int steps_ = 0;
};

}  // namespace

Status RunAsFsIdentity(const FsIdentity& who, const std::function<void()>& fn) {
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  const int n = ::getgroups(0, nullptr);
  std::vector<gid_t> groups(static_cast<size_t>(std::max(n, 0)));
  if (n < 0 || ::getgroups(n, groups.data()) != n) return Status::Unavailable("getgroups: " + ErrnoText(errno));
  if (who.uid == uid && who.gid == gid && who.groups == groups) {
    fn();
    return Status::Ok();
  }
  const std::string as = "acting as uid " + std::to_string(who.uid) + " for the file system: ";
  FsIdentitySwitch to(uid, gid, std::move(groups));
  errno = 0;
  if (!to.To(who)) {
    const int err = errno;
    return Status::Unavailable(as + (err != 0 ? ErrnoText(err) : std::string("refused")) + " (this needs root)");
  }
  // The kernel takes root's powers over files away when the file-system uid leaves 0, except under
  // SECBIT_NO_SETUID_FIXUP: with any of them left the switch would guard nothing.
  if (!FileCapabilitiesGone()) {
    return Status::Unavailable(as + "this process keeps its powers over files (CAP_DAC_OVERRIDE, "
                                    "CAP_DAC_READ_SEARCH or CAP_FOWNER) as another user "
                                    "(SECBIT_NO_SETUID_FIXUP), so it cannot act as one: run the agent without it");
  }
  fn();
  return Status::Ok();
}

std::string NotMakeableBy(const fs::path& dir, uid_t uid, const std::vector<gid_t>& groups) {
  std::error_code ec;
  const fs::path start = dir.is_absolute() ? dir : fs::absolute(dir, ec);
  for (fs::path p = start; !p.empty(); p = p.parent_path()) {
    struct stat st;
    if (::stat(p.c_str(), &st) == 0) {
      if (p == start) return "";
      // The kernel's order: the owner's bits for the owner, else the group's for a member.
      const bool member = std::find(groups.begin(), groups.end(), st.st_gid) != groups.end();
      const mode_t w = st.st_uid == uid ? S_IWUSR : member ? S_IWGRP : S_IWOTH;
      return S_ISDIR(st.st_mode) && (st.st_mode & w) ? "" : p.string();
    }
    if (p == p.parent_path()) break;
  }
  return "/";
}

ProcessLauncher::ProcessLauncher(LauncherOptions options)
    : options_(std::move(options)), shim_path_(FindShim(options_.shim_path)) {
  if (options_.cgroup_root == "off") {
    cgroup_note_ = std::string("cgroups off (cgroup root \"off\"): ") + kGroupsOnly;
    return;
  }
  std::string root = options_.cgroup_root, enable_from;
  if (root.empty()) {
    auto own = CgroupTree::OwnDir();
    std::error_code ec;
    std::string instance = options_.state_dir.empty()
                               ? std::string()
                               : fs::weakly_canonical(fs::absolute(options_.state_dir, ec), ec).string();
    auto automatic = CgroupTree::AutoRoot(options_.name, instance);
    if (!own.ok() || !automatic.ok()) {
      cgroup_note_ = "cgroups unavailable (" + (own.ok() ? automatic.status() : own.status()).message() +
                     "): " + kGroupsOnly;
      return;
    }
    root = *automatic;
    enable_from = *own;
  }
  auto tree = CgroupTree::Open(root, enable_from);
  if (!tree.ok()) {
    cgroup_note_ = "cgroups unavailable (" + tree.status().message() + "): " + kGroupsOnly;
    return;
  }
  cgroups_ = std::make_unique<CgroupTree>(std::move(*tree));
  cgroup_note_ = "cgroup v2 at " + cgroups_->root() + ": parts are contained; " + cgroups_->LimitsNote();
}

ProcessLauncher::~ProcessLauncher() {
  MutexLock lock(mu_);
  std::vector<std::string> dirs = cgroups_to_remove_;
  for (auto& [key, part] : parts_) {
    KillPart(part);
    ReapBlocking(part.pid);
    if (!part.cgroup.empty()) dirs.push_back(part.cgroup);
    if (!part.record.empty()) unlink(part.record.c_str());
  }
  for (const std::string& dir : dirs) {
    WaitCgroupEmptied(dir);
    Status ignored = RemoveCgroup(dir);
    (void)ignored;
  }
  if (cgroups_ && cgroups_->created_root()) rmdir(cgroups_->root().c_str());
}

std::string ProcessLauncher::CgroupNote() const { return cgroup_note_; }

bool ProcessLauncher::MemoryLimitsEnforced() const { return cgroups_ && cgroups_->limits_memory(); }
bool ProcessLauncher::CpuLimitsEnforced() const { return cgroups_ && cgroups_->limits_cpu(); }

Result<int> ProcessLauncher::Launch(const LaunchSpec& spec) {
  if (spec.key.empty()) return Status::InvalidArgument("launch: the key must not be empty");
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return Status::InvalidArgument("launch " + spec.key + ": argv must name a program");
  }
  if (spec.log_path.empty()) {
    return Status::InvalidArgument("launch " + spec.key + ": a log path is required");
  }
  GF_RETURN_IF_ERROR(ValidateStrings(spec));
  {
    MutexLock lock(mu_);
    if (parts_.count(spec.key) || !launching_.insert(spec.key).second) {
      return Status::AlreadyExists("launch " + spec.key + ": a part with this key is running");
    }
  }
  // The key is reserved until this function returns; the table is locked again only to record
  // the part, so that Poll and Stop of other parts go on while this one forks and execs.
  struct Unreserve {
    ProcessLauncher* self;
    const std::string& key;
    ~Unreserve() {
      MutexLock lock(self->mu_);
      self->launching_.erase(key);
    }
  } unreserve{this, spec.key};
  const std::string& user = spec.user.empty() ? options_.default_user : spec.user;
  GF_ASSIGN_OR_RETURN(RunAs run, ResolveUser(spec.key, user, options_.allow_root));
  GF_ASSIGN_OR_RETURN(std::string workdir, CheckWorkdir(spec, options_.workdir_roots));

  std::map<std::string, std::string> env = BaseEnvironment(run);
  for (const auto& [k, v] : spec.env) env[k] = v;
  std::vector<std::string> env_storage;
  for (const auto& [k, v] : env) env_storage.push_back(k + "=" + v);

  if (!workdir.empty()) {
    if (run.switch_user && run.uid != geteuid()) {
      std::vector<gid_t> groups = run.groups;
      groups.insert(groups.begin(), run.gid);
      if (std::string above = NotMakeableBy(workdir, run.uid, groups); !above.empty()) {
        return Status::InvalidArgument("launch " + spec.key + ": workdir " + workdir + " does not exist, and user " +
                                       run.name + " may not make it (" + above +
                                       " is not theirs to write): make it for them first, or pick another");
      }
    }
    struct stat st;
    if (::stat(workdir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      // Made already (as the agent's default one is): nothing is made, by root or anyone; the
      // part enters it as its user, or fails to.
    } else if (run.switch_user && run.uid != geteuid()) {
      // Made as its user (RunAsFsIdentity): the kernel decides, level by level at the instant
      // of each lookup and mkdir, what that user may reach and make, whatever the check above saw.
      Status made;
      if (Status as = RunAsFsIdentity({run.uid, run.gid, run.groups}, [&] { made = MakeDirectories(workdir).status(); });
          !as.ok()) {
        return Status::Unavailable("launch " + spec.key + ": workdir " + workdir + ": " + as.message());
      }
      if (!made.ok()) {
        return Status::InvalidArgument("launch " + spec.key + ": workdir " + workdir + " cannot be made as user " +
                                       run.name + ": " + made.message());
      }
    } else {
      GF_RETURN_IF_ERROR(MakeDirectories(workdir).status());
    }
  }

  fs::path log_dir = fs::path(spec.log_path).parent_path();
  if (!log_dir.empty()) {
    GF_ASSIGN_OR_RETURN(auto unused, MakeDirectories(log_dir));
    (void)unused;
  }
  if (!options_.state_dir.empty()) {
    GF_ASSIGN_OR_RETURN(auto unused, MakeDirectories(options_.state_dir));
    (void)unused;
  }
  UniqueFd log_fd(LiftFd(open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)));
  if (log_fd.get() < 0) {
    return Status::Unavailable("open log " + spec.log_path + ": " + ErrnoText(errno));
  }
  UniqueFd null_fd(LiftFd(open("/dev/null", O_RDONLY | O_CLOEXEC)));
  if (null_fd.get() < 0) return Status::Unavailable("open /dev/null: " + ErrnoText(errno));

  // The part's cgroup, removed again on every error from here until the part is recorded.
  std::string cgroup;
  auto drop_cgroup = [&] { DropCgroup(cgroup); };
  if (cgroups_) {
    GF_ASSIGN_OR_RETURN(cgroup, cgroups_->CreatePart(spec.key, CgroupLimits{spec.memory_limit_mib,
                                                                            spec.cpu_milli}));
  }
  int open_errno = 0;
  auto open_in_cgroup = [&](const char* file, int flags) {
    if (cgroup.empty()) return -1;
    int fd = LiftFd(open((cgroup + file).c_str(), flags | O_CLOEXEC));
    if (fd < 0 && open_errno == 0) open_errno = errno;
    return fd;
  };
  UniqueFd join_fd(open_in_cgroup("/cgroup.procs", O_WRONLY));
  UniqueFd procs_fd(open_in_cgroup("/cgroup.procs", O_RDONLY));
  if (!cgroup.empty() && (join_fd.get() < 0 || procs_fd.get() < 0)) {
    Status s = Status::Unavailable("open " + cgroup + "/cgroup.procs: " + ErrnoText(open_errno));
    drop_cgroup();
    return s;
  }
  UniqueFd kill_fd(open_in_cgroup("/cgroup.kill", O_WRONLY));  // kernels before 5.14 lack it

  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) < 0) {
    Status s = Status::Unavailable("pipe: " + ErrnoText(errno));
    drop_cgroup();
    return s;
  }
  UniqueFd err_read(LiftFd(pipe_fds[0]));
  UniqueFd err_write(LiftFd(pipe_fds[1]));
  if (err_read.get() < 0 || err_write.get() < 0) {
    Status s = Status::Unavailable("pipe: " + ErrnoText(errno));
    drop_cgroup();
    return s;
  }
  // The shim's command line (shim_main.cc) and its descriptors: 0 /dev/null, 1 and 2 the log,
  // 3 the report pipe, 4 5 6 the cgroup's files. Each is first copied above them all, so that
  // placing one cannot overwrite another's source.
  std::string groups;
  for (gid_t g : run.groups) groups += (groups.empty() ? "" : ",") + std::to_string(g);
  std::vector<std::string> args = {shim_path_,
                                   std::to_string(getpid()),
                                   std::to_string(SIGRTMAX),
                                   run.switch_user ? "1" : "0",
                                   std::to_string(run.uid),
                                   std::to_string(run.gid),
                                   groups,
                                   workdir,
                                   join_fd.get() >= 0 ? "1" : "0",
                                   procs_fd.get() >= 0 ? "1" : "0",
                                   kill_fd.get() >= 0 ? "1" : "0",
                                   "--"};
  for (const auto& a : spec.argv) args.push_back(a);
  std::vector<char*> argv_ptrs, envp_ptrs;
  for (auto& a : args) argv_ptrs.push_back(a.data());
  argv_ptrs.push_back(nullptr);
  for (auto& e : env_storage) envp_ptrs.push_back(e.data());
  envp_ptrs.push_back(nullptr);

  const std::pair<int, int> placed[] = {{null_fd.get(), 0}, {log_fd.get(), 1},    {log_fd.get(), 2},
                                        {err_write.get(), 3}, {join_fd.get(), 4}, {procs_fd.get(), 5},
                                        {kill_fd.get(), 6}};
  std::vector<int> high;  // the copies, closed once the shim has its own
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  int spawn_errno = 0;
  for (const auto& [from, to] : placed) {
    if (from < 0) continue;
    const int copy = LiftFd(fcntl(from, F_DUPFD_CLOEXEC, 64));
    if (copy < 0) {
      spawn_errno = errno;
      break;
    }
    high.push_back(copy);
    posix_spawn_file_actions_adddup2(&actions, copy, to);
  }
  // Every signal blocked and at its default, so that none of the agent's handlers or ignored
  // signals reaches the shim; it unblocks once it is set up.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t all;
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &all);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  if (spawn_errno == 0) {
    spawn_errno = posix_spawn(&pid, shim_path_.c_str(), &actions, &attr, argv_ptrs.data(), envp_ptrs.data());
  }
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  for (int fd : high) close(fd);
  if (spawn_errno != 0) {
    drop_cgroup();
    return Status::Unavailable("launch " + spec.key + ": cannot start the job shim " + shim_path_ + ": " +
                               ErrnoText(spawn_errno) + " (it is installed next to gpufleet)");
  }

  err_write.Reset();
  join_fd.Reset();
  procs_fd.Reset();
  kill_fd.Reset();
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
    // The shim or the job failed before exec; the shim exits at once (after reaping the job).
    ReapBlocking(pid);
    drop_cgroup();
    if (got < sizeof child_error) {
      return Status::Internal("launch " + spec.key + ": short error report from the child");
    }
    return Status::InvalidArgument(DescribeChildError(child_error, spec, run.name, cgroup));
  }

  Part part;
  part.key = spec.key;
  part.pid = pid;
  part.cgroup = cgroup;
  if (!options_.state_dir.empty()) {
    PartRecord record;
    record.pid = pid;
    record.start_time = ProcessStartTime(pid).value_or(0);
    record.pgid = pid;
    record.cgroup = cgroup;
    record.key = spec.key;
    std::string path = (fs::path(options_.state_dir) /
                        (CgroupNameForKey(spec.key) + "." + std::to_string(pid) + ".part")).string();
    Status s = WriteRecord(path, record);
    if (!s.ok()) {
      // A part without a record could outlive a crash unnoticed: do not run it.
      KillPart(part);
      ReapBlocking(pid);
      drop_cgroup();
      return Status::Unavailable("launch " + spec.key + ": state record: " + s.message());
    }
    part.record = path;
  }
  MutexLock lock(mu_);
  part.seq = next_seq_++;
  parts_.emplace(spec.key, std::move(part));
  return static_cast<int>(pid);
}

void ProcessLauncher::DropCgroup(const std::string& cgroup) {
  if (cgroup.empty()) return;
  if (RemoveCgroup(cgroup).ok()) return;
  MutexLock lock(mu_);
  cgroups_to_remove_.push_back(cgroup);
}

void ProcessLauncher::KillPart(const Part& part) {
  if (!part.cgroup.empty()) KillCgroup(part.cgroup);
  // The shim is not reaped until Poll, so its pid (the group id) cannot have been reused.
  kill(-part.pid, SIGKILL);
}

void ProcessLauncher::RetryCgroupRemovals() {
  std::vector<std::string> still_busy;
  for (const std::string& dir : cgroups_to_remove_) {
    if (RemoveCgroup(dir).ok()) continue;
    KillCgroup(dir);
    still_busy.push_back(dir);
  }
  cgroups_to_remove_ = std::move(still_busy);
}

Status ProcessLauncher::Signal(const std::string& key, int sig) {
  MutexLock lock(mu_);
  return SignalLocked(key, sig);
}

Status ProcessLauncher::SignalLocked(const std::string& key, int sig) {
  auto it = parts_.find(key);
  if (it == parts_.end()) return Status::NotFound("no running part " + key);
  const Part& part = it->second;
  if (kill(-part.pid, sig) < 0 && errno != ESRCH) {
    return Status::Internal("kill " + key + " (group " + std::to_string(part.pid) +
                            "): " + ErrnoText(errno));
  }
  // Processes that left the group (setsid) are still in the cgroup.
  if (!part.cgroup.empty()) SignalCgroup(part.cgroup, sig, part.pid);
  return Status::Ok();
}

Status ProcessLauncher::Stop(const std::string& key, int sig, Duration grace, Time now) {
  MutexLock lock(mu_);
  auto it = parts_.find(key);
  if (it == parts_.end()) return Status::NotFound("no running part " + key);
  Part& part = it->second;
  part.stopping = true;
  Time deadline = now + grace;
  if (!part.kill_at || deadline < *part.kill_at) part.kill_at = deadline;
  // The shim first (it is not reaped yet, so the pid is still its): it then outlives the job's
  // process until the part's last process has gone, and kills them should the agent die.
  kill(part.pid, shim::StoppingNotice());
  return SignalLocked(key, sig);
}

std::vector<Exit> ProcessLauncher::Poll(Time now) {
  MutexLock lock(mu_);
  std::vector<const Part*> order;
  for (const auto& [key, part] : parts_) order.push_back(&part);
  std::sort(order.begin(), order.end(), [](const Part* a, const Part* b) { return a->seq < b->seq; });

  std::vector<Exit> exits;
  std::vector<std::string> done;
  for (const Part* part : order) {
    // Look without reaping first: while the shim is a zombie its pid cannot be reused, so the
    // group kill below cannot hit a stranger.
    siginfo_t info;
    std::memset(&info, 0, sizeof info);
    if (waitid(P_PID, part->pid, &info, WEXITED | WNOHANG | WNOWAIT) < 0 || info.si_pid == 0) {
      continue;
    }
    // Stopping, within its grace: the command's own process may be gone (a `sh -c` that the
    // checkpoint signal ended) while the processes it started still save their checkpoint. The
    // part ends when its cgroup is empty or the grace runs out (the deadline kill below), not
    // at once. ("populated" counts live processes in the cgroup and any below it; a zombie is
    // no longer in it.)
    if (part->stopping && !part->killed && part->kill_at && now < *part->kill_at && !part->cgroup.empty() &&
        CgroupPopulated(part->cgroup)) {
      continue;
    }
    KillPart(*part);  // whatever the job left behind in its cgroup and group
    int status = 0;
    while (waitpid(part->pid, &status, 0) < 0 && errno == EINTR) {
    }
    const bool oom_killed = !part->cgroup.empty() && CgroupOomKills(part->cgroup) > 0;  // (read before it goes)
    if (!part->cgroup.empty() && !RemoveCgroup(part->cgroup).ok()) {
      cgroups_to_remove_.push_back(part->cgroup);  // killed processes still leaving; next Poll
    }
    if (!part->record.empty()) unlink(part->record.c_str());
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
    e.oom_killed = oom_killed;
    exits.push_back(std::move(e));
    done.push_back(part->key);
  }
  for (const auto& key : done) parts_.erase(key);
  RetryCgroupRemovals();

  for (auto& [key, part] : parts_) {
    if (part.kill_at && *part.kill_at <= now && !part.killed) {
      KillPart(part);
      part.killed = true;
    }
  }
  return exits;
}

std::vector<Running> ProcessLauncher::List() const {
  MutexLock lock(mu_);
  std::vector<Running> out;
  for (const auto& [key, part] : parts_) {
    out.push_back(Running{part.key, part.pid, part.stopping, part.kill_at});
  }
  std::sort(out.begin(), out.end(), [this](const Running& a, const Running& b) {
    mu_.AssertHeld();
    return parts_.at(a.key).seq < parts_.at(b.key).seq;
  });
  return out;
}

std::vector<std::string> ProcessLauncher::KillLeftovers() {
  std::vector<std::string> killed;
  std::set<std::string> ours, our_records;
  {
    // What this launcher runs now, taken under the lock; the slow part (waiting for killed
    // processes to go) runs without it.
    MutexLock lock(mu_);
    ours.insert(cgroups_to_remove_.begin(), cgroups_to_remove_.end());
    for (const auto& [key, part] : parts_) {
      if (!part.cgroup.empty()) ours.insert(part.cgroup);
      if (!part.record.empty()) our_records.insert(part.record);
    }
  }
  auto join_pids = [](const std::vector<int>& pids) {
    std::string s;
    for (int pid : pids) s += (s.empty() ? "" : ", ") + std::to_string(pid);
    return s;
  };

  if (!options_.state_dir.empty()) {
    std::error_code ec;
    std::vector<fs::path> records;
    for (fs::directory_iterator it(options_.state_dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->path().extension() == ".part" && !our_records.count(it->path().string())) {
        records.push_back(it->path());
      }
    }
    std::sort(records.begin(), records.end());
    for (const fs::path& path : records) {
      std::optional<PartRecord> r = ReadRecord(path);
      if (r) {
        std::string what;
        auto start = ProcessStartTime(r->pid);
        if (start && *start == r->start_time) {
          // The shim leads its group, so while it lives the group id is its own: no stranger's.
          if (r->pgid == r->pid) kill(-r->pgid, SIGKILL);
          kill(r->pid, SIGKILL);
          what = "pid " + std::to_string(r->pid) + ", process group " + std::to_string(r->pgid);
          // An agent that exec'ed itself afresh is still the shim's parent: reap it.
          for (int i = 0; i < 2000; ++i) {
            int rc = waitpid(r->pid, nullptr, WNOHANG);
            if (rc == r->pid || (rc < 0 && errno != EINTR)) break;
            Nap();
          }
        }
        if (!r->cgroup.empty() && !ours.count(r->cgroup) && fs::exists(r->cgroup, ec)) {
          bool populated = CgroupPopulated(r->cgroup);
          std::vector<int> pids = KillCgroup(r->cgroup);
          WaitCgroupEmptied(r->cgroup);
          Status ignored = RemoveCgroup(r->cgroup);
          (void)ignored;
          if (populated) {
            what += (what.empty() ? "" : ", ") + std::string("cgroup ") + r->cgroup +
                    (pids.empty() ? "" : " (pids " + join_pids(pids) + ")");
          }
        }
        if (!what.empty()) {
          killed.push_back("killed part " + r->key + " left by an earlier agent (" + what + ")");
        }
      }
      fs::remove(path, ec);
    }
  }

  if (cgroups_) {
    for (const std::string& dir : cgroups_->Children()) {
      if (ours.count(dir)) continue;
      bool populated = CgroupPopulated(dir);
      std::vector<int> pids = KillCgroup(dir);
      if (populated) {
        WaitCgroupEmptied(dir);
        killed.push_back("killed cgroup " + dir + " left by an earlier agent" +
                         (pids.empty() ? "" : " (pids " + join_pids(pids) + ")"));
      }
      Status ignored = RemoveCgroup(dir);
      (void)ignored;
    }
  }
  return killed;
}

}  // namespace gpufleet::agent
