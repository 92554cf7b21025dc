// ControllerList: the controller URLs a client (the CLI, an agent) was given, and the one it
// follows now. Several controllers may share one PostgreSQL store; one leads and the others stand
// by, answering 503 with the header X-Gpufleet-Leader naming the leader (docs/operations.md). A
// client sends to Current(); after a connection failure or a standby's 503 it calls Redirect and
// sends again, at most MaxTries() times per request, so that one request visits each URL (and a
// leader named outside the list) about once. The list remembers the URL that answered last, so
// later requests go straight to the leader.
//
// Thread-safety: a value; callers sharing one (the agent's threads) guard it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace gpufleet::api {

// The response header a standby names the leader in (on the agent listener: the leader's agent URL).
inline constexpr const char* kLeaderHeader = "X-Gpufleet-Leader";

class ControllerList {
 public:
  // "URL" or "URL1,URL2,..." (spaces around commas and trailing slashes ignored, repeats dropped).
  // InvalidArgument naming the entry when one is not an http:// or https:// URL, or when none is given.
  static Result<ControllerList> Parse(std::string_view text);

  const std::string& Current() const { return current_; }
  const std::vector<std::string>& urls() const { return urls_; }
  // The URLs as given, comma-separated, for messages.
  std::string Joined() const;
  // How many sends one request may make: each listed URL once, and one leader named outside the list.
  int MaxTries() const { return static_cast<int>(urls_.size()) + 1; }

  // `from` did not serve the request: it could not be reached (`leader` empty), or it stands by
  // and named `leader` (the header's value, possibly empty when it does not know). Moves to the
  // named leader, else to the listed URL after the last listed one used. Does nothing when
  // another caller moved on from `from` already. Returns whether there is another URL to try
  // (false with one URL that cannot be reached).
  bool Redirect(const std::string& from, std::string_view leader);

  // Starts at `url` (normalised as Parse does) when it is one of the listed URLs: the leader a
  // client remembered from an earlier run. Returns false, changing nothing, for any other URL.
  bool StartAt(std::string_view url);

 private:
  explicit ControllerList(std::vector<std::string> urls);

  std::vector<std::string> urls_;
  std::string current_;
  size_t cursor_ = 0;  // the listed URL used last (current_ may be a leader named outside the list)
};

}  // namespace gpufleet::api
