#include "controller/server.h"

#include <cstring>
#include <algorithm>
#include <regex>
#include <set>

#include <arpa/inet.h>

#include "controller/monitor.h"
#include "controller/pool.h"
#include "controller/webui.h"

#include <httplib.h>
#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <chrono>
#include <functional>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "api/codec.h"
#include "api/job_summary.h"
#include "api/job_yaml.h"
#include "api/node_summary.h"
#include "api/token_summary.h"
#include "common/source_location.h"
#include "common/strings.h"
#include "controller/rbac.h"
#include "controller/tls.h"
#include "model/gpu_speeds.h"

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
    case StatusCode::kResourceExhausted: return 429;
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
    case 429: return "too_many_requests";
    case 507: return "insufficient_storage";
    case 503: return "unavailable";
    default: return "internal";
  }
}

// The route a request matched, as a low-cardinality label: "/v1/jobs/{id}/logs".
std::string RouteLabel(const RouteRule* rule) {
  if (rule == nullptr) return "unmatched";
  std::string r = rule->pattern;
  auto replace = [&](const std::string& from, const std::string& to) {
    for (size_t at = r.find(from); at != std::string::npos; at = r.find(from, at + to.size())) r.replace(at, from.size(), to);
  };
  replace(R"((\d+))", "{id}");
  replace("([A-Za-z0-9._-]+)", "{name}");
  replace("([0-9a-f]{1,64})", "{token}");
  replace("[A-Za-z0-9._/-]*", "*");
  return r;
}

void Reply(httplib::Response& res, int code, const json& body) {
  res.status = code;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace) + "\n", "application/json");
}

void Error(httplib::Response& res, int code, const std::string& message) {
  Reply(res, code, {{"error", {{"code", ErrorCode(code)}, {"message", message}}}});
}

void Error(httplib::Response& res, const Status& st) { Error(res, HttpCode(st.code()), st.message()); }

// Error() for a function that answers with nothing when it refuses.
std::nullopt_t Refuse(httplib::Response& res, int code, const std::string& message) {
  Error(res, code, message);
  return std::nullopt;
}

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
  if (!n || *n < 0) {
    const std::string& text = req.matches[1].str();
    const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
    return Status::InvalidArgument(digits ? "job id " + text + " is out of range (no job has an id that large)"
                                          : "job id must be a number, got '" + text + "'");
  }
  return JobId(*n);
}

// The job a route names, with its transitions; NotFound when there is none.
struct JobAndHistory {
  api::JobRecord record;
  std::vector<api::Transition> history;
};
Result<JobAndHistory> LoadJob(store::StateStore& store, const httplib::Request& req) {
  GF_ASSIGN_OR_RETURN(JobId id, PathJob(req));
  GF_ASSIGN_OR_RETURN(auto rec, store.GetJob(id));
  if (!rec) return Status::NotFound("job " + std::to_string(id.value()) + " does not exist");
  GF_ASSIGN_OR_RETURN(auto hist, store.History(id));
  return JobAndHistory{std::move(*rec), std::move(hist)};
}

// A token's subject: empty, or up to 128 letters, digits and "-_.@+" (names and mail addresses,
// nothing that could break a log line or a table).
bool ValidSubject(const std::string& s) {
  if (s.size() > 128) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '@' || c == '+';
  });
}

// The length of the longest prefix of `s` that does not end inside a UTF-8 character (bytes that
// are not UTF-8 at all count as whole characters; they become U+FFFD in JSON either way).
size_t Utf8Prefix(const std::string& s) {
  const size_t n = s.size();
  // Walk back over at most three continuation bytes to the last lead byte.
  size_t i = n;
  int back = 0;
  while (i > 0 && back < 3 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) {
    --i;
    ++back;
  }
  if (i == 0) return n;
  const unsigned char lead = static_cast<unsigned char>(s[i - 1]);
  const size_t want = lead >= 0xF8 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  const size_t have = n - (i - 1);
  return want > have ? i - 1 : n;
}

// A rate as people write it: "50", "0.5", "0.001".
std::string FormatRate(double per_s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", per_s);
  return buf;
}

// The most jobs one POST /v1/jobs/cancel names: as many as one submission makes.
constexpr size_t kMaxCancelIds = api::kMaxArrayJobs;

// Who is calling, and how far the verb reaches for them.
struct Caller {
  api::TokenRecord token;
  Role role;
  std::string team;  // the team it acts for (TeamOf)
  Scope scope;
  bool admin() const { return role == Role::kAdmin; }
  // Whether the verb reaches a job or record of `team`.
  bool Reaches(const std::string& t) const { return scope == Scope::kAll || t == team; }
};

// Whether the caller reads a job's own details: its command, environment and directories, and
// the reasons its runs and checks gave (an exit, a start that failed, a folder it named), which
// may quote any of them. Another team's caller reads its state, shape, place and times.
bool SeesJob(const Caller& who, const std::string& team) { return who.admin() || team == who.team; }
std::string HiddenReason(const std::string& reason, const std::string& team) {
  return reason.empty() ? reason : "team " + team + "'s job: the reason is shown to that team";
}

std::string Denied(const api::TokenRecord& t, std::optional<Role> role, Verb verb, bool agents) {
  if (!role) return "the token's role '" + t.role + "' is unknown; ask an admin for a new token";
  if (*role == Role::kAgent || *role == Role::kJoin) {
    if (!agents) return std::string("a ") + RoleName(*role) + " token cannot use this route; agents talk to the agent listener";
    return std::string("a ") + RoleName(*role) + " token may not " + VerbName(verb) +
           (*role == Role::kJoin ? " (a join token only registers nodes)" : "");
  }
  if (agents) return "only agents (agent and join tokens) may use the agent listener";
  return std::string("your token (role ") + RoleName(*role) + ") may not " + VerbName(verb) +
         "; see the role table in docs/security.md";
}

// The token of "Authorization: Bearer <token>"; the scheme is case-insensitive (RFC 7235).
std::optional<std::string> BearerToken(const httplib::Request& req) {
  std::string h = req.get_header_value("Authorization");
  if (h.size() < 7 || ToLower(h.substr(0, 7)) != "bearer ") return std::nullopt;
  return std::string(Trim(h.substr(7)));
}

bool HasNul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

// Set by a handler that wrote its audit record in the same transaction as its change.
thread_local bool tl_audited = false;

// Installs the parts both listeners share: size limit, error and exception answers.
void CommonSetup(RouteTable& r, size_t max_body) {
  r.set_payload_max_length(max_body);
  r.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string msg = res.status == 413   ? "the request body is too large"
                      : res.status == 404 ? "no such route; see docs/api.md"
                                          : "request failed";
    // cpp-httplib reads at most 8 KiB of a form-encoded body, the type curl's -d sends by default.
    if (res.status == 413 && req.get_header_value("Content-Type").starts_with("application/x-www-form-urlencoded")) {
      msg = "a form-encoded body is read up to 8 KiB only; send JSON with 'Content-Type: application/json' "
            "(curl: -H 'Content-Type: application/json')";
    }
    Error(res, res.status, msg);
  });
  r.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = std::string("internal error: ") + e.what();
    } catch (...) {
    }
    Error(res, 500, what);
  });
}

}  // namespace

std::string UserMap::For(const std::string& subject, const std::string& team) const {
  if (auto it = subjects.find(subject); it != subjects.end() && !subject.empty()) return it->second;
  if (auto it = teams.find(team); it != teams.end() && !team.empty()) return it->second;
  return "";
}

Result<UserMap> LoadUserMap(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::InvalidArgument(path + ": cannot read the user map");
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().size() > (1 << 20)) return Status::InvalidArgument(path + ": a user map is at most 1 MiB");
  UserMap m;
  // "users.yaml:LINE:COL: ...", at the node that is wrong: an unknown key's key, a bad value's value.
  auto error = [&](const YAML::Node& at, const std::string& what) {
    // An empty file's node has no position: point at its start.
    return Status::InvalidArgument((at.Mark().is_null() ? SourcePrefix(path, 1, 1) : SourcePrefixAt(path, at.Mark())) +
                                   what);
  };
  try {
    YAML::Node doc = YAML::Load(text.str());
    if (!doc.IsMap()) return error(doc, "expected 'subjects:' and/or 'teams:' maps");
    for (auto it = doc.begin(); it != doc.end(); ++it) {
      std::string key = it->first.as<std::string>();
      if (key != "subjects" && key != "teams") {
        return error(it->first, key + ": unknown key (expected subjects, teams)");
      }
      if (!it->second.IsMap()) return error(it->second, key + ": must map names to Unix users");
      auto& dst = key == "subjects" ? m.subjects : m.teams;
      for (auto e = it->second.begin(); e != it->second.end(); ++e) {
        std::string user = e->second.IsScalar() ? e->second.as<std::string>() : "";
        if (user.empty() || user == "root" || user == "0" || user.find('\0') != std::string::npos) {
          return error(e->second, key + "." + e->first.as<std::string>() + ": must name a Unix user other than root");
        }
        dst[e->first.as<std::string>()] = user;
      }
    }
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(SourcePrefixAt(path, e.mark) + e.msg);
  }
  return m;
}

ApiServer::ApiServer(Engine& engine, store::StateStore& store, Authenticator& auth, const sched::Clock& clock,
                     ServerOptions options)
    : engine_(engine), store_(store), auth_(auth), clock_(clock), options_(std::move(options)),
      user_routes_(std::make_unique<RouteTable>()), agent_routes_(std::make_unique<RouteTable>()) {}

ApiServer::~ApiServer() { Stop(); }

std::string ApiServer::LogPath(int64_t job, int attempt, int part) const {
  return options_.data_dir + "/logs/job-" + std::to_string(job) + "/a" + std::to_string(attempt) + ".p" +
         std::to_string(part) + ".log";
}

Status ApiServer::Start() {
  CommonSetup(*user_routes_, options_.max_body_bytes);
  CommonSetup(*agent_routes_, options_.max_body_bytes);
  Routes();
  ListenerLimits ul = options_.user_limits, al = options_.agent_limits;
  ul.max_body_bytes = al.max_body_bytes = options_.max_body_bytes;
  user_listener_ = std::make_unique<HttpListener>(*user_routes_, ul, "api");
  agent_listener_ = std::make_unique<HttpListener>(*agent_routes_, al, "agent");
  if (!options_.tls_cert.empty() || !options_.tls_key.empty()) {
    GF_ASSIGN_OR_RETURN(SslContext tls, MakeServerTlsContext(options_.tls_cert, options_.tls_key));
    user_listener_->SetTls(tls);
    agent_listener_->SetTls(tls);
  } else {
    GF_RETURN_IF_ERROR(CheckPlainListen({options_.host, options_.agent_host}, /*tls=*/false, options_.insecure));
  }
  if (Status st = user_listener_->Bind(options_.host, options_.port); !st.ok()) {
    return Status::Unavailable(st.message() + " (in use? pick another port for the API)");
  }
  if (Status st = agent_listener_->Bind(options_.agent_host, options_.agent_port); !st.ok()) {
    return Status::Unavailable(st.message() + " (in use? pick another port for agents)");
  }
  port_ = user_listener_->port();
  agent_port_ = agent_listener_->port();
  GF_RETURN_IF_ERROR(user_listener_->Start());
  GF_RETURN_IF_ERROR(agent_listener_->Start());
  if (!options_.audit_export.empty()) exporter_ = std::thread([this] { ExportAudit(); });
  return Status::Ok();
}

api::AuditRecord ApiServer::Allowed(const httplib::Request& req, const std::string& reason, bool agents) const {
  api::AuditRecord a = AuditFor(req, FindRoute(req.method, req.path, agents));
  a.outcome = "allowed";
  a.reason = reason;
  return a;
}

api::AuditRecord ApiServer::AuditFor(const httplib::Request& req, const RouteRule* rule) const {
  api::AuditRecord a;
  a.at = clock_.Now();
  a.source = req.remote_addr;
  a.verb = rule ? AuditVerb(rule->verb) : "request";
  if (rule && rule->verb == Verb::kNodeDrain && req.path.size() > 8 && req.path.substr(req.path.size() - 8) == "/undrain") {
    a.verb = "node.undrain";
  }
  if (rule && rule->verb == Verb::kNodeDrain && req.path.size() > 6 && req.path.substr(req.path.size() - 6) == "/check") {
    a.verb = "node.check";
  }
  a.object = req.method + " " + req.path;
  std::string what;
  if (req.matches.size() > 1) {
    what = req.matches[1].str();
  } else if (rule && req.matches.empty() && std::strchr(rule->pattern, '(') != nullptr) {
    // Refused before routing (the role gate): the route's pattern gives the object as routing would.
    std::smatch m;
    if (std::regex_match(req.path, m, std::regex(rule->pattern)) && m.size() > 1) what = m[1].str();
  }
  if (!what.empty()) {
    if (StartsWith(req.path, "/v1/jobs/")) a.object = "job " + what;
    if (StartsWith(req.path, "/v1/nodes/")) a.object = "node " + what;
    if (StartsWith(req.path, "/v1/teams/")) a.object = "team " + what;
    if (StartsWith(req.path, "/v1/tokens/")) a.object = "token " + what;
  }
  a.request_id = req.get_header_value("Idempotency-Key");
  if (std::optional<std::string> token = BearerToken(req)) {
    // A lookup in the cache the request's own authentication filled.
    auto t = auth_.Check(*token, a.at);
    std::optional<api::TokenRecord> known;
    if (t.ok()) {
      known = *t;
    } else if (t.status().code() == StatusCode::kNotFound) {
      // A revoked or expired token is still someone's: the record says whose.
      if (auto found = store_.FindToken(Sha256Hex(*token)); found.ok() && *found) known = **found;
    }
    if (known) {
      a.subject = known->subject;
      a.role = known->kind == api::TokenKind::kUser ? known->role : api::TokenKindName(known->kind);
      a.team = known->team;
    }
  }
  return a;
}

std::string FailureKey(const std::string& addr) {
  in6_addr a6{};
  if (addr.find(':') == std::string::npos || ::inet_pton(AF_INET6, addr.c_str(), &a6) != 1) return addr;
  if (IN6_IS_ADDR_V4MAPPED(&a6)) {
    char v4[INET_ADDRSTRLEN];
    if (::inet_ntop(AF_INET, &a6.s6_addr[12], v4, sizeof v4) != nullptr) return v4;
  }
  std::memset(&a6.s6_addr[8], 0, 8);
  char out[INET6_ADDRSTRLEN];
  if (::inet_ntop(AF_INET6, &a6, out, sizeof out) == nullptr) return addr;
  return std::string(out) + "/64";
}

void ApiServer::HoldFailedAuth(const httplib::Request& req, httplib::Response& res) {
  if (options_.failed_auth_per_s <= 0) return;
  const Time now = clock_.Now();
  const std::string key = FailureKey(req.remote_addr);
  int64_t held_before = 0;  // answers held back from this address since its last recorded one
  bool start_holding = false;
  double wait_s = 0;
  {
    MutexLock lock(rate_mu_);
    if (failed_auth_.size() > 100000) {
      // Bounded: addresses that are not held are forgotten first (a reset only forgives).
      std::erase_if(failed_auth_, [](const auto& e) { return !e.second.holding; });
      if (failed_auth_.size() > 100000) failed_auth_.clear();
    }
    auto [it, fresh] = failed_auth_.try_emplace(key, FailBucket{static_cast<double>(options_.failed_auth_burst), now});
    FailBucket& b = it->second;
    if (!fresh) {
      b.tokens = std::min<double>(options_.failed_auth_burst,
                                  b.tokens + static_cast<double>((now - b.last).millis()) / 1000.0 * options_.failed_auth_per_s);
      b.last = now;
    }
    if (b.tokens >= 1) {
      b.tokens -= 1;
      // Answered 401 and recorded, with the count of those held back since the last record; the
      // address stays held until its bucket has refilled, so a steady flood is one record a refill.
      held_before = b.held;
      b.held = 0;
      if (b.tokens >= options_.failed_auth_burst - 1) b.holding = false;
    } else {
      start_holding = !b.holding;
      if (b.holding) ++b.held;
      b.holding = true;
      wait_s = (1 - b.tokens) / options_.failed_auth_per_s;
    }
  }
  if (wait_s <= 0) {
    if (held_before > 0) {
      // The 401's audit record (AuditAnswer) carries its message: say what was held back.
      auto body = api::ParseJson(res.body);
      std::string message = body.ok() && body->is_object() && body->contains("error") ? (*body)["error"].value("message", "") : "";
      Error(res, 401, message + " (and " + std::to_string(held_before) +
                          " earlier requests without a valid token from this address were answered 429, not recorded one by one)");
    }
    return;
  }
  res.set_header("Retry-After", std::to_string(static_cast<int64_t>(std::ceil(wait_s))));
  Error(res, 429, "too many requests without a valid token from this address (" +
                      FormatRate(options_.failed_auth_per_s) + " per second, bursts of " +
                      std::to_string(options_.failed_auth_burst) + "); check the token and retry later");
  tl_audited = true;  // the first one held is recorded (below), the rest counted
  if (start_holding) {
    api::AuditRecord a = AuditFor(req, nullptr);
    a.verb = "auth.login";
    a.outcome = "denied";
    a.reason = "too many requests without a valid token from " + key +
               ": further ones are answered 429 and counted, not recorded one by one";
    Status st = store_.AppendAudit({a});
    if (!st.ok()) spdlog::error("audit: {}", st.message());
  }
}

void ApiServer::AuditAnswer(const httplib::Request& req, const httplib::Response& res, bool agents) {
  if (tl_audited) return;
  const RouteRule* rule = FindRoute(req.method, req.path, agents);
  bool refused = res.status == 401 || res.status == 403;
  if (!refused && !(rule && Mutates(rule->verb))) return;
  api::AuditRecord a = AuditFor(req, rule);
  if (res.status == 401) a.verb = "auth.login";
  a.outcome = res.status < 300 ? "allowed" : refused ? "denied" : "failed";
  auto body = api::ParseJson(res.body);
  if (body.ok() && body->is_object()) {
    if (body->contains("error") && (*body)["error"].is_object()) {
      a.reason = (*body)["error"].value("message", "");
    }
    if (res.status < 300 && body->contains("jobs") && (*body)["jobs"].is_array()) {
      std::vector<int64_t> ids;
      for (const auto& j : (*body)["jobs"]) {
        if (j.is_object() && j.contains("id") && j["id"].is_number_integer()) ids.push_back(j["id"].get<int64_t>());
      }
      a.object = api::JobsAuditObject(ids);
      a.request_id = body->value("request_id", a.request_id);
      if (body->contains("created") && (*body)["created"].is_boolean() && !(*body)["created"].get<bool>()) {
        // Answered from the first submit's record: nothing new was submitted.
        a.reason = "a retry of request " + a.request_id + ": its jobs as first submitted, nothing new";
      }
    }
    // A refused cancel of many jobs names the jobs it was refused for.
    if (res.status >= 400) {
      std::vector<int64_t> named;
      for (const char* key : {"forbidden", "missing"}) {
        if (!body->contains(key) || !(*body)[key].is_array()) continue;
        for (const auto& id : (*body)[key]) {
          if (id.is_number_integer()) named.push_back(id.get<int64_t>());
        }
      }
      if (!named.empty()) {
        std::sort(named.begin(), named.end());
        a.object = api::JobsAuditObject(named);
      }
    }
    if (res.status < 300 && rule && rule->verb == Verb::kAgentRegister && body->contains("node_id")) {
      a.object = "node " + (*body)["node_id"].dump();
    }
  }
  if (a.reason.empty()) a.reason = "HTTP " + std::to_string(res.status);
  if (a.request_id.empty() && rule && rule->verb == Verb::kJobSubmit) {
    // A refused submit: the request id its body gave, so the client's retry can be found.
    auto sent = api::ParseJson(req.body);
    if (sent.ok() && sent->is_object() && sent->contains("request_id") && (*sent)["request_id"].is_string()) {
      a.request_id = (*sent)["request_id"].get<std::string>().substr(0, 128);
    }
  }
  Status st = store_.AppendAudit({a});
  if (!st.ok()) spdlog::error("audit: {}", st.message());
}

// Tails the audit table into a JSON-lines file, for a log shipper: what is in the file is
// committed, in order, each record once.
void ApiServer::ExportAudit() {
  int64_t after = 0;
  {
    // Resume after the last record already in the file.
    std::ifstream in(options_.audit_export);
    std::string line, last;
    while (std::getline(in, line)) {
      if (!line.empty()) last = line;
    }
    auto j = api::ParseJson(last);
    if (j.ok() && j->is_object()) after = j->value("seq", int64_t{0});
  }
  MutexLock lock(export_mu_);
  while (!stopping_) {
    lock.Unlock();
    store::AuditFilter f;
    f.after_seq = after;
    f.limit = 1000;
    auto records = store_.ListAudit(f);
    if (records.ok() && !records->empty()) {
      std::ofstream out(options_.audit_export, std::ios::app);
      for (const auto& r : *records) out << api::ToJson(r).dump() << "\n";
      out.flush();
      if (out) after = records->back().seq;
      else spdlog::error("audit export: cannot write {}", options_.audit_export);
    }
    lock.Lock();
    if (records.ok() && records->size() == 1000) continue;
    export_cv_.WaitFor(export_mu_, std::chrono::seconds(1), [&] { return stopping_.load(); });
  }
}

void ApiServer::Stop() {
  stopping_ = true;
  logs_cv_.NotifyAll();
  {
    MutexLock lock(export_mu_);
    export_cv_.NotifyAll();
  }
  if (exporter_.joinable()) exporter_.join();
  if (user_listener_) user_listener_->Stop();
  if (agent_listener_) agent_listener_->Stop();
}

// The checks every route starts with, made once by Routes() and handed to each group of routes:
// authn answers 401 or gives the token; authz also answers 403 or gives the caller with its
// scope; agent gives the node of an agent token.
struct ApiServer::Guards {
  std::function<std::optional<api::TokenRecord>(const httplib::Request&, httplib::Response&)> authn;
  std::function<std::optional<Caller>(const httplib::Request&, httplib::Response&, Verb)> authz;
  std::function<std::optional<NodeId>(const httplib::Request&, httplib::Response&)> agent;
};

void ApiServer::Routes() {
  using httplib::Request;
  using httplib::Response;
  // Authentication: returns the token's record, or answers 401 and returns nullopt.
  auto authn = [this](const Request& req, Response& res) -> std::optional<api::TokenRecord> {
    std::optional<std::string> token = BearerToken(req);
    if (!token) {
      Error(res, 401, "missing bearer token: send 'Authorization: Bearer <token>' (gpufleet reads it from "
                      "~/.config/gpufleet/config.yaml or GPUFLEET_TOKEN)");
      return std::nullopt;
    }
    auto rec = auth_.Check(*token, clock_.Now());
    if (!rec.ok()) {
      // Unknown, revoked or expired: 401. A store that cannot be read says nothing about the
      // token: 503, so that clients retry instead of asking for a new token.
      if (rec.status().code() == StatusCode::kNotFound) {
        Error(res, 401, "invalid token: " + rec.status().message());
      } else {
        Error(res, rec.status().WithContext("cannot check the token now"));
      }
      return std::nullopt;
    }
    return *rec;
  };
  // Before a body is read: a request without a valid token of a kind this listener serves, or
  // with a declared body over the limit, is answered and its connection closed, so that an
  // unauthenticated client cannot make the server buffer megabytes.
  auto gate = [this, authn](bool agents) {
    return [this, authn, agents](const Request& req, Response& res) {
      tl_audited = false;
      // Health and who leads: for load balancers and clients before they hold a token.
      if (req.path == "/v1/health" || (!agents && req.path == "/v1/leader")) {
        return httplib::Server::HandlerResponse::Unhandled;
      }
      if (req.has_header("Content-Length")) {
        auto n = ParseInt(req.get_header_value("Content-Length"));
        if (!n || *n < 0 || static_cast<size_t>(*n) > options_.max_body_bytes) {
          CloseAfterResponse();
          Error(res, 413, "the request body is too large (the limit is " + std::to_string(options_.max_body_bytes) + " bytes)");
          return httplib::Server::HandlerResponse::Handled;
        }
      }
      // Deny by default: only routes in the table (rbac.h) are served, each to the roles that
      // hold its verb.
      const RouteRule* rule = FindRoute(req.method, req.path, agents);
      // The dashboard's files hold no data; a Prometheus on this host may scrape without a token
      // when the operator said so (--metrics-open, loopback only).
      if (rule != nullptr && (rule->verb == Verb::kWebUi || (rule->verb == Verb::kMetricsRead && options_.metrics_open))) {
        return httplib::Server::HandlerResponse::Unhandled;
      }
      if (rule == nullptr) {
        CloseAfterResponse();
        Error(res, 404, agents ? "no such route on the agent listener (agents use only /v1/agents/*)"
                               : "no such route; see docs/api.md (agents talk to the agent listener, --agent-listen)");
        return httplib::Server::HandlerResponse::Handled;
      }
      auto t = authn(req, res);
      // Tenants' tokens are rate limited; admins (operators, their automation) are not.
      if (t && t->kind == api::TokenKind::kUser && t->role != "admin" && options_.token_rate_per_s > 0) {
        // A token bucket per user token: bursts up to token_burst, then token_rate_per_s.
        Time now = clock_.Now();
        MutexLock lock(rate_mu_);
        if (buckets_.size() > 100000) buckets_.clear();  // bounded; a reset only forgives
        auto [it, fresh] = buckets_.try_emplace(t->hash, Bucket{static_cast<double>(options_.token_burst), now});
        Bucket& b = it->second;
        if (!fresh) {
          b.tokens = std::min<double>(options_.token_burst,
                                      b.tokens + static_cast<double>((now - b.last).millis()) / 1000.0 * options_.token_rate_per_s);
          b.last = now;
        }
        if (b.tokens < 1) {
          double wait_s = (1 - b.tokens) / options_.token_rate_per_s;
          res.set_header("Retry-After", std::to_string(static_cast<int64_t>(std::ceil(wait_s))));
          Error(res, 429, "too many requests from this token (" + FormatRate(options_.token_rate_per_s) +
                              " per second, bursts of " + std::to_string(options_.token_burst) + "); retry later");
          return httplib::Server::HandlerResponse::Handled;
        }
        b.tokens -= 1;
      }
      if (t) {
        std::optional<Role> role = RoleOf(*t);
        if (role && Holds(*role, rule->verb)) return httplib::Server::HandlerResponse::Unhandled;
        Error(res, 403, Denied(*t, role, rule->verb, agents));
      } else if (res.status == 401 && !agents) {
        // (Not on the agent listener: an agent whose token is refused re-registers on a 401,
        // and many agents may share one address.)
        HoldFailedAuth(req, res);
      }
      CloseAfterResponse();
      return httplib::Server::HandlerResponse::Handled;
    };
  };
  user_routes_->set_pre_routing_handler(gate(false));
  agent_routes_->set_pre_routing_handler(gate(true));
  user_routes_->set_post_routing_handler([this](const Request& req, Response& res) {
    api_metrics_.requests.Add({RouteLabel(FindRoute(req.method, req.path, false)), req.method, std::to_string(res.status)});
    AuditAnswer(req, res, false);
  });
  agent_routes_->set_post_routing_handler([this](const Request& req, Response& res) {
    api_metrics_.requests.Add({RouteLabel(FindRoute(req.method, req.path, true)), req.method, std::to_string(res.status)});
    AuditAnswer(req, res, true);
  });
  // Authorization of a user route: the caller with the scope its role has for the verb, or an
  // answered 401/403 and nullopt.
  auto authz = [authn](const Request& req, Response& res, Verb verb) -> std::optional<Caller> {
    auto t = authn(req, res);
    if (!t) return std::nullopt;
    std::optional<Role> role = RoleOf(*t);
    if (!role || !Holds(*role, verb)) {
      Error(res, 403, Denied(*t, role, verb, false));
      return std::nullopt;
    }
    return Caller{*t, *role, TeamOf(*t), ScopeOf(*role, verb)};
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
    if (!engine_.IsCurrentAgentToken(*node, t->hash)) {
      Error(res, 401, "this agent token was replaced by a later registration of node '" + t->subject + "'");
      return std::nullopt;
    }
    return *node;
  };

  auto health = [this](const Request&, Response& res) {
    auto c = engine_.counters();
    Reply(res, 200, {{"status", c.store_ok ? "ok" : "degraded"},
                     {"epoch", engine_.epoch()},
                     {"store_errors", c.store_errors}});
  };
  user_routes_->Get("/v1/health", health);
  agent_routes_->Get("/v1/health", health);
  user_routes_->Get("/v1/leader", [this](const Request&, Response& res) {
    Reply(res, 200, options_.leader_info ? options_.leader_info() : json{{"role", "leader"}});
  });

  const Guards guards{authn, authz, agent};
  ObservabilityRoutes(guards);
  JobRoutes(guards);
  JobDetailRoutes(guards);
  NodeRoutes(guards);
  MoneyRoutes(guards);
  QuotaRoutes(guards);
  TokenRoutes(guards);
  AuditRoutes(guards);
  AgentRoutes(guards);
}

void ApiServer::ObservabilityRoutes(const Guards& g) {
  using httplib::Request;
  using httplib::Response;
  [[maybe_unused]] const auto& authn = g.authn;
  [[maybe_unused]] const auto& authz = g.authz;
  [[maybe_unused]] const auto& agent = g.agent;
  // --- Metrics, alerts and the dashboard (docs/observability.md, docs/dashboard.md) ---
  user_routes_->Get("/metrics", [this, authz](const Request& req, Response& res) {
    if (!options_.metrics_open && !authz(req, res, Verb::kMetricsRead)) return;
    MetricsSources src;
    src.engine = &engine_;
    src.monitor = monitor_.load();
    src.pool = pool_.load();
    src.api = &api_metrics_;
    src.version = options_.version;
    src.now = clock_.Now();
    res.status = 200;
    res.set_content(ControllerMetricsText(src), "text/plain; version=0.0.4; charset=utf-8");
  });
  user_routes_->Get("/v1/alerts", [this, authz](const Request& req, Response& res) {
    auto who = authz(req, res, Verb::kAlertRead);
    if (!who) return;
    const Monitor* monitor = monitor_.load();
    json list = json::array();
    if (monitor != nullptr) {
      for (const obs::Alert& a : monitor->Alerts()) {
        if (!AlertVisible(a.name, a.labels, who->admin(), who->team)) continue;
        json o = {{"name", a.name},
                  {"state", obs::AlertStateName(a.state)},
                  {"severity", a.severity},
                  {"labels", a.labels},
                  {"message", a.message},
                  {"started_at", FormatIso8601(a.started)},
                  {"fired_at", a.fired ? json(FormatIso8601(*a.fired)) : json(nullptr)},
                  {"resolved_at", a.resolved ? json(FormatIso8601(*a.resolved)) : json(nullptr)}};
        list.push_back(std::move(o));
      }
    }
    Reply(res, 200, {{"alerts", list}, {"enabled", monitor != nullptr && monitor->rules().enabled}});
  });
  auto web = [](const Request& req, Response& res) {
    const WebAsset* asset = FindWebAsset(req.path);
    if (asset == nullptr) return Error(res, 404, "no such file of the dashboard: " + req.path);
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Content-Type-Options", "nosniff");
    // Not framed by another site (a drain or cancel button under someone else's page).
    res.set_header("X-Frame-Options", "DENY");
    res.set_header("Content-Security-Policy",
                   "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'");
    res.set_content(std::string(asset->body), std::string(asset->content_type));
  };
  user_routes_->Get("/", web);
  user_routes_->Get(R"(/ui/[A-Za-z0-9._/-]*)", web);
}

void ApiServer::JobRoutes(const Guards& g) {
  using httplib::Request;
  using httplib::Response;
  [[maybe_unused]] const auto& authn = g.authn;
  [[maybe_unused]] const auto& authz = g.authz;
  [[maybe_unused]] const auto& agent = g.agent;
  // --- Jobs ---
  user_routes_->Post("/v1/jobs", [this, authz](const Request& req, Response& res) {
    // Submit latency, however the request ends.
    struct Timer {
      obs::Histogram& h;
      std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
      ~Timer() { h.Record(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()); }
    } timer{api_metrics_.submit_seconds};
    auto who = authz(req, res, Verb::kJobSubmit);
    if (!who) return;
    // (A NUL byte is refused field by field with the job's own checks, which say more.)
    auto body = api::ParseRequestJson(req.body, /*refuse_nul=*/false);
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
    if (HasNul(request_id)) return Error(res, 400, "request_id: must not contain a NUL byte");
    if (request_id.empty()) request_id = "auto-" + NewToken(api::TokenKind::kUser).substr(8);
    // Request ids are scoped to the caller, so one team's id can neither collide with nor reveal
    // another's submission.
    // Request ids are a caller's own: per subject (a person keeps them across re-issued tokens),
    // or per token when it names no subject, so that two people of a team whose tokens have no
    // subject never get each other's jobs back ("token:" cannot begin a subject).
    // A team-admin's people have subjects "team/name": marked with "q:" (no subject holds ':'),
    // so that "vision/alice" + "r1" and "vision" + "alice/r1" stay two keys.
    const std::string& subject = who->token.subject;
    std::string caller = subject.empty()                          ? "token:" + who->token.hash.substr(0, 12)
                         : subject.find('/') != std::string::npos ? "q:" + subject
                                                                  : subject;
    std::string scoped_id = who->token.team + "/" + caller + "/" + request_id;
    std::string text;
    api::JobParseOptions opts;
    // An environment that is not one of this controller's presets is refused at its line.
    opts.check_environment = [table = engine_.options().environments](const std::string& name) -> Status {
      if (!table) {
        return Status::FailedPrecondition("names environment '" + name +
                                          "' but this controller has no environment presets (gpufleet server "
                                          "--environments FILE)");
      }
      return table->Resolve(name).status();
    };
    if (body->contains("yaml") && body->contains("job")) {
      return Error(res, 400, "body: give the job as 'job' (an object) or 'yaml' (the file's text), not both");
    }
    if (body->contains("yaml")) {
      if (!(*body)["yaml"].is_string()) return Error(res, 400, "yaml: expected the job file as a string");
      text = (*body)["yaml"].get<std::string>();
      if (body->contains("source")) {
        if (!(*body)["source"].is_string() || HasNul((*body)["source"].get_ref<const std::string&>())) {
          return Error(res, 400, "source: expected the file's name as a string without NUL bytes");
        }
        opts.source = (*body)["source"].get<std::string>();
      }
    } else if (body->contains("job")) {
      text = (*body)["job"].dump();
      opts.source = "job";
    } else {
      return Error(res, 400, "body: give the job as 'job' (an object) or 'yaml' (the file's text)");
    }
    // A job that names no team is its submitter's team's; one that names a team, "default"
    // included, is checked against the token below.
    if (!who->admin()) opts.default_team = who->team;
    // A workload class is checked against the shipped speed table where there is one.
    if (const auto& speeds = model::GpuSpeeds::Shipped(); speeds.ok()) opts.speeds = &*speeds;
    // The jobs as asked, checked and filled in (workdir, team, user); on a refusal the answer is
    // written to `out`. Deterministic, so that a retried request id can be checked against the
    // same jobs by running it again instead of keeping a copy of every job of every request.
    auto expand = [&](Response& out) -> std::optional<std::vector<api::JobRequest>> {
      auto jobs = api::ParseJobs(text, opts);
      if (!jobs.ok()) {
        Error(out, jobs.status());
        return std::nullopt;
      }
      // The client's directory, for jobs that name none (the CLI sends its current directory).
      if (body->contains("default_workdir")) {
        const json& d = (*body)["default_workdir"];
        if (!d.is_string() || (!d.get<std::string>().empty() && d.get<std::string>()[0] != '/') ||
            HasNul(d.get<std::string>())) {
          return Refuse(out, 400, "default_workdir: expected an absolute path without NUL bytes");
        }
        for (auto& j : *jobs) {
          if (j.workdir.empty()) j.workdir = d.get<std::string>();
        }
      }
      if (!who->admin()) {
        for (auto& j : *jobs) {
          if (j.spec.team != who->team) {
            return Refuse(out, 403,
                          "your token may submit only for team '" + who->team + "', not '" + j.spec.team + "'" +
                              (j.spec.team == "default" ? " (leave team out for your token's team; a gpufleet CLI "
                                                          "older than this controller sends 'default' for that: "
                                                          "upgrade it)"
                                                        : ""));
          }
        }
      }
      // Who the job runs as on the agents (docs/security.md): never chosen freely by the caller.
      for (auto& j : *jobs) {
        std::string mapped = options_.user_map.For(who->token.subject, who->admin() ? j.spec.team : who->team);
        if (j.user == "root" || j.user == "0") {  // (the parser refuses it first; kept as the last guard)
          return Refuse(out, 403, "user: jobs cannot ask to run as root");
        }
        if (!j.user.empty() && !who->admin() && j.user != mapped) {
          return Refuse(out, 403, "user: your token may not run jobs as '" + j.user + "'" +
                                     (mapped.empty() ? std::string(" (leave user: out; the agent picks its job user)")
                                                     : " (your jobs run as '" + mapped + "')"));
        }
        if (j.user.empty()) j.user = mapped;
      }
      return std::move(*jobs);
    };
    auto jobs = expand(res);
    if (!jobs) return;
    api::AuditRecord audit = Allowed(req, std::to_string(jobs->size()) + " job(s)");
    audit.request_id = request_id;
    auto reply = engine_.Submit(scoped_id, std::move(*jobs), audit).get();
    if (!reply.ok()) return Error(res, reply.status());
    if (reply->created) tl_audited = true;  // recorded with the jobs
    if (!reply->created) {
      // A retry must ask for the same jobs; an id reused for other jobs is a client bug that
      // would otherwise be answered with the earlier jobs as if they were these.
      Response scratch;
      auto asked = expand(scratch);
      bool same = asked && reply->ids.size() == asked->size();
      std::vector<std::string> names;  // the earlier jobs' names, for the answer
      for (size_t i = 0; same && i < reply->ids.size(); ++i) {
        auto rec = store_.GetJob(reply->ids[i]);
        same = rec.ok() && *rec && api::ToJobJson((*rec)->request) == api::ToJobJson((*asked)[i]);
        if (same) names.push_back((*rec)->request.spec.name);
      }
      if (same && reply->names.size() < names.size()) reply->names = std::move(names);
      if (!same) {
        return Error(res, 409, "request_id '" + request_id +
                                   "' was used before for different jobs; use a new request id for a new submission");
      }
    }
    // {"created":...,"jobs":[{"id":...,"name":...},...],"request_id":...}, as Reply would write it,
    // without a json object per job: an array's answer lists 100,000 of them.
    std::string answer = reply->created ? R"({"created":true,"jobs":[)" : R"({"created":false,"jobs":[)";
    answer.reserve(answer.size() + reply->ids.size() * 32 + request_id.size() + 32);
    for (size_t i = 0; i < reply->ids.size(); ++i) {
      answer += i == 0 ? R"({"id":)" : R"(,{"id":)";
      answer += std::to_string(reply->ids[i].value());
      answer += R"(,"name":)";
      api::AppendJsonString(answer, i < reply->names.size() ? reply->names[i] : "");
      answer += '}';
    }
    answer += R"(],"request_id":)";
    api::AppendJsonString(answer, request_id);
    answer += "}\n";
    res.status = reply->created ? 201 : 200;
    res.set_content(std::move(answer), "application/json");
  });

  user_routes_->Get("/v1/jobs", [this, authz](const Request& req, Response& res) {
    auto who = authz(req, res, Verb::kJobRead);
    if (!who) return;
    store::JobFilter f;
    auto limit = IntParam(req, "limit", 1, options_.max_page, std::min(1000, options_.max_page));
    if (!limit.ok()) return Error(res, limit.status());
    f.limit = *limit;
    auto cursor = IntParam(req, "cursor", 1, INT64_MAX / 4, 0);
    if (!cursor.ok()) return Error(res, cursor.status());
    if (*cursor > 0) f.before = JobId(*cursor);
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
    // With states asked for, pages of the store are read here until `limit` jobs match (or about
    // 100,000 were read: the answer then has a cursor and fewer jobs), so that a rare state
    // costs the client one request, not one per page of the whole history.
    constexpr int64_t kScanBudget = 100'000;
    const int64_t want = f.limit;
    int64_t scanned = 0;
    std::optional<int64_t> next_cursor;
    json list = json::array();
    while (true) {
      auto jobs = store_.ListJobs(f);
      if (!jobs.ok()) return Error(res, jobs.status());
      scanned += static_cast<int64_t>(jobs->size());
      for (const auto& j : *jobs) {
        if (!states.empty() && std::find(states.begin(), states.end(), j.state) == states.end()) continue;
        api::JobSummary sm = api::SummaryOf(j);
        if (!SeesJob(*who, sm.team)) sm.reason = HiddenReason(sm.reason, sm.team);
        list.push_back(api::ToJson(sm));
        if (!states.empty() && static_cast<int64_t>(list.size()) == want) {
          next_cursor = j.id.value();  // (the next page starts below the last job given)
          break;
        }
      }
      if (next_cursor) break;
      // A full page may have more behind it: the next page starts below its last id.
      if (static_cast<int64_t>(jobs->size()) < f.limit || jobs->empty()) break;
      const int64_t below = jobs->back().id.value();
      if (states.empty() || scanned >= kScanBudget) {
        next_cursor = below;
        break;
      }
      f.before = JobId(below);
    }
    json out = {{"jobs", list}};
    if (next_cursor) out["next_cursor"] = *next_cursor;
    Reply(res, 200, out);
  });

  user_routes_->Get(R"(/v1/jobs/(\d+))", [this, authz](const Request& req, Response& res) {
    auto who = authz(req, res, Verb::kJobRead);
    if (!who) return;
    auto loaded = LoadJob(store_, req);
    if (!loaded.ok()) return Error(res, loaded.status());
    const api::JobRecord& rec = loaded->record;
    // Another team's job: its state and history, not its command, environment, directories,
    // activity or reasons.
    const bool visible = SeesJob(*who, rec.request.spec.team);
    json h = json::array();
    for (api::Transition t : loaded->history) {
      if (!visible) t.reason = HiddenReason(t.reason, rec.request.spec.team);
      h.push_back(api::ToJson(t));
    }
    api::JobSummary summary = api::SummaryOf(rec);
    if (!visible) summary.reason = HiddenReason(summary.reason, summary.team);
    json o = api::ToJson(summary);
    if (visible) {
      o["record"] = api::ToJson(rec);
      o["job_file"] = api::ToJobJson(rec.request);
    } else {
      o["hidden"] = "the job belongs to team " + rec.request.spec.team + ": its command, environment and logs are not shown";
    }
    o["history"] = h;
    // A running job's activity, as the watchdog sees it.
    if (std::optional<Engine::JobWatch> watch = visible ? engine_.WatchOf(rec.id) : std::nullopt) {
      const Engine::JobWatch& w = *watch;
      json act = {{"attempt_started", FormatIso8601(w.started)}};
      if (w.progress_at) act["progress_at"] = FormatIso8601(*w.progress_at);
      if (w.step) act["step"] = *w.step;
      if (w.loss) act["loss"] = *w.loss;
      if (w.last_output) act["last_output_at"] = FormatIso8601(*w.last_output);
      if (w.watchdog.stall_timeout > Duration::Zero()) {
        act["stall_timeout_ms"] = w.watchdog.stall_timeout.millis();
        act["on_stall"] = w.watchdog.restart_on_stall ? "restart" : "alert";
      }
      o["activity"] = act;
    }
    Reply(res, 200, o);
  });
}

// A job's GPUs, cancel, explain and logs, and the queue.
void ApiServer::JobDetailRoutes(const Guards& g) {
  using httplib::Request;
  using httplib::Response;
  [[maybe_unused]] const auto& authz = g.authz;
  // The job's GPUs over its current (or last) run, from the monitor's history: one series per GPU.
  user_routes_->Get(R"(/v1/jobs/(\d+)/gpus)", [this, authz](const Request& req, Response& res) {
    if (!authz(req, res, Verb::kJobRead)) return;
    auto loaded = LoadJob(store_, req);
    if (!loaded.ok()) return Error(res, loaded.status());
    const api::JobRecord& r = loaded->record;
    json series = json::array();
    const Monitor* monitor = monitor_.load();
    Time from = Time::Max();
    for (const auto& t : loaded->history) {
      if (t.to == api::JobState::kStarting) from = t.at;  // the last placement
    }
    Time to = api::IsTerminal(r.state) ? r.updated : clock_.Now();
    if (monitor != nullptr && r.placement && from != Time::Max()) {
      std::map<int64_t, std::string> names;
      for (const NodeStatus& n : engine_.Nodes()) names[n.record.id.value()] = n.record.name;
      for (const auto& part : r.placement->parts) {
        auto name = names.find(part.node.value());
        if (name == names.end()) continue;
        for (int g : part.gpus) {
          json points = json::array();
          // From one point before the start: the record has a point per spacing, so a run shorter
          // than that still gets one.
          for (const obs::GpuPoint& p : monitor->history().Range(name->second, g, from - monitor->history().spacing(), to)) {
            points.push_back({p.at.millis(), p.util_pct, p.mem_used_mib, p.temperature_c, p.power_w});
          }
          series.push_back({{"node", name->second}, {"gpu", g}, {"points", std::move(points)}});
        }
      }
    }
    json o = {{"job", r.id.value()},
              {"fields", {"at_ms", "util_pct", "mem_used_mib", "temperature_c", "power_w"}},
              {"series", std::move(series)}};
    if (monitor != nullptr) {
      o["spacing_ms"] = monitor->history().spacing().millis();
      o["span_ms"] = monitor->history().span().millis();
    }
    Reply(res, 200, o);
  });

  user_routes_->Post(R"(/v1/jobs/(\d+)/cancel)", [this, authz](const Request& req, Response& res) {
    auto who = authz(req, res, Verb::kJobCancel);
    if (!who) return;
    auto id = PathJob(req);
    if (!id.ok()) return Error(res, id.status());
    if (!who->admin()) {
      auto rec = store_.GetJob(*id);
      if (!rec.ok()) return Error(res, rec.status());
      if (*rec && !who->Reaches((*rec)->request.spec.team)) {
        return Error(res, 403, "job " + std::to_string(id->value()) + " belongs to team " + (*rec)->request.spec.team +
                                   "; your token may cancel only team " + who->team + "'s jobs");
      }
    }
    Status st = engine_.Cancel(*id, who->token.subject, Allowed(req, "cancel requested")).get();
    if (!st.ok()) return Error(res, st);
    tl_audited = true;  // recorded with the job's transition
    Reply(res, 202, {{"id", id->value()}, {"cancel_requested", true}});
  });

  // Many jobs at once (an array's tasks): checked first, then cancelled in one step.
  user_routes_->Post("/v1/jobs/cancel", [this, authz](const Request& req, Response& res) {
    auto who = authz(req, res, Verb::kJobCancel);
    if (!who) return;
    auto body = api::ParseRequestJson(req.body);
    const std::string shape = "body: expected {\"ids\": [job ids] (at most " + std::to_string(kMaxCancelIds) +
                              "), \"states\": [states to cancel in], \"skip_other_teams\": bool}";
    if (!body.ok()) return Error(res, 400, body.status().message() + "; " + shape);
    if (!body->is_object()) return Error(res, 400, shape);
    CancelManyOptions options;
    for (auto it = body->begin(); it != body->end(); ++it) {
      if (it.key() == "ids") continue;
      if (it.key() == "skip_other_teams") {
        if (!it->is_boolean()) return Error(res, 400, "skip_other_teams: expected true or false, got " + it->dump());
        options.skip_forbidden = it->get<bool>();
        continue;
      }
      if (it.key() == "states") {
        if (!it->is_array() || it->empty()) return Error(res, 400, "states: expected a non-empty list of states");
        for (size_t i = 0; i < it->size(); ++i) {
          const json& v = (*it)[i];
          auto st = v.is_string() ? api::ParseJobState(v.get<std::string>())
                                  : Result<api::JobState>(Status::InvalidArgument("not a string"));
          if (!st.ok() || api::IsTerminal(*st)) {
            return Error(res, 400, "states[" + std::to_string(i) + "]: expected a state an unfinished job has " +
                                       "(pending, starting, running, stopping, preempted), got " + v.dump());
          }
          options.only.push_back(*st);
        }
        continue;
      }
      return Error(res, 400, "unknown field '" + it.key() + "'; " + shape);
    }
    auto ids_field = body->find("ids");
    if (ids_field == body->end() || !ids_field->is_array()) return Error(res, 400, shape);
    if (ids_field->empty()) return Error(res, 400, "ids is empty: name at least one job");
    if (ids_field->size() > kMaxCancelIds) {
      return Error(res, 413, "ids names " + std::to_string(ids_field->size()) + " jobs; one request cancels at most " +
                                 std::to_string(kMaxCancelIds) + ": send the rest in another");
    }
    std::vector<JobId> ids;
    ids.reserve(ids_field->size());
    for (size_t i = 0; i < ids_field->size(); ++i) {
      const json& v = (*ids_field)[i];
      if (!v.is_number_integer() || v.get<int64_t>() < 1) {
        return Error(res, 400, "ids[" + std::to_string(i) + "]: a job id is a whole number from 1, got " + v.dump());
      }
      ids.emplace_back(v.get<int64_t>());
    }
    std::function<bool(const std::string&)> may_cancel;
    if (!who->admin()) {
      may_cancel = [caller = Caller{{}, who->role, who->team, who->scope}](const std::string& team) {
        return caller.Reaches(team);
      };
    }
    auto list = [](const std::vector<JobId>& v) {
      std::vector<int64_t> out;
      out.reserve(v.size());
      for (JobId id : v) out.push_back(id.value());
      return out;
    };
    // The first few ids of a refusal in its message; every one in the field beside it.
    auto some = [](const std::vector<int64_t>& v) {
      std::string s;
      for (size_t i = 0; i < v.size() && i < 10; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
      if (v.size() > 10) s += " and " + std::to_string(v.size() - 10) + " more";
      return s;
    };
    // Refused: every id of no job (404) and every job of another team (403 when there are only
    // those), both named at once; nothing changes.
    auto refuse = [&](const CancelManyReply& r) {
      std::vector<int64_t> forbidden;
      std::map<std::string, std::vector<int64_t>> by_team;
      for (const auto& [id, team] : r.forbidden) {
        forbidden.push_back(id.value());
        by_team[team].push_back(id.value());
      }
      std::string theirs;
      for (const auto& [team, v] : by_team) {
        theirs += (theirs.empty() ? "" : "; ") + std::string(v.size() == 1 ? "job " : "jobs ") + some(v) +
                  (v.size() == 1 ? " belongs" : " belong") + " to team " + team;
      }
      if (!theirs.empty()) theirs += "; your token may cancel only team " + who->team + "'s jobs";
      if (!r.missing.empty()) {
        std::vector<int64_t> missing = list(r.missing);
        std::string msg = (missing.size() == 1 ? "job " + some(missing) + " does not exist"
                                               : "jobs " + some(missing) + " do not exist") +
                          (theirs.empty() ? "" : "; " + theirs) + "; nothing was cancelled";
        json body = {{"error", {{"code", "not_found"}, {"message", msg}}}, {"missing", missing}};
        if (!forbidden.empty()) body["forbidden"] = forbidden;
        Reply(res, 404, body);
        return;
      }
      Reply(res, 403, {{"error", {{"code", "permission_denied"}, {"message", theirs + "; nothing was cancelled"}}},
                       {"forbidden", forbidden}});
    };
    // Checked here first, on this request's thread: the jobs the engine does not hold are read from
    // the store in a few statements, not in the engine's step (which every other request waits on).
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    const std::vector<std::optional<std::string>> teams = engine_.UnfinishedTeams(ids);
    CancelManyReply check;
    std::vector<JobId> not_held;
    std::vector<std::pair<JobId, std::string>> left_alone;  // other teams' jobs that ended (skip_other_teams)
    for (size_t i = 0; i < ids.size(); ++i) {
      if (!teams[i]) {
        not_held.push_back(ids[i]);
      } else if (may_cancel && !may_cancel(*teams[i]) && !options.skip_forbidden) {
        check.forbidden.emplace_back(ids[i], *teams[i]);
      }
    }
    if (!not_held.empty()) {
      auto briefs = store_.GetJobBriefs(not_held);
      if (!briefs.ok()) return Error(res, briefs.status());
      size_t k = 0;  // briefs come in the order of not_held, which is ascending
      for (JobId id : not_held) {
        if (k < briefs->size() && (*briefs)[k].id == id) {
          const store::JobBrief& b = (*briefs)[k++];
          if (may_cancel && !may_cancel(b.team)) {
            if (options.skip_forbidden) {
              left_alone.emplace_back(id, "team " + b.team);  // not sent: the step would read it again
            } else {
              check.forbidden.emplace_back(id, b.team);
            }
          } else if (api::IsTerminal(b.state)) {
            options.ended[id.value()] = b.state;
          }
        } else {
          check.missing.push_back(id);
        }
      }
      std::sort(check.forbidden.begin(), check.forbidden.end());
    }
    if (check.refused()) return refuse(check);
    if (!left_alone.empty()) {
      std::vector<JobId> sent;
      sent.reserve(ids.size() - left_alone.size());
      size_t k = 0;  // both ascending
      for (JobId id : ids) {
        if (k < left_alone.size() && left_alone[k].first == id) {
          ++k;
        } else {
          sent.push_back(id);
        }
      }
      ids = std::move(sent);
    }
    auto reply = engine_.CancelMany(std::move(ids), who->token.subject, std::move(may_cancel),
                                    Allowed(req, "cancel requested"), std::move(options))
                     .get();
    if (!reply.ok()) return Error(res, reply.status());
    if (reply->refused()) return refuse(*reply);
    tl_audited = true;  // recorded with the jobs' transitions (none when every job had ended)
    json ended_out = json::array();
    for (const auto& [id, state] : reply->ended) {
      ended_out.push_back({{"id", id.value()}, {"state", api::JobStateName(state)}});
    }
    reply->skipped.insert(reply->skipped.end(), left_alone.begin(), left_alone.end());
    std::sort(reply->skipped.begin(), reply->skipped.end());
    json skipped_out = json::array();
    for (const auto& [id, why] : reply->skipped) skipped_out.push_back({{"id", id.value()}, {"why", why}});
    Reply(res, 202, {{"cancel_requested", !reply->cancelled.empty() || !reply->stopping.empty()},
                     {"cancelled", list(reply->cancelled)},
                     {"stopping", list(reply->stopping)},
                     {"ended", std::move(ended_out)},
                     {"skipped", std::move(skipped_out)}});
  });

  user_routes_->Get(R"(/v1/jobs/(\d+)/explain)", [this, authz](const Request& req, Response& res) {
    auto who = authz(req, res, Verb::kJobRead);
    if (!who) return;
    auto id = PathJob(req);
    if (!id.ok()) return Error(res, id.status());
    auto rec = store_.GetJob(*id);
    if (!rec.ok()) return Error(res, rec.status());
    if (!*rec) return Error(res, 404, "job " + std::to_string(id->value()) + " does not exist");
    const std::string& team = (*rec)->request.spec.team;
    // The reasons name the job's directories and what the nodes allow: its own team's to read.
    const bool visible = SeesJob(*who, team);
    auto e = engine_.Explain(*id);
    if (!e.ok()) {
      const std::string reason = visible ? (*rec)->reason : HiddenReason((*rec)->reason, team);
      return Reply(res, 200, {{"id", id->value()},
                              {"state", api::JobStateName((*rec)->state)},
                              {"reasons", json::array({"the job is " + std::string(api::JobStateName((*rec)->state)) +
                                                       (reason.empty() ? "" : ": " + reason)})}});
    }
    if (!visible) e->reasons = {HiddenReason("waiting", team)};
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

  user_routes_->Get(R"(/v1/jobs/(\d+)/logs)", [this, authz](const Request& req, Response& res) {
    auto who = authz(req, res, Verb::kJobLogs);
    if (!who) return;
    auto id = PathJob(req);
    if (!id.ok()) return Error(res, id.status());
    auto rec = store_.GetJob(*id);
    if (!rec.ok()) return Error(res, rec.status());
    if (!*rec) return Error(res, 404, "job " + std::to_string(id->value()) + " does not exist");
    if (!who->Reaches((*rec)->request.spec.team)) {
      return Error(res, 403, "job " + std::to_string(id->value()) + " belongs to team " + (*rec)->request.spec.team +
                                 "; your token reads only team " + who->team + "'s logs");
    }
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
    bool finished = api::IsTerminal((*rec)->state) || *attempt != (*rec)->attempt;
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
            // A chunk ends on a whole UTF-8 character where more may follow (the 1 MiB cut, or
            // the end of a log that is still written): the rest of a character cut in two comes
            // whole in the next chunk. A finished log's last bytes go as they are.
            if (offsets[p] + n < size || !finished) data.resize(Utf8Prefix(data));
            any = any || !data.empty();
          }
        }
        // `data` is JSON text: bytes that are not UTF-8 arrive as U+FFFD, so the next read starts
        // at next_offset (bytes of the file), not at offset + the length of data.
        out.push_back({{"part", p},
                       {"offset", offsets[p]},
                       {"next_offset", offsets[p] + static_cast<int64_t>(data.size())},
                       {"data", data}});
        // A finished part with no log here: it wrote nothing, or its log stayed with the
        // controller that received it (one that led before a takeover, or before a restore).
        if (!f && finished) out.back()["missing"] = true;
      }
      return any;
    };
    json list;
    bool any = read(list);
    // Long poll: until new bytes arrive, the job ends or moves to another attempt, or the wait
    // is over. Uploads wake the wait; the job's state is looked at every 200 ms.
    // Long-polls are capped: past the cap the answer comes at once and the client asks again.
    bool may_wait = false;
    if (*wait_ms > 0 && !any && !finished) {
      MutexLock lock(polls_mu_);
      int& mine = long_polls_by_client_[req.remote_addr];
      if (user_long_polls_ < options_.max_user_long_polls && mine < options_.max_long_polls_per_client) {
        ++user_long_polls_;
        ++mine;
        may_wait = true;
      } else if (mine == 0) {
        long_polls_by_client_.erase(req.remote_addr);
      }
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(may_wait ? *wait_ms : 0);
    struct Release {
      ApiServer* self;
      const std::string& client;
      bool on;
      ~Release() {
        if (!on) return;
        MutexLock lock(self->polls_mu_);
        --self->user_long_polls_;
        if (--self->long_polls_by_client_[client] <= 0) self->long_polls_by_client_.erase(client);
      }
    } release{this, req.remote_addr, may_wait};
    while (!any && !finished && !stopping_ && std::chrono::steady_clock::now() < deadline) {
      {
        MutexLock lock(logs_mu_);
        const auto now = std::chrono::steady_clock::now();
        logs_cv_.WaitFor(logs_mu_, std::min(deadline, now + std::chrono::milliseconds(200)) - now);
      }
      // The state first, then the bytes: an attempt seen over has had its log uploaded (agents
      // report an exit only after its log), so a read after that sees all of it. The other
      // order loses output that arrives between the read and the state.
      auto again = store_.GetJob(*id);
      if (again.ok() && *again) finished = api::IsTerminal((*again)->state) || *attempt != (*again)->attempt;
      any = read(list);
    }
    {
      MutexLock lock(logs_mu_);
      for (int p = 0; p < parts; ++p) {
        if (incomplete_logs_.count(LogPath(id->value(), static_cast<int>(*attempt), p))) {
          list[p]["incomplete"] = true;
          list[p]["note"] = "the controller could not store part of this log (disk full?); bytes are missing";
        }
      }
    }
    Reply(res, 200, {{"id", id->value()}, {"attempt", *attempt}, {"parts", list}, {"finished", finished}});
  });

  user_routes_->Get("/v1/queue", [this, authz](const Request& req, Response& res) {
    auto who = authz(req, res, Verb::kQueueRead);
    if (!who) return;
    auto limit = IntParam(req, "limit", 1, options_.max_page, options_.max_page);
    auto cursor = IntParam(req, "cursor", 0, INT64_MAX / 4, 0);
    if (!limit.ok()) return Error(res, limit.status());
    if (!cursor.ok()) return Error(res, cursor.status());
    // The cursor is an index into the queue as it stands: running jobs, then pending ones.
    // Only the page is copied out of the engine.
    auto [page, total] = engine_.QueuePage(static_cast<size_t>(*cursor), static_cast<size_t>(*limit));
    json list = json::array();
    for (const QueueEntry& q : page) {
      api::JobSummary o = api::SummaryOf(q.job);
      o.position = q.position;
      if (!SeesJob(*who, o.team)) o.reason = HiddenReason(o.reason, o.team);
      list.push_back(api::ToJson(o));
    }
    const size_t to = std::min(total, static_cast<size_t>(*cursor) + page.size());
    json out = {{"jobs", list}, {"total", total}};
    if (to < total) out["next_cursor"] = to;
    Reply(res, 200, out);
  });
}

void ApiServer::NodeRoutes(const Guards& g) {
  using httplib::Request;
  using httplib::Response;
  [[maybe_unused]] const auto& authn = g.authn;
  [[maybe_unused]] const auto& authz = g.authz;
  [[maybe_unused]] const auto& agent = g.agent;
  // --- Nodes ---
  user_routes_->Get("/v1/nodes", [this, authz](const Request& req, Response& res) {
    if (!authz(req, res, Verb::kNodeRead)) return;
    json list = json::array();
    for (const auto& n : engine_.Nodes()) {
      api::NodeSummary summary = api::SummaryOf(n.record);
      summary.gpus_used = n.gpus_used;
      summary.telemetry = n.telemetry;
      summary.jobs = n.jobs;
      summary.notice = n.notice;
      summary.heard_since_start = n.heard_since_start;
      summary.storage_fault = n.storage_fault;
      summary.disks = n.disks;
      summary.containment = n.containment;
      summary.limits = n.limits;
      list.push_back(api::ToJson(summary));
    }
    Reply(res, 200, {{"nodes", list}});
  });

  auto drain = [this, authz](bool on) {
    return [this, authz, on](const Request& req, Response& res) {
      if (!authz(req, res, Verb::kNodeDrain)) return;
      Status st = engine_.Drain(req.matches[1].str(), on, Allowed(req, on ? "drained" : "undrained")).get();
      if (!st.ok()) return Error(res, st);
      tl_audited = true;  // recorded with the node's state
      std::string state = on ? "draining" : "up";
      for (const NodeStatus& n : engine_.Nodes()) {
        if (n.record.name != req.matches[1].str()) continue;
        if (n.record.state == api::NodeState::kLost) {
          state = on ? "lost (drained when it comes back)" : "lost (takes work when it comes back)";
        } else if (n.record.acceptance == "quarantined") {
          // Undrained is not up: a node that failed its check takes no work until one passes.
          state = std::string(on ? "draining" : "undrained") + ", but quarantined: it failed its node check (" +
                  n.record.acceptance_reason + ") and takes no work until one passes (gpufleet node check " +
                  n.record.name + " --wait)";
        } else if (n.record.acceptance == "checking") {
          state = std::string(on ? "draining" : "undrained") + ", its node check running: it takes work once the check passes";
        }
      }
      Reply(res, 200, {{"node", req.matches[1].str()}, {"state", state}});
    };
  };
  user_routes_->Post(R"(/v1/nodes/([A-Za-z0-9._-]+)/drain)", drain(true));
  user_routes_->Post(R"(/v1/nodes/([A-Za-z0-9._-]+)/undrain)", drain(false));
  user_routes_->Post(R"(/v1/nodes/([A-Za-z0-9._-]+)/check)", [this, authz](const Request& req, Response& res) {
    if (!authz(req, res, Verb::kNodeDrain)) return;
    Status st = engine_.CheckNode(req.matches[1].str(), Allowed(req, "burn-in asked for")).get();
    if (!st.ok()) return Error(res, st);
    tl_audited = true;  // recorded with the node's acceptance
    Reply(res, 202, {{"node", req.matches[1].str()}, {"acceptance", "checking"}});
  });
}

void ApiServer::MoneyRoutes(const Guards& g) {
  using httplib::Request;
  using httplib::Response;
  [[maybe_unused]] const auto& authn = g.authn;
  [[maybe_unused]] const auto& authz = g.authz;
  [[maybe_unused]] const auto& agent = g.agent;
  // --- Money ---
  user_routes_->Get("/v1/cost", [this, authz](const Request& req, Response& res) {
    auto who = authz(req, res, Verb::kCostRead);
    if (!who) return;
    store::JobFilter f;
    if (req.has_param("team")) f.team = req.get_param_value("team");
    if (who->scope != Scope::kAll) {
      // Below admin, cost details are the caller's team's only.
      if (f.team && *f.team != who->team) {
        return Error(res, 403, "your token reads only team " + who->team + "'s costs");
      }
      f.team = who->team;
    }
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
    int64_t rented_idle = 0;
    for (const auto& t : engine_.TeamCosts()) {
      if (f.team && *f.team != t.team) continue;
      rented_idle += t.spend.rented_idle_micros;
      json o = {{"team", t.team},
                {"jobs_cost_micros", by_team[t.team]},
                {"spent_micros", t.spend.spent_micros},
                {"rate_micros_per_hour", t.spend.rate_micros},
                {"rented_idle_micros", t.spend.rented_idle_micros},
                {"rented_idle_rate_micros_per_hour", t.spend.rented_idle_rate_micros},
                {"over_soft", t.spend.over_soft},
                {"over_hard", t.spend.over_hard},
                {"hard_stop", t.spend.hard_stop}};
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
        // When a rolling budget starts again from zero.
        if (t.budget->period != CalendarPeriod::kNone) {
          o["budget"]["until_ms"] = NextPeriodStart(clock_.Now(), t.budget->period).millis();
        }
      }
      teams.push_back(o);
    }
    // total_micros: the jobs listed; rented_idle_micros: the pool's nodes billed to the teams
    // listed beyond what their jobs used (each team's from its budget period's start).
    Reply(res, 200, {{"total_micros", total}, {"rented_idle_micros", rented_idle}, {"teams", teams}, {"jobs", list}});
  });

  user_routes_->Get("/v1/pool", [this, authz](const Request& req, Response& res) {
    if (!authz(req, res, Verb::kPoolRead)) return;
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
                {"team", i.team},         {"note", i.note}};
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

  user_routes_->Post(R"(/v1/teams/([^/]+)/budget)", [this, authz](const Request& req, Response& res) {
    if (!authz(req, res, Verb::kBudgetSet)) return;
    if (Status st = api::CheckName("team", req.matches[1].str()); !st.ok()) return Error(res, st);
    auto body = api::ParseRequestJson(req.body);
    if (!body.ok() || !body->is_object()) {
      // What is wrong first (a syntax error, a NUL byte), then what is expected.
      return Error(res, 400,
                   (body.ok() ? std::string("body: ") : body.status().message() + "; ") +
                       "expected {\"hard\": dollars, \"soft\": dollars, \"max_hourly\": dollars, "
                       "\"since_ms\": time, \"stop_running\": bool}");
    }
    sched::TeamBudget b;
    b.since = clock_.Now();
    bool new_period = false;  // count from now, by this controller's clock
    for (auto it = body->begin(); it != body->end(); ++it) {
      const std::string& k = it.key();
      if (k == "hard" || k == "soft" || k == "max_hourly") {
        if (!it->is_number() || it->get<double>() < 0 || it->get<double>() > 1e12) {
          return Error(res, 400, k + ": expected dollars, a number from 0 to 1,000,000,000,000");
        }
        int64_t micros = static_cast<int64_t>(std::llround(it->get<double>() * 1e6));
        if (micros == 0 && it->get<double>() > 0) {
          // 0 is "no limit": a positive amount under a micro-dollar would remove the limit asked for.
          return Error(res, 400, k + ": at least 0.000001 dollars (0 means no limit), got " + it->dump());
        }
        (k == "hard" ? b.hard_micros : k == "soft" ? b.soft_micros : b.max_rate_micros) = micros;
      } else if (k == "since_ms") {
        if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > INT64_MAX / 4) {
          return Error(res, 400, "since_ms: expected a time in ms since 1970 (from 0 to " +
                                     std::to_string(INT64_MAX / 4) + ")");
        }
        b.since = Time::FromMillis(it->get<int64_t>());
      } else if (k == "stop_running") {
        if (!it->is_boolean()) return Error(res, 400, "stop_running: expected true or false");
        b.stop_running = it->get<bool>();
      } else if (k == "new_period") {
        if (!it->is_boolean()) return Error(res, 400, "new_period: expected true or false");
        new_period = it->get<bool>();
      } else if (k == "period") {
        std::optional<CalendarPeriod> p = it->is_string() ? ParseCalendarPeriod(it->get<std::string>()) : std::nullopt;
        if (!p) return Error(res, 400, "period: expected none, daily, weekly or monthly");
        b.period = *p;
      } else {
        return Error(res, 400,
                     "unknown field '" + k +
                         "' (expected hard, soft, max_hourly, since_ms, new_period, stop_running, period)");
      }
    }
    if (new_period && body->contains("since_ms")) return Error(res, 400, "give since_ms or new_period, not both");
    const bool since_given = body->contains("since_ms") || new_period;  // (new_period: b.since is now)
    // A budget that rolls over counts from the start of the current period, unless told otherwise.
    if (b.period != CalendarPeriod::kNone && !since_given) b.since = PeriodStart(clock_.Now(), b.period);
    // A one-period budget set again (other limits) keeps counting from its start: a changed
    // soft limit must not wipe what the team spent, nor let a team its hard limit stopped go
    // on. A new start is asked for with since_ms or new_period (gpufleet budget --new-period).
    if (b.period == CalendarPeriod::kNone && !since_given) {
      for (const Engine::TeamCost& c : engine_.TeamCosts()) {
        if (c.team == req.matches[1].str() && c.budget && c.budget->period == CalendarPeriod::kNone) {
          b.since = c.budget->since;
        }
      }
    }
    if (b.soft_micros > 0 && b.hard_micros > 0 && b.soft_micros > b.hard_micros) {
      return Error(res, 400, "soft: must not be above hard");
    }
    // Spend counts from `since` up to now: a start ahead of the clock would count nothing, and
    // the limit would never apply. (A minute of slack for clocks a little apart, counted from now.)
    if (const Time now = clock_.Now(); body->contains("since_ms") && b.since > now) {
      if (b.since > now + Duration::Minutes(1)) {
        return Error(res, 400, "since_ms: " + FormatIso8601(b.since) + " is in the future (the controller's clock: " +
                                   FormatIso8601(now) + "); a budget counts spend from a time up to now (new_period: "
                                   "true starts it now)");
      }
      b.since = now;
    }
    // A rolling budget counts from its current period's start at the latest (as the engine keeps it).
    if (b.period != CalendarPeriod::kNone) b.since = std::max(b.since, PeriodStart(clock_.Now(), b.period));
    Status st = engine_.SetBudget(req.matches[1].str(), b, Allowed(req, "budget set: " + req.body.substr(0, 200))).get();
    if (!st.ok()) return Error(res, st);
    tl_audited = true;  // recorded with the budget
    Reply(res, 200, {{"team", req.matches[1].str()},
                     {"hard_micros", b.hard_micros},
                     {"soft_micros", b.soft_micros},
                     {"max_rate_micros", b.max_rate_micros},
                     {"since_ms", b.since.millis()},
                     {"stop_running", b.stop_running},
                     {"period", CalendarPeriodName(b.period)}});
  });
}

void ApiServer::QuotaRoutes(const Guards& g) {
  using httplib::Request;
  using httplib::Response;
  [[maybe_unused]] const auto& authn = g.authn;
  [[maybe_unused]] const auto& authz = g.authz;
  [[maybe_unused]] const auto& agent = g.agent;
  // --- Quotas ---
  auto quota_json = [](const std::string& team, const sched::TeamQuota& q, const sched::TeamLoad& l) {
    json models = json::object();
    for (const auto& [m, g] : q.model_gpus) models[m] = g;
    json used = json::object();
    for (const auto& [m, milli] : l.model_used_milli) used[m] = static_cast<double>(milli) / model::kMilliGpuPerGpu;
    return json{{"team", team},
                {"gpus", q.gpus},
                {"model_gpus", models},
                {"borrow", q.borrow},
                {"max_running_jobs", q.max_running_jobs},
                {"max_pending_jobs", q.max_pending_jobs},
                {"running_jobs", l.running_jobs},
                {"pending_jobs", l.pending_jobs},
                {"used_gpus", static_cast<double>(l.used_milli) / model::kMilliGpuPerGpu},
                {"used_gpus_by_model", used}};
  };
  user_routes_->Get("/v1/quotas", [this, authz, quota_json](const Request& req, Response& res) {
    auto who = authz(req, res, Verb::kQuotaRead);
    if (!who) return;
    // ?team=T: that team only; one the token does not reach is refused, not shown as none.
    std::string only;
    if (req.has_param("team")) {
      only = req.get_param_value("team");
      if (Status st = api::CheckName("team", only); !st.ok()) return Error(res, st);
      if (!who->Reaches(only)) {
        return Error(res, 403, "your token reads only team " + who->team + "'s quota and load, not team " + only + "'s");
      }
    }
    json teams = json::array();
    for (const auto& v : engine_.Quotas()) {
      if (who->Reaches(v.team) && (only.empty() || v.team == only)) teams.push_back(quota_json(v.team, v.quota, v.load));
    }
    Reply(res, 200, {{"teams", teams}});
  });
  user_routes_->Post(R"(/v1/teams/([^/]+)/quota)", [this, authz, quota_json](const Request& req,
                                                                                      Response& res) {
    if (!authz(req, res, Verb::kQuotaSet)) return;
    const std::string team = req.matches[1].str();
    if (Status st = api::CheckName("team", team); !st.ok()) return Error(res, st);
    auto body = api::ParseRequestJson(req.body);
    const char* shape =
        "body: expected {\"gpus\": N, \"model\": \"H100\", \"borrow\": bool, \"max_running_jobs\": N, "
        "\"max_pending_jobs\": N, \"clear\": bool}";
    if (!body.ok()) return Error(res, 400, body.status().message() + "; " + std::string(shape).substr(6));
    if (!body->is_object()) return Error(res, 400, shape);
    // Changes apply to the team's current quota; "clear" starts from none.
    sched::TeamQuota q;
    bool clear = false;
    if (auto c = body->find("clear"); c != body->end()) {
      if (!c->is_boolean()) return Error(res, 400, "clear: expected true or false");
      clear = c->get<bool>();
    }
    if (!clear) {
      for (const auto& v : engine_.Quotas()) {
        if (v.team == team) q = v.quota;
      }
    }
    std::optional<int64_t> gpus;
    std::string model_name;
    for (auto it = body->begin(); it != body->end(); ++it) {
      const std::string& k = it.key();
      if (k == "gpus" || k == "max_running_jobs" || k == "max_pending_jobs") {
        if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 100000000) {
          return Error(res, 400, k + ": expected a whole number from 0 (0: none)");
        }
        int64_t n = it->get<int64_t>();
        if (k == "gpus") gpus = n;
        if (k == "max_running_jobs") q.max_running_jobs = n;
        if (k == "max_pending_jobs") q.max_pending_jobs = n;
      } else if (k == "model") {
        const model::GpuModel* m = it->is_string() ? model::GpuCatalog::BuiltIn().Find(it->get<std::string>()) : nullptr;
        if (m == nullptr) {
          return Error(res, 400, "model: expected a GPU model of the catalog, like H100, A100-80GB, L4 or T4; got " + it->dump());
        }
        model_name = m->name;
      } else if (k == "borrow") {
        if (!it->is_boolean()) return Error(res, 400, "borrow: expected true or false");
        q.borrow = it->get<bool>();
      } else if (k != "clear") {
        return Error(res, 400, "unknown field '" + k + "'; " + shape);
      }
    }
    if (!model_name.empty() && !gpus) return Error(res, 400, "model: give gpus too (the GPUs of that model guaranteed)");
    if (gpus) {
      if (model_name.empty()) {
        q.gpus = *gpus;
      } else if (*gpus == 0) {
        q.model_gpus.erase(model_name);
      } else {
        q.model_gpus[model_name] = *gpus;
      }
    }
    Status st = engine_.SetQuota(team, q, Allowed(req, "quota set: " + req.body.substr(0, 200))).get();
    if (!st.ok()) return Error(res, st);
    tl_audited = true;  // recorded with the quota
    Reply(res, 200, quota_json(team, q, sched::TeamLoad{}));
  });
}

void ApiServer::TokenRoutes(const Guards& g) {
  using httplib::Request;
  using httplib::Response;
  [[maybe_unused]] const auto& authn = g.authn;
  [[maybe_unused]] const auto& authz = g.authz;
  [[maybe_unused]] const auto& agent = g.agent;
  // --- Tokens ---
  user_routes_->Post("/v1/tokens", [this, authz](const Request& req, Response& res) {
    auto who = authz(req, res, Verb::kTokenCreate);
    if (!who) return;
    auto body = api::ParseRequestJson(req.body);
    if (!body.ok()) return Error(res, 400, body.status().message() + "; expected a JSON object {kind, role, subject, team, ttl}");
    if (!body->is_object()) return Error(res, 400, "body: expected a JSON object {kind, role, subject, team, ttl}");
    std::map<std::string, std::string> f = {{"kind", "user"}, {"role", "user"}, {"subject", ""}, {"team", ""}, {"ttl", ""}};
    for (auto it = body->begin(); it != body->end(); ++it) {
      if (!f.count(it.key())) {
        return Error(res, 400, "unknown field '" + it.key() + "' (expected kind, role, subject, team, ttl)");
      }
      if (!it->is_string()) return Error(res, 400, it.key() + ": expected a string");
      std::string v = it->get<std::string>();
      if (v.size() > 128 || HasNul(v)) return Error(res, 400, it.key() + ": at most 128 characters, no NUL bytes");
      f[it.key()] = v;
    }
    std::string kind = f["kind"], role = f["role"], subject = f["subject"], team = f["team"];
    if (kind != "user" && kind != "join") return Error(res, 400, "kind: must be user or join, got '" + kind + "'");
    // (Earlier CLIs sent the default "user" with every token, join tokens too.)
    if (kind == "join" && body->contains("role") && role != "user" && role != "join") {
      return Error(res, 400, "role: a join token has no role (it only registers nodes); leave role out");
    }
    std::optional<Role> made = kind == "join" ? std::optional<Role>(Role::kJoin) : ParseRole(role);
    if (!made || *made == Role::kAgent || (kind == "user" && *made == Role::kJoin)) {
      return Error(res, 400, "role: must be admin, team-admin, user, viewer or metrics, got '" + role + "'");
    }
    if (!MayMakeRole(who->role, *made)) {
      return Error(res, 403, std::string("your token (role ") + RoleName(who->role) + ") may not make " +
                                 RoleName(*made) + " tokens");
    }
    if (Status st = api::CheckName("team", team); !team.empty() && !st.ok()) return Error(res, st);
    // An admin's team-admin administers a team it names: without one it would be the team-admin
    // of "default" (the team of jobs that name none), which nobody asks for by leaving it out.
    if (*made == Role::kTeamAdmin && team.empty() && who->scope == Scope::kAll) {
      return Error(res, 400, "team: a team-admin token needs the team it administers (gpufleet token create "
                             "--role team-admin --team TEAM)");
    }
    if (!ValidSubject(subject)) {
      return Error(res, 400, "subject: use up to 128 letters, digits, '-', '_', '.', '@' or '+', got '" + subject + "'");
    }
    if (who->scope != Scope::kAll) {
      // A team-admin makes tokens for its own team only.
      if (!team.empty() && team != who->team) {
        return Error(res, 403, "your token makes tokens for team " + who->team + " only, not '" + team + "'");
      }
      team = who->team;
      // ... and names its people within the team: a subject is who the audit log says acted, and
      // the user map may run a subject's jobs as a Unix user, both of which only an admin may hand
      // out. A team-admin's "dave" is stored as "vision/dave", which no admin-made subject, no
      // user-map entry an admin did not write as such, and no other team's subject can be.
      if (!subject.empty()) subject = team + "/" + subject;
    }
    std::optional<Time> expires;
    if (!f["ttl"].empty()) {
      auto ttl = ParseDuration(f["ttl"]);
      // (A token expired when made, or living past any date a clock can say, is a mistake too.)
      if (!ttl || *ttl <= Duration::Zero() || *ttl > Duration::Hours(24 * 36500)) {
        return Error(res, 400, "ttl: expected a duration from 1s to 100 years (36500d), such as 30d or 12h, got '" +
                                   f["ttl"] + "'");
      }
      expires = clock_.Now() + *ttl;
    }
    // A token that expires makes none that outlives it: a temporary team-admin (a contractor's)
    // must not leave a team-admin behind that never expires.
    if (who->token.expires && (!expires || *expires > *who->token.expires)) expires = who->token.expires;
    api::AuditRecord audit = AuditFor(req, FindRoute("POST", "/v1/tokens", false));
    audit.outcome = "allowed";
    audit.reason = std::string("a ") + (kind == "join" ? "join" : RoleName(*made)) + " token for " +
                   (subject.empty() ? std::string("(no subject)") : subject) + (team.empty() ? "" : ", team " + team) +
                   (expires ? ", expires " + FormatIso8601(*expires) : ", no expiry");
    MutexLock tokens_lock(tokens_mu_);
    // Revoked (with what it made) since this request was let in: it makes nothing more.
    auto maker = store_.FindToken(who->token.hash);
    if (!maker.ok()) return Error(res, maker.status());  // cannot be checked now: 503, not "revoked"
    if (!*maker || (*maker)->revoked) return Error(res, 401, "your token was revoked");
    auto secret = auth_.Create(kind == "join" ? api::TokenKind::kJoin : api::TokenKind::kUser, subject,
                               kind == "join" ? "agent" : RoleName(*made), team, clock_.Now(), expires, audit,
                               who->token.Id());
    if (!secret.ok()) return Error(res, secret.status());
    tl_audited = true;
    json out = {{"token", *secret}, {"id", Sha256Hex(*secret).substr(0, 12)}, {"kind", kind},
                {"role", kind == "join" ? "join" : RoleName(*made)}, {"subject", subject}, {"team", team}};
    if (expires) out["expires_ms"] = expires->millis();
    Reply(res, 201, out);
  });

  // Tokens as people see them: never the secret, nor the whole hash.
  auto token_json = [](const api::TokenRecord& t) { return api::ToJson(api::SummaryOf(t)); };
  // Whether the caller may see (and revoke) this token: admins every token, team-admins their
  // team's user tokens.
  auto token_visible = [](const Caller& who, const api::TokenRecord& t) {
    if (who.scope == Scope::kAll) return true;
    // A team-admin: its team's tokens of the roles it may make (not an admin's or a metrics token
    // that names its team, which it could otherwise list and revoke).
    std::optional<Role> r = RoleOf(t);
    return t.kind == api::TokenKind::kUser && r && MayMakeRole(who.role, *r) && TeamOf(t) == who.team;
  };

  user_routes_->Get("/v1/tokens", [this, authz, token_json, token_visible](const Request& req, Response& res) {
    auto who = authz(req, res, Verb::kTokenRead);
    if (!who) return;
    auto tokens = store_.ListTokens();
    if (!tokens.ok()) return Error(res, tokens.status());
    std::sort(tokens->begin(), tokens->end(), [](const auto& a, const auto& b) { return a.created < b.created; });
    json list = json::array();
    // A maker the caller may not see (an admin's token, for a team-admin) is not named either.
    std::set<std::string> visible;
    for (const auto& t : *tokens) {
      if (token_visible(*who, t)) visible.insert(t.Id());
    }
    for (const auto& t : *tokens) {
      if (!token_visible(*who, t)) continue;
      json o = token_json(t);
      if (!t.made_by.empty() && !visible.count(t.made_by)) o["made_by"] = "";
      list.push_back(std::move(o));
    }
    Reply(res, 200, {{"tokens", list}});
  });

  user_routes_->Post(R"(/v1/tokens/([0-9a-f]{1,64})/revoke)", [this, authz, token_json, token_visible](
                                                                   const Request& req, Response& res) {
    auto who = authz(req, res, Verb::kTokenRevoke);
    if (!who) return;
    std::string id = req.matches[1].str();
    if (id.size() < 8) return Error(res, 400, "token id: give at least 8 hex digits (gpufleet token list shows them)");
    MutexLock tokens_lock(tokens_mu_);
    auto tokens = store_.ListTokens();
    if (!tokens.ok()) return Error(res, tokens.status());
    std::vector<api::TokenRecord> found;
    for (const auto& t : *tokens) {
      if (StartsWith(t.hash, id) && token_visible(*who, t)) found.push_back(t);
    }
    if (found.empty()) return Error(res, 404, "no token " + id + " that your token may revoke");
    if (found.size() > 1) return Error(res, 409, "token id " + id + " is ambiguous; give more digits");
    if (found[0].hash == who->token.hash) return Error(res, 409, "a token cannot revoke itself");
    const bool team_admin = found[0].role == RoleName(Role::kTeamAdmin);
    // Nor a team-admin it was made through: the revoke would take the caller's own token, and
    // skipping it would leave what it made working.
    if (team_admin) {
      std::map<std::string, const api::TokenRecord*> by_id;
      for (const auto& t : *tokens) by_id[t.Id()] = &t;
      std::string maker = who->token.made_by;
      for (int depth = 0; !maker.empty() && depth < 64; ++depth) {
        if (maker == found[0].Id()) {
          return Error(res, 409, "token " + found[0].Id() + " made your token (or the team-admin that made it): "
                                 "revoking it revokes yours too; ask an admin to revoke it");
        }
        auto m = by_id.find(maker);
        maker = m == by_id.end() ? std::string() : m->second->made_by;
      }
    }
    api::AuditRecord audit = AuditFor(req, FindRoute("POST", req.path, false));
    audit.object = "token " + found[0].Id();
    audit.outcome = "allowed";
    // As `token list` names it (a join token is stored with the agent role); a join token has
    // no subject.
    const api::TokenSummary shown = api::SummaryOf(found[0]);
    audit.reason = "revoked the " + shown.role + " token" + (shown.subject.empty() ? "" : " of " + shown.subject);
    // What a team-admin token made goes with it, and what team-admins among those made, and so
    // on: a contractor's team-admin token must not leave working tokens behind. (An admin's do
    // not: admins are the root of trust, and replacing one must not revoke every token it issued.)
    // The walk goes through team-admins revoked earlier (what they made may still work), and a
    // revoke of a team-admin already revoked finishes what an earlier one left (a failed write).
    std::vector<const api::TokenRecord*> made;
    if (team_admin) {
      std::set<std::string> makers = {found[0].Id()};
      for (bool more = true; more;) {
        more = false;
        for (const auto& t : *tokens) {
          if (t.made_by.empty() || !makers.count(t.made_by) || t.hash == who->token.hash) continue;
          if (t.role == RoleName(Role::kTeamAdmin) && makers.insert(t.Id()).second) more = true;
          if (!t.revoked && std::find(made.begin(), made.end(), &t) == made.end()) made.push_back(&t);
        }
      }
    }
    if (found[0].revoked && made.empty()) return Error(res, 409, "token " + found[0].Id() + " is already revoked");
    std::vector<api::AuditRecord> records = {audit};
    for (const api::TokenRecord* t : made) {
      api::AuditRecord r = audit;
      r.object = "token " + t->Id();
      r.reason = "revoked the " + t->role + " token of " + t->subject + ": made by revoked team-admin token " +
                 (t->made_by == found[0].Id() ? found[0].Id() : t->made_by);
      records.push_back(std::move(r));
    }
    if (!made.empty()) audit.reason += " and " + std::to_string(made.size()) + " token(s) it made";
    records[0] = audit;
    // Each record is written with its own revoke (commits with it, or not at all): a write that
    // fails leaves the log saying what was revoked, and a revoke again finishes the rest.
    if (!found[0].revoked) {
      store_.AttachAudit({records[0]});
      if (Status st = auth_.Revoke(found[0].hash); !st.ok()) return Error(res, st);
    }
    tl_audited = true;
    for (size_t i = 0; i < made.size(); ++i) {
      store_.AttachAudit({records[i + 1]});
      if (Status also = auth_.Revoke(made[i]->hash); !also.ok()) return Error(res, also);
    }
    found[0].revoked = true;
    json out = token_json(found[0]);
    // Its maker, as the list names it: only when the caller may see that token too.
    if (!found[0].made_by.empty() && std::none_of(tokens->begin(), tokens->end(), [&](const api::TokenRecord& t) {
          return t.Id() == found[0].made_by && token_visible(*who, t);
        })) {
      out["made_by"] = "";
    }
    json also = json::array();
    for (const api::TokenRecord* t : made) also.push_back(t->Id());
    if (!made.empty()) out["also_revoked"] = also;
    Reply(res, 200, out);
  });
}

void ApiServer::AuditRoutes(const Guards& g) {
  using httplib::Request;
  using httplib::Response;
  [[maybe_unused]] const auto& authn = g.authn;
  [[maybe_unused]] const auto& authz = g.authz;
  [[maybe_unused]] const auto& agent = g.agent;
  // --- Audit ---
  user_routes_->Get("/v1/audit", [this, authz](const Request& req, Response& res) {
    if (!authz(req, res, Verb::kAuditRead)) return;
    store::AuditFilter f;
    auto limit = IntParam(req, "limit", 1, options_.max_page, options_.max_page);
    auto after = IntParam(req, "cursor", 0, INT64_MAX / 4, 0);
    auto since = IntParam(req, "since_ms", 0, INT64_MAX / 4, -1);
    for (const auto* r : {&limit, &after, &since}) {
      if (!r->ok()) return Error(res, r->status());
    }
    f.limit = *limit;
    f.after_seq = *after;
    if (*since >= 0) f.since = Time::FromMillis(*since);
    if (req.has_param("subject")) f.subject = req.get_param_value("subject");
    if (req.has_param("verb")) {
      // A verb, or a family ending in '.': one the log can hold, or the filter would quietly match
      // nothing (a typo looks like "no such records").
      f.verb = req.get_param_value("verb");
      const std::vector<std::string>& verbs = AuditVerbNames();
      const std::string& v = *f.verb;
      const bool family = !v.empty() && v.back() == '.';
      const bool known = std::any_of(verbs.begin(), verbs.end(), [&](const std::string& name) {
        return family ? name.rfind(v, 0) == 0 : name == v;
      });
      if (!known) {
        std::string closest;
        size_t best = SIZE_MAX;
        for (const std::string& name : verbs) {
          if (const size_t d = EditDistance(v, name); d < best) {
            best = d;
            closest = name;
          }
        }
        std::string msg = "verb: unknown audit verb '" + v + "'";
        if (best <= 3) msg += " (closest: " + closest + ")";
        return Error(res, Status::InvalidArgument(msg + "; verbs: " + Join(verbs, ", ") +
                                                  ", or a family such as job."));
      }
    }
    auto records = store_.ListAudit(f);
    if (!records.ok()) return Error(res, records.status());
    json list = json::array();
    for (const auto& r : *records) list.push_back(api::ToJson(r));
    json out = {{"records", list}};
    if (static_cast<int64_t>(records->size()) == f.limit) out["next_cursor"] = records->back().seq;
    Reply(res, 200, out);
  });
}

void ApiServer::AgentRoutes(const Guards& g) {
  using httplib::Request;
  using httplib::Response;
  [[maybe_unused]] const auto& authn = g.authn;
  [[maybe_unused]] const auto& authz = g.authz;
  [[maybe_unused]] const auto& agent = g.agent;
  // --- Agents ---
  agent_routes_->Post("/v1/agents/register", [this, authn](const Request& req, Response& res) {
    auto t = authn(req, res);
    if (!t) return;
    if (t->kind != api::TokenKind::kJoin && t->kind != api::TokenKind::kAgent) {
      return Error(res, 403, "registering a node needs a join token (gpufleet token create --join)");
    }
    auto body = api::ParseJson(req.body);
    if (!body.ok()) return Error(res, 400, "body: " + body.status().message());
    api::ReplaceNulBytes(*body);  // (an agent refused for one would send it again for ever)
    auto r = api::RegisterRequestFromJson(*body);
    if (!r.ok()) return Error(res, r.status());
    // The node routes (drain, undrain, check) take only these.
    if (Status st = api::CheckName("name", r->name); !st.ok()) return Error(res, st);
    if (t->kind == api::TokenKind::kAgent && t->subject != r->name) {
      return Error(res, 403, "this agent token belongs to node '" + t->subject + "'");
    }
    if (t->kind == api::TokenKind::kAgent) {
      auto node = engine_.NodeByName(t->subject);
      if (node && !engine_.IsCurrentAgentToken(*node, t->hash)) {
        return Error(res, 401, "this agent token was replaced by a later registration of node '" + t->subject + "'");
      }
    }
    std::string secret = NewToken(api::TokenKind::kAgent);
    api::AuditRecord audit = Allowed(req, "registered " + r->name, /*agents=*/true);
    audit.object = "node " + r->name;
    const std::string name = r->name;
    auto reply =
        engine_.Register(std::move(*r), Sha256Hex(secret), t->kind == api::TokenKind::kJoin, audit).get();
    if (!reply.ok()) {
      // A live node's name: a join token may take it once the node is lost. Retry-After says
      // when, so that an agent whose own token this controller does not know (a store restored
      // from a backup) waits for it rather than give up.
      if (reply.status().code() == StatusCode::kFailedPrecondition && t->kind == api::TokenKind::kJoin) {
        if (std::optional<Duration> left = engine_.LostIn(name)) {
          res.set_header("Retry-After", std::to_string((left->millis() + 999) / 1000 + 1));
        }
      }
      return Error(res, reply.status());
    }
    tl_audited = true;  // recorded with the node's record
    reply->token = secret;
    Reply(res, 200, api::ToJson(*reply));
  });

  agent_routes_->Post("/v1/agents/heartbeat", [this, agent](const Request& req, Response& res) {
    auto node = agent(req, res);
    if (!node) return;
    auto body = api::ParseJson(req.body);
    if (!body.ok()) return Error(res, 400, "body: " + body.status().message());
    // A NUL byte (an agent older than the one that writes U+FFFD for it) becomes U+FFFD: a
    // heartbeat refused for it would be sent again for ever, and the node would be lost.
    api::ReplaceNulBytes(*body);
    auto hb = api::HeartbeatFromJson(*body);
    if (!hb.ok()) return Error(res, hb.status());
    auto reply = engine_.Heartbeat(*node, std::move(*hb)).get();
    if (!reply.ok()) return Error(res, reply.status());
    Reply(res, 200, api::ToJson(*reply));
  });

  agent_routes_->Get("/v1/agents/commands", [this, agent](const Request& req, Response& res) {
    auto node = agent(req, res);
    if (!node) return;
    auto after = IntParam(req, "after", 0, INT64_MAX / 4, 0);
    auto wait = IntParam(req, "wait_ms", 0, options_.max_poll_wait.millis(), 0);
    if (!after.ok()) return Error(res, after.status());
    if (!wait.ok()) return Error(res, wait.status());
    auto batch = engine_.PollCommands(*node, *after, Duration::Millis(*wait), req.get_param_value("epoch"));
    Reply(res, 200, api::ToJson(batch));
  });

  agent_routes_->Post("/v1/agents/logs", [this, agent](const Request& req, Response& res) {
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
    if (!engine_.PartOnNode(*node, api::PartKey{JobId(*job), static_cast<int>(*attempt), static_cast<int>(*part)})) {
      return Error(res, 403, "part job-" + std::to_string(*job) + ".a" + std::to_string(*attempt) + ".p" +
                                 std::to_string(*part) + " is not placed on this node");
    }
    std::string path = LogPath(*job, static_cast<int>(*attempt), static_cast<int>(*part));
    MutexLock lock(logs_mu_);
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    int64_t size = 0;
    struct stat sb;
    if (::stat(path.c_str(), &sb) == 0) size = sb.st_size;
    // Past the cap: keep counting what the agent offers (so it moves on), keep nothing.
    if (auto cut = cut_logs_.find(path); cut != cut_logs_.end()) {
      cut->second = std::max(cut->second, *offset + static_cast<int64_t>(req.body.size()));
      return Reply(res, 200, {{"size", cut->second}, {"cut", true}});
    }
    if (*offset > size) {
      return Reply(res, 409, {{"error", {{"code", "conflict"}, {"message", "offset beyond the end"}}}, {"size", size}});
    }
    int64_t skip = size - *offset;
    if (size + static_cast<int64_t>(req.body.size()) - std::max<int64_t>(skip, 0) > options_.max_log_bytes_per_part &&
        skip < static_cast<int64_t>(req.body.size())) {
      // This chunk crosses the cap: keep what fits, then one line saying the rest is dropped.
      int64_t fits = std::max<int64_t>(0, options_.max_log_bytes_per_part - size);
      std::ofstream f(path, std::ios::binary | std::ios::app);
      f.write(req.body.data() + skip, static_cast<std::streamsize>(fits));
      f << "\n[gpufleet: this log is cut at " << options_.max_log_bytes_per_part
        << " bytes (the controller's per-part cap); later output is not kept]\n";
      f.flush();
      if (!f) incomplete_logs_.insert(path);
      int64_t offered = *offset + static_cast<int64_t>(req.body.size());
      cut_logs_[path] = offered;
      logs_cv_.NotifyAll();
      return Reply(res, 200, {{"size", offered}, {"cut", true}});
    }
    if (skip < static_cast<int64_t>(req.body.size())) {
      std::ofstream f(path, std::ios::binary | std::ios::app);
      f.write(req.body.data() + skip, static_cast<std::streamsize>(req.body.size() - skip));
      f.flush();  // a full disk shows here, not at close
      if (!f) {
        incomplete_logs_.insert(path);
        f.close();
        // Whatever part of the chunk did land must not be counted twice: truncate back.
        std::error_code trunc_ec;
        std::filesystem::resize_file(path, static_cast<uintmax_t>(size), trunc_ec);
        return Error(res, 507, "cannot write the log " + path + " (disk full?); the log is marked incomplete");
      }
      incomplete_logs_.erase(path);
      size += static_cast<int64_t>(req.body.size()) - skip;
    }
    logs_cv_.NotifyAll();
    Reply(res, 200, {{"size", size}});
  });
}

}  // namespace gpufleet::controller
