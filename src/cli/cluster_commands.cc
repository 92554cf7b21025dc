#include "cli/cluster_commands.h"

#include <pthread.h>
#include <signal.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "agent/agent.h"
#include "agent/gpu_probe.h"
#include "api/controller_list.h"
#include "api/job_yaml.h"
#include "cli/client_config.h"
#include "cli/cost_commands.h"
#include "cli/exit_codes.h"
#include "common/fd.h"
#include "common/mutex.h"
#include "common/time.h"
#include "common/strings.h"
#include "cli/cli.h"
#include "controller/auth.h"
#include "controller/engine.h"
#include "controller/http_listener.h"
#include "controller/monitor.h"
#include "controller/pool.h"
#include "controller/server.h"
#include "controller/tls.h"
#include "node/burn_in.h"
#include "node/environments.h"
#include "provider/provider.h"
#include "sched/policy/registry.h"
#include "store/state_store.h"

namespace gpufleet::cli {

namespace {

class WallClock : public sched::Clock {
 public:
  Time Now() const override { return WallNow(); }
};

std::string DefaultDataDir(const std::string& leaf) {
  const char* xdg = std::getenv("XDG_DATA_HOME");
  const char* home = std::getenv("HOME");
  std::string base = xdg && *xdg ? xdg : std::string(home && *home ? home : "/root") + "/.local/share";
  return base + "/gpufleet/" + leaf;
}

// Blocks SIGINT/SIGTERM in this thread and every thread it starts afterwards; WaitForSignal
// takes them synchronously.
void BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

int WaitForSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int sig = 0;
  sigwait(&set, &sig);
  return sig;
}

// The largest id of a folder named job-<id> in `dir` (the controller's logs, a checkpoint root),
// 0 when there is none or `dir` cannot be read.
int64_t LargestJobFolder(const std::string& dir) {
  int64_t largest = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= 4 || name.compare(0, 4, "job-") != 0) continue;
    if (std::optional<int64_t> id = ParseInt(name.substr(4)); id && *id > largest) largest = *id;
  }
  return largest;
}

// The audit record of a token made at start by whoever may start the controller on its data
// directory (it holds the controller's state already): an admin's local token.create.
api::AuditRecord TokenMadeAtStart(std::string reason) {
  api::AuditRecord a;
  a.at = WallNow();
  a.subject = "admin";
  a.role = "admin";
  a.source = "local";
  a.verb = "token.create";
  a.outcome = "allowed";
  a.reason = std::move(reason);
  return a;
}

Status WriteSecret(const std::string& path, const std::string& secret) {
  std::ofstream f(path, std::ios::trunc);
  if (!f) return Status::Unavailable("cannot write " + path);
  f << secret << "\n";
  f.close();
  ::chmod(path.c_str(), 0600);
  return Status::Ok();
}

std::string ReadSecret(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return std::string(Trim(s));
}

Result<std::pair<std::string, int>> ParseListen(const std::string& listen) {
  size_t colon = listen.rfind(':');
  std::string host = colon == std::string::npos ? "127.0.0.1" : listen.substr(0, colon);
  std::string port_text = colon == std::string::npos ? listen : listen.substr(colon + 1);
  auto port = ParseInt(port_text);
  if (!port || *port < 0 || *port > 65535) {
    return Status::InvalidArgument("--listen: expected HOST:PORT like 127.0.0.1:8470, got '" + listen + "'");
  }
  if (host.empty()) host = "0.0.0.0";
  return std::make_pair(host, static_cast<int>(*port));
}

// Options shared by `server` and `dev`.
struct ControllerFlags {
  std::string data_dir;
  std::string store;  // --store sqlite:PATH | postgresql://...; empty: sqlite:<data-dir>/state.db
  std::string leader_lease;  // --leader-lease DURATION (server, PostgreSQL): empty: the only controller
  std::string agent_urls;    // --agent-urls (server): what rented agents are given; empty: our own
  bool makes_join_token = false;  // dev: makes its agents a join token when join.token is missing
  std::string listen = "127.0.0.1:8470";
  std::string policy = "backfill";
  std::vector<std::string> policy_opts;
  std::string heartbeat = "5s";
  std::string lost_after = "30s";
  std::string checkpoint_root;
  int master_port_base = 29500;
  std::string pool;  // pool file: autoscaling with a provider
  std::string agent_listen;  // default: the API's host, its port + 1
  std::string user_map;      // --job-user-map FILE
  std::string audit_export;  // --audit-export FILE
  std::string tls_cert, tls_key;  // --tls-cert, --tls-key
  bool insecure = false;          // --insecure: plain HTTP on a non-loopback address
  std::string ca_cert;            // the CA clients and agents pin (dev --tls: the one it makes)
  std::string alert_rules;                  // --alert-rules FILE
  std::vector<std::string> alert_webhooks;  // --alert-webhook URL
  std::string alert_interval = "5s";
  std::string budget_release_lead = "30s";
  bool metrics_open = false;                // --metrics-open
  int thermal_limit = 85, thermal_resume = -1;  // resume: -1 = the limit - 10
  std::string burn_in = "off";              // --burn-in off|required
  double burn_in_threshold = node::kDefaultThreshold;
  std::string environments;                 // --environments FILE (default: the shipped table)
  bool new_admin_token = false;             // --new-admin-token: a lost or revoked admin token replaced
};

void AddControllerFlags(CLI::App* sub, ControllerFlags& f) {
  sub->add_option("--data-dir", f.data_dir, "State (state.db), job logs and tokens live here");
  sub->add_option("--policy", f.policy, "Queue policy (see 'gpufleet policies')")->capture_default_str();
  sub->add_option("--policy-opt", f.policy_opts, "Policy option k=v (repeatable)");
  sub->add_option("--heartbeat", f.heartbeat, "How often agents report")->capture_default_str();
  sub->add_option("--lost-after", f.lost_after, "A node silent this long is lost; its jobs are requeued")
      ->capture_default_str();
  sub->add_option("--master-port-base", f.master_port_base,
                  "Gangs get MASTER_PORT from BASE..BASE+999 (pick another range when two clusters share nodes)")
      ->capture_default_str()
      ->check(CLI::Range(1024, 64535));
  sub->add_option("--pool", f.pool,
                  "Autoscale with this pool file: a provider (static, local, exec) and the offers it may rent "
                  "(docs/providers.md)")
      ->check(CLI::ExistingFile);
  sub->add_option("--agent-listen", f.agent_listen,
                  "Address agents connect to: their own listener, so user traffic cannot starve heartbeats "
                  "(server default: the --listen host, its port + 1; dev default: any free port)");
  sub->add_option("--audit-export", f.audit_export,
                  "Append every audit record to this file as a JSON line, for a log shipper (docs/security.md)");
  sub->add_option("--job-user-map", f.user_map,
                  "YAML mapping token subjects and teams to the Unix users their jobs run as "
                  "(subjects: {alice: alice}, teams: {vision: gf-vision}); see docs/security.md")
      ->check(CLI::ExistingFile);
  sub->add_option("--tls-cert", f.tls_cert,
                  "Serve HTTPS with this certificate chain (PEM, leaf first), on the API and the agent listener")
      ->check(CLI::ExistingFile);
  sub->add_option("--tls-key", f.tls_key, "The private key (PEM) of --tls-cert")->check(CLI::ExistingFile);
  sub->add_flag("--new-admin-token", f.new_admin_token,
                "Make a new admin token at start and write it to <data-dir>/admin.token, when the one there "
                "no longer opens the controller (lost or revoked; the old one stays as it was, the audit log "
                "records the new one). While it still works, none is made and the start says so");
  sub->add_flag("--insecure", f.insecure,
                "Allow plain HTTP on an address other hosts can reach (tokens then cross the network in clear text)");
  sub->add_option("--checkpoint-root", f.checkpoint_root,
                  "Default GPUFLEET_CHECKPOINT_DIR parent (a shared filesystem on real clusters); "
                  "default <data-dir>/checkpoints. Root agents make job-<id> in it for jobs of other users only "
                  "when it and every folder above are root's and writable by no one else (a sticky one such as "
                  "/tmp may be shared)");
  sub->add_option("--alert-rules", f.alert_rules,
                  "YAML file changing the alert rules' settings (hot_temp_c: 85, idle_for: 30m, disabled: [...]); "
                  "see docs/observability.md")
      ->check(CLI::ExistingFile);
  sub->add_option("--alert-webhook", f.alert_webhooks,
                  "Send alerts here (repeatable): an Alertmanager (http://am:9093/api/v2/alerts) or any receiver "
                  "of Alertmanager's webhook JSON");
  sub->add_option("--alert-interval", f.alert_interval, "How often the alert rules and the watchdog run")
      ->capture_default_str();
  sub->add_option("--thermal-limit", f.thermal_limit,
                  "A GPU this hot (°C) takes no new work until it cools to --thermal-resume (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0, 150));
  sub->add_option("--thermal-resume", f.thermal_resume,
                  "The temperature (°C) a hot GPU must cool to (default: --thermal-limit - 10)")
      ->check(CLI::Range(0, 150));
  sub->add_option("--budget-release-lead", f.budget_release_lead,
                  "How long the pool takes to release a rented node once its jobs stopped: a hard budget stops "
                  "a team this much earlier when nodes are billed to it, so the bill ends at the budget "
                  "(docs/cost.md)")
      ->capture_default_str();
  sub->add_option("--burn-in", f.burn_in,
                  "Acceptance burn-in for nodes that join: 'required' (each node runs `gpufleet node check` when it "
                  "registers and takes no work until it passes; a failing node is quarantined) or 'off' (only pools "
                  "with burn_in: true and `gpufleet node check NODE` ask for it); see docs/nodes.md")
      ->capture_default_str()
      ->check(CLI::IsMember({"off", "required"}));
  sub->add_option("--burn-in-threshold", f.burn_in_threshold,
                  "Share of its reference each burn-in test must reach (datasheet x achievable, or the fleet's median)")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1.0));
  sub->add_option("--environments", f.environments,
                  "Environment presets jobs may name with environment: (default: the shipped data/environments.yaml)")
      ->check(CLI::ExistingFile);
  sub->add_flag("--metrics-open", f.metrics_open,
                "Serve GET /metrics without a token (a Prometheus on this host); only with a loopback --listen. "
                "Otherwise scrape with a token of role metrics");
}

// Exit status of a controller that lost the leader lease: a supervisor restarts it, as a standby.
constexpr int kExitLostLeadership = 75;
// The leader lease of a controller on a PostgreSQL store that does not name one.
constexpr Duration kDefaultLeaderLease = Duration::Seconds(10);

// What GET /v1/leader says about this controller: its role, the lease as it last read it, and
// whether the store answered. Written by the thread that asks for the lease, read by the
// listeners. Thread-safe.
class LeaderState {
 public:
  LeaderState(store::LeaderAddress self, std::optional<Duration> lease, std::string engine, store::StateStore& st)
      : self_(std::move(self)), lease_(lease), engine_(std::move(engine)), store_(st) {}

  void SetAgentUrl(const std::string& agent_url) GF_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    self_.agent_url = agent_url;
  }
  store::LeaderAddress Self() const GF_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return self_;
  }
  // The answer of the last ask for the lease (the role follows from it).
  void Saw(const Result<store::Leadership>& l) GF_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (!l.ok()) {
      store_error_ = l.status().message();
      return;
    }
    store_error_.clear();
    const bool was_leader = lease_seen_ && lease_seen_->held;
    if (!lease_seen_ || was_leader != l->held) role_since_ = WallNow();
    lease_seen_ = *l;
  }
  // How long the lease lasts still, as it was last seen (zero: lapsed or unknown).
  Duration LeaseLeft() const GF_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return lease_seen_ ? lease_seen_->expires_in : Duration::Zero();
  }
  // The leader's URLs, as the lease last said (empty: unknown).
  store::LeaderAddress Leader() const GF_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (!lease_seen_) return {};
    return {lease_seen_->holder, lease_seen_->agent_url};
  }

  nlohmann::json Json() const GF_EXCLUDES(mu_) {
    // The store's health now: a read of its schema version (outside the lock: it may wait).
    auto version = store_.GetMeta("schema_version");
    MutexLock lock(mu_);
    const bool leads = !lease_ || (lease_seen_ && lease_seen_->held);
    nlohmann::json j = {{"url", self_.url},
                        {"agent_url", self_.agent_url},
                        {"role", leads ? "leader" : "standby"},
                        {"since", FormatIso8601(role_since_)},
                        {"lease_ms", lease_ ? lease_->millis() : 0}};
    if (lease_seen_) {
      j["leader"] = {{"url", lease_seen_->holder},
                     {"agent_url", lease_seen_->agent_url},
                     {"token", lease_seen_->token},
                     {"since", lease_seen_->since > Time::Epoch() ? FormatIso8601(lease_seen_->since) : ""},
                     {"lease_left_ms", lease_seen_->expires_in.millis()}};
    } else {
      j["leader"] = {{"url", self_.url}, {"agent_url", self_.agent_url}, {"token", 1}, {"since", FormatIso8601(role_since_)},
                     {"lease_left_ms", 0}};
    }
    nlohmann::json health = {{"engine", engine_}, {"reachable", version.ok()}};
    if (version.ok()) {
      auto n = ParseInt(version->value_or("0"));
      health["schema_version"] = n ? *n : 0;
    } else {
      health["error"] = version.status().message();
    }
    if (version.ok() && !store_error_.empty()) health["lease_error"] = store_error_;
    j["store"] = std::move(health);
    return j;
  }

 private:
  mutable Mutex mu_;
  store::LeaderAddress self_ GF_GUARDED_BY(mu_);
  const std::optional<Duration> lease_;  // unset: the only controller, which always leads
  const std::string engine_;
  store::StateStore& store_;
  std::optional<store::Leadership> lease_seen_ GF_GUARDED_BY(mu_);
  std::string store_error_ GF_GUARDED_BY(mu_);
  Time role_since_ GF_GUARDED_BY(mu_) = WallNow();
};

// A running controller: store, engine thread, HTTP server.
struct Controller {
  WallClock clock;
  // The locks first, so that they are released after everything else: the store's file is
  // closed by then (closing any descriptor of it would drop SQLite's own locks on it), and no
  // second controller starts while this one still writes.
  std::optional<UniqueFd> lock_fd;        // <data-dir>/controller.lock, held while running
  std::optional<UniqueFd> store_lock_fd;  // a SQLite store's file, flock'ed while running
  std::unique_ptr<store::StateStore> store;
  std::unique_ptr<controller::Authenticator> auth;
  std::unique_ptr<controller::Engine> engine;
  std::unique_ptr<controller::ApiServer> server;
  std::thread engine_thread;
  std::unique_ptr<controller::Pool> pool;
  std::thread pool_thread;
  std::unique_ptr<controller::Monitor> monitor;
  std::string admin_token;  // set when this start made it
  std::string join_token;
  std::shared_ptr<LeaderState> leader;  // GET /v1/leader
  std::optional<Duration> lease;        // --leader-lease
  bool lease_implicit = false;          // the lease is kDefaultLeaderLease: no --leader-lease given
  // --leader-lease: the thread renewing the lease, told to stop through lease_stop.
  std::thread lease_thread;
  Mutex lease_mu;
  CondVar lease_cv;
  bool lease_stop GF_GUARDED_BY(lease_mu) = false;

  ~Controller() { Stop(); }

  // Renews the leader lease (taken with `token`) every third of its length. A controller that
  // finds the lease taken by another, or held again under a newer token (another led meanwhile,
  // so this one's memory is stale), or cannot renew it for a whole lease (the database
  // unreachable), stops at once with kExitLostLeadership: its writes are refused by then anyway
  // (the fencing token), and a supervisor restarts it as a standby. Agents keep their jobs running
  // meanwhile.
  void KeepLease(Duration lease, int64_t token) GF_EXCLUDES(lease_mu) {
    auto renewed = std::chrono::steady_clock::now();
    MutexLock lock(lease_mu);
    while (!lease_stop) {
      lease_cv.WaitFor(lease_mu, std::chrono::milliseconds(std::max<int64_t>(lease.millis() / 3, 1)), [&] {
        lease_mu.AssertHeld();  // WaitFor checks it with lease_mu held
        return lease_stop;
      });
      if (lease_stop) break;
      lock.Unlock();
      auto l = store->AcquireLeadership(leader->Self(), lease);
      leader->Saw(l);
      lock.Lock();
      if (l.ok() && l->held && l->token == token) {
        renewed = std::chrono::steady_clock::now();
        continue;
      }
      if (l.ok()) {
        std::fprintf(stderr,
                     "gpufleet server: lost the leadership: %s holds the leader lease now (token %lld, this "
                     "controller led with %lld); stopping, to be restarted as a standby\n",
                     l->holder.c_str(), static_cast<long long>(l->token), static_cast<long long>(token));
        std::fflush(stderr);
        std::_Exit(kExitLostLeadership);
      }
      const auto since = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                                renewed);
      spdlog::warn("cannot renew the leader lease: {}", l.status().message());
      // A lease taken only because the store is PostgreSQL (no --leader-lease: no standby is
      // meant to take over) does not stop the controller while the database is away: it answers
      // 503 and reconnects, as before; it stops once it sees another controller holding the lease
      // (above), and its writes are fenced meanwhile.
      if (since.count() >= lease.millis() && !lease_implicit) {
        std::fprintf(stderr,
                     "gpufleet server: could not renew the leader lease for %s (its whole length): %s; stopping, "
                     "to be restarted as a standby\n",
                     FormatDuration(Duration::Millis(since.count())).c_str(), l.status().message().c_str());
        std::fflush(stderr);
        std::_Exit(kExitLostLeadership);
      }
    }
  }

  bool tls = false;
  std::string Scheme() const { return tls ? "https://" : "http://"; }
  std::string AgentUrl() const { return Scheme() + "127.0.0.1:" + std::to_string(server->agent_port()); }
  void Stop() GF_EXCLUDES(lease_mu) {
    {
      MutexLock lock(lease_mu);
      lease_stop = true;
      lease_cv.NotifyAll();
    }
    if (lease_thread.joinable()) lease_thread.join();
    if (monitor) monitor->Stop();
    if (pool) pool->Stop();
    if (pool_thread.joinable()) pool_thread.join();
    // Agents hold long polls; answer them now, or stopping the server waits them out.
    if (engine) engine->ReleasePollers();
    if (server) server->Stop();
    if (engine) engine->Stop();
    if (engine_thread.joinable()) engine_thread.join();
    // Nothing writes any more: give the lease up, so that a standby leads at its next ask rather
    // than after the lease.
    if (lease && store && leader) {
      Status released = store->ReleaseLeadership(leader->Self());
      if (released.ok()) {
        std::fprintf(stderr, "gpufleet server: released the leader lease\n");
      } else {
        spdlog::warn("could not release the leader lease (a standby takes over once it lapses): {}",
                     released.message());
      }
      lease.reset();
    }
  }
};

// Where the state lives: --store, or SQLite in the data directory.
Result<store::StoreLocation> StoreFlag(const ControllerFlags& f) {
  if (f.store.empty()) return store::StoreLocation{store::StoreLocation::Engine::kSqlite, f.data_dir + "/state.db"};
  auto where = store::ParseStoreLocation(f.store);
  if (!where.ok()) return Status::InvalidArgument("--store '" + f.store + "': " + where.status().message());
  return where;
}

// Opens the store, with what to do about the likely failures.
Result<std::unique_ptr<store::StateStore>> OpenStoreFlag(const store::StoreLocation& where) {
  auto opened = store::OpenStore(where);
  if (opened.ok()) return opened;
  const Status& st = opened.status();
  if (where.engine != store::StoreLocation::Engine::kPostgres) return st;
  const std::string flag = "--store " + store::Redacted(where);
  if (st.code() == StatusCode::kUnavailable) {
    return Status::Unavailable(flag + ": " + st.message() +
                               "; is PostgreSQL running there, and do the URL's host, port, database, user and "
                               "password match it? (docs/operations.md: setting up PostgreSQL)");
  }
  return st.WithContext(flag);
}

// The 503 of a standby: "not the leader; the leader is URL", with that URL in X-Gpufleet-Leader
// (on the agent listener, the leader's agent URL), and GET /v1/leader answered (200) on the API's.
httplib::Server::HandlerResponse StandbyReply(const httplib::Request& req, httplib::Response& res,
                                              const LeaderState& state, const std::string& leader, bool agents) {
  if (!agents && req.method == "GET" && req.path == "/v1/leader") {
    res.status = 200;
    res.set_content(state.Json().dump(), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }
  res.status = 503;
  res.set_header("Retry-After", "1");
  res.set_header(api::kLeaderHeader, leader);
  std::string message = "not the leader; the leader is " + (leader.empty() ? "unknown" : leader);
  const store::LeaderAddress self = state.Self();
  if (!leader.empty() && leader == (agents ? self.agent_url : self.url)) {
    // The lease names this very controller: its earlier run stopped without giving it up (killed),
    // and it takes over once the lease lapses.
    const Duration left = state.LeaseLeft();
    message = "not the leader yet: this controller's earlier run, stopped without giving up the leader lease, holds "
              "it for " + FormatDuration(std::max(left, Duration::Seconds(1))) +
              " more; this controller leads once it lapses (retry then)";
    res.set_header("Retry-After", std::to_string(std::max<int64_t>(1, (left.millis() + 999) / 1000)));
  }
  nlohmann::json body = {{"error", {{"code", "unavailable"}, {"message", message}}}};
  res.set_content(body.dump(), "application/json");
  controller::CloseAfterResponse();
  return httplib::Server::HandlerResponse::Handled;
}

// --leader-lease: waits until this controller holds the leader lease, answering every request on
// the API's address with 503 "not the leader; the leader is URL" (and the header
// X-Gpufleet-Leader) meanwhile, and every request on the agent address likewise with the leader's
// agent URL, so that agents given several controllers find the leader. Asks for the lease every
// third of its length, as the leader renews it. Returns the fencing token once it leads, 0 when a
// stop signal came first.
Result<int64_t> WaitForLeadership(store::StateStore& st, LeaderState& state, Duration lease,
                                  const std::pair<std::string, int>& listen,
                                  const std::pair<std::string, int>& agent_listen, const ControllerFlags& f) {
  auto first = st.AcquireLeadership(state.Self(), lease);
  state.Saw(first);
  if (!first.ok()) return first.status();
  if (first->held) return first->token;
  controller::RouteTable routes;
  routes.set_pre_routing_handler([&state](const httplib::Request& req, httplib::Response& res) {
    return StandbyReply(req, res, state, state.Leader().url, false);
  });
  controller::RouteTable agent_routes;
  agent_routes.set_pre_routing_handler([&state](const httplib::Request& req, httplib::Response& res) {
    return StandbyReply(req, res, state, state.Leader().agent_url, true);
  });
  controller::HttpListener standby(routes, controller::ListenerLimits{}, "standby API");
  controller::HttpListener agent_standby(agent_routes, controller::ListenerLimits{}, "standby agent API");
  if (!f.tls_cert.empty()) {
    GF_ASSIGN_OR_RETURN(controller::SslContext tls, controller::MakeServerTlsContext(f.tls_cert, f.tls_key));
    standby.SetTls(tls);
    GF_ASSIGN_OR_RETURN(controller::SslContext agent_tls, controller::MakeServerTlsContext(f.tls_cert, f.tls_key));
    agent_standby.SetTls(agent_tls);
  }
  GF_RETURN_IF_ERROR(standby.Bind(listen.first, listen.second));
  GF_RETURN_IF_ERROR(agent_standby.Bind(agent_listen.first, agent_listen.second));
  GF_RETURN_IF_ERROR(standby.Start());
  GF_RETURN_IF_ERROR(agent_standby.Start());
  auto stop_listeners = [&] {
    standby.Stop();
    agent_standby.Stop();
  };
  std::fprintf(stderr, "gpufleet server: standing by on %s:%d (agents %s:%d); the leader is %s (token %lld)\n",
               listen.first.c_str(), standby.port(), agent_listen.first.c_str(), agent_standby.port(),
               first->holder.c_str(), static_cast<long long>(first->token));
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  const int64_t every_ms = std::max<int64_t>(lease.millis() / 3, 1);
  for (;;) {
    // The pause between asks doubles as the wait for a stop signal.
    timespec pause{static_cast<time_t>(every_ms / 1000), static_cast<long>((every_ms % 1000) * 1000000)};
    if (sigtimedwait(&stop_signals, nullptr, &pause) > 0) {
      stop_listeners();
      return int64_t{0};
    }
    auto l = st.AcquireLeadership(state.Self(), lease);
    state.Saw(l);
    if (!l.ok()) {
      spdlog::warn("standby: cannot read the leader lease: {}", l.status().message());
      continue;
    }
    if (l->held) {
      stop_listeners();
      std::fprintf(stderr, "gpufleet server: took the leader lease (token %lld); taking over\n",
                   static_cast<long long>(l->token));
      return l->token;
    }
  }
}

// The name a controller gives itself in the lease: the URLs other controllers, clients and agents
// can reach it at (0.0.0.0 shown as the host name).
store::LeaderAddress SelfAddress(const ControllerFlags& f, const std::pair<std::string, int>& listen,
                                 const std::pair<std::string, int>& agent_listen) {
  auto url = [&](const std::pair<std::string, int>& where) {
    std::string host = where.first;
    if (host == "0.0.0.0") {
      char name[256] = {};
      host = ::gethostname(name, sizeof(name) - 1) == 0 ? name : "localhost";
    }
    return std::string(f.tls_cert.empty() ? "http://" : "https://") + host + ":" + std::to_string(where.second);
  };
  // A port of 0 is known only once the listener is bound: advertised from the first renewal on.
  return {url(listen), agent_listen.second == 0 ? "" : url(agent_listen)};
}

Result<std::unique_ptr<Controller>> StartController(const ControllerFlags& f, int port_override) {
  auto c = std::make_unique<Controller>();
  GF_ASSIGN_OR_RETURN(const store::StoreLocation store_location, StoreFlag(f));
  // The addresses first: a start they refuse writes nothing (no data directory, tokens or store).
  GF_ASSIGN_OR_RETURN(auto listen, ParseListen(f.listen));
  if (port_override >= 0) listen.second = port_override;
  std::pair<std::string, int> agent_listen{listen.first, listen.second == 0 ? 0 : listen.second + 1};
  if (!f.agent_listen.empty()) {
    GF_ASSIGN_OR_RETURN(agent_listen, ParseListen(f.agent_listen));
  } else if (port_override >= 0) {
    agent_listen.second = 0;  // dev: its agents are told the port
  } else if (listen.second == 65535) {
    return Status::InvalidArgument("--listen port 65535 leaves no port + 1 for the agents: give --agent-listen HOST:PORT");
  }
  if (agent_listen.second != 0 && agent_listen == listen) {
    return Status::InvalidArgument("--agent-listen " + agent_listen.first + ":" + std::to_string(agent_listen.second) +
                                   " is the API's own address (--listen): give the agents another port");
  }
  GF_RETURN_IF_ERROR(controller::CheckPlainListen({listen.first, agent_listen.first}, !f.tls_cert.empty(), f.insecure));
  {
    // Ports in use, tried before anything is written (the real listeners bind them again later).
    controller::RouteTable none;
    controller::HttpListener api_probe(none, controller::ListenerLimits{}, "api probe");
    controller::HttpListener agent_probe(none, controller::ListenerLimits{}, "agent probe");
    if (listen.second != 0) {
      if (Status st = api_probe.Bind(listen.first, listen.second); !st.ok()) {
        return Status::Unavailable(st.message() + " (in use? pick another port for the API)");
      }
    }
    if (agent_listen.second != 0) {
      if (Status st = agent_probe.Bind(agent_listen.first, agent_listen.second); !st.ok()) {
        return Status::Unavailable(st.message() + " (in use? pick another port for agents)");
      }
    }
  }
  // Everything the controller writes (state.db, logs, tokens) is private to its user.
  ::umask(077);
  std::error_code ec;
  std::filesystem::create_directories(f.data_dir, ec);
  if (ec) return Status::Unavailable("cannot create " + f.data_dir + ": " + ec.message());
  // Others may pass through (jobs running as another user reach their checkpoint directories
  // below it) but not list it.
  ::chmod(f.data_dir.c_str(), 0711);
  // One controller per data directory: a second one would hand out the same job ids and commands.
  std::string lock_path = f.data_dir + "/controller.lock";
  c->lock_fd.emplace(LiftFd(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600)));
  if (c->lock_fd->get() < 0) return Status::Unavailable("cannot open " + lock_path + ": " + std::strerror(errno));
  if (::flock(c->lock_fd->get(), LOCK_EX | LOCK_NB) != 0) {
    std::ifstream in(lock_path);
    std::string holder;
    std::getline(in, holder);
    return Status::FailedPrecondition("another controller is running on " + f.data_dir +
                                      (holder.empty() ? std::string() : " (pid " + holder + ")") +
                                      "; stop it first, or use another --data-dir");
  }
  std::string pid_text = std::to_string(::getpid()) + "\n";
  if (::ftruncate(c->lock_fd->get(), 0) == 0) {
    ssize_t unused = ::pwrite(c->lock_fd->get(), pid_text.data(), pid_text.size(), 0);
    (void)unused;
  }
  controller::UserMap user_map;
  if (!f.user_map.empty()) {
    GF_ASSIGN_OR_RETURN(user_map, controller::LoadUserMap(f.user_map));
  } else if (!f.makes_join_token) {
    // (Not for dev: one person's machine.)
    spdlog::warn("no --job-user-map: every team's jobs run as each agent's --job-user (nobody when the agent is "
                 "root), so a job can read another team's job environments, files and checkpoints on the same "
                 "node; map teams to their own Unix users with --job-user-map FILE (docs/security.md)");
  }
  auto hb = ParseDuration(f.heartbeat);
  auto lost = ParseDuration(f.lost_after);
  if (!hb || *hb <= Duration::Zero()) {
    return Status::InvalidArgument("--heartbeat: expected a duration like 5s, got '" + f.heartbeat + "'");
  }
  // Every agent reports that often: under 100 ms a fleet would do little else (and --alert-interval
  // and --leader-lease have floors too).
  if (*hb < Duration::Millis(100)) {
    return Status::InvalidArgument("--heartbeat: at least 100ms (every agent reports that often), got '" + f.heartbeat + "'");
  }
  if (!lost || *lost <= *hb) {
    return Status::InvalidArgument(
        !lost ? "--lost-after: expected a duration longer than --heartbeat, like 30s, got '" + f.lost_after + "'"
              : "--lost-after: " + f.lost_after + " is not longer than --heartbeat (" + f.heartbeat + ")");
  }
  if (*lost > Duration::Hours(24 * 366)) {
    return Status::InvalidArgument("--lost-after: at most a year, got '" + f.lost_after + "'");
  }
  GF_ASSIGN_OR_RETURN(auto opts, sched::ParsePolicyOptions(f.policy_opts));
  GF_RETURN_IF_ERROR(sched::MakePolicies(f.policy, opts).status());
  controller::MonitorOptions mo;
  if (!f.alert_rules.empty()) {
    GF_ASSIGN_OR_RETURN(mo.rules, controller::LoadAlertRules(f.alert_rules));
  }
  auto alert_interval = ParseDuration(f.alert_interval);
  if (!alert_interval || *alert_interval < Duration::Seconds(1)) {
    return Status::InvalidArgument("--alert-interval: expected a duration of at least 1s, like 5s");
  }
  mo.interval = *alert_interval;
  for (const std::string& url : f.alert_webhooks) {
    if (!url.starts_with("http://") && !url.starts_with("https://")) {
      return Status::InvalidArgument("--alert-webhook " + url + ": expected an http:// or https:// URL");
    }
  }
  mo.webhooks = f.alert_webhooks;
  if (f.metrics_open && !controller::IsLoopbackHost(listen.first)) {
    return Status::InvalidArgument("--metrics-open serves metrics without a token, so only on a loopback --listen; "
                                   "on " + listen.first + " scrape with a token of role metrics "
                                   "(gpufleet token create --role metrics)");
  }

  std::optional<Duration> lease;
  if (!f.leader_lease.empty()) {
    lease = ParseDuration(f.leader_lease);
    if (!lease || *lease < Duration::Millis(300)) {
      return Status::InvalidArgument("--leader-lease: expected a duration of at least 300ms, like 10s, got '" +
                                     f.leader_lease + "'");
    }
    if (store_location.engine != store::StoreLocation::Engine::kPostgres) {
      return Status::InvalidArgument("--leader-lease: several controllers share only a PostgreSQL --store; a SQLite "
                                     "store has one controller, which always leads");
    }
  } else if (store_location.engine == store::StoreLocation::Engine::kPostgres) {
    // Every controller on a PostgreSQL store takes the lease: one started without the flag beside
    // a leader (or before one) would otherwise lead too, and the two would run jobs twice.
    lease = kDefaultLeaderLease;
    c->lease_implicit = true;
  }

  std::string rented_agent_urls;  // --agent-urls, normalised; empty: this controller's agent URL
  if (!f.agent_urls.empty()) {
    if (f.pool.empty()) {
      return Status::InvalidArgument("--agent-urls: only with --pool; it names the controllers the agents the pool "
                                     "rents report to");
    }
    auto list = api::ControllerList::Parse(f.agent_urls);
    if (!list.ok()) return Status::InvalidArgument("--agent-urls: " + list.status().message());
    rented_agent_urls = list->Joined();
  }

  if (store_location.engine == store::StoreLocation::Engine::kSqlite) {
    // One controller per SQLite store too: --store sqlite:PATH may name another data directory's
    // database, which that directory's lock does not cover. (flock, which SQLite's own POSIX
    // locks do not see or disturb on a local filesystem, where a SQLite store belongs.)
    const std::string& db = store_location.target;
    const bool existed = ::access(db.c_str(), F_OK) == 0;
    c->store_lock_fd.emplace(LiftFd(::open(db.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0600)));
    if (c->store_lock_fd->get() < 0) return Status::Unavailable("cannot open " + db + ": " + std::strerror(errno));
    if (::flock(c->store_lock_fd->get(), LOCK_EX | LOCK_NB) != 0) {
      return Status::FailedPrecondition("another controller is using the store " + db +
                                        " (from another --data-dir); stop it first: two controllers on one store "
                                        "would run the same jobs twice");
    }
    // An empty file where a store was: a new cluster starts, which is rarely what was meant.
    struct stat st {};
    if (existed && ::fstat(c->store_lock_fd->get(), &st) == 0 && st.st_size == 0) {
      spdlog::warn("{} exists but is empty: starting a new, empty cluster there (a restore that did not copy? "
                   "a gpufleet backup is never empty; stop the controller and copy it again)",
                   db);
    }
    // Every change is written there (and SQLite's journal beside it): a store this user may only
    // read would take the start and then refuse every submit.
    std::string folder = std::filesystem::path(db).parent_path().string();
    if (folder.empty()) folder = ".";
    for (const std::string& path : {db, folder}) {
      if (::access(path.c_str(), W_OK) != 0) {
        return Status::FailedPrecondition(path + " is not writable by this user (" + std::strerror(errno) +
                                          "): the controller writes every change to its store there; fix its "
                                          "owner or mode, or run the controller as its owner");
      }
    }
  }
  GF_ASSIGN_OR_RETURN(c->store, OpenStoreFlag(store_location));
  c->leader = std::make_shared<LeaderState>(
      SelfAddress(f, listen, agent_listen), lease,
      store_location.engine == store::StoreLocation::Engine::kPostgres ? "postgresql" : "sqlite", *c->store);
  int64_t token = 0;
  if (lease) {
    // Nothing is written before this controller leads: a standby only reads the lease.
    GF_ASSIGN_OR_RETURN(token, WaitForLeadership(*c->store, *c->leader, *lease, listen, agent_listen, f));
    if (token == 0) return std::unique_ptr<Controller>();
    c->lease = lease;  // from now on Stop releases it
    // Renewed from now on, while the state is rebuilt: rebuilding a large store takes longer than
    // a short lease, and a lease that lapsed meanwhile would pass to a standby that rebuilds in
    // turn and loses it the same way (controllers taking the lease from each other for ever).
    Controller* self = c.get();
    c->lease_thread = std::thread([self, lease, token] { self->KeepLease(*lease, token); });
  }
  c->auth = std::make_unique<controller::Authenticator>(*c->store);
  // First start: make an admin token and a join token, readable only by this user.
  GF_ASSIGN_OR_RETURN(auto tokens, c->store->ListTokens());
  if (tokens.empty()) {
    // A data directory that already holds a cluster's secrets, on a store that holds no token,
    // is not a first start: the store is not that cluster's (SQLite's WAL lost or not copied, a
    // mistyped --store database). Making new tokens would overwrite the secrets that still work
    // with the real store; refuse before anything is written.
    for (const char* name : {"admin.token", "join.token"}) {
      const std::string path = f.data_dir + "/" + name;
      if (!ReadSecret(path).empty()) {
        return Status::FailedPrecondition(
            path + " holds a token, but the store (" + store::Redacted(store_location) +
            ") has no tokens: it is not the store this data directory's cluster used (for SQLite, state.db "
            "without its state.db-wal beside it, e.g. copied alone or the WAL deleted; for PostgreSQL, another "
            "or a mistyped database). Point --store at that cluster's store, or restore its `gpufleet backup`; "
            "to start a new cluster here instead, remove admin.token and join.token (or use a new --data-dir)");
      }
    }
    // Recorded in the audit log as every other token's creation is (its id, no expiry).
    GF_ASSIGN_OR_RETURN(c->admin_token,
                        c->auth->Create(api::TokenKind::kUser, "admin", "admin", "", WallNow(), std::nullopt,
                                        TokenMadeAtStart("an admin token for admin, made at the first start, no expiry")));
    GF_ASSIGN_OR_RETURN(c->join_token,
                        c->auth->Create(api::TokenKind::kJoin, "", "agent", "", WallNow(), std::nullopt,
                                        TokenMadeAtStart("a join token, made at the first start, no expiry")));
    GF_RETURN_IF_ERROR(WriteSecret(f.data_dir + "/admin.token", c->admin_token));
    GF_RETURN_IF_ERROR(WriteSecret(f.data_dir + "/join.token", c->join_token));
  } else {
    c->admin_token = ReadSecret(f.data_dir + "/admin.token");
    c->join_token = ReadSecret(f.data_dir + "/join.token");
    // The store keeps only the tokens' hashes: a store restored into a new data directory comes
    // without these files.
    if (c->admin_token.empty() && !f.new_admin_token) {
      spdlog::warn("{}/admin.token is missing or empty, but the store has tokens (a backup restored into a new "
                   "data directory?): use an admin token you have, or start again with --new-admin-token",
                   f.data_dir);
    }
    if (c->join_token.empty() && !f.makes_join_token) {
      spdlog::warn("{}/join.token is missing or empty: agents cannot join with it; make a join token with "
                   "`gpufleet token create --join` (admin) and give it to them",
                   f.data_dir);
    }
  }
  bool admin_token_works = false;
  if (!f.new_admin_token && !tokens.empty() && !c->admin_token.empty()) {
    auto t = c->auth->Check(c->admin_token, WallNow());
    if (!t.ok() || t->kind != api::TokenKind::kUser || t->role != "admin") {
      spdlog::warn("{}/admin.token no longer opens the controller as admin ({}): use an admin token you have, or "
                   "start again with --new-admin-token",
                   f.data_dir, t.ok() ? "not an admin token" : "revoked, expired or unknown to this store");
    }
  }
  if (f.new_admin_token && !tokens.empty() && !c->admin_token.empty()) {
    auto t = c->auth->Check(c->admin_token, WallNow());
    admin_token_works = t.ok() && t->kind == api::TokenKind::kUser && t->role == "admin";
    // Left in a service's command line, the flag must not mint an admin token at every start.
    if (admin_token_works) {
      spdlog::warn("--new-admin-token: {}/admin.token still opens the controller as admin; no new token made",
                   f.data_dir);
    }
  }
  if (f.new_admin_token && !tokens.empty() && !admin_token_works) {
    // Whoever may start the controller on its data directory holds its state already: a new admin
    // token is theirs to make, recorded in the audit log with the token's creation.
    GF_ASSIGN_OR_RETURN(c->admin_token,
                        c->auth->Create(api::TokenKind::kUser, "admin", "admin", "", WallNow(), std::nullopt,
                                        TokenMadeAtStart("a new admin token for admin, made at start "
                                                         "(--new-admin-token), no expiry")));
    GF_RETURN_IF_ERROR(WriteSecret(f.data_dir + "/admin.token", c->admin_token));
    spdlog::warn("a new admin token was made (--new-admin-token): {}/admin.token", f.data_dir);
  }

  controller::EngineOptions eo;
  eo.policy = f.policy;
  eo.policy_options = opts;
  eo.heartbeat_interval = *hb;
  eo.lost_after = *lost;
  eo.checkpoint_root = f.checkpoint_root.empty() ? f.data_dir + "/checkpoints" : f.checkpoint_root;
  eo.master_port_base = f.master_port_base;
  const int resume = f.thermal_resume >= 0 ? f.thermal_resume : std::max(0, f.thermal_limit - 10);
  if (f.thermal_limit > 0 && resume >= f.thermal_limit) {
    return Status::InvalidArgument("--thermal-resume (" + std::to_string(resume) + ") must be below --thermal-limit (" +
                                   std::to_string(f.thermal_limit) + ")");
  }
  eo.thermal_limit_c = f.thermal_limit;
  auto release_lead = ParseDuration(f.budget_release_lead);
  if (!release_lead || *release_lead < Duration::Zero()) {
    return Status::InvalidArgument("--budget-release-lead wants a duration such as 30s or 2m, got '" +
                                   f.budget_release_lead + "'");
  }
  eo.budget_release_lead = *release_lead;
  eo.thermal_resume_c = resume;
  eo.burn_in_required = f.burn_in == "required";
  eo.burn_in_threshold = f.burn_in_threshold;
  {
    auto table = f.environments.empty() ? node::EnvironmentTable::LoadDefault()
                                        : node::EnvironmentTable::Load(f.environments);
    if (!table.ok()) {
      if (!f.environments.empty()) return table.status();
      spdlog::warn("no environment presets ({}); jobs naming an environment will be refused", table.status().message());
    } else {
      eo.environments = std::make_shared<const node::EnvironmentTable>(std::move(*table));
    }
  }
  c->engine = std::make_unique<controller::Engine>(c->clock, *c->store, eo);
  std::map<std::string, std::string> subs = {
      {"server", "http://127.0.0.1:0"},  // filled in below, once the API has its port
      {"join_token_file", f.data_dir + "/join.token"},
      {"gpufleet", "gpufleet"},
      {"data_dir", f.data_dir},
      {"ca_cert_file", f.ca_cert},
  };
  // Offers of a pool file may come from the price catalog (catalog: {...}); read it only then.
  std::optional<cost::OfferTable> offer_catalog;
  if (!f.pool.empty()) {
    std::ifstream in(f.pool);
    std::stringstream text;
    text << in.rdbuf();
    if (text.str().find("catalog:") != std::string::npos) {
      std::string catalog_path;
      auto table = LoadOfferCatalog("", catalog_path);
      if (!table.ok()) return table.status().WithContext("the pool's catalog offers");
      offer_catalog = std::move(*table);
    }
  }
  const cost::OfferTable* offers = offer_catalog ? &*offer_catalog : nullptr;
  if (!f.pool.empty()) {
    // Read the pool first for the node shapes it may rent: jobs larger than a node are split to
    // fit them, also those recovered now.
    GF_ASSIGN_OR_RETURN(controller::PoolConfig early,
                        controller::LoadPoolConfig(f.pool, model::GpuCatalog::BuiltIn(), subs, offers));
    std::map<std::string, int> sizes;
    for (const auto& o : early.offers) sizes[o.gpu_model] = std::max(sizes[o.gpu_model], o.gpus_per_node);
    c->engine->SetNodeSizeHints(sizes);
  }
  // Job ids go on after every job this data directory has logs or checkpoints of: a store
  // restored from a backup would otherwise hand out the ids of jobs submitted after the backup,
  // and a new job would read their logs and start from their checkpoints.
  {
    int64_t largest = std::max(LargestJobFolder(f.data_dir + "/logs"), LargestJobFolder(eo.checkpoint_root));
    if (largest > 0) GF_RETURN_IF_ERROR(c->store->SkipJobIdsThrough(largest));
  }
  GF_RETURN_IF_ERROR(c->engine->Recover());

  controller::ServerOptions so;
  so.host = listen.first;
  so.port = listen.second;
  so.agent_host = agent_listen.first;
  so.agent_port = agent_listen.second;
  so.data_dir = f.data_dir;
  so.user_map = std::move(user_map);
  so.audit_export = f.audit_export;
  so.tls_cert = f.tls_cert;
  so.tls_key = f.tls_key;
  so.insecure = f.insecure;
  so.metrics_open = f.metrics_open;
  so.version = kGpufleetVersion;
  so.leader_info = [state = c->leader] { return state->Json(); };
  c->tls = !f.tls_cert.empty();
  c->server = std::make_unique<controller::ApiServer>(*c->engine, *c->store, *c->auth, c->clock, so);
  GF_RETURN_IF_ERROR(c->server->Start());
  mo.external_url = c->Scheme() + (listen.first == "0.0.0.0" ? "127.0.0.1" : listen.first) + ":" +
                    std::to_string(c->server->port());
  mo.store = c->store.get();  // alerts keep their state across a restart
  c->monitor = std::make_unique<controller::Monitor>(*c->engine, c->clock, std::move(mo));
  c->server->SetMonitor(c->monitor.get());
  c->monitor->Start();
  controller::Engine* engine = c->engine.get();
  c->engine_thread = std::thread([engine] { engine->Run(); });
  if (!f.pool.empty()) {
    std::error_code path_ec;
    std::string self = std::filesystem::read_symlink("/proc/self/exe", path_ec).string();
    const std::string host = agent_listen.first == "0.0.0.0" ? "127.0.0.1" : agent_listen.first;
    subs["server"] = c->Scheme() + host + ":" + std::to_string(c->server->agent_port());
    if (!rented_agent_urls.empty()) subs["server"] = rented_agent_urls;
    subs["gpufleet"] = self.empty() ? "gpufleet" : self;
    GF_ASSIGN_OR_RETURN(controller::PoolConfig pc,
                        controller::LoadPoolConfig(f.pool, model::GpuCatalog::BuiltIn(), subs, offers));
    GF_ASSIGN_OR_RETURN(auto prov, provider::MakeProvider(pc.provider));
    c->pool = std::make_unique<controller::Pool>(std::move(pc), std::move(prov), *c->engine, *c->store, c->clock);
    GF_RETURN_IF_ERROR(c->pool->Start());
    c->server->SetPool(c->pool.get());
    controller::Pool* pool = c->pool.get();
    c->pool_thread = std::thread([pool] { pool->Run(); });
  }
  if (agent_listen.second == 0) {
    const std::string host = agent_listen.first == "0.0.0.0" ? "127.0.0.1" : agent_listen.first;
    c->leader->SetAgentUrl(c->Scheme() + host + ":" + std::to_string(c->server->agent_port()));
  }
  return c;
}

// How the user runs this binary from a shell: "gpufleet" when that name on PATH is this very
// file, else its absolute path.
std::string CliName() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::canonical("/proc/self/exe", ec);
  if (ec) return "gpufleet";
  const char* path = std::getenv("PATH");
  for (const std::string& dir : Split(path ? path : "", ':')) {
    if (dir.empty()) continue;
    std::error_code e2;
    const std::filesystem::path found = std::filesystem::canonical(std::filesystem::path(dir) / "gpufleet", e2);
    if (e2) continue;
    // The first gpufleet on PATH is the one a shell runs.
    return found == self ? "gpufleet" : self.string();
  }
  return self.string();
}

int Fail(const char* cmd, const Status& st) {
  std::fprintf(stderr, "gpufleet %s: %s\n", cmd, st.message().c_str());
  return ExitCodeFor(st);
}

// --cpus and --memory of `agent` and `dev`: what jobs may ask of a node besides GPUs. Empty: what
// the host offers.
Status ParseNodeResources(const std::string& cpus, const std::string& memory, agent::AgentOptions& o) {
  if (!cpus.empty()) {
    auto c = ParseDouble(cpus);
    if (!c || *c <= 0 || *c > 100000) {
      return Status::InvalidArgument("--cpus: expected a number of cores like 16 or 0.5, got '" + cpus + "'");
    }
    o.cpu_milli = std::llround(*c * 1000);
  }
  if (!memory.empty()) {
    auto m = api::ParseMemoryMib(memory);
    if (!m.ok() || *m <= 0) {
      return Status::InvalidArgument("--memory: expected a size like 64Gi or 512Mi (a plain number is MiB), got '" +
                                     memory + "'");
    }
    o.mem_mib = *m;
  }
  return Status::Ok();
}

void AddNodeResourceFlags(CLI::App* sub, std::string& cpus, std::string& memory) {
  sub->add_option("--cpus", cpus,
                  "CPUs jobs may use on the node (resources.cpus of a job; default: the CPUs this process may run "
                  "on)");
  sub->add_option("--memory", memory,
                  "Memory jobs may use on the node, like 64Gi (resources.memory; default: the host's, or its "
                  "cgroup's limit)");
}

// Says how to get past a port in use, with the flags this command has.
Status WithListenHint(Status st, const std::string& hint) {
  if (st.ok() || st.message().find("cannot listen") == std::string::npos) return st;
  std::string msg = st.message() + "; " + hint;
  return st.code() == StatusCode::kInvalidArgument ? Status::InvalidArgument(msg) : Status::Unavailable(msg);
}

Result<std::unique_ptr<agent::GpuProbe>> MakeProbe(const std::string& fake, const std::string& telemetry,
                                                   const std::string& nvml, const std::string& node,
                                                   const std::string& faults = "", const std::string& driver = "") {
  agent::FakeGpuOptions o;
  o.spec = fake;
  o.node = node;
  o.telemetry_path = telemetry;
  o.faults = faults;
  o.driver = driver;
  return agent::OpenProbe(o, nvml, model::GpuCatalog::BuiltIn());
}

}  // namespace

std::function<int()> SetupServerCommand(CLI::App& app) {
  auto* sub = app.add_subcommand("server", "Run the controller: the HTTP API, the scheduler and the state store");
  auto f = std::make_shared<ControllerFlags>();
  f->data_dir = DefaultDataDir("server");
  AddControllerFlags(sub, *f);
  sub->add_option("--listen", f->listen, "Address to serve the API on; 0.0.0.0:PORT for all interfaces")
      ->capture_default_str();
  sub->add_option("--store", f->store,
                  "Where the state lives: sqlite:PATH, or a PostgreSQL URL postgresql://USER@HOST:PORT/DB "
                  "(default: sqlite:<data-dir>/state.db); the schema is created or migrated at start");
  sub->add_option("--leader-lease", f->leader_lease,
                  "Several controllers on one PostgreSQL --store: lead while holding the leader lease of this "
                  "length (default 10s: every controller on PostgreSQL takes it), renewed every third of it; "
                  "until then stand by, answering 503 with the leader's URL; exit with status 75 when the lease "
                  "is lost (docs/operations.md)");
  sub->add_option("--agent-urls", f->agent_urls,
                  "With --pool: the agent URLs the agents it rents are given (its {server}), comma-separated: "
                  "every controller's agent listener on this store, as the rented machines reach them, so that "
                  "they follow a takeover (default: this controller's own)");

  sub->footer(R"(The first start makes an admin token and a join token in the data directory
(admin.token, join.token; mode 0600). Give the join token to agents (--join-token-file, last
example below); the admin token is for the CLI and for making other tokens (gpufleet token create).

Listening on an address other hosts can reach needs TLS (--tls-cert, --tls-key), or --insecure.

Examples:
  gpufleet server --data-dir /var/lib/gpufleet --listen 0.0.0.0:8470 \
      --tls-cert /etc/gpufleet/server.pem --tls-key /etc/gpufleet/server.key
  PGPASSFILE=/etc/gpufleet/pgpass gpufleet server --data-dir /var/lib/gpufleet \
      --store postgresql://gpufleet@db.example:5432/gpufleet?sslmode=verify-full
  gpufleet agent --server https://controller:8471 --ca-cert /etc/gpufleet/ca.pem \
      --join-token-file /etc/gpufleet/join.token
  GPUFLEET_TOKEN=$(cat /var/lib/gpufleet/admin.token) gpufleet queue)");
  return [f]() {
    BlockStopSignals();
    auto c = StartController(*f, -1);
    if (!c.ok()) {
      return Fail("server", WithListenHint(c.status(), "is another controller running? Stop it, or pick other "
                                                       "addresses with --listen HOST:PORT and --agent-listen HOST:PORT"));
    }
    if (*c == nullptr) {
      std::fprintf(stderr, "gpufleet server: stopped by a signal while standing by\n");
      return 0;
    }
    // The port bound, not the one asked for (--listen HOST:0 takes any free port).
    std::string listening = f->listen.substr(0, f->listen.rfind(':') + 1) + std::to_string((*c)->server->port());
    std::fprintf(stderr,
                 "gpufleet server: serving on %s%s, agents on port %d (data %s; tokens in admin.token, "
                 "join.token; store %s)\n",
                 (*c)->Scheme().c_str(), listening.c_str(), (*c)->server->agent_port(), f->data_dir.c_str(),
                 store::Redacted(*StoreFlag(*f)).c_str());
    int sig = WaitForSignal();
    std::fprintf(stderr, "gpufleet server: signal %d, stopping (jobs keep running on their agents)\n", sig);
    (*c)->Stop();
    return 0;
  };
}

std::function<int()> SetupAgentCommand(CLI::App& app) {
  auto* sub = app.add_subcommand("agent", "Run a node agent: register this machine's GPUs and run jobs on them");
  struct Flags {
    agent::AgentOptions o;
    std::string join_token_file;
    std::string fake_gpus, fake_telemetry, nvml, fake_faults, fake_driver;
    std::string burn_in_time_limit = "170s";
    std::vector<std::string> labels;
    std::string market = "on-demand";
    std::string max_disconnected = "0";
    double price = 0;
    std::string spot_notice_interval = "5s";
    std::string spot_notice_format = "aws";
    std::string join_token_argv;  // refused: a secret on the command line shows in `ps`
    std::string fence_after = "auto";
    std::string cpus, memory;
  };
  auto f = std::make_shared<Flags>();
  f->o.data_dir = DefaultDataDir("agent");
  sub->add_option("--server", f->o.server,
                  "The controller's agent URL (its --agent-listen; by default the API port + 1); several controllers on one store: URL1,URL2,... (the agent follows "
                  "the leader among them and keeps its jobs running while none answers)")
      ->capture_default_str();
  sub->add_option("--ca-cert", f->o.ca_cert,
                  "With an https:// --server: trust only this CA certificate (PEM) for it (default: the system's "
                  "CAs)")
      ->check(CLI::ExistingFile);
  sub->add_option("--join-token", f->join_token_argv)->group("");  // refused with a hint, see below
  sub->add_option("--join-token-file", f->join_token_file,
                  "File holding the join token (or set GPUFLEET_JOIN_TOKEN); never on the command line, where "
                  "every user of the machine could read it in `ps`");
  sub->add_option("--name", f->o.name, "Node name (default: the host name); unique in the cluster");
  sub->add_option("--address", f->o.address, "Address other nodes reach this one at (MASTER_ADDR of gangs)")
      ->capture_default_str();
  sub->add_option("--data-dir", f->o.data_dir, "Job logs and working directories")->capture_default_str();
  sub->add_option("--fake-gpus", f->fake_gpus, "Pretend to have GPUs, e.g. 8xH100-80GB (machines without GPUs)");
  sub->add_option("--fake-telemetry", f->fake_telemetry, "With --fake-gpus: telemetry lines to replay");
  sub->add_option("--fake-faults", f->fake_faults,
                  "With --fake-gpus: faults the burn-in finds, e.g. 'gpu=1 ecc=3; slow=10' (drills; docs/nodes.md)");
  sub->add_option("--fake-driver", f->fake_driver,
                  "With --fake-gpus: the driver to report, DRIVER/CUDA (default 550.54.15/12.4)");
  sub->add_option("--nvml-library", f->nvml, "Path of libnvidia-ml.so.1 if not on the loader path");
  {
    const char* env_python = std::getenv("GPUFLEET_BURNIN_PYTHON");
    f->o.burn_in.python = env_python && *env_python ? env_python : "python3";
  }
  sub->add_option("--burn-in-python", f->o.burn_in.python,
                  "Interpreter with PyTorch for the acceptance burn-in (default: $GPUFLEET_BURNIN_PYTHON, else python3)")
      ->capture_default_str();
  sub->add_option("--burn-in-time-limit", f->burn_in_time_limit, "The burn-in stops starting tests after this long")
      ->capture_default_str();
  sub->add_option("--environments-dir", f->o.environments_dir,
                  "Prepared environments (one virtual environment per preset) live here; default <data-dir>/envs");
  sub->add_option("--environments", f->o.environments_file,
                  "Environment presets (default: the shipped data/environments.yaml); the controller's must match")
      ->check(CLI::ExistingFile);
  sub->add_option("--prewarm", f->o.prewarm,
                  "Prepare these environments before taking work (repeatable), so the first jobs start warm");
  sub->add_flag("--burn-in-quick", f->o.burn_in.quick,
                "Smallest burn-in sizes (a smoke test; for tests and laptops, not for accepting real nodes)");
  sub->add_option("--label", f->labels, "Node label k=v (repeatable): region, zone, rack, gdpr=true, ...");
  sub->add_option("--market", f->market, "on-demand, spot or reserved")->capture_default_str();
  sub->add_option("--price-per-hour", f->price,
                  "What this node costs in dollars per hour (its offer; reserved: amortised). Jobs are "
                  "charged their GPUs' share of it; budgets count it")
      ->check(CLI::Range(0.0, 1e6));
  AddNodeResourceFlags(sub, f->cpus, f->memory);
  sub->add_option("--max-disconnected", f->max_disconnected,
                  "Stop jobs and exit when the controller is unreachable this long (0: never)")
      ->capture_default_str();
  sub->add_option("--spot-notice-url", f->o.spot_notice_url,
                  "Poll this spot interruption notice endpoint (off when not set)");
  sub->add_option("--spot-notice-format", f->spot_notice_format,
                  "What --spot-notice-url answers: aws (instance-action, IMDSv2), gcp (instance/preempted) or "
                  "azure (Scheduled Events)")
      ->capture_default_str();
  sub->add_option("--spot-notice-interval", f->spot_notice_interval, "How often to poll --spot-notice-url")
      ->capture_default_str();
  sub->add_option("--job-user", f->o.job_user,
                  "Unix user that runs jobs whose submitter maps to none (default: nobody when the agent is "
                  "root, else the agent's own user)");
  sub->add_flag("--allow-root-jobs", f->o.allow_root_jobs,
                "Allow job parts to run as root (uid 0); refused otherwise. Only for single-user machines");
  sub->add_option("--workdir-root", f->o.workdir_roots,
                  "A directory job working directories must lie under (repeatable; default: <data-dir>/work, "
                  "/home, /srv, /mnt, /data, /scratch, /tmp, /var/tmp)");
  sub->add_option("--fence-after", f->fence_after,
                  "Stop this node's jobs after this long without the controller (auto: the controller's "
                  "--lost-after, when it has requeued them elsewhere; 0: never)")
      ->capture_default_str();
  sub->add_option("--cgroup-root", f->o.cgroup_root,
                  "cgroup v2 directory for the job parts (default: found under the agent's own cgroup; off: "
                  "process groups only)");
  sub->add_option("--metrics-listen", f->o.metrics_listen,
                  "Serve GET /metrics (DCGM-exporter GPU series, sampled every second) on HOST:PORT, e.g. "
                  "127.0.0.1:9400 (docs/observability.md)");
  sub->add_flag("--metrics-remote", f->o.metrics_remote,
                "Let --metrics-listen use a non-loopback address (its metrics need no token)");
  sub->footer(R"(Examples:
  gpufleet agent --server http://controller:8471 --join-token-file join.token
  gpufleet agent --join-token-file ~/.local/share/gpufleet/server/join.token \
      --name node-a --fake-gpus 8xH100 --label zone=a      # beside a local `gpufleet server`
  gpufleet agent --server http://controller:8471 --join-token-file join.token --market spot \
      --spot-notice-url http://169.254.169.254/latest/meta-data/spot/instance-action   # on AWS)");
  return [f]() {
    if (!f->join_token_argv.empty()) {
      std::fprintf(stderr, "gpufleet agent: --join-token would show the secret to every user of this machine "
                           "(ps); put it in a file (mode 0600) and pass --join-token-file FILE, or set "
                           "GPUFLEET_JOIN_TOKEN\n");
      return 2;
    }
    if (!f->join_token_file.empty()) {
      f->o.join_token = ReadSecret(f->join_token_file);
      if (f->o.join_token.empty()) {
        std::error_code ec;
        const bool exists = std::filesystem::exists(f->join_token_file, ec);
        std::fprintf(stderr, "gpufleet agent: --join-token-file %s: %s\n", f->join_token_file.c_str(),
                     exists ? "cannot read a token from it (unreadable or empty)"
                            : "no such file (the controller writes one to <its data dir>/join.token)");
        return 2;
      }
    }
    if (f->o.join_token.empty()) {
      if (const char* t = std::getenv("GPUFLEET_JOIN_TOKEN")) f->o.join_token = t;
    }
    ::unsetenv("GPUFLEET_JOIN_TOKEN");  // nothing started from here needs it
    if (f->o.join_token.empty()) {
      std::fprintf(stderr, "gpufleet agent: no join token: pass --join-token-file FILE or set "
                           "GPUFLEET_JOIN_TOKEN (the controller wrote one to <its data dir>/join.token)\n");
      return 2;
    }
    if (f->fence_after != "auto") {
      auto fa = ParseDuration(f->fence_after);
      if (!fa || *fa < Duration::Zero()) {
        return Fail("agent", Status::InvalidArgument("--fence-after: expected auto, 0 or a duration like 30s"));
      }
      f->o.fence_after = *fa;
    }
    for (const auto& l : f->labels) {
      size_t eq = l.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::fprintf(stderr, "gpufleet agent: --label expects k=v, got '%s'\n", l.c_str());
        return 2;
      }
      f->o.labels[l.substr(0, eq)] = l.substr(eq + 1);
    }
    auto market = model::ParseMarket(f->market);
    if (!market.ok()) return Fail("agent", Status::InvalidArgument("--market: " + market.status().message()));
    f->o.market = *market;
    f->o.price_micros_per_hour = std::llround(f->price * 1e6);
    if (Status st = ParseNodeResources(f->cpus, f->memory, f->o); !st.ok()) return Fail("agent", st);
    auto md = ParseDuration(f->max_disconnected);
    if (!md) return Fail("agent", Status::InvalidArgument("--max-disconnected: expected a duration like 10m"));
    f->o.max_disconnected = *md;
    auto sni = ParseDuration(f->spot_notice_interval);
    if (!sni || *sni <= Duration::Zero()) {
      return Fail("agent", Status::InvalidArgument("--spot-notice-interval: expected a duration like 5s"));
    }
    f->o.spot_notice_interval = *sni;
    auto snf = agent::ParseSpotNoticeFormat(f->spot_notice_format);
    if (!snf.ok()) return Fail("agent", Status::InvalidArgument("--spot-notice-format: " + snf.status().message()));
    f->o.spot_notice_format = *snf;
    std::string name = f->o.name;
    if (name.empty()) {
      char host[256] = {0};
      ::gethostname(host, sizeof host - 1);
      name = host;
    }
    if (Status st = api::CheckName(f->o.name.empty() ? "node name (the host name; give --name)" : "--name", name);
        !st.ok()) {
      return Fail("agent", st);
    }
    auto burn_in_limit = ParseDuration(f->burn_in_time_limit);
    if (!burn_in_limit || *burn_in_limit <= Duration::Zero()) {
      return Fail("agent", Status::InvalidArgument("--burn-in-time-limit wants a duration such as 170s or 3m, got '" +
                                                   f->burn_in_time_limit + "'"));
    }
    f->o.burn_in.time_limit = *burn_in_limit;
    auto probe = MakeProbe(f->fake_gpus, f->fake_telemetry, f->nvml, name, f->fake_faults, f->fake_driver);
    if (!probe.ok()) return Fail("agent", probe.status());
    BlockStopSignals();
    std::atomic<bool> stop{false};
    agent::Agent a(f->o, std::move(*probe));
    Status result;
    std::thread runner([&] {
      result = a.Run(stop);
      // Wake the signal wait if the agent ended on its own.
      ::kill(::getpid(), SIGTERM);
    });
    WaitForSignal();
    stop = true;
    runner.join();
    if (!result.ok()) return Fail("agent", result);
    return 0;
  };
}

std::function<int()> SetupDevCommand(CLI::App& app) {
  auto* sub = app.add_subcommand("dev", "Run a whole cluster on this machine: controller + agents with fake GPUs");
  struct Flags {
    ControllerFlags c;
    int port = 8470;
    int agents = 1;
    std::string fake_gpus = "8xH100";
    std::string config;
    double price = 0;
    std::string job_user;
    bool allow_root_jobs = false;
    std::string cpus, memory;
    bool tls = false;
  };
  auto f = std::make_shared<Flags>();
  f->c.data_dir = DefaultDataDir("dev");
  AddControllerFlags(sub, f->c);
  sub->add_option("--port", f->port, "API port on 127.0.0.1 (0: any free port)")->capture_default_str()
      ->check(CLI::Range(0, 65535));
  sub->add_option("--agents", f->agents, "Nodes to run, each an agent with its own GPUs")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  sub->add_option("--fake-gpus", f->fake_gpus, "GPUs of each node, COUNTxMODEL")->capture_default_str();
  sub->add_option("--config", f->config, "Where to write the CLI config (default ~/.config/gpufleet/config.yaml)");
  sub->add_option("--price-per-hour", f->price, "Each node's price in dollars per hour (0: unpriced)")
      ->check(CLI::Range(0.0, 1e6));
  sub->add_option("--job-user", f->job_user,
                  "Unix user that runs the jobs (default: nobody when run as root, else you)");
  sub->add_flag("--allow-root-jobs", f->allow_root_jobs, "Let jobs run as root (refused otherwise)");
  sub->add_flag("--tls", f->tls,
                "Serve HTTPS: make a local CA and a certificate for 127.0.0.1 in <data-dir>/tls (kept across "
                "restarts), and pin that CA in the CLI config and the agents");
  AddNodeResourceFlags(sub, f->cpus, f->memory);
  sub->footer(R"(Starts the controller on 127.0.0.1, the agents (node dev-1, dev-2, ...), and writes the
CLI config with an admin token, so the client commands work at once. Ctrl-C stops it all.

Examples:
  gpufleet dev
  gpufleet dev --agents 2 --fake-gpus 4xA100 --policy las
  gpufleet dev --tls          # HTTPS with a local CA in <data-dir>/tls that the CLI config pins
  gpufleet run --gpus 1 -- python3 -c 'print("hello")'   # in another terminal)");
  return [f]() {
    BlockStopSignals();
    spdlog::set_level(spdlog::level::warn);
    // The agents' flags are checked before anything is written (the data dir, the tokens, the
    // CLI config): a start that fails on them leaves nothing behind.
    {
      agent::AgentOptions check;
      if (Status st = ParseNodeResources(f->cpus, f->memory, check); !st.ok()) return Fail("dev", st);
      if (f->agents > 0) {
        if (auto probe = MakeProbe(f->fake_gpus, "", "", "dev-1"); !probe.ok()) return Fail("dev", probe.status());
      }
    }
    if (f->tls) {
      if (!f->c.tls_cert.empty() || !f->c.tls_key.empty()) {
        return Fail("dev", Status::InvalidArgument("--tls makes its own certificate; drop --tls-cert/--tls-key, "
                                                   "or drop --tls to serve yours"));
      }
      auto certs = controller::EnsureDevCertificates(f->c.data_dir + "/tls");
      if (!certs.ok()) return Fail("dev", certs.status());
      f->c.tls_cert = certs->cert_file;
      f->c.tls_key = certs->key_file;
      f->c.ca_cert = certs->ca_file;
    }
    f->c.makes_join_token = true;
    auto c = StartController(f->c, f->port);
    if (!c.ok()) {
      return Fail("dev", WithListenHint(c.status(), "is another gpufleet dev running? Stop it (Ctrl-C), or pick "
                                                    "another port with --port N (--port 0: any free port)"));
    }
    // A store restored into a new data directory comes without the token files: the CLI config
    // needs the admin token, and the agents dev starts need a join token (dev makes one).
    if ((*c)->admin_token.empty()) {
      return Fail("dev", Status::FailedPrecondition(
                             f->c.data_dir + "/admin.token is missing or empty, but the store has tokens (a backup "
                             "restored into a new data directory?): start again with --new-admin-token"));
    }
    if ((*c)->join_token.empty()) {
      (*c)->store->AttachAudit(
          {TokenMadeAtStart("a new join token, made by gpufleet dev at start (join.token was missing)")});
      auto join = (*c)->auth->Create(api::TokenKind::kJoin, "", "agent", "", WallNow());
      if (!join.ok()) return Fail("dev", join.status());
      (*c)->join_token = *join;
      if (Status st = WriteSecret(f->c.data_dir + "/join.token", *join); !st.ok()) return Fail("dev", st);
      std::fprintf(stderr, "gpufleet dev: %s/join.token was missing; made a new join token there\n",
                   f->c.data_dir.c_str());
    }
    int port = (*c)->server->port();
    std::string url = (*c)->Scheme() + "127.0.0.1:" + std::to_string(port);
    std::string agent_url = (*c)->AgentUrl();
    std::string config = f->config.empty() ? ClientConfigPath() : f->config;
    if (Status st = WriteClientConfig(config, url, (*c)->admin_token, f->c.ca_cert); !st.ok()) return Fail("dev", st);

    // The agents' folders live below this one: jobs running as another user (nobody, when dev runs
    // as root) must pass through it to their default working directory, <agent>/work/job-N. The
    // controller's umask would make it private.
    {
      const std::string agents_dir = f->c.data_dir + "/agents";
      std::error_code ec;
      std::filesystem::create_directories(agents_dir, ec);
      ::chmod(agents_dir.c_str(), 0711);
    }
    std::atomic<bool> stop{false};
    std::vector<std::unique_ptr<agent::Agent>> agents;
    std::vector<std::thread> threads;
    for (int i = 1; i <= f->agents; ++i) {
      std::string name = "dev-" + std::to_string(i);
      auto probe = MakeProbe(f->fake_gpus, "", "", name);
      if (!probe.ok()) return Fail("dev", probe.status());
      agent::AgentOptions o;
      o.server = agent_url;
      o.ca_cert = f->c.ca_cert;
      o.join_token = (*c)->join_token;
      o.name = name;
      o.data_dir = f->c.data_dir + "/agents/" + name;
      o.poll_wait = Duration::Seconds(10);
      o.price_micros_per_hour = std::llround(f->price * 1e6);
      o.job_user = f->job_user;
      o.allow_root_jobs = f->allow_root_jobs;
      // The agents prepare the same environment presets the controller places jobs by, and run
      // the burn-in with the interpreter a separate agent would use.
      o.environments_file = f->c.environments;
      if (const char* py = std::getenv("GPUFLEET_BURNIN_PYTHON"); py && *py) o.burn_in.python = py;
      if (Status st = ParseNodeResources(f->cpus, f->memory, o); !st.ok()) return Fail("dev", st);
      // Jobs may also work where `dev` was started, and in its user's home (the CLI sends its
      // directory as the default working directory).
      o.workdir_roots = agent::DefaultWorkdirRoots(o.data_dir);
      std::error_code cwd_ec;
      std::string cwd = std::filesystem::current_path(cwd_ec).string();
      if (!cwd.empty()) o.workdir_roots.push_back(cwd);
      if (const char* home = std::getenv("HOME"); home && *home && home != cwd) o.workdir_roots.push_back(home);
      agents.push_back(std::make_unique<agent::Agent>(o, std::move(*probe)));
      agent::Agent* a = agents.back().get();
      threads.emplace_back([a, &stop] {
        Status st = a->Run(stop, /*stop_jobs_on_exit=*/true);
        if (!st.ok()) spdlog::error("agent: {}", st.message());
      });
    }
    if (f->agents > 0) {
      std::printf("gpufleet dev: controller on %s, %d node(s) with %s each (fake GPUs)%s\n", url.c_str(), f->agents,
                  f->fake_gpus.c_str(), f->c.pool.empty() ? "" : ", and the nodes its pool rents");
    } else {
      std::printf("gpufleet dev: controller on %s, no nodes of its own%s\n", url.c_str(),
                  f->c.pool.empty() ? ": jobs wait until an agent joins (gpufleet agent --server ...)"
                                    : ": the nodes its pool rents run the jobs");
    }
    std::printf("  data:   %s (state.db, logs/, agents/)\n", f->c.data_dir.c_str());
    std::printf("  config: %s (admin token; the CLI reads it)\n", config.c_str());
    if (f->tls) std::printf("  tls:    %s (the CA the config and the agents trust)\n", f->c.ca_cert.c_str());
    // The CLI finds this config by itself only where it looks by default (GPUFLEET_CONFIG, else
    // ~/.config/gpufleet/config.yaml): another --config needs naming.
    const std::string cli = config == ClientConfigPath() ? CliName() : "GPUFLEET_CONFIG=" + config + " " + CliName();
    std::printf("Try, in another terminal:\n");
    std::printf("  %s run --gpus 1 -- sh -c 'echo hello from job $GPUFLEET_JOB_ID on GPUs $CUDA_VISIBLE_DEVICES'\n",
                cli.c_str());
    std::printf("  %s queue; %s nodes; %s logs -f 1; %s history\n", cli.c_str(), cli.c_str(), cli.c_str(),
                cli.c_str());
    if (cli != "gpufleet") {
      std::printf("  (gpufleet is not on your PATH: bash scripts/install.sh links it into one, or run it as above)\n");
    }
    std::printf("Ctrl-C stops the cluster; running jobs are stopped with their checkpoint signal and requeued.\n");
    std::fflush(stdout);
    WaitForSignal();
    std::printf("gpufleet dev: stopping\n");
    std::fflush(stdout);
    // The agents go away with their jobs: nothing new may land on their nodes meanwhile, or a
    // job requeued from one would be placed on another that is going too.
    for (int i = 1; i <= f->agents; ++i) {
      Status held = (*c)->engine->HoldUntilRegistered("dev-" + std::to_string(i)).get();
      (void)held;  // NotFound: that agent never registered
    }
    stop = true;
    for (auto& t : threads) t.join();
    (*c)->Stop();
    return 0;
  };
}

}  // namespace gpufleet::cli
