#include "cli/client.h"

#include <httplib.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "api/codec.h"
#include "common/strings.h"

namespace gpufleet::cli {

namespace {

// Long enough for the longest long-poll the API allows (logs: wait_ms up to 60 s).
constexpr int kReadTimeoutS = 90;
constexpr int kConnectTimeoutS = 5;

bool Transient(const ApiResult& r) { return r.http_status == 0 || r.http_status >= 500; }

// 64-bit FNV-1a: a file name for a list of URLs that is the same in every build.
std::string ListKey(const std::string& joined) {
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(Fnv1a64(joined)));
  return out;
}

}  // namespace

int ExitCodeForHttp(int http_status) {
  if (http_status >= 200 && http_status < 300) return kExitOk;
  if (http_status == 0 || http_status == 401 || http_status == 403) return kExitUnreachable;
  if (http_status == 400 || http_status == 413 || http_status == 415) return kExitUsage;
  return kExitFailed;
}

ApiClient::ApiClient(ClientConfig config) : config_(std::move(config)) {
  auto list = api::ControllerList::Parse(config_.server);
  if (list.ok()) {
    controllers_ = std::move(*list);
    if (controllers_->urls().size() > 1 && !config_.leader_memory_dir.empty()) {
      memory_path_ = config_.leader_memory_dir + "/leader-" + ListKey(controllers_->Joined());
      std::ifstream in(memory_path_);
      std::string url;
      if (in && std::getline(in, url) && controllers_->StartAt(url)) remembered_ = controllers_->Current();
    }
  } else {
    bad_server_ = list.status().message() + " (from " + config_.server_source + ")";
  }
}

ApiClient::~ApiClient() = default;

std::string ApiClient::CheckServer() const { return bad_server_; }

void ApiClient::Remember(const std::string& server) {
  if (memory_path_.empty() || server == remembered_) return;
  // A cache: a failure to write it costs the next command a detour, nothing else.
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::path(memory_path_).parent_path();
  if (std::filesystem::create_directories(dir, ec)) ::chmod(dir.c_str(), 0700);
  const std::string tmp = memory_path_ + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << server << "\n";
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  ::chmod(tmp.c_str(), 0600);
  std::filesystem::rename(tmp, memory_path_, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return;
  }
  remembered_ = server;
}

std::vector<std::string> ApiClient::servers() const {
  return controllers_ ? controllers_->urls() : std::vector<std::string>{config_.server};
}

httplib::Client& ApiClient::ClientFor(const std::string& server) {
  auto& http = http_[server];
  if (http) return *http;
  http = std::make_unique<httplib::Client>(server);
  if (StartsWith(server, "https://")) {
    if (!config_.ca_cert.empty()) http->set_ca_cert_path(config_.ca_cert);
    http->enable_server_certificate_verification(true);
  }
  http->set_connection_timeout(kConnectTimeoutS, 0);
  http->set_read_timeout(kReadTimeoutS, 0);
  http->set_write_timeout(30, 0);
  http->set_keep_alive(true);
  http->set_tcp_nodelay(true);
  if (!config_.token.empty()) http->set_bearer_token_auth(config_.token);
  return *http;
}

ApiResult ApiClient::Get(const std::string& path, const std::map<std::string, std::string>& query,
                         const ApiClientOptions& options) {
  httplib::Params params(query.begin(), query.end());
  return Send(false, params.empty() ? path : httplib::append_query_params(path, params), "", options);
}

ApiResult ApiClient::Post(const std::string& path, const nlohmann::json& body, const ApiClientOptions& options) {
  return Send(true, path, api::DumpJson(body), options);
}

ApiResult ApiClient::Send(bool post, const std::string& target, const std::string& body,
                          const ApiClientOptions& options) {
  if (std::string bad = CheckServer(); !bad.empty()) {
    ApiResult r;
    r.error = bad;
    r.exit_code = kExitUsage;
    return r;
  }
  int backoff_ms = options.first_backoff_ms;
  for (int attempt = 0;; ++attempt) {
    ApiResult r;
    // One try: the current controller, then the leader a standby names or the next URL.
    for (int sent = 1;; ++sent) {
      const std::string server = controllers_->Current();
      httplib::Client& http = ClientFor(server);
      httplib::Result res = post ? http.Post(target.c_str(), body, "application/json") : http.Get(target.c_str());
      std::string leader;
      const bool standby = res && res->status == 503 && res->has_header(api::kLeaderHeader);
      if (standby) leader = res->get_header_value(api::kLeaderHeader);
      if (!res) {
        r = ApiResult();
        if (res.error() == httplib::Error::SSLConnection) {
          r.error = "cannot reach the controller at " + server + " (" + httplib::to_string(res.error()) +
                    "): the TLS handshake failed; does it serve https? (a controller without --tls-cert, or "
                    "gpufleet dev without --tls, speaks http://)";
        } else if (server.rfind("http://", 0) == 0 && res.error() == httplib::Error::Read) {
          r.error = "cannot reach the controller at " + server + " (" + httplib::to_string(res.error()) +
                    "): it closed the connection without an answer; if it serves https (--tls-cert, dev --tls), "
                    "use https://";
        } else if (res.error() == httplib::Error::SSLServerVerification) {
          r.error = "cannot reach the controller at " + server + " (" + httplib::to_string(res.error()) +
                    "): its certificate is not one this client trusts" +
                    (config_.ca_cert.empty() ? std::string("; set ca_cert: in ") + config_.source +
                                                   " (or GPUFLEET_CA_CERT) to the CA that signed it"
                                             : " (ca_cert " + config_.ca_cert + "), or it does not name the host");
        } else if (controllers_->urls().size() > 1) {
          r.error = "cannot reach any of the controllers " + controllers_->Joined() + " (last: " + server + ", " +
                    httplib::to_string(res.error()) + "): is one of them running?";
        } else {
          r.error = "cannot reach the controller at " + server + " (" + httplib::to_string(res.error()) +
                    "): is it running? start one with 'gpufleet dev'";
        }
        r.exit_code = kExitUnreachable;
      } else {
        r = Decode(server, res->status, res->body);
        if (!standby) Remember(server);
      }
      // A request that may have reached a controller (the answer was lost) is sent elsewhere only
      // when it is safe to repeat.
      const bool not_sent = !res && (res.error() == httplib::Error::Connection ||
                                     res.error() == httplib::Error::ConnectionTimeout);
      const bool elsewhere = standby || not_sent || (!res && options.retries > 0);
      if (!elsewhere || sent >= controllers_->MaxTries()) break;
      if (!controllers_->Redirect(server, leader)) break;
    }
    if (r.ok() || !Transient(r) || attempt >= options.retries) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
    backoff_ms *= 2;
  }
}

ApiResult ApiClient::Decode(const std::string& server, int status, const std::string& body) const {
  ApiResult r;
  r.http_status = status;
  auto parsed = api::ParseJson(body);
  if (parsed.ok()) r.body = std::move(*parsed);
  r.exit_code = ExitCodeForHttp(status);
  if (r.exit_code == kExitOk) {
    if (!parsed.ok()) {
      r.error = "the controller at " + server + " sent a reply that is not JSON: " + parsed.status().message();
      r.exit_code = kExitFailed;
    }
    return r;
  }
  std::string message;
  if (r.body.is_object() && r.body.contains("error") && r.body["error"].is_object()) {
    message = r.body["error"].value("message", "");
  }
  if (message.empty()) message = "HTTP " + std::to_string(status) + (body.empty() ? "" : ": " + body.substr(0, 200));
  if (status == 401) {
    r.error = "the token was refused (" + message + "): check the token given (--token, else GPUFLEET_TOKEN, else " +
              ClientConfigPath() + ")";
  } else {
    r.error = message;
  }
  return r;
}

}  // namespace gpufleet::cli
