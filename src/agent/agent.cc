#include "agent/agent.h"

#include <algorithm>
#include <limits>

#include <httplib.h>
#include <spdlog/spdlog.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/progress.h"
#include "api/codec.h"
#include "common/fd.h"
#include "common/process.h"
#include "common/strings.h"
#include "node/environments.h"
#include "obs/dcgm.h"
#include "obs/exposition.h"

namespace gpufleet::agent {

using nlohmann::json;

namespace {

std::unique_ptr<httplib::Client> MakeClient(const std::string& server, const std::string& ca_cert,
                                            Duration read_timeout) {
  auto c = std::make_unique<httplib::Client>(server);
  if (server.rfind("https://", 0) == 0) {
    if (!ca_cert.empty()) c->set_ca_cert_path(ca_cert);
    c->enable_server_certificate_verification(true);
  }
  c->set_connection_timeout(2, 0);
  c->set_read_timeout(static_cast<time_t>(read_timeout.millis() / 1000 + 5), 0);
  c->set_write_timeout(10, 0);
  c->set_keep_alive(true);
  c->set_tcp_nodelay(true);
  return c;
}

std::string ProcKey(const api::PartKey& k, int i) { return k.ToString() + "#" + std::to_string(i); }

}  // namespace

std::vector<std::string> DefaultWorkdirRoots(const std::string& data_dir) {
  return {data_dir + "/work", "/home", "/srv", "/mnt", "/data", "/scratch", "/tmp", "/var/tmp"};
}

std::string DefaultWorkDir(const std::string& data_dir, const std::string& name, bool jobs_as_another_user,
                           std::string* why) {
  const std::string own = data_dir + "/work";
  if (!jobs_as_another_user) return own;
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(data_dir, ec);
  if (ec) return own;
  for (std::filesystem::path p = abs.parent_path(); !p.empty(); p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      if (why) *why = p.string() + " does not let other users through (mode " + mode + ")";
      // One folder per agent data directory: two clusters on one machine may both have a dev-1.
      const uint64_t h = Fnv1a64(abs.string());
      char key[9];
      std::snprintf(key, sizeof key, "%08x", static_cast<unsigned>(h & 0xffffffffu));
      return "/var/tmp/gpufleet-" + name + "-" + key + "/work";
    }
    if (p == p.parent_path()) break;
  }
  return own;
}

namespace {

std::string TokenPath(const AgentOptions& o) { return o.data_dir + "/agent.token"; }

std::string ReadFirstLine(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// Writes the file whole or not at all, readable only by this user.
// Returns false (and says why in the agent's log) when it could not.
bool WritePrivate(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    errno = 0;
    std::ofstream f(tmp, std::ios::trunc);
    f << text << "\n";
    if (!f.flush()) {
      const int err = errno;
      f.close();
      ::unlink(tmp.c_str());
      spdlog::error("cannot save {}: {}", path, err != 0 ? std::strerror(err) : "write failed");
      return false;
    }
  }
  ::chmod(tmp.c_str(), 0600);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    spdlog::error("cannot save {}: {}", path, std::strerror(errno));
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

// The user a part runs as, as the launcher will resolve it, for the directories made for it.
std::optional<std::pair<uid_t, gid_t>> JobOwner(const std::string& user) {
  if (::geteuid() != 0 || user.empty()) return std::nullopt;
  std::vector<char> buf(16384);
  struct passwd pw;
  struct passwd* found = nullptr;
  if (getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) return std::nullopt;
  return std::make_pair(pw.pw_uid, pw.pw_gid);
}

// The modes (and with `owner`, the leaf's owner) of the levels MakeDirectories made for `dir`.
void SetJobDirModes(const std::string& dir, const std::vector<std::filesystem::path>& made,
                    const std::optional<std::pair<uid_t, gid_t>>& owner) {
  // The leaf is the folder `dir` names, whichever level made it (a path may end in "..").
  struct stat want {};
  const bool known = ::stat(dir.c_str(), &want) == 0;
  for (const std::filesystem::path& p : made) {
    // Through a descriptor of the folder just made, never following a link put in its place.
    UniqueFd fd(::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat got {};
    if (fd.get() < 0 || ::fstat(fd.get(), &got) != 0) {
      spdlog::warn("open {}: {}", p.string(), std::strerror(errno));
      continue;
    }
    const bool leaf = known && got.st_dev == want.st_dev && got.st_ino == want.st_ino;
    ::fchmod(fd.get(), leaf ? 0700 : 0711);
    if (leaf && owner && ::fchown(fd.get(), owner->first, owner->second) != 0) {
      spdlog::warn("chown {}: {}", p.string(), std::strerror(errno));
    }
  }
}

// Creates `dir` with its missing parents: the parents passable (0711), the leaf owned by the
// job's user (0700), so the job can write its checkpoints and nobody else can read them.
void MakeJobDir(const std::string& dir, const std::optional<std::pair<uid_t, gid_t>>& owner) {
  auto made = MakeDirectories(dir);
  if (!made.ok()) {
    spdlog::warn("{}", made.status().message());
    return;
  }
  SetJobDirModes(dir, *made, owner);
}

// MakeJobDir for a folder the job named, outside the agent's own folders: all of it done as the
// job's user (RunAsFsIdentity, with its groups), so that the kernel lets it make and change only
// what that user could, whatever link is swapped in meanwhile, and what it makes is that user's.
// Why the folder could not be made ("" when it was, or existed: an existing folder is left as it
// is, as an existing workdir is); the part then does not start.
std::string MakeJobDirAs(const std::string& dir, uid_t uid, gid_t gid, const std::vector<gid_t>& groups) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return "";
  std::string why;
  Status as = RunAsFsIdentity({uid, gid, groups}, [&] {
    if (auto made = MakeDirectories(dir); !made.ok()) {
      why = made.status().message();
    } else {
      SetJobDirModes(dir, *made, std::nullopt);
    }
  });
  return as.ok() ? why : as.message();
}

// Why `root` is not a folder only this agent's user (or root) controls, "" when it is (and in
// `walked` the path walked): the path as configured (no ".."), walked from "/" without following
// links, every level a folder owned by root or
// the agent's user that nobody else may write (a sticky folder such as /tmp may be shared: the
// level below it must still be ours). With `make_missing`, missing levels below such a chain
// are made (0711, through descriptors that follow no link).
std::string AgentsAloneWhyNot(const std::string& root, bool make_missing, std::filesystem::path* walked) {
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(root, ec);
  if (ec || absolute.empty()) return root + " cannot be resolved";
  for (const auto& part : absolute) {
    // Behind a link ".." is not where it reads: name the folder itself.
    if (part == "..") return root + " has a \"..\" in it: name the folder itself";
  }
  const std::filesystem::path lexical = absolute.lexically_normal();
  if (walked) *walked = lexical;
  const uid_t self = ::geteuid();
  std::filesystem::path at = lexical.root_path();
  std::vector<std::filesystem::path> levels = {at};
  for (const auto& part : lexical.relative_path()) {
    if (part.empty() || part == ".") continue;
    at /= part;
    levels.push_back(at);
  }
  for (size_t i = 0; i < levels.size(); ++i) {
    const std::filesystem::path& p = levels[i];
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      if (errno != ENOENT || !make_missing) return p.string() + " does not exist";
      if (::mkdir(p.c_str(), 0711) != 0 && errno != EEXIST) return p.string() + " cannot be made: " + std::strerror(errno);
      UniqueFd fd(::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0) return p.string() + " is not a folder";
      if (st.st_uid == self) ::fchmod(fd.get(), 0711);
      if (::lstat(p.c_str(), &st) != 0) return p.string() + " cannot be read";
    }
    if (S_ISLNK(st.st_mode)) return p.string() + " is a link (name the folder it leads to, owned by root)";
    if (!S_ISDIR(st.st_mode)) return p.string() + " is not a folder";
    if (st.st_uid != 0 && st.st_uid != self) {
      return p.string() + " belongs to uid " + std::to_string(st.st_uid) + ": make it root's, mode 0711 or 0755";
    }
    const bool last = i + 1 == levels.size();
    if ((st.st_mode & 022) != 0 && (last || (st.st_mode & S_ISVTX) == 0)) {
      return p.string() + " may be written by others than root: make it 0711 or 0755";
    }
  }
  return "";
}

// For a job of another user (uid, gid; its groups `groups`) than the agent's: why its checkpoint
// folder `ckpt` may not be made for it ("" when it may; `ckpt` then becomes the resolved folder,
// where the kernel's walk leads). Made for it: <ckpt_root>/job-<id> when that root is the agent's
// alone (by the agent), or a folder where the user could make it (`as_user` set: made as that
// user, MakeJobDirAs).
std::string CheckpointFolderRefusal(uid_t uid, const std::vector<gid_t>& groups, JobId job,
                                    const std::string& ckpt_root, std::string& ckpt, bool& as_user) {
  as_user = false;
  auto resolved = ResolvePath(ckpt);
  if (!resolved.ok()) return "checkpoint folder " + ckpt + ": " + resolved.status().message();
  const std::string own = "job-" + std::to_string(job.value());
  std::string root_why;  // why the controller's root does not count, when this is its default folder
  if (auto root = ckpt_root.empty() ? resolved : ResolvePath(ckpt_root);
      !ckpt_root.empty() && root.ok() && *resolved == *root / own) {
    std::filesystem::path walked;
    root_why = AgentsAloneWhyNot(ckpt_root, /*make_missing=*/true, &walked);
    if (root_why.empty()) {
      // Resolved again now that no level of the root can be replaced: it must still be the
      // folder that was checked (a link removed after the first resolution would not be).
      auto again = ResolvePath(ckpt);
      if (again.ok() && *again == walked / own) {
        ckpt = again->string();
        return "";
      }
      root_why = ckpt_root + " leads elsewhere than it reads (a link)";
    }
  }
  const std::string above = NotMakeableBy(*resolved, uid, groups);
  if (above.empty()) {
    ckpt = resolved->string();
    as_user = true;
    return "";
  }
  if (!root_why.empty()) {
    return "the job's checkpoint folder " + ckpt + " is not made for its user: the controller's checkpoint root " +
           root_why;
  }
  const bool looks_default = resolved->filename() == own;
  return "checkpoint folder " + ckpt + " does not exist, and the job's user may not make it (" + above +
         " is not theirs to write): make it for that user first" +
         (ckpt_root.empty() && looks_default
              ? " (a controller that does not name its checkpoint root, older than this agent, leaves even its "
                "default folders to be made so: upgrade it)"
              : ", or leave checkpoint.dir unset");
}

}  // namespace

// Waiting events are tried again at least this often while the controller does not answer.
constexpr Duration kMaxEventRetry = Duration::Seconds(5);

Duration EventRetryDelay(int64_t unanswered, Duration cap, double spread) {
  if (unanswered <= 0) return Duration::Zero();
  constexpr int64_t kFirstMs = 100;
  const int64_t doublings = std::min<int64_t>(unanswered - 1, 40);
  const int64_t full = std::min<int64_t>(cap.millis(), kFirstMs << std::min<int64_t>(doublings, 30));
  return Duration::Millis(static_cast<int64_t>(static_cast<double>(full) * std::clamp(spread, 0.5, 1.0)));
}

void Agent::NoteAnswer(bool answered, Time now) {
  if (answered) {
    unanswered_ = 0;
    events_retry_at_ = Time();
    return;
  }
  ++unanswered_;
  const double spread = std::uniform_real_distribution<double>(0.5, 1.0)(retry_spread_);
  events_retry_at_ = now + EventRetryDelay(unanswered_, std::min(heartbeat_interval_, kMaxEventRetry), spread);
}

Agent::Agent(AgentOptions options, std::unique_ptr<GpuProbe> probe)
    : options_(std::move(options)), probe_(std::move(probe)) {
  if (options_.name.empty()) {
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    options_.name = host;
  }
  if (options_.job_user.empty() && ::geteuid() == 0) options_.job_user = "nobody";
  {
    MutexLock lock(mu_);
    retry_spread_.seed(static_cast<uint32_t>(std::hash<std::string>()(options_.name) ^ static_cast<size_t>(::getpid())));
  }
  if (options_.workdir_roots.empty()) options_.workdir_roots = DefaultWorkdirRoots(options_.data_dir);
  if (options_.environments_dir.empty()) options_.environments_dir = options_.data_dir + "/envs";
  if (options_.env_python.empty()) options_.env_python = options_.burn_in.python;
  if (auto list = api::ControllerList::Parse(options_.server); list.ok()) {
    MutexLock lock(mu_);
    controllers_ = std::move(*list);
  }
  LauncherOptions lo;
  lo.default_user = options_.job_user;
  lo.allow_root = options_.allow_root_jobs;
  lo.workdir_roots = options_.workdir_roots;
  lo.cgroup_root = options_.cgroup_root;
  lo.name = options_.name;
  lo.state_dir = options_.data_dir + "/parts";
  launcher_ = std::make_unique<ProcessLauncher>(lo);
}

Agent::~Agent() {
  if (burn_in_thread_.joinable()) burn_in_thread_.join();
  if (metrics_server_) {
    metrics_server_->stop();
    if (metrics_thread_.joinable()) metrics_thread_.join();
  }
}

void Agent::SampleGpus() {
  Result<std::vector<GpuSample>> samples = Status::Unavailable("");
  {
    MutexLock probe(probe_mu_);
    samples = probe_->Sample();
  }
  MutexLock lock(mu_);
  last_sample_at_ = LoopNow();
  if (samples.ok()) {
    last_samples_ = std::move(*samples);
  } else {
    last_samples_.clear();
  }
}

std::string Agent::MetricsText() const {
  MutexLock lock(mu_);
  std::vector<obs::DcgmGpu> gpus;
  for (size_t i = 0; i < last_samples_.size() && i < gpus_.size(); ++i) {
    const GpuSample& s = last_samples_[i];
    obs::DcgmGpu g{options_.name, gpus_[i].index, gpus_[i].uuid, gpus_[i].name, s.util_pct, s.mem_used_mib,
                   gpus_[i].memory_mib, s.temperature_c, static_cast<double>(s.power_w), 0, ""};
    for (const auto& [key, run] : runs_) {
      if (run.exited) continue;
      if (std::find(run.start.gpus.begin(), run.start.gpus.end(), gpus_[i].index) != run.start.gpus.end()) {
        g.job_id = run.job_id;
        g.team = run.team;
      }
    }
    gpus.push_back(std::move(g));
  }
  obs::Exposition e;
  obs::WriteDcgmSeries(e, gpus);
  int running = 0;
  for (const auto& [key, run] : runs_) running += run.exited ? 0 : 1;
  e.Family("gpufleet_agent_parts_running", "gauge", "Job parts this agent runs now.");
  e.Sample({{"Hostname", options_.name}}, running);
  e.Family("gpufleet_agent_registered", "gauge", "1 while the agent is registered with its controller.");
  e.Sample({{"Hostname", options_.name}}, registered_ ? 1 : 0);
  e.Family("gpufleet_agent_heartbeats_total", "counter", "Heartbeats sent, by result.");
  e.Sample({{"Hostname", options_.name}, {"result", "ok"}}, static_cast<double>(heartbeats_ok_));
  e.Sample({{"Hostname", options_.name}, {"result", "failed"}}, static_cast<double>(heartbeats_failed_));
  // (By the loop's clock: the wall clock unless a test gave the agent another.)
  e.Family("gpufleet_agent_last_contact_seconds", "gauge", "Unix time of the last answer from the controller.");
  e.Sample({{"Hostname", options_.name}}, static_cast<double>(last_contact_.millis()) / 1000.0);
  return e.Text();
}

Status Agent::StartMetricsServer() {
  auto colon = options_.metrics_listen.rfind(':');
  auto port = colon == std::string::npos ? std::nullopt : ParseInt(options_.metrics_listen.substr(colon + 1));
  if (!port || *port < 0 || *port > 65535) {
    return Status::InvalidArgument("--metrics-listen: expected HOST:PORT such as 127.0.0.1:9400, got '" +
                                   options_.metrics_listen + "'");
  }
  std::string host = options_.metrics_listen.substr(0, colon);
  if (!host.empty() && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  bool loopback = host == "localhost" || host == "::1" || host.starts_with("127.");
  if (!loopback && !options_.metrics_remote) {
    return Status::InvalidArgument("--metrics-listen " + options_.metrics_listen +
                                   ": the agent's metrics need no token, so they are served on a loopback address "
                                   "only; add --metrics-remote to serve them on " + host +
                                   " (a private network your Prometheus reaches)");
  }
  metrics_server_ = std::make_unique<httplib::Server>();
  metrics_server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(MetricsText(), "text/plain; version=0.0.4; charset=utf-8");
  });
  if (!metrics_server_->bind_to_port(host, static_cast<int>(*port))) {
    return Status::Unavailable("--metrics-listen " + options_.metrics_listen + ": cannot listen there (in use?)");
  }
  metrics_thread_ = std::thread([this] { metrics_server_->listen_after_bind(); });
  // stop() does nothing before the server runs: wait, so that a quick shutdown can stop it.
  while (!metrics_server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  spdlog::info("serving metrics on http://{}/metrics", options_.metrics_listen);
  return Status::Ok();
}

namespace {

bool s_environments_dir_empty(const AgentOptions& o) { return o.environments_dir.empty(); }

// The agent's probe for a second thread: every call under the agent's probe lock.
class LockedProbe : public GpuProbe {
 public:
  LockedProbe(GpuProbe& probe, Mutex& mu) : probe_(probe), mu_(mu) {}
  Result<std::vector<GpuDevice>> Devices() override {
    MutexLock lock(mu_);
    return probe_.Devices();
  }
  Result<std::vector<GpuSample>> Sample() override {
    MutexLock lock(mu_);
    return probe_.Sample();
  }
  DriverInfo Driver() override {
    MutexLock lock(mu_);
    return probe_.Driver();
  }
  Result<std::vector<model::GpuHealth>> Health() override {
    MutexLock lock(mu_);
    return probe_.Health();
  }
  std::vector<std::pair<int, int>> TakeXids() override {
    MutexLock lock(mu_);
    return probe_.TakeXids();
  }
  double SuiteSlowdown() const override { return probe_.SuiteSlowdown(); }

 private:
  GpuProbe& probe_;
  Mutex& mu_;
};

}  // namespace

bool Agent::WantsBurnIn(int64_t request) const {
  return !burn_in_running_ && !(burn_in_report_ && burn_in_report_->request == request);
}

void Agent::StartBurnIn(int64_t request) {
  {
    MutexLock lock(mu_);
    if (burn_in_running_) return;
    burn_in_running_ = true;
    burn_in_report_.reset();
  }
  if (burn_in_thread_.joinable()) burn_in_thread_.join();
  spdlog::info("running the acceptance burn-in (time limit {})", FormatDuration(options_.burn_in.time_limit));
  burn_in_thread_ = std::thread([this, request] {
    LockedProbe probe(*probe_, probe_mu_);
    auto r = RunNodeCheck(probe, options_.burn_in);
    model::BurnInReport report;
    if (r.ok()) {
      report = std::move(*r);
    } else {
      // A suite that cannot run is a failed check, not a pass: the node is quarantined with the
      // reason, and an operator fixes the node and checks it again.
      spdlog::error("burn-in could not run: {}", r.status().message());
      report.path = "cpu";
      model::BurnInMeasurement m;
      m.name = "suite";
      m.error = r.status().message();
      report.tests.push_back(m);
    }
    report.at = WallNow();
    report.request = request;
    spdlog::info("burn-in finished in {}: {} tests", FormatDuration(report.took), report.tests.size());
    MutexLock lock(mu_);
    burn_in_report_ = std::move(report);
    burn_in_running_ = false;
    wake_.NotifyAll();
  });
}

std::vector<std::string> Agent::ReadyEnvironments() const {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(options_.environments_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name[0] == '.') continue;  // .NAME.tmp: being prepared
    if (std::filesystem::exists(entry.path() / "bin" / "python", ec)) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<Duration> Agent::PrepareEnvironment(const std::string& name, std::string* storage_fault,
                                           std::string* too_big) {
  MutexLock one(env_mu_);
  const auto started = std::chrono::steady_clock::now();
  const std::filesystem::path dir = std::filesystem::path(options_.environments_dir) / name;
  std::error_code ec;
  if (std::filesystem::exists(dir / "bin" / "python", ec)) return Duration::Zero();
  auto table = options_.environments_file.empty() ? node::EnvironmentTable::LoadDefault()
                                                  : node::EnvironmentTable::Load(options_.environments_file);
  if (!table.ok()) return table.status();
  GF_ASSIGN_OR_RETURN(const node::Environment* env, table->Resolve(name));
  const std::filesystem::path tmp = std::filesystem::path(options_.environments_dir) / ("." + name + ".tmp");
  std::filesystem::remove_all(tmp, ec);
  // A build that fails leaves nothing behind (a half-made environment can fill the disk); whether
  // it failed for lack of room is asked first, while the partial build still holds the room.
  struct DropTmp {
    const Agent& agent;
    const std::filesystem::path& path;
    std::string* storage_fault;
    std::string* too_big;
    bool keep = false;
    ~DropTmp() {
      if (keep) return;
      const bool ask = storage_fault != nullptr && too_big != nullptr && agent.StorageLooksFull();
      const std::string with_build = ask ? agent.ProbeStorage() : std::string();
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
      if (with_build.empty()) return;
      *storage_fault = agent.ProbeStorage();
      if (storage_fault->empty()) *too_big = with_build;
    }
  } drop_tmp{*this, tmp, storage_fault, too_big};
  std::filesystem::create_directories(options_.environments_dir, ec);
  spdlog::info("preparing environment {} in {}", name, dir.string());
  // A virtual environment that sees the system's packages (a node image's CUDA libraries and
  // drivers' Python bindings), with the preset's PyTorch build installed into it.
  CommandOptions co;
  co.timeout = Duration::Minutes(30);
  co.die_with_parent = true;
  auto made = RunCommand({options_.env_python, "-m", "venv", "--system-site-packages", tmp.string()}, co);
  if (!made.ok()) return made.status();
  if (!made->ok()) {
    std::string err = made->stderr_text.substr(0, 400);
    while (!err.empty() && std::isspace(static_cast<unsigned char>(err.back()))) err.pop_back();
    return Status::Unavailable("environment " + name + ": " + options_.env_python + " -m venv " +
                               made->Describe(co.timeout) + ": " + err);
  }
  std::vector<std::string> pip = Split(env->pip, ' ');
  pip.erase(std::remove(pip.begin(), pip.end(), std::string()), pip.end());
  if (!pip.empty() && pip[0] == "pip") {
    std::vector<std::string> argv = {(tmp / "bin" / "python").string(), "-m"};
    argv.insert(argv.end(), pip.begin(), pip.end());
    auto installed = RunCommand(argv, co);
    if (!installed.ok()) return installed.status();
    if (!installed->ok()) {
      std::string err = installed->stderr_text;  // (DropTmp removes the partial build)
      if (err.size() > 400) {
        // The last lines (pip ends with what went wrong), from a line's start.
        size_t from = err.size() - 400;
        const size_t line = err.find('\n', from);
        if (line != std::string::npos && line + 1 < err.size()) from = line + 1;
        err = "... " + err.substr(from);
      }
      return Status::Unavailable("environment " + name + ": '" + env->pip + "' " + installed->Describe(co.timeout) +
                                 ": " + err);
    }
  }
  std::filesystem::remove_all(dir, ec);  // a broken one (its python gone after an upgrade)
  std::filesystem::rename(tmp, dir, ec);
  if (ec) return Status::Unavailable("environment " + name + ": " + ec.message());
  drop_tmp.keep = true;
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  spdlog::info("environment {} ready in {} ms", name, took.count());
  return Duration::Millis(took.count());
}

struct Agent::Sent {
  httplib::Result res;
  std::string server;
};

std::string Agent::CurrentServer() const {
  MutexLock lock(mu_);
  return controllers_->Current();
}

Agent::Sent Agent::SendToLeader(const std::function<httplib::Result(httplib::Client&)>& send) {
  int max_tries;
  {
    MutexLock lock(mu_);
    max_tries = controllers_->MaxTries();
  }
  for (int tried = 1;; ++tried) {
    Sent sent{httplib::Result(nullptr, httplib::Error::Unknown), CurrentServer()};
    sent.res = send(MainClient(sent.server));
    const bool standby = sent.res && sent.res->status == 503 && sent.res->has_header(api::kLeaderHeader);
    // After a failure the next request starts afresh: a new connection, name lookup and TLS
    // context (a controller that moved, or a CA file that changed).
    if (!sent.res || standby) main_client_.reset();
    if ((sent.res && !standby) || tried >= max_tries) return sent;
    MutexLock lock(mu_);
    if (!controllers_->Redirect(sent.server, standby ? sent.res->get_header_value(api::kLeaderHeader) : "")) {
      return sent;
    }
    spdlog::info("{} {}; trying {}", sent.server,
                 standby ? "stands by" : "cannot be reached (" + httplib::to_string(sent.res.error()) + ")",
                 controllers_->Current());
  }
}

httplib::Client& Agent::MainClient(const std::string& server) {
  if (!main_client_ || main_client_server_ != server) {
    main_client_ = MakeClient(server, options_.ca_cert, options_.request_timeout);
    main_client_server_ = server;
  }
  return *main_client_;
}

// Why the controller could not be reached, with what to check for the TLS failures.
std::string Agent::Unreachable(const std::string& server, httplib::Error error) const {
  const std::string& url = server.empty() ? options_.server : server;
  std::string why = "cannot reach the controller at " + url + " (" + httplib::to_string(error) + ")";
  switch (error) {
    case httplib::Error::SSLServerVerification:
      return why + ": its certificate is not signed by " +
             (options_.ca_cert.empty() ? std::string("a CA this machine trusts; give --ca-cert with the CA that signed it")
                                       : "--ca-cert " + options_.ca_cert + ", or it does not name the host");
    case httplib::Error::SSLConnection:
      return why + ": the TLS handshake failed; does it serve https on that port (the agent listener of a "
                   "controller with --tls-cert)?";
    case httplib::Error::Read:
      return url.rfind("http://", 0) == 0
                 ? why + ": it closed the connection without an answer; if it serves https, use https://"
                 : why;
    default:
      return why;
  }
}

std::vector<std::pair<std::string, std::string>> Agent::StorageDirs() const {
  std::vector<std::pair<std::string, std::string>> dirs;
  if (!options_.data_dir.empty()) dirs.emplace_back("data directory", options_.data_dir);
  std::error_code ec;
  if (!options_.environments_dir.empty() && std::filesystem::is_directory(options_.environments_dir, ec)) {
    dirs.emplace_back("environments directory", options_.environments_dir);
  }
  return dirs;
}

std::vector<api::DiskReport> Agent::DiskRoom() const {
  std::vector<api::DiskReport> out;
  for (const auto& [what, dir] : StorageDirs()) {
    struct statvfs fs;
    if (::statvfs(dir.c_str(), &fs) != 0) continue;
    api::DiskReport d;
    d.dir = what == "data directory" ? "data" : "environments";
    d.path = dir;
    constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    const uint64_t unit = fs.f_frsize != 0 ? fs.f_frsize : fs.f_bsize;
    d.size_bytes = static_cast<int64_t>(std::min<uint64_t>(kMax / std::max<uint64_t>(unit, 1), fs.f_blocks) * unit);
    d.free_bytes = std::min(d.size_bytes, static_cast<int64_t>(std::min<uint64_t>(kMax / std::max<uint64_t>(unit, 1), fs.f_bavail) * unit));
    out.push_back(std::move(d));
  }
  return out;
}

bool Agent::StorageLooksFull() const {
  constexpr uint64_t kRoom = uint64_t{16} << 20;  // less than this free (or read-only): look closer
  for (const auto& [what, dir] : StorageDirs()) {
    struct statvfs fs;
    if (::statvfs(dir.c_str(), &fs) != 0) continue;
    if ((fs.f_flag & ST_RDONLY) != 0 || static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize < kRoom) return true;
  }
  return false;
}

std::string Agent::ProbeStorage() const {
  for (const auto& [what, dir] : StorageDirs()) {
    if (std::string fault = ProbeDirectory(what, dir); !fault.empty()) return fault;
  }
  return "";
}

std::string Agent::ProbeDirectory(const std::string& name, const std::string& dir) {
  const std::string path = dir + "/.storage-probe";
  auto fault = [&](const std::string& what, int err) {
    ::unlink(path.c_str());
    return "the node's " + name + " " + dir + " cannot be written (" + what + "): " + std::strerror(err);
  };
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (fd.get() < 0) return fault("create", errno);
  // 64 KiB: room for a part's state record and its first lines of output. (An empty file may
  // still fit where nothing more does, and a node with a page or two left is full for a job.)
  // (Not zeros: a file system that compresses, or dedupes, stores zeros as a hole.)
  std::string block(64 * 1024, '\0');
  for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<char>((i * 2654435761u) >> 13);
  for (size_t done = 0; done < block.size();) {
    ssize_t n = ::write(fd.get(), block.data() + done, block.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fault("write", n < 0 ? errno : ENOSPC);
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) return fault("sync", errno);
  fd.Reset();
  ::unlink(path.c_str());
  return "";
}

Status Agent::Register() {
  api::RegisterRequest req;
  const std::vector<std::string> ready = ReadyEnvironments();
  {
    MutexLock lock(mu_);
    req.name = options_.name;
    req.driver_version = driver_version_;
    req.cuda_version = cuda_version_;
    req.environments_ready = ready;
    req.storage_fault = storage_fault_;
    req.containment = launcher_->CgroupNote();
    req.limits = api::EnforcedLimits{launcher_->MemoryLimitsEnforced(), launcher_->CpuLimitsEnforced()};
    envs_reported_ = ready;
    req.address = options_.address;
    req.spec = spec_;
    req.gpus = gpus_;
    req.running = RunningKeys();
    // A part that ended but whose exit the controller has not acknowledged is still known here:
    // its exit comes with a later heartbeat (once its log is up, for an exit held back for it), so
    // it must not look lost to a new controller.
    for (const auto& e : events_) {
      if (std::find(req.running.begin(), req.running.end(), e.key) == req.running.end()) req.running.push_back(e.key);
    }
    for (const auto& [key, run] : runs_) {
      if (run.held_exit && std::find(req.running.begin(), req.running.end(), key) == req.running.end()) {
        req.running.push_back(key);
      }
    }
    req.version = "0.1.0";
  }
  std::string token;
  {
    MutexLock lock(mu_);
    token = token_.empty() ? options_.join_token : token_;
  }
  // (Bytes that are not UTF-8 and NUL bytes, say in a path a fault names, become U+FFFD: the
  // controller refuses a body with a NUL byte, and nlohmann's own dump throws on the others.)
  const std::string request = api::WithoutNulEscapes(api::DumpJson(api::ToJson(req)));
  auto post = [&](const std::string& bearer) {
    return SendToLeader([&](httplib::Client& http) {
      return http.Post("/v1/agents/register", httplib::Headers{{"Authorization", "Bearer " + bearer}}, request,
                       "application/json");
    });
  };
  Sent sent = post(token);
  if (!sent.res) return Status::Unavailable(Unreachable(sent.server, sent.res.error()));
  if ((sent.res->status == 401 || sent.res->status == 403) && token != options_.join_token) {
    // The controller forgot or replaced this agent's token (a new store), or the token is another
    // node's (a renamed agent): join again.
    sent = post(options_.join_token);
    if (!sent.res) return Status::Unavailable(Unreachable(sent.server, sent.res.error()));
  }
  const httplib::Result& res = sent.res;
  if (res->status != 200) {
    std::string msg = res->body;
    auto j = api::ParseJson(res->body);
    if (j.ok() && j->contains("error")) msg = (*j)["error"].value("message", res->body);
    std::string text = "registration refused (HTTP " + std::to_string(res->status) + "): " + msg;
    // A refusal (bad token, bad spec, a released name) will not change by retrying; a live node's
    // name (409 with Retry-After) may be taken with the join token once that node is lost: this
    // agent's own token was not known (the controller's store was restored from a backup, or the
    // agent's data directory is new), and the node it names is this one.
    const bool wait_for_name = res->status == 409 && res->has_header("Retry-After");
    if (wait_for_name) {
      text += "; the name is free " + res->get_header_value("Retry-After") +
              " s after that node's agent last reported, if it stops (asking again meanwhile; another agent "
              "still running under this name keeps it: give this one another --name)";
    }
    // 404: not a gpufleet agent listener (the API port, or another server): retrying cannot help.
    if (res->status == 404) {
      text += "; --server must be the controller's agent URL (its --agent-listen, by default the API port + 1)";
    }
    bool refused = res->status == 400 || res->status == 401 || res->status == 403 || res->status == 404 ||
                   (res->status == 409 && !wait_for_name);
    Status st = refused ? Status::InvalidArgument(text) : Status::Unavailable(text);
    return st;
  }
  auto body = api::ParseJson(res->body);
  if (!body.ok()) return body.status();
  auto reply = api::RegisterReplyFromJson(*body);
  if (!reply.ok()) return reply.status();
  if (!WritePrivate(TokenPath(options_), reply->token)) {
    // (Kept in memory: this run goes on; a restart joins again with the join token once the
    // controller lets the old registration go.)
    spdlog::error("the agent token is not saved: a restarted agent must join again");
  }
  MutexLock lock(mu_);
  token_ = reply->token;
  if (epoch_ != reply->epoch) after_ = 0;
  epoch_ = reply->epoch;
  heartbeat_interval_ = reply->heartbeat_interval;
  lost_after_ = reply->lost_after;
  checkpoint_root_ = reply->checkpoint_root;
  fenced_ = false;
  registered_ = true;
  notice_acked_ = false;  // a restarted controller hears of a notice again at once
  notice_retry_at_ = Time();
  last_contact_ = LoopNow();
  spdlog::info("registered as {} (node {}) with {}", options_.name, reply->node.value(), sent.server);
  wake_.NotifyAll();
  const bool burn_in = reply->run_burn_in && WantsBurnIn(reply->burn_in_request);
  lock.Unlock();
  if (burn_in) StartBurnIn(reply->burn_in_request);
  return Status::Ok();
}

Status Agent::Run(const std::atomic<bool>& stop, bool stop_jobs_on_exit) {
  if (auto list = api::ControllerList::Parse(options_.server); !list.ok()) {
    return Status::InvalidArgument("--server: " + list.status().message());
  }
  // The node as the probe sees it.
  auto devices = probe_->Devices();
  if (!devices.ok()) return devices.status();
  auto spec = NodeSpecFromDevices(options_.name, *devices, model::GpuCatalog::BuiltIn());
  if (!spec.ok()) return spec.status();
  spec_ = *spec;
  spec_.labels = options_.labels;
  spec_.market = options_.market;
  spec_.price_micros_per_hour = options_.price_micros_per_hour;
  // What jobs may ask besides GPUs (resources.cpus, memory): declared, else the host's.
  HostResources host = ProbeHostResources();
  spec_.cpu_milli = options_.cpu_milli > 0 ? options_.cpu_milli : host.cpu_milli;
  spec_.mem_mib = options_.mem_mib > 0 ? options_.mem_mib : host.mem_mib;
  for (const auto& d : *devices) gpus_.push_back({d.index, d.uuid, d.name, d.memory_mib, d.compute_capability});
  {
    MutexLock probe(probe_mu_);
    DriverInfo driver = probe_->Driver();
    driver_version_ = driver.driver_version;
    cuda_version_ = driver.cuda_version;
  }
  std::error_code ec;
  // Folders made here for the data directory are passable (0711), whatever the umask: the jobs'
  // folders lie below them, and jobs may run as another user.
  if (auto made = MakeDirectories(std::filesystem::absolute(options_.data_dir, ec)); made.ok()) {
    for (const auto& p : *made) ::chmod(p.c_str(), 0711);
  } else {
    spdlog::warn("{}", made.status().message());
  }
  ::chmod(options_.data_dir.c_str(), 0711);
  {
    // One agent per data directory, before anything of an earlier run is touched.
    const std::string lock_path = options_.data_dir + "/agent.lock";
    data_lock_.emplace(LiftFd(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600)));
    if (data_lock_->get() < 0) return Status::Unavailable("cannot open " + lock_path + ": " + std::strerror(errno));
    if (::flock(data_lock_->get(), LOCK_EX | LOCK_NB) != 0) {
      data_lock_.reset();
      return Status::FailedPrecondition("another agent is running on " + options_.data_dir +
                                        "; stop it first, or give this one its own --data-dir (and --name)");
    }
  }
  // Given back when Run returns (an agent object that is run again, or another in this process).
  struct ReleaseLock {
    std::optional<UniqueFd>& lock;
    ~ReleaseLock() { lock.reset(); }
  } release_lock{data_lock_};
  std::filesystem::create_directories(options_.data_dir + "/logs", ec);
  ::chmod((options_.data_dir + "/logs").c_str(), 0700);
  // A node that starts without room says so from its registration on (and takes no work).
  if (std::string fault = StorageLooksFull() ? ProbeStorage() : std::string(); !fault.empty()) {
    spdlog::error("{}; this node takes no work until it can", fault);
    MutexLock lock(mu_);
    storage_fault_ = fault;
    ++storage_fault_sets_;
  }
  if (options_.work_dir.empty()) {
    const bool another_user = ::geteuid() == 0 && options_.job_user != "root";
    std::string why;
    options_.work_dir = DefaultWorkDir(options_.data_dir, options_.name, another_user, &why);
    if (!why.empty()) {
      spdlog::warn("jobs run as another user and {}: jobs with no working directory of their own run under {}",
                   why, options_.work_dir);
    }
  }
  for (const std::filesystem::path& dir : {std::filesystem::path(options_.work_dir).parent_path(),
                                           std::filesystem::path(options_.work_dir)}) {
    std::filesystem::create_directories(dir, ec);
    // In a shared folder such as /var/tmp another user may have made it first: use only ours.
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
      spdlog::error("{} is not a folder of this agent's user; jobs with no working directory of their own run "
                    "under {} instead", dir.string(), options_.data_dir + "/work");
      options_.work_dir = options_.data_dir + "/work";
      std::filesystem::create_directories(options_.work_dir, ec);
      ::chmod(options_.work_dir.c_str(), 0711);
      break;
    }
    ::chmod(dir.c_str(), 0711);
  }
  // What an earlier run of this agent left running (it was killed, or the machine rebooted into
  // it): the controller has given that work away, so it must not go on.
  for (const auto& what : launcher_->KillLeftovers()) spdlog::warn("killed a leftover of an earlier run: {}", what);
  // Pre-warmed environments (a pool's prewarm:): ready before the node takes work.
  for (const auto& env : options_.prewarm) {
    auto took = PrepareEnvironment(env);
    if (!took.ok()) spdlog::error("prewarm {}: {}", env, took.status().message());
  }
  spdlog::info("{}", launcher_->CgroupNote());
  {
    std::string saved = ReadFirstLine(TokenPath(options_));
    MutexLock lock(mu_);
    if (!saved.empty()) token_ = saved;
  }
  if (!options_.spot_notice_url.empty()) {
    auto poller = SpotNoticePoller::Create(options_.spot_notice_url, options_.spot_notice_format);
    if (!poller.ok()) return Status::InvalidArgument("spot notice URL: " + poller.status().message());
    notice_poller_ = std::move(*poller);
  }

  if (!options_.metrics_listen.empty()) GF_RETURN_IF_ERROR(StartMetricsServer());

  // First registration: a refusal (bad token, bad spec) is fatal; an absent controller is not.
  Time started = LoopNow();
  {
    MutexLock lock(mu_);
    last_contact_ = started;
  }
  while (!stop) {
    Status st = Register();
    if (st.ok()) break;
    if (st.code() == StatusCode::kInvalidArgument) return st;
    if (options_.max_disconnected > Duration::Zero() && LoopNow() - started > options_.max_disconnected) {
      return Status::Unavailable("gave up: " + st.message());
    }
    spdlog::warn("{}; retrying", st.message());
    MutexLock lock(mu_);
    wake_.WaitFor(mu_, std::chrono::seconds(1), [&] { return stop.load(); });
  }

  std::thread commands([&] { CommandLoop(stop); });
  std::thread notices;
  if (notice_poller_) notices = std::thread([&] { NoticeLoop(stop); });
  Time last_beat = Time::FromMillis(0);
  bool gave_up = false;
  while (!stop) {
    Time now = LoopNow();
    bool due;
    bool has_events;
    {
      MutexLock lock(mu_);
      // (A beat that carries activity is the interval's heartbeat, so `due` matters only until
      // the first one and after the interval changes.)
      due = now - last_beat >= heartbeat_interval_;
      // Not registered (a new controller epoch seen by the command poll): at once, not at the
      // next interval, or its commands would wait that long; held as events are after a miss.
      if (!registered_ && now >= events_retry_at_) due = true;
      // Held a while after the controller did not answer (EventRetryDelay): a fleet's agents
      // would otherwise send a beat every pass, ten a second each, at a controller that is down
      // or coming back up.
      has_events = (!events_.empty() || (notice_ && !notice_acked_ && now >= notice_retry_at_)) &&
                   now >= events_retry_at_;
    }
    if (!options_.metrics_listen.empty() && now - last_sample_at_ >= options_.metrics_interval) SampleGpus();
    if (Beat(due || has_events, now)) last_beat = now;
    {
      Duration silent;
      bool fence = false;
      {
        MutexLock lock(mu_);
        Duration window = options_.fence_after ? *options_.fence_after : lost_after_;
        silent = now - last_contact_;
        fence = !fenced_ && window > Duration::Zero() && silent > window && !RunningKeys().empty();
        if (fence) fenced_ = true;
      }
      if (fence) Fence(silent);
    }
    {
      MutexLock lock(mu_);
      if (options_.max_disconnected > Duration::Zero() && now - last_contact_ > options_.max_disconnected) {
        spdlog::error("the controller has been unreachable for {}; stopping all jobs and exiting",
                      FormatDuration(now - last_contact_));
        gave_up = true;
        break;
      }
    }
    {
      MutexLock lock(mu_);
      wake_.WaitFor(mu_, std::chrono::milliseconds(100));
    }
    MutexLock passes(passes_mu_);
    ++loop_passes_;
    passed_.NotifyAll();
  }
  // Parts die with the agent (their shims watch the thread that launched them), so stop them
  // properly first, with their checkpoint signal and grace, whatever the reason for stopping.
  // Their exits and logs still go to the controller (the ticks below), marked stopped by the
  // agent: it requeues their jobs (a stop is not a failure) and holds the node until the agent
  // registers again.
  (void)stop_jobs_on_exit;
  StopAll(gave_up ? "the agent gave up on its controller" : "the agent is shutting down");
  {
    // One prompt try with what is waiting, whatever hold the last misses set.
    MutexLock lock(mu_);
    events_retry_at_ = Time();
  }
  {
    // Wait for the parts within their grace (the launcher escalates to SIGKILL), then a little
    // for the controller to acknowledge their exits; an absent controller is not waited for.
    const Time parts_deadline = LoopNow() + Duration::Seconds(300);
    Time acked_deadline = Time::Max();
    for (;;) {
      bool waiting_events;
      {
        MutexLock lock(mu_);
        waiting_events = !events_.empty();
        for (const auto& [key, run] : runs_) waiting_events = waiting_events || !run.exited || run.held_exit;
      }
      // Beats go for events (exits, which wait for their logs' upload in Tick), and after a miss
      // only once the hold is over; the running parts' activity goes on its own interval.
      bool send_events;
      Time retry_at;
      {
        MutexLock lock(mu_);
        retry_at = events_retry_at_;
        send_events = !events_.empty() && LoopNow() >= retry_at;
      }
      const bool parts_left = !launcher_->List().empty();
      Time now = LoopNow();
      if (!parts_left && acked_deadline == Time::Max()) {
        // Five seconds for the acknowledgement, and a try after the hold that is on now.
        acked_deadline = std::max(now + Duration::Seconds(5), retry_at + Duration::Seconds(1));
      }
      if (!parts_left && (!waiting_events || gave_up || now >= acked_deadline)) break;
      if (parts_left && now >= parts_deadline) break;
      // Parts checkpointing within their grace still report output and progress.
      Beat(send_events, now);
      MutexLock lock(mu_);
      wake_.WaitFor(mu_, std::chrono::milliseconds(50));
    }
  }
  {
    MutexLock lock(mu_);
    wake_.NotifyAll();
  }
  // Only now may the command thread (the one that launched the parts) end. Cut its long poll
  // short, then wait for it.
  {
    MutexLock lock(mu_);
    quit_commands_ = true;
    if (poll_client_) poll_client_->stop();
  }
  commands.join();
  if (notices.joinable()) {
    notice_poller_->Cancel();
    notices.join();
  }
  if (metrics_server_) {
    metrics_server_->stop();
    metrics_thread_.join();
  }
  return gave_up ? Status::Unavailable("the controller was unreachable for too long") : Status::Ok();
}

int64_t Agent::loop_passes() const {
  MutexLock lock(passes_mu_);
  return loop_passes_;
}

bool Agent::WaitForLoopPasses(int64_t n, std::chrono::milliseconds limit) const {
  MutexLock lock(passes_mu_);
  return passed_.WaitFor(passes_mu_, limit, [&] {
    passes_mu_.AssertHeld();  // WaitFor checks it with passes_mu_ held
    return loop_passes_ >= n;
  });
}

void Agent::Fence(Duration silent) {
  size_t running;
  {
    MutexLock lock(mu_);
    running = RunningKeys().size();
  }
  spdlog::error("no word from the controller for {}: a controller that is up counts this node as lost by now and "
                "may requeue its jobs elsewhere; stopping the {} part(s) that still run here so that no job runs twice",
                FormatDuration(silent), running);
  StopAll("fenced: no word from the controller for " + FormatDuration(silent));
}

void Agent::StopAll(const std::string& why) {
  std::vector<api::StopPart> stops;
  {
    MutexLock lock(mu_);
    for (auto& [key, run] : runs_) {
      if (run.exited) continue;
      if (run.message.empty()) run.message = why;
      stops.push_back({key, run.start.stop_signal, run.start.grace, why});
    }
  }
  for (const auto& s : stops) StopPart(s);
}

void Agent::CommandLoop(const std::atomic<bool>& stop) {
  httplib::Client* http = nullptr;
  std::string server;  // the URL poll_client_ talks to
  for (;;) {
    std::string token;
    int64_t after;
    std::string epoch;
    {
      MutexLock lock(mu_);
      if (quit_commands_) break;
      if (!http || server != controllers_->Current()) {
        // The agent follows another controller now: poll that one.
        server = controllers_->Current();
        poll_client_ = MakeClient(server, options_.ca_cert, options_.poll_wait);
        http = poll_client_.get();
      }
      if (!registered_ || stop) {
        // Stopping: no new work; this thread stays until the parts it launched have stopped.
        wake_.WaitFor(mu_, std::chrono::milliseconds(200));
        continue;
      }
      token = token_;
      after = after_;
      epoch = epoch_;
    }
    httplib::Headers h = {{"Authorization", "Bearer " + token}};
    // The epoch `after` counts in: a controller that restarted while this poll was on its way
    // (or before the agent heard) must not take `after` as an acknowledgement of its own commands.
    std::string path = "/v1/agents/commands?after=" + std::to_string(after) +
                       "&wait_ms=" + std::to_string(options_.poll_wait.millis()) +
                       (epoch.empty() ? "" : "&epoch=" + httplib::detail::encode_query_param(epoch));
    auto res = http->Get(path.c_str(), h);
    if (!res || res->status != 200) {
      if (res && (res->status == 401 || res->status == 409)) {
        MutexLock lock(mu_);
        registered_ = false;  // the heartbeat loop re-registers
      }
      if (!res || (res->status == 503 && res->has_header(api::kLeaderHeader))) {
        // Not the leader (any more): the next poll goes where the list points now.
        MutexLock lock(mu_);
        controllers_->Redirect(server, res ? res->get_header_value(api::kLeaderHeader) : "");
      }
      MutexLock lock(mu_);
      wake_.WaitFor(mu_, std::chrono::milliseconds(500), [&] { return stop.load(); });
      continue;
    }
    auto body = api::ParseJson(res->body);
    if (!body.ok()) continue;
    auto batch = api::CommandBatchFromJson(*body);
    if (!batch.ok()) {
      spdlog::error("bad commands from the controller: {}", batch.status().message());
      continue;
    }
    {
      MutexLock lock(mu_);
      last_contact_ = LoopNow();
      fenced_ = false;
      if (batch->epoch != epoch_) {
        // A new controller: its command numbers start again, and it must hear what runs here
        // (the registration does both; the heartbeat loop, seeing the epoch unchanged once this
        // loop took it, would not register).
        epoch_ = batch->epoch;
        after_ = 0;
        registered_ = false;
        wake_.NotifyAll();
        continue;
      }
    }
    for (const auto& c : batch->commands) {
      Apply(c);
      MutexLock lock(mu_);
      // A registration meanwhile may have moved to a new controller's numbering: this command's
      // number counts in the batch's epoch only.
      if (epoch_ == batch->epoch) after_ = std::max(after_, c.seq);
    }
  }
}

void Agent::NoticeLoop(const std::atomic<bool>& stop) {
  spdlog::info("polling {} for spot interruption notices every {}", options_.spot_notice_url,
               FormatDuration(options_.spot_notice_interval));
  while (!stop) {
    std::optional<api::SpotNotice> notice = notice_poller_->Poll();
    MutexLock lock(mu_);
    if (notice) {
      // A notice does not go away; one is all the controller needs.
      spdlog::warn("spot interruption notice: the provider will {} this node at {}", notice->action,
                   FormatIso8601(notice->time));
      notice_ = std::move(notice);
      notice_acked_ = false;
      notice_retry_at_ = Time();
      wake_.NotifyAll();  // a heartbeat now
      return;
    }
    wake_.WaitFor(mu_, std::chrono::milliseconds(options_.spot_notice_interval.millis()),
                   [&] { return stop.load(); });
  }
}

void Agent::Apply(const api::Command& c) {
  if (c.start) StartPart(*c.start);
  if (c.stop) StopPart(*c.stop);
}

// The exit the agent reports for a part it did not run (now): code -1, the reason in its message.
api::PartEvent Agent::NotRunExit(const api::PartKey& key, std::string message) {
  api::PartEvent e;
  e.key = key;
  e.kind = api::PartEventKind::kExited;
  e.at = WallNow();
  e.exit_code = -1;
  e.message = std::move(message);
  return e;
}

void Agent::StartPart(const api::StartPart& s) {
  MutexLock lock(mu_);
  if (!seen_.insert(s.key).second) {
    // Started (or refused) before: started at most once. A start sent again for a part that runs
    // here is a repeat; one for a part that has ended comes from a controller whose state is older
    // than this node's (a restored backup): say so, or its job would wait in starting for ever.
    // (Only once the part is forgotten here: while its exit waits to be reported, that exit is
    // the answer, and a second one would requeue a job that ended.)
    if (runs_.count(s.key)) return;
    lock.Unlock();
    api::PartEvent e = NotRunExit(s.key, "node " + options_.name + " ran part " + s.key.ToString() +
                                             " before and does not start it again (the controller's state is older "
                                             "than the node's: a restored backup?)");
    e.already_ran = true;
    PushEvent(e);
    return;
  }
  PartRun run;
  run.start = s;
  run.log_path = options_.data_dir + "/logs/" + s.key.ToString() + ".log";
  std::string workdir = s.workdir.empty() ? options_.work_dir + "/job-" + std::to_string(s.key.job.value())
                                          : s.workdir;
  std::string ckpt;
  if (auto it = s.env.find("GPUFLEET_CHECKPOINT_DIR"); it != s.env.end()) ckpt = it->second;
  if (auto it = s.env.find("GPUFLEET_JOB_ID"); it != s.env.end()) run.job_id = ParseInt(it->second).value_or(0);
  if (auto it = s.env.find("GPUFLEET_TEAM"); it != s.env.end()) run.team = it->second;
  // Where the part reports progress (the watchdog): a directory of its own, writable by its user.
  std::string progress_dir = options_.work_dir + "/progress/" + s.key.ToString();
  run.progress_path = progress_dir + "/progress";
  const std::string ckpt_root = checkpoint_root_;
  lock.Unlock();
  auto owner = JobOwner(s.user.empty() ? options_.job_user : s.user);
  // The agent makes the checkpoint folder for the job's user where that user could make it, or
  // where the controller puts it by default (<its checkpoint root>/job-<id>, exactly) when the
  // root is the agent's alone (made here if missing where no job's user could make it); a job
  // that names one elsewhere must find it made. The path is resolved first, so that what is
  // checked is what the kernel's walk reaches ("..", links); a folder the user could make is
  // then made as that user (MakeJobDirAs), so the check is not all that stands guard.
  std::string refused;
  bool ckpt_as_user = false;
  std::vector<gid_t> groups;
  const std::string job_user = s.user.empty() ? options_.job_user : s.user;
  if (::geteuid() == 0 && !job_user.empty() && (!owner || (owner->first == 0 && !options_.allow_root_jobs))) {
    // The launch would be refused: make nothing for it, and say why.
    refused = owner ? "the job's user is root, and this agent runs no job as root: run the agent with "
                      "--allow-root-jobs, or the job as another user"
                    : "the job's user '" + job_user + "' is unknown on this node";
  } else if (!ckpt.empty() && owner && owner->first != ::geteuid()) {
    groups = GroupsOf(job_user, owner->second);
    refused = CheckpointFolderRefusal(owner->first, groups, s.key.job, ckpt_root, ckpt, ckpt_as_user);
  }
  if (refused.empty()) {
    if (ckpt_as_user) {
      if (std::string why = MakeJobDirAs(ckpt, owner->first, owner->second, groups); !why.empty()) {
        refused = "checkpoint folder " + ckpt + " cannot be made as the job's user: " + why;
      }
    } else if (!ckpt.empty()) {
      MakeJobDir(ckpt, owner);
    }
  }
  if (refused.empty()) {
    if (s.workdir.empty()) MakeJobDir(workdir, owner);
    MakeJobDir(progress_dir, owner);
  }
  int procs = std::max(1, s.processes);
  std::string error = refused;
  if (!error.empty()) procs = 0;
  std::vector<std::string> keys;
  std::optional<Duration> env_took;
  bool env_warm = false;
  bool env_failed = false;  // preparing the part's environment failed
  std::string env_storage_fault;  // ... on a disk without room (probed before its build was removed)
  std::string env_bin;
  if (error.empty() && !s.environment.empty()) {
    std::string env_too_big;
    auto took = PrepareEnvironment(s.environment, &env_storage_fault, &env_too_big);
    if (!took.ok() && !env_too_big.empty()) {
      // The node has room, but not for this environment: the job's failure here (its build
      // would only fill the disk again), said plainly.
      std::string why = took.status().message();
      if (why.size() > 240) why = why.substr(0, 240) + "...";
      error = "environment " + s.environment + " does not fit on this node: " + env_too_big +
              " while it was built (it needs more room there; the partial build was removed): " + why;
      procs = 0;
    } else if (!took.ok()) {
      const std::string& why = took.status().message();  // most name the environment already
      const bool named = StartsWith(why, "environment " + s.environment + ":") ||
                         why.find("'" + s.environment + "'") != std::string::npos;
      error = named ? why : "environment " + s.environment + ": " + why;
      env_failed = true;
      procs = 0;
    } else {
      env_took = *took;
      env_warm = *took == Duration::Zero();
      env_bin = options_.environments_dir + "/" + s.environment + "/bin";
    }
  }
  if (error.empty() && s.verify_network) {
    // The gang's nodes all-reduce with each other before the job's processes start: a gang whose
    // nodes cannot reach each other (a firewall, a wrong --address) fails here with the reason
    // instead of hanging in its own rendezvous. The result goes to the part's log.
    auto get = [&](const char* k) {
      auto it = s.env.find(k);
      return it == s.env.end() ? std::string() : it->second;
    };
    std::vector<std::string> argv = {options_.burn_in.python,
                                     options_.burn_in.suite.empty() ? DefaultBurnInSuite() : options_.burn_in.suite,
                                     "allreduce", "--rank", get("NODE_RANK"), "--world-size", get("NNODES"),
                                     "--master-addr", get("MASTER_ADDR"), "--master-port", get("MASTER_PORT"),
                                     "--backend", s.gpus.empty() || driver_version_.empty() ? "gloo" : "auto",
                                     "--time-limit", "120"};
    if (options_.burn_in.quick) argv.push_back("--quick");
    CommandOptions co;
    co.timeout = Duration::Seconds(150);
    co.die_with_parent = true;
    if (!s.gpus.empty()) co.env["CUDA_VISIBLE_DEVICES"] = get("CUDA_VISIBLE_DEVICES");
    auto check = RunCommand(argv, co);
    std::ofstream log(run.log_path, std::ios::app);
    if (!check.ok() || !check->ok()) {
      std::string why = !check.ok() ? check.status().message()
                                     : check->Describe(co.timeout) + ": " +
                                           check->stderr_text.substr(0, std::min<size_t>(check->stderr_text.size(), 400));
      error = "network check between the gang's nodes failed: " + why;
      procs = 0;
    } else {
      log << "gpufleet: network check: " << check->stdout_text;
      spdlog::info("{}: network check: {}", s.key.ToString(), check->stdout_text);
    }
  }
  for (int i = 0; i < procs; ++i) {
    LaunchSpec ls;
    ls.key = ProcKey(s.key, i);
    ls.argv = s.argv;
    ls.workdir = workdir;
    ls.env = s.env;
    if (!ckpt.empty()) ls.env["GPUFLEET_CHECKPOINT_DIR"] = ckpt;  // where it was made (resolved)
    ls.env["GPUFLEET_PROGRESS"] = run.progress_path;
    if (!env_bin.empty()) {
      // The environment's python first on PATH, as `source bin/activate` would.
      auto path = ls.env.find("PATH");
      ls.env["PATH"] = env_bin + ":" + (path != ls.env.end() ? path->second : std::string("/usr/local/bin:/usr/bin:/bin"));
      ls.env["VIRTUAL_ENV"] = std::filesystem::path(env_bin).parent_path().string();
      ls.env["GPUFLEET_ENVIRONMENT"] = s.environment;
    }
    if (procs > 1) {
      ls.env["RANK"] = std::to_string(s.rank_base + i);
      ls.env["LOCAL_RANK"] = std::to_string(i);
    }
    ls.user = s.user;
    ls.log_path = run.log_path;
    // The part's request, shared by its processes (one cgroup each: split it evenly).
    ls.cpu_milli = s.cpu_milli / procs;
    ls.memory_limit_mib = s.mem_mib / procs;
    auto pid = launcher_->Launch(ls);
    if (!pid.ok()) {
      error = pid.status().message();
      break;
    }
    keys.push_back(ls.key);
  }
  // A part that could not start on a node that cannot keep its own files (its data directory is
  // full or read-only) did not fail by its own doing: the node is at fault. The controller
  // requeues the part's job and gives this node no work until the probe passes again.
  // (statvfs first: an array of failing starts must not write and sync 64 KiB for each.)
  const std::string storage_fault = error.empty()                 ? std::string()
                                    : !env_storage_fault.empty()  ? env_storage_fault
                                    : StorageLooksFull()          ? ProbeStorage()
                                                                  : std::string();
  lock.Lock();
  run.proc_keys = keys;
  run.procs_left = static_cast<int>(keys.size());
  if (!error.empty()) {
    // Write the reason where the user will look, stop what did start, and report the part as
    // exited with 127 (as a shell does for a command it cannot run).
    const std::string start_error = error;
    if (!storage_fault.empty()) {
      if (storage_fault_.empty()) spdlog::error("{}; this node takes no work until it can", storage_fault);
      storage_fault_ = storage_fault;
      ++storage_fault_sets_;
      error += " (" + storage_fault + ")";
      run.node_fault = true;
    }
    std::ofstream(run.log_path, std::ios::app) << "gpufleet: cannot start: " << error << "\n";
    spdlog::error("{}: cannot start: {}", s.key.ToString(), error);
    // (A node fault says what the node lacks first, then the start's own error, cut short: the
    // part's log may not have taken it.)
    run.message = storage_fault.empty()
                      ? "cannot start: " + error
                      : storage_fault + (env_failed ? " (preparing environment " + s.environment + ")" : "") +
                            "; cannot start: " + (start_error.size() > 240 ? start_error.substr(0, 240) + "..." : start_error);
    run.exit_code = 127;
    run.start_failed = true;
    if (!keys.empty()) {
      // Some processes of the part started: stop them; their exits report the part.
      runs_[s.key] = std::move(run);
      lock.Unlock();
      for (const auto& k : keys) {
        if (Status st = launcher_->Stop(k, SIGKILL, Duration::Zero(), WallNow()); !st.ok()) {
          spdlog::warn("{}: {}", k, st.message());  // it exited already: its exit reports it
        }
      }
      return;
    }
    // The main loop uploads the log (its connection is its own) and then reports the exit.
    run.exited = true;
    api::PartEvent e;
    e.key = s.key;
    e.kind = api::PartEventKind::kExited;
    e.at = WallNow();
    e.exit_code = 127;
    e.node_fault = run.node_fault;
    e.message = run.message;
    run.held_exit = e;
    run.held_since = LoopNow();
    runs_[s.key] = std::move(run);
    wake_.NotifyAll();
    return;
  }
  runs_[s.key] = std::move(run);
  lock.Unlock();
  api::PartEvent e;
  e.key = s.key;
  e.kind = api::PartEventKind::kStarted;
  e.at = WallNow();
  e.environment_took = env_took;
  e.environment_warm = env_warm;
  PushEvent(e);
}

void Agent::StopPart(const api::StopPart& s) {
  MutexLock lock(mu_);
  auto it = runs_.find(s.key);
  if (it == runs_.end()) {
    // Never ran here: refuse a later start and say it is not running, so the controller's
    // bookkeeping of the part ends.
    bool fresh = seen_.insert(s.key).second;
    lock.Unlock();
    if (fresh) {
      api::PartEvent e = NotRunExit(s.key, "was not running on " + options_.name);
      e.stopped = true;
      PushEvent(e);
    }
    return;
  }
  if (it->second.exited) return;
  it->second.stopped = true;
  std::vector<std::string> keys = it->second.proc_keys;
  lock.Unlock();
  spdlog::info("{}: stopping with signal {} ({}), grace {}", s.key.ToString(), s.signal, s.reason,
               FormatDuration(s.grace));
  for (const auto& k : keys) {
    if (Status st = launcher_->Stop(k, s.signal, s.grace, WallNow()); !st.ok()) {
      spdlog::warn("{}: {}", k, st.message());  // it exited already: its exit reports it
    }
  }
}

void Agent::PushEvent(api::PartEvent e) {
  MutexLock lock(mu_);
  e.seq = next_event_seq_++;
  events_.push_back(std::move(e));
  wake_.NotifyAll();
}

std::vector<api::PartKey> Agent::RunningKeys() const {
  std::vector<api::PartKey> out;
  for (const auto& [key, run] : runs_) {
    if (!run.exited) out.push_back(key);
  }
  return out;
}

// Uploads new bytes of a part's log (all of them when `all`), from `u.uploaded` on, to `server`.
// The main loop's thread (it uses MainClient), without mu_: the caller snapshots what it needs
// and applies the result (LogUpload's outcome) under the lock.
void Agent::UploadLog(LogUpload& u, const std::string& token, const std::string& server) {
  struct stat sb;
  if (::stat(u.log_path.c_str(), &sb) != 0) {
    u.outcome = LogUpload::Outcome::kComplete;
    return;
  }
  httplib::Client* http = &MainClient(server);
  httplib::Headers h = {{"Authorization", "Bearer " + token}};
  for (int round = 0; round < (u.all ? 64 : 1) && u.uploaded < sb.st_size; ++round) {
    std::ifstream f(u.log_path, std::ios::binary);
    f.seekg(u.uploaded);
    std::string chunk(std::min<int64_t>(sb.st_size - u.uploaded, 1 << 20), '\0');
    f.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    chunk.resize(f.gcount());
    if (chunk.empty()) break;
    std::string path = "/v1/agents/logs?job=" + std::to_string(u.part.job.value()) +
                       "&attempt=" + std::to_string(u.part.attempt) + "&part=" + std::to_string(u.part.part) +
                       "&offset=" + std::to_string(u.uploaded);
    auto res = http->Post(path.c_str(), h, chunk, "application/octet-stream");
    if (!res || (res->status == 503 && res->has_header(api::kLeaderHeader))) {
      // Not the leader: the next upload (and heartbeat) goes where the list points now, afresh.
      main_client_.reset();
      u.outcome = LogUpload::Outcome::kRedirect;
      u.leader = res ? res->get_header_value(api::kLeaderHeader) : "";
      u.answered = static_cast<bool>(res);
      return;
    }
    auto body = api::ParseJson(res->body);
    if ((res->status == 200 || res->status == 409) && body.ok() && body->contains("size") &&
        (*body)["size"].is_number_integer()) {
      u.uploaded = std::min<int64_t>((*body)["size"].get<int64_t>(), sb.st_size);
      if (res->status == 409 && u.uploaded < 0) u.uploaded = 0;
      if (res->status == 200 && u.cut_at < 0 && body->value("cut", false)) u.cut_at = u.uploaded;
    } else if (res->status == 403 || res->status == 404) {
      // The controller will not take this log (the part is no longer this node's): stop trying.
      spdlog::warn("{}: the controller refused its log (HTTP {}); dropping {} bytes", u.part.ToString(),
                   res->status, sb.st_size - u.uploaded);
      u.uploaded = sb.st_size;
      u.refused = true;
      u.outcome = LogUpload::Outcome::kComplete;
      return;
    } else {
      u.outcome = LogUpload::Outcome::kMissed;
      return;
    }
  }
  u.outcome = u.uploaded >= sb.st_size ? LogUpload::Outcome::kComplete : LogUpload::Outcome::kPartial;
}

void Agent::FreeLogPastCut(PartRun& run) {
  // Kept: what the controller has (up to the cut), for a standby that takes over with less of it
  // and asks for it again, and the last MiB (the tail of a part's output). Freed in steps of at
  // least 16 MiB, so that a part that prints without end costs one call per 16 MiB.
  constexpr int64_t kBlock = 4096, kKeepTail = int64_t{1} << 20, kStep = int64_t{16} << 20;
  if (run.cut_at < 0 || run.punch_unsupported) return;
  const int64_t from = (std::max(run.cut_at, run.punched) + kBlock - 1) / kBlock * kBlock;
  const int64_t to = (run.uploaded - kKeepTail) / kBlock * kBlock;
  if (to - from < kStep) return;
  UniqueFd fd(open(run.log_path.c_str(), O_WRONLY | O_CLOEXEC));
  if (fd.get() < 0 || fallocate(fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, from, to - from) != 0) {
    // A filesystem without hole punching: the log keeps its size, as before.
    spdlog::warn("{}: cannot free its log past the controller's cap: {}", run.log_path, std::strerror(errno));
    run.punch_unsupported = true;  // not again
    return;
  }
  if (run.punched == 0) {
    spdlog::info("{}: the log passed the controller's cap; what was sent beyond it is freed on this node", run.log_path);
  }
  run.punched = to;
}

bool Agent::TakeActivityDue(Time now) {
  // Once per interval (again at once if the clock stepped back).
  if (now - activity_at_ < heartbeat_interval_ && now >= activity_at_) return false;
  activity_at_ = now;
  return true;
}

bool Agent::Beat(bool heartbeat_due, Time now) {
  bool activity;
  int64_t answered_before;
  {
    MutexLock lock(mu_);
    activity = TakeActivityDue(now);
    answered_before = heartbeats_ok_;
  }
  Tick(heartbeat_due || activity, activity);
  if (activity) {
    // Not answered: the watchdog has not heard it, so it falls due again in a second (a quarter
    // of the interval if that is shorter), not a whole interval on, nor at every pass.
    MutexLock lock(mu_);
    if (heartbeats_ok_ == answered_before) {
      // ... and not before the hold on events is over (EventRetryDelay), so that a controller
      // that is away hears no more than that from this agent.
      activity_at_ = std::max(
          now - heartbeat_interval_ + Duration::Millis(std::min<int64_t>(1000, heartbeat_interval_.millis() / 4)),
          events_retry_at_ - heartbeat_interval_);
    }
  }
  return heartbeat_due || activity;
}

void Agent::Tick(bool heartbeat_due, bool with_activity) {
  // Reap exits; a part has exited when all its processes have.
  std::vector<Exit> exits = launcher_->Poll(WallNow());
  MutexLock lock(mu_);
  // A process can end before StartPart, on the command thread, has recorded it in its run (a
  // job that exits at once): such an exit waits here until the run names it.
  exits.insert(exits.begin(), unclaimed_exits_.begin(), unclaimed_exits_.end());
  unclaimed_exits_.clear();
  std::vector<api::PartEvent> finished;
  std::vector<std::pair<std::vector<std::string>, api::StartPart>> stop_siblings;  // (their keys, the part)
  for (const auto& x : exits) {
    bool claimed = false;
    for (auto& [key, run] : runs_) {
      auto proc = std::find(run.proc_keys.begin(), run.proc_keys.end(), x.key);
      if (proc == run.proc_keys.end()) continue;
      claimed = true;
      if (!x.success() && run.exit_code == 0 && run.signal == 0) {
        run.exit_code = x.signal ? 128 + x.signal : x.exit_code;
        run.signal = x.signal;
        // The code or signal says the rest; only a kill after the grace, or the kernel's OOM
        // killer, needs words.
        if (x.killed_after_grace) run.message = "did not exit within its grace period; killed";
        if (x.oom_killed) {
          // With a limit, its cgroup's own; without one, the node ran out of memory.
          const int procs = std::max(1, run.start.processes);
          run.message = run.start.mem_mib > 0
                            ? "killed by the kernel's OOM killer: it used more than its memory limit (resources.memory: " +
                                  std::to_string(run.start.mem_mib) + " MiB" +
                                  (procs > 1 ? ", " + std::to_string(run.start.mem_mib / procs) + " MiB a process" : "") +
                                  ")"
                            : "killed by the kernel's OOM killer: the node ran out of memory";
        }
        if (run.procs_left > 1 && !run.stopped && !run.exited && !run.start_failed) {
          // One process of several failed: the part has failed. Its other processes (ranks
          // that would wait for it in a collective for ever) get the part's stop signal and
          // grace, and the part's exit is this one's.
          const int rank = run.start.rank_base + static_cast<int>(proc - run.proc_keys.begin());
          run.message = "RANK " + std::to_string(rank) + " " +
                        (x.signal ? "was killed by signal " + std::to_string(x.signal)
                                  : "exited with code " + std::to_string(x.exit_code)) +
                        "; the part's other processes were stopped" +
                        (run.message.empty() ? "" : " (" + run.message + ")");
          run.siblings_stopped = true;
          std::vector<std::string> others;
          for (const std::string& k : run.proc_keys) {
            if (k != x.key) others.push_back(k);
          }
          stop_siblings.emplace_back(std::move(others), run.start);
        }
      }
      // (Processes stopped because a sibling failed do not make the part a stopped one.)
      if (x.stopped && !run.siblings_stopped) run.stopped = true;
      if (--run.procs_left <= 0 && !run.exited) {
        run.exited = true;
        api::PartEvent e;
        e.key = key;
        e.kind = api::PartEventKind::kExited;
        e.at = WallNow();
        e.exit_code = run.exit_code;
        e.signal = run.signal;
        // A part that could not start failed, even though the agent stopped what did start; so
        // did a part one of whose processes failed, even if the controller asked to stop it
        // while its other processes were stopping (its failure came first: restart: and
        // recover_on_exit_codes judge its code).
        e.stopped = run.stopped && !run.start_failed && !run.siblings_stopped;
        e.node_fault = run.node_fault;
        e.message = run.message;
        finished.push_back(e);
      }
    }
    if (!claimed) unclaimed_exits_.push_back(x);
  }
  if (!stop_siblings.empty()) {
    lock.Unlock();
    for (const auto& [keys, part] : stop_siblings) {
      spdlog::info("{}: a process failed; stopping the part's other processes with signal {}, grace {}",
                   part.key.ToString(), part.stop_signal, FormatDuration(part.grace));
      for (const std::string& k : keys) {
        if (Status st = launcher_->Stop(k, part.stop_signal, part.grace, WallNow()); !st.ok()) {
          spdlog::warn("{}: {}", k, st.message());  // it exited already: its exit reports it
        }
      }
    }
    lock.Lock();
  }
  // A part that ended on a node whose disk had no room (its own output may have filled it, and
  // its log may be cut short) says so, and the node takes no work until there is room again.
  // (statvfs first: a probe only where the disk looks full.)
  auto ended_here = [](const api::PartEvent& e) { return !e.stopped && !e.node_fault; };
  if (std::any_of(finished.begin(), finished.end(), ended_here)) {
    lock.Unlock();
    const std::string fault = StorageLooksFull() ? ProbeStorage() : std::string();
    lock.Lock();
    if (!fault.empty()) {
      if (storage_fault_.empty()) spdlog::error("{}; this node takes no work until it can", fault);
      storage_fault_ = fault;
      ++storage_fault_sets_;
      for (auto& e : finished) {
        if (!ended_here(e)) continue;
        // (Logs are kept in the data directory: a full environments directory cuts none.)
        const bool ok = e.exit_code == 0 && e.signal == 0;
        const bool logs = fault.rfind("the node's data directory", 0) == 0;
        e.message += (e.message.empty() ? "" : "; ") + std::string(ok && logs ? "its log may be cut short: " : "") +
                     "when it ended, " + fault;
      }
    }
  }
  Time now = LoopNow();
  for (auto& e : finished) {
    PartRun& run = runs_[e.key];
    run.held_exit = e;
    run.held_since = now;
  }
  // Logs: new bytes of every part; all of a finished part's before its exit is reported. Not
  // while requests are held after a miss (EventRetryDelay): uploads wait out the hold too. The
  // uploads go without the lock (a slow or distant controller would otherwise hold up the
  // command thread's starts), from a snapshot; only this thread changes `uploaded` or forgets
  // a run, so the results are applied to the runs as they are found again.
  std::vector<LogUpload> uploads;
  if (now >= events_retry_at_ && !token_.empty()) {
    for (const auto& [key, run] : runs_) {
      LogUpload& u = uploads.emplace_back();
      u.key = key;
      u.part = run.start.key;
      u.log_path = run.log_path;
      u.uploaded = run.uploaded;
      u.all = run.held_exit.has_value();
    }
  }
  if (!uploads.empty()) {
    const std::string token = token_;
    const std::string server = controllers_->Current();
    lock.Unlock();
    for (LogUpload& u : uploads) {
      UploadLog(u, token, server);
      // A miss holds the rest of this tick's uploads too; after a standby's redirect they go to
      // the leader in the next tick (the list moves once the lock is taken again).
      if (u.outcome == LogUpload::Outcome::kMissed || u.outcome == LogUpload::Outcome::kRedirect) break;
    }
    lock.Lock();
    for (const LogUpload& u : uploads) {
      if (u.outcome == LogUpload::Outcome::kNotTried) continue;
      // As the controller answered (a 409 may send it back to a smaller size: a standby that took
      // over with less of the log); only this thread changes it, so nothing newer is overwritten.
      if (auto it = runs_.find(u.key); it != runs_.end()) {
        it->second.uploaded = u.uploaded;
        if (u.refused) it->second.log_incomplete = true;  // the only copy of its output
        if (u.cut_at >= 0 && it->second.cut_at < 0) it->second.cut_at = u.cut_at;
        FreeLogPastCut(it->second);
      }
      if (u.outcome == LogUpload::Outcome::kRedirect) controllers_->Redirect(server, u.leader);
      if ((u.outcome == LogUpload::Outcome::kRedirect && !u.answered) || u.outcome == LogUpload::Outcome::kMissed) {
        NoteAnswer(false, LoopNow());
      }
    }
  }
  auto uploaded_all = [&](const api::PartKey& key) {
    for (const LogUpload& u : uploads) {
      if (u.key == key) return u.outcome == LogUpload::Outcome::kComplete;
    }
    return false;
  };
  for (auto& [key, run] : runs_) {
    if (!run.held_exit) continue;
    bool complete = uploaded_all(key);
    constexpr Duration kMaxHold = Duration::Seconds(10);
    if (!complete && now - run.held_since < kMaxHold) continue;  // try again next tick
    api::PartEvent e = *run.held_exit;
    run.held_exit.reset();
    if (!complete) {
      struct stat sb;
      int64_t size = ::stat(run.log_path.c_str(), &sb) == 0 ? sb.st_size : run.uploaded;
      std::string note = "its log is incomplete: the last " + std::to_string(size - run.uploaded) +
                         " bytes could not be uploaded";
      e.message = e.message.empty() ? note : e.message + "; " + note;
      run.uploaded = size;  // given up: the part may be forgotten
      run.log_incomplete = true;
    }
    e.seq = next_event_seq_++;
    events_.push_back(e);
  }
  // Forget parts that ended and whose logs are up.
  for (auto it = runs_.begin(); it != runs_.end();) {
    struct stat sb;
    bool done = it->second.exited && !it->second.held_exit &&
                (::stat(it->second.log_path.c_str(), &sb) != 0 || it->second.uploaded >= sb.st_size);
    bool reported = true;
    for (const auto& e : events_) {
      if (e.key == it->first) reported = false;
    }
    if (done && reported) {
      std::error_code ec;
      std::filesystem::remove_all(std::filesystem::path(it->second.progress_path).parent_path(), ec);
      // The controller has all of its log (or all it keeps): a node that runs many jobs must not
      // fill its disk with copies. A log whose upload was given up stays for whoever needs it.
      if (!it->second.log_incomplete) std::filesystem::remove(it->second.log_path, ec);
      it = runs_.erase(it);
    } else {
      ++it;
    }
  }
  if (!heartbeat_due && (events_.empty() || now < events_retry_at_)) return;
  bool need_register = !registered_;
  lock.Unlock();
  if (need_register) {
    Status st = Register();
    if (!st.ok()) {
      spdlog::warn("{}", st.message());
      lock.Lock();
      NoteAnswer(false, LoopNow());
      return;
    }
  }
  api::Heartbeat hb;
  // A node that could not keep its own files looks again: once it can, it takes work again.
  lock.Lock();
  const bool faulted = !storage_fault_.empty();
  const int64_t sets = storage_fault_sets_;
  lock.Unlock();
  if (faulted) {
    std::string fault = ProbeStorage();
    lock.Lock();
    if (storage_fault_sets_ == sets) {  // (else a part found it meanwhile: that word is newer)
      if (fault.empty()) spdlog::info("the node's storage can be written again: it takes work");
      storage_fault_ = fault;
    }
    lock.Unlock();
  }
  hb.disks = DiskRoom();
  // With metrics served, the GPUs are sampled every metrics_interval already: report the last
  // sample (sampling again would advance fake telemetry twice as fast).
  if (options_.metrics_listen.empty() || last_sample_at_ == Time()) SampleGpus();
  std::string token;
  lock.Lock();
  for (const auto& s : last_samples_) hb.gpus.push_back({s.util_pct, s.mem_used_mib, s.temperature_c, s.power_w});
  std::vector<std::pair<api::PartKey, std::pair<std::string, std::string>>> watched;  // log, progress
  if (with_activity) {
    for (const auto& [key, run] : runs_) {
      if (!run.exited) watched.push_back({key, {run.log_path, run.progress_path}});
    }
  }
  lock.Unlock();
  // Ages by this node's clock, so that the controller's clock can turn them into times.
  const Time sent = WallNow();
  auto age = [&](Time t) { return std::max(Duration::Zero(), sent - t); };
  for (const auto& [key, paths] : watched) {
    api::PartActivity a;
    a.key = key;
    if (auto t = LastWritten(paths.first)) a.output_age = age(*t);
    if (auto p = ReadProgressFile(paths.second)) {
      a.progress_age = age(p->written);
      a.step = p->progress.step;
      a.loss = p->progress.loss;
    }
    if (a.output_age || a.progress_age) hb.activity.push_back(std::move(a));
  }
  lock.Lock();
  hb.events.assign(events_.begin(), events_.end());
  hb.running = RunningKeys();
  hb.notice = notice_;
  hb.storage_fault = storage_fault_;
  hb.burn_in = burn_in_report_;
  token = token_;
  lock.Unlock();
  if (!s_environments_dir_empty(options_)) {
    std::vector<std::string> ready = ReadyEnvironments();
    lock.Lock();
    if (ready != envs_reported_) hb.environments_ready = ready;  // until a reply says it was heard
    lock.Unlock();
  }
  const std::string beat = api::WithoutNulEscapes(api::DumpJson(api::ToJson(hb)));  // (as the registration)
  Sent answer = SendToLeader([&](httplib::Client& http) {
    return http.Post("/v1/agents/heartbeat", httplib::Headers{{"Authorization", "Bearer " + token}}, beat,
                     "application/json");
  });
  const httplib::Result& res = answer.res;
  int64_t failed_in_a_row;
  {
    MutexLock count(mu_);
    ++(res && res->status == 200 ? heartbeats_ok_ : heartbeats_failed_);
    failed_in_a_row = res && res->status == 200 ? 0 : failed_in_a_row_ + 1;
    failed_in_a_row_ = failed_in_a_row;
  }
  // Say why heartbeats fail (the first, then every tenth), so a node that goes quiet can be told
  // from one whose controller is away.
  if (failed_in_a_row == 1 || failed_in_a_row % 10 == 0) {
    if (!res) {
      spdlog::warn("heartbeat to {} failed ({} in a row): {}", answer.server, failed_in_a_row,
                   httplib::to_string(res.error()));
    } else if (res->status != 200) {
      spdlog::warn("heartbeat to {} answered HTTP {} ({} in a row)", answer.server, res->status, failed_in_a_row);
    }
  }
  Result<api::HeartbeatReply> reply = Status::Unavailable("no answer");
  if (res && res->status == 200) {
    if (auto body = api::ParseJson(res->body); body.ok()) reply = api::HeartbeatReplyFromJson(*body);
  }
  if (!reply.ok()) {
    lock.Lock();
    // 401 and 409 are answers: register again at once (but a second one in a row, right after
    // that registration, is a miss: no registration and beat on every pass). Anything else holds
    // the events a while.
    const bool reregister = res && (res->status == 401 || res->status == 409);
    if (reregister) registered_ = false;
    NoteAnswer(reregister && !rejected_last_, LoopNow());
    rejected_last_ = reregister;
    return;
  }
  lock.Lock();
  last_contact_ = LoopNow();
  fenced_ = false;
  while (!events_.empty() && events_.front().seq <= reply->acked) events_.pop_front();
  if (reply->notice_acked && hb.notice) notice_acked_ = true;
  if (reply->burn_in_acked && hb.burn_in && burn_in_report_ && burn_in_report_->request == hb.burn_in->request &&
      burn_in_report_->at == hb.burn_in->at) {
    burn_in_report_.reset();
  }
  if (hb.environments_ready) envs_reported_ = *hb.environments_ready;  // heard
  if (reply->run_burn_in && WantsBurnIn(reply->burn_in_request)) {
    lock.Unlock();
    StartBurnIn(reply->burn_in_request);
    lock.Lock();
  }
  // Heard when the events this beat carried were acknowledged; a reply that leaves them
  // unacknowledged counts as a miss, or the agent would send them again on every pass. (A reply
  // that asks for registration again, or comes from another epoch, is heard: what it did not ack
  // goes again after the registration, at once.)
  const bool heard = (hb.events.empty() || reply->acked >= hb.events.back().seq) || reply->reregister ||
                     reply->epoch != epoch_;
  NoteAnswer(heard, LoopNow());
  rejected_last_ = false;
  // A notice this controller does not acknowledge (an older one) goes again on the hold's longest
  // step, not on every pass.
  if (hb.notice && !notice_acked_) notice_retry_at_ = LoopNow() + std::min(heartbeat_interval_, kMaxEventRetry);
  if (reply->reregister) registered_ = false;
  if (reply->epoch != epoch_) {
    epoch_ = reply->epoch;
    after_ = 0;
    registered_ = false;  // a restarted controller: tell it what runs here
  }
}

}  // namespace gpufleet::agent
