#include "cli/client.h"

#include <httplib.h>

#include <chrono>
#include <thread>

#include "api/codec.h"
#include "common/strings.h"

namespace gpufleet::cli {

namespace {

// Long enough for the longest long-poll the API allows (logs: wait_ms up to 60 s).
constexpr int kReadTimeoutS = 90;
constexpr int kConnectTimeoutS = 5;

bool Transient(const ApiResult& r) { return r.http_status == 0 || r.http_status >= 500; }

}  // namespace

int ExitCodeForHttp(int http_status) {
  if (http_status >= 200 && http_status < 300) return kExitOk;
  if (http_status == 0 || http_status == 401 || http_status == 403) return kExitUnreachable;
  if (http_status == 400 || http_status == 413 || http_status == 415) return kExitUsage;
  return kExitFailed;
}

ApiClient::ApiClient(ClientConfig config) : config_(std::move(config)) {
  while (!config_.server.empty() && config_.server.back() == '/') config_.server.pop_back();
  if (!CheckServer().empty()) return;
  http_ = std::make_unique<httplib::Client>(config_.server);
  if (StartsWith(config_.server, "https://")) {
    if (!config_.ca_cert.empty()) http_->set_ca_cert_path(config_.ca_cert);
    http_->enable_server_certificate_verification(true);
  }
  http_->set_connection_timeout(kConnectTimeoutS, 0);
  http_->set_read_timeout(kReadTimeoutS, 0);
  http_->set_write_timeout(30, 0);
  http_->set_keep_alive(true);
  http_->set_tcp_nodelay(true);
  if (!config_.token.empty()) http_->set_bearer_token_auth(config_.token);
}

ApiClient::~ApiClient() = default;

std::string ApiClient::CheckServer() const {
  if (StartsWith(config_.server, "http://") || StartsWith(config_.server, "https://")) return "";
  return "the server URL '" + config_.server + "' (from " + config_.source +
         ") must start with http:// or https://, e.g. http://127.0.0.1:8470";
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
    httplib::Result res = post ? http_->Post(target.c_str(), body, "application/json") : http_->Get(target.c_str());
    ApiResult r;
    if (!res) {
      if (res.error() == httplib::Error::SSLServerVerification || res.error() == httplib::Error::SSLConnection) {
        r.error = "cannot reach the controller at " + config_.server + " (" + httplib::to_string(res.error()) +
                  "): its certificate is not one this client trusts" +
                  (config_.ca_cert.empty() ? std::string("; set ca_cert: in ") + config_.source +
                                                 " (or GPUFLEET_CA_CERT) to the CA that signed it"
                                           : " (ca_cert " + config_.ca_cert + "), or it does not name the host");
      } else {
        r.error = "cannot reach the controller at " + config_.server + " (" + httplib::to_string(res.error()) +
                  "): is it running? start one with 'gpufleet dev'";
      }
      r.exit_code = kExitUnreachable;
    } else {
      r = Decode(res->status, res->body);
    }
    if (r.ok() || !Transient(r) || attempt >= options.retries) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
    backoff_ms *= 2;
  }
}

ApiResult ApiClient::Decode(int status, const std::string& body) const {
  ApiResult r;
  r.http_status = status;
  auto parsed = api::ParseJson(body);
  if (parsed.ok()) r.body = std::move(*parsed);
  r.exit_code = ExitCodeForHttp(status);
  if (r.exit_code == kExitOk) {
    if (!parsed.ok()) {
      r.error = "the controller at " + config_.server + " sent a reply that is not JSON: " + parsed.status().message();
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
    r.error = "the token was refused (" + message + "): check " + ClientConfigPath() + " or GPUFLEET_TOKEN";
  } else {
    r.error = message;
  }
  return r;
}

}  // namespace gpufleet::cli
