#include "agent/cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <system_error>

#include <spdlog/spdlog.h>

#include "common/strings.h"

namespace gpufleet::agent {
namespace {

namespace fs = std::filesystem;

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

// The whole file, or nullopt when it cannot be read.
std::optional<std::string> ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One write(2) of `text`, as cgroupfs wants it: the kernel answers each write as one command.
// Returns 0 or the errno of the failure.
int WriteOnce(const std::string& path, std::string_view text) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  ssize_t n = write(fd, text.data(), text.size());
  int err = n < 0 ? errno : (n == static_cast<ssize_t>(text.size()) ? 0 : EIO);
  close(fd);
  return err;
}

Status WriteText(const std::string& path, std::string_view text) {
  int err = WriteOnce(path, text);
  if (err == 0) return Status::Ok();
  return Status::Unavailable("write '" + std::string(text) + "' to " + path + ": " + ErrnoText(err));
}

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string UnescapeOctal(std::string_view s) {
  auto octal = [](char c) { return c >= '0' && c <= '7'; };
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && octal(s[i + 1]) && octal(s[i + 2]) && octal(s[i + 3])) {
      out.push_back(static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::vector<std::string_view> SplitSpaces(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ') ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

// True when the space-separated `list` (cgroup.controllers, cgroup.subtree_control) has `word`.
bool ListHas(const std::string& list, std::string_view word) {
  std::string_view rest(list);
  while (!rest.empty() && rest.back() == '\n') rest.remove_suffix(1);
  for (std::string_view w : SplitSpaces(rest)) {
    if (w == word) return true;
  }
  return false;
}

// Turns `controller` on from `top` down to `root`; "" when it ends up on in root's
// subtree_control, otherwise why not.
std::string EnableController(const std::vector<fs::path>& top_down, std::string_view controller) {
  for (const fs::path& dir : top_down) {
    std::string controllers = ReadText((dir / "cgroup.controllers").string()).value_or("");
    if (!ListHas(controllers, controller)) {
      return "the cgroup offers no " + std::string(controller) + " controller";
    }
    std::string control = (dir / "cgroup.subtree_control").string();
    if (ListHas(ReadText(control).value_or(""), controller)) continue;
    if (int err = WriteOnce(control, "+" + std::string(controller)); err != 0) {
      return "enabling the " + std::string(controller) + " controller in " + control +
             " failed: " + ErrnoText(err);
    }
  }
  return "";
}

// The directories directly in `dir`, sorted; empty when it cannot be read. Never throws (the
// range-for form of directory_iterator throws when a step fails).
std::vector<std::string> Subdirectories(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_directory(type_ec)) out.push_back(it->path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// SIGKILL to each pid listed in `dir` and below, re-reading each list until it is empty.
void KillListedPids(const std::string& dir) {
  for (int round = 0; round < 64; ++round) {
    std::vector<int> pids = CgroupPids(dir);
    if (pids.empty()) break;
    for (int pid : pids) kill(pid, SIGKILL);
  }
  for (const std::string& child : Subdirectories(dir)) KillListedPids(child);
}

}  // namespace

Result<Cgroup2Mount> FindCgroup2Mount(std::string_view mountinfo) {
  std::istringstream lines{std::string(mountinfo)};
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string_view> fields = SplitSpaces(line);
    size_t dash = 0;
    while (dash < fields.size() && fields[dash] != "-") ++dash;
    // id parent major:minor root mount-point options [optional...] - fstype source super-options
    if (dash < 6 || dash + 1 >= fields.size()) continue;
    if (fields[dash + 1] != "cgroup2") continue;
    return Cgroup2Mount{UnescapeOctal(fields[4]), UnescapeOctal(fields[3])};
  }
  return Status::NotFound("no cgroup2 file system in /proc/self/mountinfo");
}

Result<std::string> FindOwnCgroup(std::string_view proc_self_cgroup) {
  std::istringstream lines{std::string(proc_self_cgroup)};
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  }
  return Status::NotFound("no cgroup v2 entry (0::) in /proc/self/cgroup");
}

std::string CgroupNameForKey(std::string_view key) {
  std::string out;
  for (char c : key) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    out.push_back(ok ? c : '_');
  }
  if (out == "." || out.empty()) return "_";
  if (out == "..") return "__";
  return out;
}

Result<std::string> CgroupTree::OwnDir() {
  auto mountinfo = ReadText("/proc/self/mountinfo");
  if (!mountinfo) return Status::NotFound("cannot read /proc/self/mountinfo");
  GF_ASSIGN_OR_RETURN(Cgroup2Mount mount, FindCgroup2Mount(*mountinfo));
  auto cgroup = ReadText("/proc/self/cgroup");
  if (!cgroup) return Status::NotFound("cannot read /proc/self/cgroup");
  GF_ASSIGN_OR_RETURN(std::string own, FindOwnCgroup(*cgroup));
  // With a subtree bind-mounted, the mount shows `root` and our path lies below it.
  fs::path rel = fs::path(own).lexically_relative(mount.root.empty() ? "/" : mount.root);
  if (rel.empty() || *rel.begin() == "..") {
    return Status::NotFound("this process's cgroup " + own + " is not under the cgroup2 mount " +
                            mount.mount_point + " (which shows " + mount.root + ")");
  }
  return (fs::path(mount.mount_point) / rel).lexically_normal().string();
}

Result<std::string> CgroupTree::AutoRoot(std::string_view name, std::string_view instance) {
  GF_ASSIGN_OR_RETURN(std::string own, OwnDir());
  std::string leaf = name.empty() ? "default" : CgroupNameForKey(name);
  if (!instance.empty()) {
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08x", Fnv1a32(instance));
    leaf += std::string("-") + hex;
  }
  return (fs::path(own) / "gpufleet" / leaf).lexically_normal().string();
}

Result<CgroupTree> CgroupTree::Open(const std::string& root, const std::string& enable_from) {
  fs::path root_path = fs::path(root).lexically_normal();
  if (!root_path.is_absolute()) {
    return Status::Unavailable("the cgroup root " + root + " is not an absolute path");
  }
  if (!root_path.has_filename()) root_path = root_path.parent_path();  // a trailing slash
  CgroupTree tree;
  tree.root_ = root_path.string();
  std::error_code ec;
  if (!fs::exists(root_path, ec)) {
    fs::create_directories(root_path, ec);
    if (ec) return Status::Unavailable("mkdir " + tree.root_ + ": " + ec.message());
    tree.created_root_ = true;
  }
  std::string procs = tree.root_ + "/cgroup.procs";
  if (!fs::exists(procs, ec)) {
    return Status::Unavailable(tree.root_ + " is not a cgroup v2 directory (no cgroup.procs)");
  }
  if (access(tree.root_.c_str(), W_OK) < 0 || access(procs.c_str(), W_OK) < 0) {
    return Status::Unavailable("cannot write to " + tree.root_ + ": " + ErrnoText(errno));
  }

  fs::path top = enable_from.empty() ? root_path.parent_path()
                                     : fs::path(enable_from).lexically_normal();
  std::vector<fs::path> top_down;
  for (fs::path p = root_path;; p = p.parent_path()) {
    top_down.insert(top_down.begin(), p);
    if (p == top || p == p.parent_path()) break;
  }
  if (top_down.front() != top) top_down = {root_path.parent_path(), root_path};
  tree.memory_reason_ = EnableController(top_down, "memory");
  tree.cpu_reason_ = EnableController(top_down, "cpu");
  tree.limits_memory_ = tree.memory_reason_.empty();
  tree.limits_cpu_ = tree.cpu_reason_.empty();
  return tree;
}

std::string CgroupTree::LimitsNote() const {
  if (limits_memory_ && limits_cpu_) return "memory and cpu limits enforced";
  if (!limits_memory_ && !limits_cpu_) {
    if (memory_reason_.rfind("the cgroup offers no", 0) == 0 &&
        cpu_reason_.rfind("the cgroup offers no", 0) == 0) {
      return "memory/cpu limits not enforced: the cgroup offers no memory or cpu controller";
    }
  }
  auto clause = [](std::string_view what, bool on, const std::string& why) {
    return std::string(what) + (on ? " limits enforced" : " limits not enforced: " + why);
  };
  return clause("memory", limits_memory_, memory_reason_) + "; " +
         clause("cpu", limits_cpu_, cpu_reason_);
}

Result<std::string> CgroupTree::CreatePart(std::string_view key, const CgroupLimits& limits) const {
  const std::string name = CgroupNameForKey(key);
  std::string dir;
  for (int n = 1;; ++n) {
    if (n > 1000) return Status::Unavailable("mkdir " + root_ + "/" + name + "-N: all names taken");
    dir = root_ + "/" + name + (n == 1 ? "" : "-" + std::to_string(n));
    if (mkdir(dir.c_str(), 0755) == 0) break;
    if (errno != EEXIST) return Status::Unavailable("mkdir " + dir + ": " + ErrnoText(errno));
  }
  Status s = Status::Ok();
  if (limits.memory_mib > 0 && limits_memory_) {
    s = WriteText(dir + "/memory.max", std::to_string(limits.memory_mib * 1024 * 1024));
    // The limit is of memory, not of memory plus swap: a job over it is stopped, not swapped
    // out at a crawl. (No memory.swap.max without swap accounting: nothing to cap.)
    if (s.ok() && access((dir + "/memory.swap.max").c_str(), F_OK) == 0) {
      if (Status swap = WriteText(dir + "/memory.swap.max", "0"); !swap.ok()) {
        spdlog::warn("{}: swap not capped: {}", dir, swap.message());  // the memory limit still holds
      }
    }
  }
  if (s.ok() && limits.cpu_milli > 0 && limits_cpu_) {
    // cpu.max is "<quota> <period>" in microseconds; the kernel wants a quota of at least 1 ms.
    int64_t quota_us = std::max<int64_t>(1000, limits.cpu_milli * 100);
    s = WriteText(dir + "/cpu.max", std::to_string(quota_us) + " 100000");
  }
  if (!s.ok()) {
    rmdir(dir.c_str());
    return s;
  }
  return dir;
}

std::vector<std::string> CgroupTree::Children() const {
  return Subdirectories(root_);
}

std::vector<int> CgroupPids(const std::string& dir) {
  std::vector<int> pids;
  std::istringstream in(ReadText(dir + "/cgroup.procs").value_or(""));
  for (int pid; in >> pid;) pids.push_back(pid);
  return pids;
}

bool CgroupPopulated(const std::string& dir) {
  auto events = ReadText(dir + "/cgroup.events");
  return events && events->find("populated 1") != std::string::npos;
}

int64_t CgroupOomKills(const std::string& dir) {
  std::istringstream in(ReadText(dir + "/memory.events").value_or(""));
  std::string name;
  for (int64_t count; in >> name >> count;) {
    if (name == "oom_kill") return count;
  }
  return 0;
}

void SignalCgroup(const std::string& dir, int sig, int skip_pgid) {
  for (int pid : CgroupPids(dir)) {
    if (skip_pgid > 0 && getpgid(pid) == skip_pgid) continue;
    kill(pid, sig);
  }
}

std::vector<int> KillCgroup(const std::string& dir) {
  std::vector<int> seen = CgroupPids(dir);
  if (WriteOnce(dir + "/cgroup.kill", "1") == 0) return seen;
  KillListedPids(dir);
  return seen;
}

Status RemoveCgroup(const std::string& dir) {
  for (const std::string& child : Subdirectories(dir)) GF_RETURN_IF_ERROR(RemoveCgroup(child));
  if (rmdir(dir.c_str()) < 0 && errno != ENOENT) {
    return Status::Unavailable("rmdir " + dir + ": " + ErrnoText(errno));
  }
  return Status::Ok();
}

}  // namespace gpufleet::agent
