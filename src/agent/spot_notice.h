// Spot interruption notices: the agent polls the provider's notice endpoint, only when one is
// configured (`gpufleet agent --spot-notice-url`). The format is AWS's instance metadata document
// `spot/instance-action`: 404 while there is no notice, then 200 with
//   {"action": "terminate", "time": "2026-12-02T15:04:05Z"}
// (action "terminate", "stop" or "hibernate"; time: when the provider acts, UTC).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "api/agent_protocol.h"
#include "common/status.h"

namespace httplib {
class Client;
}

namespace gpufleet::agent {

// Parses an instance-action document.
Result<api::SpotNotice> ParseInstanceAction(const std::string& body);

// Splits "http://host[:port]/path" into the client's "http://host:port" and the path. Only http:
// metadata endpoints are plain HTTP on a link-local address.
Result<std::pair<std::string, std::string>> SplitHttpUrl(const std::string& url);

// One endpoint, polled by Poll(). Not thread-safe; Cancel() may be called from another thread.
class SpotNoticePoller {
 public:
  static Result<std::unique_ptr<SpotNoticePoller>> Create(const std::string& url);
  ~SpotNoticePoller();

  // One GET (timeouts of a second or two). A notice, nullopt while there is none (404); an
  // unexpected answer is logged the first time it is seen and counts as none.
  std::optional<api::SpotNotice> Poll();
  // Cuts a Poll in progress short.
  void Cancel();

 private:
  SpotNoticePoller() = default;
  std::string url_, path_;
  std::unique_ptr<httplib::Client> http_;
  std::string last_error_;  // logged already
};

}  // namespace gpufleet::agent
