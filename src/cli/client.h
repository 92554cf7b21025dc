// ApiClient: the CLI's one door to the controller's HTTP/JSON API (docs/api.md). It sends the
// bearer token, decodes JSON replies and turns every failure into a message a person can act on
// and an exit code a script can trust:
//
//   0  ok
//   1  the operation failed (not found, conflict, the job failed, the server broke)
//   2  usage error or bad input (the server answered 400/413)
//   3  cannot reach the controller, or it refused the token (401/403)
//
// Requests that are safe to repeat (reads, and submits carrying a request id) may ask for
// retries: connection errors and 5xx answers are retried with exponential backoff.
//
// `server` may list several controllers ("URL1,URL2"): a request that cannot reach one, or is
// answered 503 by a standby, goes to the leader the standby names or to the next URL at once
// (api/controller_list.h), and the client keeps to the URL that answered. Any request may follow
// a standby: the standby did nothing with it. With `leader_memory_dir` set, the URL that answered
// is also written there (a file per list, named by a hash of it) and the next client given the
// same list starts at it: a later command goes straight to the leader instead of through a
// standby's 503 or a dead controller's connection timeout. A remembered URL that stands by by now
// names the new leader as any standby does.
//
// Thread-safety: one ApiClient per thread.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/controller_list.h"
#include "cli/client_config.h"
#include "cli/exit_codes.h"

namespace httplib {
class Client;
}

namespace gpufleet::cli {


// The outcome of one API call: the decoded body of a 2xx answer, or an error message and the
// exit code it maps to.
struct ApiResult {
  int http_status = 0;   // 0: no answer came
  nlohmann::json body;   // the decoded reply (for errors too, when the server sent JSON)
  std::string error;     // empty on success; ready to print
  int exit_code = kExitOk;
  bool ok() const { return error.empty(); }
};

struct ApiClientOptions {
  int retries = 0;  // extra tries after a connection error or a 5xx answer
  int first_backoff_ms = 250;  // doubled after each try
};

class ApiClient {
 public:
  // `config.server` is a URL such as http://127.0.0.1:8470, or several separated by commas.
  explicit ApiClient(ClientConfig config);
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  // A server URL that is not http:// or https://: an error message, else empty.
  std::string CheckServer() const;
  // The controller requests go to now (the one that answered last).
  std::string server() const { return controllers_ ? controllers_->Current() : config_.server; }
  // Every controller URL given.
  std::vector<std::string> servers() const;

  // `path` starts with /v1; query values are URL-encoded here.
  ApiResult Get(const std::string& path, const std::map<std::string, std::string>& query = {},
                const ApiClientOptions& options = {});
  ApiResult Post(const std::string& path, const nlohmann::json& body, const ApiClientOptions& options = {});

 private:
  ApiResult Send(bool post, const std::string& target, const std::string& body, const ApiClientOptions& options);
  ApiResult Decode(const std::string& server, int status, const std::string& body) const;
  httplib::Client& ClientFor(const std::string& server);
  // Writes `server` as the one that answered, when it differs from what is remembered.
  void Remember(const std::string& server);

  ClientConfig config_;
  std::optional<api::ControllerList> controllers_;  // unset when config_.server is not a valid list
  std::string bad_server_;                           // why, then
  std::string memory_path_;  // the file remembering the leader of this list; empty: none
  std::string remembered_;   // what it holds
  std::map<std::string, std::unique_ptr<httplib::Client>> http_;  // by URL, made on first use
};

// Maps an HTTP status to the CLI's exit code (2xx: 0).
int ExitCodeForHttp(int http_status);

}  // namespace gpufleet::cli
