#include "agent/spot_notice.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <ctime>

#include "api/codec.h"

namespace gpufleet::agent {

Result<api::SpotNotice> ParseInstanceAction(const std::string& body) {
  auto j = api::ParseJson(body);
  if (!j.ok()) return j.status();
  if (!j->is_object()) return Status::InvalidArgument("instance-action: expected a JSON object");
  auto action = j->find("action");
  auto time = j->find("time");
  if (action == j->end() || !action->is_string() || action->get<std::string>().empty()) {
    return Status::InvalidArgument("instance-action: no \"action\"");
  }
  if (time == j->end() || !time->is_string()) return Status::InvalidArgument("instance-action: no \"time\"");
  std::string t = time->get<std::string>();
  std::tm tm{};
  char z = 0;
  int n = std::sscanf(t.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                      &tm.tm_min, &tm.tm_sec, &z);
  if (n != 7 || z != 'Z' || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31) {
    return Status::InvalidArgument("instance-action: time '" + t + "' is not like 2026-12-02T15:04:05Z");
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  api::SpotNotice notice;
  notice.action = action->get<std::string>();
  notice.time = Time::FromMillis(static_cast<int64_t>(::timegm(&tm)) * 1000);
  return notice;
}

Result<std::pair<std::string, std::string>> SplitHttpUrl(const std::string& url) {
  const std::string scheme = "http://";
  if (url.compare(0, scheme.size(), scheme) != 0) {
    return Status::InvalidArgument("'" + url + "': expected an http:// URL");
  }
  size_t slash = url.find('/', scheme.size());
  std::string host = url.substr(0, slash);
  std::string path = slash == std::string::npos ? "/" : url.substr(slash);
  if (host.size() == scheme.size()) return Status::InvalidArgument("'" + url + "': no host");
  return std::make_pair(host, path);
}

Result<std::unique_ptr<SpotNoticePoller>> SpotNoticePoller::Create(const std::string& url) {
  GF_ASSIGN_OR_RETURN(auto parts, SplitHttpUrl(url));
  std::unique_ptr<SpotNoticePoller> p(new SpotNoticePoller());
  p->url_ = url;
  p->path_ = parts.second;
  p->http_ = std::make_unique<httplib::Client>(parts.first);
  if (!p->http_->is_valid()) return Status::InvalidArgument("'" + url + "': not a usable URL");
  p->http_->set_connection_timeout(1, 0);
  p->http_->set_read_timeout(2, 0);
  p->http_->set_write_timeout(2, 0);
  return p;
}

SpotNoticePoller::~SpotNoticePoller() = default;

void SpotNoticePoller::Cancel() { http_->stop(); }

std::optional<api::SpotNotice> SpotNoticePoller::Poll() {
  auto res = http_->Get(path_.c_str());
  std::string error;
  if (!res) {
    error = "cannot reach it (" + httplib::to_string(res.error()) + ")";
  } else if (res->status == 404) {
    last_error_.clear();
    return std::nullopt;
  } else if (res->status != 200) {
    error = "HTTP " + std::to_string(res->status);
  } else {
    auto notice = ParseInstanceAction(res->body);
    if (notice.ok()) return *notice;
    error = notice.status().message();
  }
  if (error != last_error_) {
    spdlog::warn("spot notice endpoint {}: {}; polling on", url_, error);
    last_error_ = error;
  }
  return std::nullopt;
}

}  // namespace gpufleet::agent
