// ApiServer: the controller's HTTP/JSON API under /v1 (docs/api.md), on cpp-httplib.
//
// Two listeners: the API for people and scripts (host:port) and one for agents (agent_host:
// agent_port), each with its own connection caps and workers (http_listener.h), so that no amount
// of user traffic, idle sockets or log long-polls can keep heartbeats from being answered (which
// would get nodes declared lost and their jobs requeued). Agent routes are served only on the
// agent listener, user routes only on the user one.
//
// Every route but /v1/health needs a bearer token (auth.h), checked from the headers before a
// body is read. Handlers validate the request fully before anything changes, answer 4xx with
// {"error": {"code", "message"}} when it is wrong, and hand valid requests to the Engine. Bodies
// are limited in size (413 beyond, also for chunked bodies).
#pragma once

#include <atomic>
#include <functional>

#include <memory>
#include <map>
#include <set>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/mutex.h"
#include "common/status.h"
#include "controller/auth.h"
#include "controller/engine.h"
#include "controller/http_listener.h"
#include "controller/metrics.h"
#include "controller/rbac.h"
#include "store/state_store.h"

namespace gpufleet::controller {

class Monitor;
class Pool;

// Which Unix user runs a caller's jobs on the agents: by token subject first, then by team; no
// match leaves it to the agent (its --job-user; never root unless the agent allows it). A job may
// name `user:` itself only if that is its mapped user, or if the caller is an admin; no job may
// name root.
struct UserMap {
  std::map<std::string, std::string> subjects;
  std::map<std::string, std::string> teams;
  std::string For(const std::string& subject, const std::string& team) const;
};
// The key a client's failed authentications are counted under (ServerOptions::failed_auth_*):
// its IPv4 address, or the /64 of an IPv6 one (a host is given a whole /64 to pick addresses from).
std::string FailureKey(const std::string& addr);

// Reads a user map file: `subjects: {alice: alice}` and `teams: {vision: gf-vision}`. Errors name
// the file and the entry.
Result<UserMap> LoadUserMap(const std::string& path);

struct ServerOptions {
  UserMap user_map;
  std::string host = "127.0.0.1";
  int port = 8470;  // 0: any free port (see port())
  std::string agent_host = "127.0.0.1";
  int agent_port = 8471;  // 0: any free port (see agent_port())
  std::string data_dir;  // logs live in <data_dir>/logs
  // TLS on both listeners (PEM files; see tls.h). Without them, only loopback addresses may be
  // bound, unless `insecure`.
  std::string tls_cert, tls_key;
  bool insecure = false;
  size_t max_body_bytes = 8 << 20;
  ListenerLimits user_limits;
  ListenerLimits agent_limits;
  // User long-polls (logs -f) held at once, in all and per client address; more answer at once,
  // and the client polls again. Per address, so that one address's followers cannot use up its
  // share of the listener's workers (ListenerLimits::max_active_per_client).
  int max_user_long_polls = 64;
  int max_long_polls_per_client = 8;
  Duration max_poll_wait = Duration::Seconds(30);
  int max_page = 1000;  // largest page of a listing (limit); follow next_cursor for more
  std::string audit_export;  // when set: every audit record is appended here as a JSON line
  // Requests per second a user token may make, with bursts up to `token_burst`; more are 429
  // with Retry-After. 0: no limit. Admin and agent tokens are not limited.
  double token_rate_per_s = 50;
  int token_burst = 200;
  // Requests with a token that is missing, unknown, revoked or expired, per client address:
  // bursts up to `failed_auth_burst`, then `failed_auth_per_s`; more are answered 429 with
  // Retry-After and counted, not audited one by one (the audit log records when an address
  // starts being held, and how many it sent while held), so that anyone who can reach the port
  // cannot fill the store with refusals. A valid token from the same address is not held.
  // 0: no limit.
  double failed_auth_per_s = 1;
  int failed_auth_burst = 30;
  // A part's log is kept up to this size; the rest is dropped behind a marker line saying how
  // much, so a job that writes gigabytes cannot fill the controller's disk.
  int64_t max_log_bytes_per_part = int64_t{256} << 20;
  // GET /metrics without a token (for a Prometheus on this host); only with a loopback --listen.
  bool metrics_open = false;
  std::string version;  // gpufleet_build_info
  // Answers GET /v1/leader (docs/api.md): this controller's role among those sharing its store,
  // the lease, the store's health. Unset: {"role": "leader"} of the only controller.
  std::function<nlohmann::json()> leader_info;
};

class ApiServer {
 public:
  ApiServer(Engine& engine, store::StateStore& store, Authenticator& auth, const sched::Clock& clock,
            ServerOptions options);
  ~ApiServer();
  // Binds and starts serving on a background thread. Errors name the address.
  Status Start();
  void Stop();
  int port() const { return port_; }
  int agent_port() const { return agent_port_; }
  // Serves GET /v1/pool from this pool (the instances it rented); without one the route says so.
  void SetPool(const Pool* pool) { pool_ = pool; }
  // Serves GET /v1/alerts and the alert series of /metrics from this monitor.
  void SetMonitor(const Monitor* monitor) { monitor_ = monitor; }

 private:
  // Installs every route: the gates and checks first, then each group (docs/api.md's sections).
  void Routes();
  struct Guards;
  void ObservabilityRoutes(const Guards& g);  // /metrics, /v1/alerts, the dashboard
  void JobRoutes(const Guards& g);            // submit, list and read jobs
  void JobDetailRoutes(const Guards& g);      // a job's GPUs, cancel, explain, logs; /v1/queue
  void NodeRoutes(const Guards& g);           // /v1/nodes...
  void MoneyRoutes(const Guards& g);          // /v1/cost, budgets, /v1/pool
  void QuotaRoutes(const Guards& g);          // /v1/teams/*/quota
  void TokenRoutes(const Guards& g);          // /v1/tokens...
  void AuditRoutes(const Guards& g);          // /v1/audit
  void AgentRoutes(const Guards& g);          // /v1/agents/* on the agent listener
  std::string LogPath(int64_t job, int attempt, int part) const;
  // An audit record of this request (caller, source, verb, object), outcome unset.
  api::AuditRecord AuditFor(const httplib::Request& req, const RouteRule* rule) const;
  // The record of a change this request makes, for the engine to write with the change.
  api::AuditRecord Allowed(const httplib::Request& req, const std::string& reason, bool agents = false) const;
  // Records the answer to a change or a refusal, unless the handler recorded it with the change.
  // A request refused 401 (no valid token): counted against its address's failed-authentication
  // bucket; over it, the answer becomes 429 and is counted instead of audited (ServerOptions).
  void HoldFailedAuth(const httplib::Request& req, httplib::Response& res);
  void AuditAnswer(const httplib::Request& req, const httplib::Response& res, bool agents);
  void ExportAudit();

  Engine& engine_;
  store::StateStore& store_;
  Authenticator& auth_;
  const sched::Clock& clock_;
  ServerOptions options_;
  std::unique_ptr<RouteTable> user_routes_;
  std::unique_ptr<RouteTable> agent_routes_;
  std::unique_ptr<HttpListener> user_listener_;
  std::unique_ptr<HttpListener> agent_listener_;
  int port_ = 0;
  int agent_port_ = 0;
  std::atomic<const Pool*> pool_{nullptr};
  std::atomic<const Monitor*> monitor_{nullptr};
  ApiMetrics api_metrics_;
  std::atomic<int> user_long_polls_{0};
  // Each lock is a leaf: none is taken while holding another. logs_mu_ is held across a log
  // chunk's write to disk, so that chunks of one part land in order.
  Mutex polls_mu_;
  std::map<std::string, int> long_polls_by_client_ GF_GUARDED_BY(polls_mu_);
  std::atomic<bool> stopping_{false};
  Mutex logs_mu_;
  // Token creation and revocation, one at a time: a token made while its maker is being revoked
  // would otherwise miss the revoke's walk and outlive it.
  Mutex tokens_mu_;
  CondVar logs_cv_;
  std::set<std::string> incomplete_logs_ GF_GUARDED_BY(logs_mu_);  // log files a write to failed (disk full)
  std::thread exporter_;
  Mutex rate_mu_;
  struct Bucket {
    double tokens = 0;
    Time last;
  };
  std::map<std::string, Bucket> buckets_ GF_GUARDED_BY(rate_mu_);  // by token hash
  // Failed authentications by client address; while `holding`, `held` counts the answers held
  // back (429) after the first, which was audited.
  struct FailBucket {
    double tokens = 0;
    Time last;
    bool holding = false;
    int64_t held = 0;
  };
  std::map<std::string, FailBucket> failed_auth_ GF_GUARDED_BY(rate_mu_);
  std::map<std::string, int64_t> cut_logs_ GF_GUARDED_BY(logs_mu_);  // log path -> bytes offered in all, once cut
  Mutex export_mu_;  // the exporter waits on export_cv_ with it (stopping_ is what it waits for)
  CondVar export_cv_;
};

}  // namespace gpufleet::controller
