// Spot interruption notices: the agent polls the provider's notice endpoint, only when one is
// configured (`gpufleet agent --spot-notice-url`, `--spot-notice-format`). Three formats:
//
//   aws    EC2 instance metadata `spot/instance-action`: 404 while there is no notice, then 200
//          with {"action": "terminate", "time": "2026-12-02T15:04:05Z"} (action "terminate",
//          "stop" or "hibernate"; time: when EC2 acts, UTC). Read with IMDSv2: a session token
//          from PUT /latest/api/token on the same host, sent with every GET; renewed before it
//          expires and on a 401. Only when the PUT is refused outright (403, 404, 405, 501: an
//          endpoint without IMDSv2, such as the local provider's or a plain HTTP server that
//          has no PUT) does it fall back to IMDSv1, and says so once in the log.
//   gcp    Compute Engine metadata `instance/preempted` (header Metadata-Flavor: Google): "FALSE",
//          then "TRUE" once the VM is preempted; GCE acts about 30 s later, so the notice's time
//          is the moment "TRUE" was seen.
//   azure  Azure Scheduled Events (header Metadata: true): {"Events": [...]}; the first event of
//          EventType "Preempt" is the notice, at its NotBefore (RFC 1123, "Mon, 19 Sep 2016
//          18:29:47 GMT"; empty: now).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "api/agent_protocol.h"
#include "common/status.h"
#include "common/time.h"

namespace httplib {
class Client;
}

namespace gpufleet::agent {

enum class SpotNoticeFormat { kAws, kGcp, kAzure };

// "aws", "gcp" or "azure".
Result<SpotNoticeFormat> ParseSpotNoticeFormat(const std::string& text);
const char* SpotNoticeFormatName(SpotNoticeFormat format);

// Parses an instance-action document.
Result<api::SpotNotice> ParseInstanceAction(const std::string& body);

// Parses a Scheduled Events document: the first Preempt event as a notice (its NotBefore, or
// `now` when that is empty), nullopt when there is none.
Result<std::optional<api::SpotNotice>> ParseScheduledEvents(const std::string& body, Time now);

// "Mon, 19 Sep 2016 18:29:47 GMT" (RFC 1123, as HTTP dates and Azure's NotBefore are written).
Result<Time> ParseRfc1123(const std::string& text);

// Splits "http://host[:port]/path" into the client's "http://host:port" and the path. Only http:
// metadata endpoints are plain HTTP on a link-local address.
Result<std::pair<std::string, std::string>> SplitHttpUrl(const std::string& url);

// One endpoint, polled by Poll(). Not thread-safe; Cancel() may be called from another thread.
class SpotNoticePoller {
 public:
  // `now` is the wall clock (WallNow unless a test sets it): it stamps GCP notices and ages the
  // IMDSv2 token.
  static Result<std::unique_ptr<SpotNoticePoller>> Create(const std::string& url,
                                                          SpotNoticeFormat format = SpotNoticeFormat::kAws,
                                                          std::function<Time()> now = nullptr);
  ~SpotNoticePoller();

  // One GET (and on AWS a token PUT when one is due; timeouts of a second or two). A notice,
  // nullopt while there is none; an unexpected answer is logged the first time it is seen and
  // counts as none.
  std::optional<api::SpotNotice> Poll();
  // Cuts a Poll in progress short.
  void Cancel();

 private:
  SpotNoticePoller() = default;
  // An error is an answer that is neither a notice nor "none": Poll logs it once.
  Result<std::optional<api::SpotNotice>> PollAws();
  Result<std::optional<api::SpotNotice>> PollGcp();
  Result<std::optional<api::SpotNotice>> PollAzure();
  // Fetches an IMDSv2 token into token_, or switches to IMDSv1 when the endpoint has none.
  Status RenewToken();

  std::string url_, path_;
  SpotNoticeFormat format_ = SpotNoticeFormat::kAws;
  std::function<Time()> now_;
  std::unique_ptr<httplib::Client> http_;
  std::string last_error_;  // logged already
  std::string token_;       // IMDSv2 session token; empty: none yet
  Time token_renew_at_;     // renew the token from then on (before it expires)
  bool imds_v1_ = false;    // the endpoint refused the token PUT: plain GETs
};

}  // namespace gpufleet::agent
