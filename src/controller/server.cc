#include "controller/server.h"

#include "controller/pool.h"

#include <httplib.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "api/codec.h"
#include "api/job_yaml.h"
#include "common/strings.h"

namespace gpufleet::controller {

using nlohmann::json;

namespace {

int HttpCode(StatusCode c) {
  switch (c) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kAlreadyExists: return 409;
    case StatusCode::kFailedPrecondition: return 409;
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kInternal: return 500;
  }
  return 500;
}

const char* ErrorCode(int http) {
  switch (http) {
    case 400: return "invalid_argument";
    case 401: return "unauthenticated";
    case 403: return "permission_denied";
    case 404: return "not_found";
    case 405: return "method_not_allowed";
    case 409: return "conflict";
    case 413: return "payload_too_large";
    case 415: return "unsupported_media_type";
    case 503: return "unavailable";
    default: return "internal";
  }
}

void Reply(httplib::Response& res, int code, const json& body) {
  res.status = code;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace) + "\n", "application/json");
}

void Error(httplib::Response& res, int code, const std::string& message) {
  Reply(res, code, {{"error", {{"code", ErrorCode(code)}, {"message", message}}}});
}

void Error(httplib::Response& res, const Status& st) { Error(res, HttpCode(st.code()), st.message()); }

Result<int64_t> IntParam(const httplib::Request& req, const std::string& name, int64_t lo, int64_t hi,
                         int64_t fallback) {
  if (!req.has_param(name.c_str())) return fallback;
  std::string v = req.get_param_value(name.c_str());
  auto n = ParseInt(v);
  if (!n || *n < lo || *n > hi) {
    return Status::InvalidArgument("query parameter " + name + " must be a whole number from " + std::to_string(lo) +
                                   " to " + std::to_string(hi) + ", got '" + v + "'");
  }
  return *n;
}

Result<JobId> PathJob(const httplib::Request& req) {
  auto n = ParseInt(req.matches[1].str());
  if (!n || *n < 0) return Status::InvalidArgument("job id must be a number, got '" + req.matches[1].str() + "'");
  return JobId(*n);
}

json JobSummary(const api::JobRecord& r) {
  const auto& s = r.request.spec;
  json o = {{"id", r.id.value()},
            {"name", s.name},
            {"team", s.team},
            {"priority", s.priority},
            {"state", api::JobStateName(r.state)},
            {"reason", r.reason},
            {"gpus", s.fractional() ? json(static_cast<double>(s.gpu_milli) / 1000.0) : json(s.gpus_per_node)},
            {"nodes", s.nodes},
            {"gpu_type", s.gpu_models},
            {"submitted_ms", r.submitted.millis()},
            {"updated_ms", r.updated.millis()},
            {"attempt", r.attempt}};
  if (r.exit_code) o["exit_code"] = *r.exit_code;
  if (r.placement) o["placement"] = api::ToJson(*r.placement);
  return o;
}

bool IsAdmin(const api::TokenRecord& t) { return t.kind == api::TokenKind::kUser && t.role == "admin"; }

}  // namespace

ApiServer::ApiServer(Engine& engine, store::StateStore& store, Authenticator& auth, const sched::Clock& clock,
                     ServerOptions options)
    : engine_(engine), store_(store), auth_(auth), clock_(clock), options_(std::move(options)),
      http_(std::make_unique<httplib::Server>()) {}

ApiServer::~ApiServer() { Stop(); }

std::string ApiServer::LogPath(int64_t job, int attempt, int part) const {
  return options_.data_dir + "/logs/job-" + std::to_string(job) + "/a" + std::to_string(attempt) + ".p" +
         std::to_string(part) + ".log";
}

Status ApiServer::Start() {
  int threads = options_.threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_read_timeout(30, 0);
  http_->set_write_timeout(30, 0);
  http_->set_keep_alive_max_count(100000);
  // Responses go out as two writes (headers, body): without TCP_NODELAY, Nagle's algorithm holds
  // the body until the client's delayed ACK, about 40 ms per request on a kept-alive connection.
  http_->set_tcp_nodelay(true);
  // Remember the listening socket: Debian's prebuilt cpp-httplib listens with a backlog of 5,
  // which drops connections when dozens of clients (or agents after a restart) connect at once.
  http_->set_socket_options([this](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (listen_fd_ < 0) listen_fd_ = sock;  // the first socket is the listening one
  });
  http_->set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string msg = res.status == 413   ? "the request body is too large"
                      : res.status == 404 ? "no such route; see docs/api.md"
                                          : "request failed";
    Error(res, res.status, msg);
  });
  http_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = std::string("internal error: ") + e.what();
    } catch (...) {
    }
    Error(res, 500, what);
  });
  Routes();
  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host.c_str());
    if (port_ < 0) return Status::Unavailable("cannot listen on " + options_.host);
  } else {
    if (!http_->bind_to_port(options_.host.c_str(), options_.port)) {
      return Status::Unavailable("cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                                 " (in use? pick another with --listen)");
    }
    port_ = options_.port;
  }
  if (listen_fd_ >= 0) ::listen(listen_fd_, SOMAXCONN);  // widen the backlog (see above)
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  return Status::Ok();
}

void ApiServer::Stop() {
  if (http_) http_->stop();
  logs_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ApiServer::Routes() {
  using httplib::Request;
  using httplib::Response;
  // Authentication: returns the token's record, or answers 401 and returns nullopt.
  auto authn = [this](const Request& req, Response& res) -> std::optional<api::TokenRecord> {
    std::string h = req.get_header_value("Authorization");
    if (!StartsWith(h, "Bearer ")) {
      Error(res, 401, "missing bearer token: send 'Authorization: Bearer <token>' (gpufleet reads it from "
                      "~/.config/gpufleet/config.yaml or GPUFLEET_TOKEN)");
      return std::nullopt;
    }
    auto rec = auth_.Check(std::string(Trim(h.substr(7))));
    if (!rec.ok()) {
      Error(res, 401, "invalid token: " + rec.status().message());
      return std::nullopt;
    }
    return *rec;
  };
  auto user = [authn](const Request& req, Response& res) -> std::optional<api::TokenRecord> {
    auto t = authn(req, res);
    if (t && t->kind != api::TokenKind::kUser) {
      Error(res, 403, std::string("a ") + api::TokenKindName(t->kind) + " token cannot use this route; use a user token");
      return std::nullopt;
    }
    return t;
  };
  auto agent = [this, authn](const Request& req, Response& res) -> std::optional<NodeId> {
    auto t = authn(req, res);
    if (!t) return std::nullopt;
    if (t->kind != api::TokenKind::kAgent) {
      Error(res, 403, "only agents may use this route");
      return std::nullopt;
    }
    auto node = engine_.NodeByName(t->subject);
    if (!node) {
      Error(res, 409, "node '" + t->subject + "' is not registered; register again");
      return std::nullopt;
    }
    return *node;
  };

  http_->Get("/v1/health", [this](const Request&, Response& res) {
    auto c = engine_.counters();
    Reply(res, 200, {{"status", c.store_errors ? "degraded" : "ok"},
                     {"epoch", engine_.epoch()},
                     {"store_errors", c.store_errors}});
  });

  // --- Jobs ---
  http_->Post("/v1/jobs", [this, user](const Request& req, Response& res) {
    auto who = user(req, res);
    if (!who) return;
    auto body = api::ParseJson(req.body);
    if (!body.ok()) return Error(res, 400, "body: " + body.status().message());
    if (!body->is_object()) return Error(res, 400, "body: expected a JSON object with 'job' or 'yaml'");
    for (auto it = body->begin(); it != body->end(); ++it) {
      if (it.key() != "request_id" && it.key() != "job" && it.key() != "yaml" && it.key() != "source" &&
          it.key() != "default_workdir") {
        return Error(res, 400, "body: unknown field '" + it.key() +
                                   "' (expected request_id, job, yaml, source, default_workdir)");
      }
    }
    std::string request_id = req.get_header_value("Idempotency-Key");
    if (body->contains("request_id")) {
      if (!(*body)["request_id"].is_string()) return Error(res, 400, "request_id: expected a string");
      request_id = (*body)["request_id"].get<std::string>();
    }
    if (request_id.size() > 128) return Error(res, 400, "request_id: at most 128 characters");
    if (request_id.empty()) request_id = "auto-" + NewToken(api::TokenKind::kUser).substr(8);
    std::string text;
    api::JobParseOptions opts;
    if (body->contains("yaml")) {
      if (!(*body)["yaml"].is_string()) return Error(res, 400, "yaml: expected the job file as a string");
      text = (*body)["yaml"].get<std::string>();
      opts.source = body->value("source", std::string("job.yaml"));
    } else if (body->contains("job")) {
      text = (*body)["job"].dump();
      opts.source = "job";
    } else {
      return Error(res, 400, "body: give the job as 'job' (an object) or 'yaml' (the file's text)");
    }
    auto jobs = api::ParseJobs(text, opts);
    if (!jobs.ok()) return Error(res, jobs.status());
    // The client's directory, for jobs that name none (the CLI sends its current directory).
    if (body->contains("default_workdir")) {
      const json& d = (*body)["default_workdir"];
      if (!d.is_string() || (!d.get<std::string>().empty() && d.get<std::string>()[0] != '/')) {
        return Error(res, 400, "default_workdir: expected an absolute path");
      }
      for (auto& j : *jobs) {
        if (j.workdir.empty()) j.workdir = d.get<std::string>();
      }
    }
    if (!IsAdmin(*who) && !who->team.empty()) {
      for (const auto& j : *jobs) {
        if (j.spec.team != who->team) {
          return Error(res, 403, "your token may submit only for team '" + who->team + "', not '" + j.spec.team + "'");
        }
      }
    }
    auto reply = engine_.Submit(request_id, std::move(*jobs)).get();
    if (!reply.ok()) return Error(res, reply.status());
    json list = json::array();
    for (size_t i = 0; i < reply->ids.size(); ++i) {
      list.push_back({{"id", reply->ids[i].value()}, {"name", i < reply->names.size() ? reply->names[i] : ""}});
    }
    Reply(res, reply->created ? 201 : 200, {{"request_id", request_id}, {"created", reply->created}, {"jobs", list}});
  });

  http_->Get("/v1/jobs", [this, user](const Request& req, Response& res) {
    if (!user(req, res)) return;
    store::JobFilter f;
    auto limit = IntParam(req, "limit", 0, 1000000, 1000);
    if (!limit.ok()) return Error(res, limit.status());
    f.limit = *limit;
    if (req.has_param("team")) f.team = req.get_param_value("team");
    auto since = IntParam(req, "since_ms", 0, INT64_MAX / 4, -1);
    if (!since.ok()) return Error(res, since.status());
    if (*since >= 0) f.since = Time::FromMillis(*since);
    std::vector<api::JobState> states;
    if (req.has_param("state")) {
      for (const auto& s : Split(req.get_param_value("state"), ',')) {
        auto st = api::ParseJobState(std::string(Trim(s)));
        if (!st.ok()) return Error(res, 400, "state: " + st.status().message());
        states.push_back(*st);
      }
    }
    auto jobs = store_.ListJobs(f);
    if (!jobs.ok()) return Error(res, jobs.status());
    json list = json::array();
    for (const auto& j : *jobs) {
      if (!states.empty() && std::find(states.begin(), states.end(), j.state) == states.end()) continue;
      list.push_back(JobSummary(j));
    }
    Reply(res, 200, {{"jobs", list}});
  });

  http_->Get(R"(/v1/jobs/(\d+))", [this, user](const Request& req, Response& res) {
    if (!user(req, res)) return;
    auto id = PathJob(req);
    if (!id.ok()) return Error(res, id.status());
    auto rec = store_.GetJob(*id);
    if (!rec.ok()) return Error(res, rec.status());
    if (!*rec) return Error(res, 404, "job " + std::to_string(id->value()) + " does not exist");
    auto hist = store_.History(*id);
    if (!hist.ok()) return Error(res, hist.status());
    json h = json::array();
    for (const auto& t : *hist) h.push_back(api::ToJson(t));
    json o = JobSummary(**rec);
    o["record"] = api::ToJson(**rec);
    o["job_file"] = api::ToJobJson((*rec)->request);
    o["history"] = h;
    Reply(res, 200, o);
  });

  http_->Post(R"(/v1/jobs/(\d+)/cancel)", [this, user](const Request& req, Response& res) {
    auto who = user(req, res);
    if (!who) return;
    auto id = PathJob(req);
    if (!id.ok()) return Error(res, id.status());
    Status st = engine_.Cancel(*id, who->subject).get();
    if (!st.ok()) return Error(res, st);
    Reply(res, 202, {{"id", id->value()}, {"cancel_requested", true}});
  });

  http_->Get(R"(/v1/jobs/(\d+)/explain)", [this, user](const Request& req, Response& res) {
    if (!user(req, res)) return;
    auto id = PathJob(req);
    if (!id.ok()) return Error(res, id.status());
    auto e = engine_.Explain(*id);
    if (!e.ok()) {
      auto rec = store_.GetJob(*id);
      if (rec.ok() && *rec) {
        return Reply(res, 200, {{"id", id->value()},
                                {"state", api::JobStateName((*rec)->state)},
                                {"reasons", json::array({"the job is " + std::string(api::JobStateName((*rec)->state)) +
                                                         ": " + (*rec)->reason})}});
      }
      return Error(res, e.status());
    }
    json o = {{"id", id->value()},
              {"phase", sched::JobPhaseName(e->phase)},
              {"position", e->position},
              {"queue_length", e->queue_length},
              {"can_start_now", e->placement == sched::PlaceResult::Kind::kPlaced},
              {"ever", e->ever},
              {"reasons", e->reasons}};
    if (e->earliest_start) o["earliest_start_ms"] = e->earliest_start->millis();
    Reply(res, 200, o);
  });

  http_->Get(R"(/v1/jobs/(\d+)/logs)", [this, user](const Request& req, Response& res) {
    if (!user(req, res)) return;
    auto id = PathJob(req);
    if (!id.ok()) return Error(res, id.status());
    auto rec = store_.GetJob(*id);
    if (!rec.ok()) return Error(res, rec.status());
    if (!*rec) return Error(res, 404, "job " + std::to_string(id->value()) + " does not exist");
    auto attempt = IntParam(req, "attempt", 0, 1000000, (*rec)->attempt);
    auto wait_ms = IntParam(req, "wait_ms", 0, 60000, 0);
    if (!attempt.ok()) return Error(res, attempt.status());
    if (!wait_ms.ok()) return Error(res, wait_ms.status());
    int parts = (*rec)->placement ? static_cast<int>((*rec)->placement->parts.size()) : 0;
    if (*attempt != (*rec)->attempt) {
      // Older attempts: count the parts from the files.
      parts = 0;
      while (std::filesystem::exists(LogPath(id->value(), static_cast<int>(*attempt), parts))) ++parts;
    }
    std::vector<int64_t> offsets(parts, 0);
    if (req.has_param("offsets")) {
      auto items = Split(req.get_param_value("offsets"), ',');
      for (size_t i = 0; i < items.size() && i < offsets.size(); ++i) {
        auto v = ParseInt(Trim(items[i]));
        if (!v || *v < 0) return Error(res, 400, "offsets: a comma-separated list of byte offsets, one per part");
        offsets[i] = *v;
      }
    }
    constexpr int64_t kMaxChunk = 1 << 20;
    auto read = [&](json& out) {
      bool any = false;
      out = json::array();
      for (int p = 0; p < parts; ++p) {
        std::ifstream f(LogPath(id->value(), static_cast<int>(*attempt), p), std::ios::binary);
        std::string data;
        if (f) {
          f.seekg(0, std::ios::end);
          int64_t size = f.tellg();
          if (size > offsets[p]) {
            int64_t n = std::min(kMaxChunk, size - offsets[p]);
            data.resize(n);
            f.seekg(offsets[p]);
            f.read(data.data(), n);
            any = true;
          }
        }
        out.push_back({{"part", p}, {"offset", offsets[p]}, {"data", data}});
      }
      return any;
    };
    json list;
    bool any = read(list);
    bool finished = api::IsTerminal((*rec)->state) || *attempt != (*rec)->attempt;
    // Long poll: until new bytes arrive, the job ends or moves to another attempt, or the wait
    // is over. Uploads wake the wait; the job's state is looked at every 200 ms.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(*wait_ms);
    while (!any && !finished && std::chrono::steady_clock::now() < deadline) {
      {
        std::unique_lock<std::mutex> lock(logs_mu_);
        logs_cv_.wait_until(lock, std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(200)));
      }
      any = read(list);
      auto again = store_.GetJob(*id);
      if (again.ok() && *again) finished = api::IsTerminal((*again)->state) || *attempt != (*again)->attempt;
    }
    Reply(res, 200, {{"id", id->value()}, {"attempt", *attempt}, {"parts", list}, {"finished", finished}});
  });

  http_->Get("/v1/queue", [this, user](const Request& req, Response& res) {
    if (!user(req, res)) return;
    json list = json::array();
    for (const auto& e : engine_.Queue()) {
      json o = JobSummary(e.job);
      o["position"] = e.position;
      list.push_back(o);
    }
    Reply(res, 200, {{"jobs", list}});
  });

  // --- Nodes ---
  http_->Get("/v1/nodes", [this, user](const Request& req, Response& res) {
    if (!user(req, res)) return;
    json list = json::array();
    for (const auto& n : engine_.Nodes()) {
      json tel = json::array();
      for (const auto& g : n.telemetry) {
        tel.push_back({{"util_pct", g.util_pct},
                       {"mem_used_mib", g.mem_used_mib},
                       {"temperature_c", g.temperature_c},
                       {"power_w", g.power_w}});
      }
      json jobs = json::array();
      for (JobId j : n.jobs) jobs.push_back(j.value());
      list.push_back({{"id", n.record.id.value()},
                      {"name", n.record.name},
                      {"state", api::NodeStateName(n.record.state)},
                      {"gpu_model", n.record.spec.gpu_model},
                      {"gpus", n.record.spec.gpus},
                      {"gpus_used", n.gpus_used},
                      {"address", n.record.address},
                      {"market", model::MarketName(n.record.spec.market)},
                      {"labels", n.record.spec.labels},
                      {"last_heartbeat_ms", n.record.last_heartbeat.millis()},
                      {"telemetry", tel},
                      {"jobs", jobs}});
      if (n.notice) list.back()["notice"] = api::ToJson(*n.notice);
    }
    Reply(res, 200, {{"nodes", list}});
  });

  auto drain = [this, user](bool on) {
    return [this, user, on](const Request& req, Response& res) {
      auto who = user(req, res);
      if (!who) return;
      if (!IsAdmin(*who)) return Error(res, 403, "draining a node needs an admin token");
      Status st = engine_.Drain(req.matches[1].str(), on).get();
      if (!st.ok()) return Error(res, st);
      Reply(res, 200, {{"node", req.matches[1].str()}, {"state", on ? "draining" : "up"}});
    };
  };
  http_->Post(R"(/v1/nodes/([A-Za-z0-9._-]+)/drain)", drain(true));
  http_->Post(R"(/v1/nodes/([A-Za-z0-9._-]+)/undrain)", drain(false));

  // --- Money ---
  http_->Get("/v1/cost", [this, user](const Request& req, Response& res) {
    if (!user(req, res)) return;
    store::JobFilter f;
    if (req.has_param("team")) f.team = req.get_param_value("team");
    auto since = IntParam(req, "since_ms", 0, INT64_MAX / 4, -1);
    if (!since.ok()) return Error(res, since.status());
    if (*since >= 0) f.since = Time::FromMillis(*since);
    auto jobs = store_.ListJobs(f);
    if (!jobs.ok()) return Error(res, jobs.status());
    auto live = engine_.LiveJobCosts();
    json list = json::array();
    std::map<std::string, int64_t> by_team;
    int64_t total = 0;
    for (const auto& j : *jobs) {
      int64_t cost = j.cost_micros;
      if (auto it = live.find(j.id.value()); it != live.end()) cost = std::max(cost, it->second);
      by_team[j.request.spec.team] += cost;
      total += cost;
      if (cost == 0) continue;
      list.push_back({{"id", j.id.value()},
                      {"name", j.request.spec.name},
                      {"team", j.request.spec.team},
                      {"state", api::JobStateName(j.state)},
                      {"cost_micros", cost}});
    }
    json teams = json::array();
    for (const auto& t : engine_.TeamCosts()) {
      if (f.team && *f.team != t.team) continue;
      json o = {{"team", t.team},
                {"jobs_cost_micros", by_team[t.team]},
                {"spent_micros", t.spend.spent_micros},
                {"rate_micros_per_hour", t.spend.rate_micros},
                {"over_soft", t.spend.over_soft},
                {"over_hard", t.spend.over_hard}};
      if (t.budget) {
        // A rolling budget counts from the start of the current period.
        Time since = t.budget->period == CalendarPeriod::kNone
                         ? t.budget->since
                         : std::max(t.budget->since, PeriodStart(clock_.Now(), t.budget->period));
        o["budget"] = {{"since_ms", since.millis()},
                       {"hard_micros", t.budget->hard_micros},
                       {"soft_micros", t.budget->soft_micros},
                       {"max_rate_micros", t.budget->max_rate_micros},
                       {"stop_running", t.budget->stop_running},
                       {"period", CalendarPeriodName(t.budget->period)}};
      }
      teams.push_back(o);
    }
    Reply(res, 200, {{"total_micros", total}, {"teams", teams}, {"jobs", list}});
  });

  http_->Get("/v1/pool", [this, user](const Request& req, Response& res) {
    if (!user(req, res)) return;
    const Pool* pool = pool_.load();
    if (pool == nullptr) {
      return Error(res, 404, "this controller has no pool (start it with --pool FILE to autoscale)");
    }
    json list = json::array();
    for (const PoolInstance& i : pool->Instances()) {
      json jobs = json::array();
      for (JobId id : i.for_jobs) jobs.push_back(id.value());
      json o = {{"name", i.name},         {"provider_id", i.provider_id}, {"offer", i.offer},
                {"state", i.state},       {"created_ms", i.created.millis()}, {"for_jobs", jobs},
                {"note", i.note}};
      if (i.idle_since) o["idle_since_ms"] = i.idle_since->millis();
      list.push_back(std::move(o));
    }
    json offers = json::array();
    for (const auto& o : pool->config().offers) {
      offers.push_back({{"name", o.name},
                        {"gpu", o.gpu_model},
                        {"gpus", o.gpus_per_node},
                        {"market", model::MarketName(o.market)},
                        {"price_micros_per_hour", o.price_micros_per_hour},
                        {"zone", o.zone}});
    }
    Reply(res, 200, {{"provider", pool->config().provider.kind}, {"instances", list}, {"offers", offers}});
  });

  http_->Post(R"(/v1/teams/([A-Za-z0-9._-]+)/budget)", [this, user](const Request& req, Response& res) {
    auto who = user(req, res);
    if (!who) return;
    if (!IsAdmin(*who)) return Error(res, 403, "setting a budget needs an admin token");
    auto body = api::ParseJson(req.body);
    if (!body.ok() || !body->is_object()) {
      return Error(res, 400, "body: expected {\"hard\": dollars, \"soft\": dollars, \"max_hourly\": dollars, "
                             "\"since_ms\": time, \"stop_running\": bool}");
    }
    sched::TeamBudget b;
    b.since = clock_.Now();
    for (auto it = body->begin(); it != body->end(); ++it) {
      const std::string& k = it.key();
      if (k == "hard" || k == "soft" || k == "max_hourly") {
        if (!it->is_number() || it->get<double>() < 0 || it->get<double>() > 1e12) {
          return Error(res, 400, k + ": expected dollars (a number from 0)");
        }
        int64_t micros = static_cast<int64_t>(std::llround(it->get<double>() * 1e6));
        (k == "hard" ? b.hard_micros : k == "soft" ? b.soft_micros : b.max_rate_micros) = micros;
      } else if (k == "since_ms") {
        if (!it->is_number_integer() || it->get<int64_t>() < 0) return Error(res, 400, "since_ms: expected a time in ms");
        b.since = Time::FromMillis(it->get<int64_t>());
      } else if (k == "stop_running") {
        if (!it->is_boolean()) return Error(res, 400, "stop_running: expected true or false");
        b.stop_running = it->get<bool>();
      } else if (k == "period") {
        std::optional<CalendarPeriod> p = it->is_string() ? ParseCalendarPeriod(it->get<std::string>()) : std::nullopt;
        if (!p) return Error(res, 400, "period: expected none, daily, weekly or monthly");
        b.period = *p;
      } else {
        return Error(res, 400,
                     "unknown field '" + k + "' (expected hard, soft, max_hourly, since_ms, stop_running, period)");
      }
    }
    // A budget that rolls over counts from the start of the current period, unless told otherwise.
    if (b.period != CalendarPeriod::kNone && !body->contains("since_ms")) b.since = PeriodStart(clock_.Now(), b.period);
    if (b.soft_micros > 0 && b.hard_micros > 0 && b.soft_micros > b.hard_micros) {
      return Error(res, 400, "soft: must not be above hard");
    }
    Status st = engine_.SetBudget(req.matches[1].str(), b).get();
    if (!st.ok()) return Error(res, st);
    Reply(res, 200, {{"team", req.matches[1].str()},
                     {"hard_micros", b.hard_micros},
                     {"soft_micros", b.soft_micros},
                     {"max_rate_micros", b.max_rate_micros},
                     {"since_ms", b.since.millis()},
                     {"stop_running", b.stop_running},
                     {"period", CalendarPeriodName(b.period)}});
  });

  // --- Tokens ---
  http_->Post("/v1/tokens", [this, user](const Request& req, Response& res) {
    auto who = user(req, res);
    if (!who) return;
    if (!IsAdmin(*who)) return Error(res, 403, "making tokens needs an admin token");
    auto body = api::ParseJson(req.body);
    if (!body.ok() || !body->is_object()) return Error(res, 400, "body: expected a JSON object {kind, role, subject, team}");
    std::string kind = body->value("kind", std::string("user"));
    std::string role = body->value("role", std::string("user"));
    std::string subject = body->value("subject", std::string(""));
    std::string team = body->value("team", std::string(""));
    if (kind != "user" && kind != "join") return Error(res, 400, "kind: must be user or join, got '" + kind + "'");
    if (role != "user" && role != "admin") return Error(res, 400, "role: must be user or admin, got '" + role + "'");
    auto secret = auth_.Create(kind == "join" ? api::TokenKind::kJoin : api::TokenKind::kUser, subject,
                               kind == "join" ? "agent" : role, team, clock_.Now());
    if (!secret.ok()) return Error(res, secret.status());
    Reply(res, 201, {{"token", *secret}, {"kind", kind}, {"role", role}, {"subject", subject}, {"team", team}});
  });

  // --- Agents ---
  http_->Post("/v1/agents/register", [this, authn](const Request& req, Response& res) {
    auto t = authn(req, res);
    if (!t) return;
    if (t->kind != api::TokenKind::kJoin && t->kind != api::TokenKind::kAgent) {
      return Error(res, 403, "registering a node needs a join token (gpufleet token create --join)");
    }
    auto body = api::ParseJson(req.body);
    if (!body.ok()) return Error(res, 400, "body: " + body.status().message());
    auto r = api::RegisterRequestFromJson(*body);
    if (!r.ok()) return Error(res, r.status());
    if (t->kind == api::TokenKind::kAgent && t->subject != r->name) {
      return Error(res, 403, "this agent token belongs to node '" + t->subject + "'");
    }
    std::string secret = NewToken(api::TokenKind::kAgent);
    auto reply = engine_.Register(std::move(*r), Sha256Hex(secret)).get();
    if (!reply.ok()) return Error(res, reply.status());
    reply->token = secret;
    Reply(res, 200, api::ToJson(*reply));
  });

  http_->Post("/v1/agents/heartbeat", [this, agent](const Request& req, Response& res) {
    auto node = agent(req, res);
    if (!node) return;
    auto body = api::ParseJson(req.body);
    if (!body.ok()) return Error(res, 400, "body: " + body.status().message());
    auto hb = api::HeartbeatFromJson(*body);
    if (!hb.ok()) return Error(res, hb.status());
    auto reply = engine_.Heartbeat(*node, std::move(*hb)).get();
    if (!reply.ok()) return Error(res, reply.status());
    Reply(res, 200, api::ToJson(*reply));
  });

  http_->Get("/v1/agents/commands", [this, agent](const Request& req, Response& res) {
    auto node = agent(req, res);
    if (!node) return;
    auto after = IntParam(req, "after", 0, INT64_MAX / 4, 0);
    auto wait = IntParam(req, "wait_ms", 0, options_.max_poll_wait.millis(), 0);
    if (!after.ok()) return Error(res, after.status());
    if (!wait.ok()) return Error(res, wait.status());
    auto batch = engine_.PollCommands(*node, *after, Duration::Millis(*wait));
    Reply(res, 200, api::ToJson(batch));
  });

  http_->Post("/v1/agents/logs", [this, agent](const Request& req, Response& res) {
    auto node = agent(req, res);
    if (!node) return;
    auto job = IntParam(req, "job", 0, INT64_MAX / 4, -1);
    auto attempt = IntParam(req, "attempt", 1, 1000000, -1);
    auto part = IntParam(req, "part", 0, 4096, -1);
    auto offset = IntParam(req, "offset", 0, INT64_MAX / 4, -1);
    for (const auto* r : {&job, &attempt, &part, &offset}) {
      if (!r->ok()) return Error(res, r->status());
      if (**r < 0) return Error(res, 400, "job, attempt, part and offset are required query parameters");
    }
    std::string path = LogPath(*job, static_cast<int>(*attempt), static_cast<int>(*part));
    std::lock_guard<std::mutex> lock(logs_mu_);
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    int64_t size = 0;
    struct stat sb;
    if (::stat(path.c_str(), &sb) == 0) size = sb.st_size;
    if (*offset > size) {
      return Reply(res, 409, {{"error", {{"code", "conflict"}, {"message", "offset beyond the end"}}}, {"size", size}});
    }
    int64_t skip = size - *offset;
    if (skip < static_cast<int64_t>(req.body.size())) {
      std::ofstream f(path, std::ios::binary | std::ios::app);
      f.write(req.body.data() + skip, static_cast<std::streamsize>(req.body.size() - skip));
      if (!f) return Error(res, 503, "cannot write " + path);
      size += static_cast<int64_t>(req.body.size()) - skip;
    }
    logs_cv_.notify_all();
    Reply(res, 200, {{"size", size}});
  });
}

}  // namespace gpufleet::controller
