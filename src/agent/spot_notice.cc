#include "agent/spot_notice.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "api/codec.h"
#include "common/iso_time.h"

namespace gpufleet::agent {
namespace {

// IMDSv2 tokens live up to six hours; the one asked for is renewed a minute before it expires.
constexpr int kTokenTtlSeconds = 21600;
constexpr Duration kTokenRenewMargin = Duration::Seconds(60);
constexpr const char* kTokenPath = "/latest/api/token";

}  // namespace

Result<SpotNoticeFormat> ParseSpotNoticeFormat(const std::string& text) {
  if (text == "aws") return SpotNoticeFormat::kAws;
  if (text == "gcp") return SpotNoticeFormat::kGcp;
  if (text == "azure") return SpotNoticeFormat::kAzure;
  return Status::InvalidArgument("unknown spot notice format '" + text + "' (expected aws, gcp or azure)");
}

const char* SpotNoticeFormatName(SpotNoticeFormat format) {
  switch (format) {
    case SpotNoticeFormat::kAws: return "aws";
    case SpotNoticeFormat::kGcp: return "gcp";
    case SpotNoticeFormat::kAzure: return "azure";
  }
  return "?";
}

Result<Time> ParseRfc1123(const std::string& text) {
  static const char* const kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  char weekday[4] = {0}, month[4] = {0}, zone[4] = {0};
  std::tm tm{};
  int consumed = 0;
  int n = std::sscanf(text.c_str(), "%3[A-Za-z], %2d %3[A-Za-z] %4d %2d:%2d:%2d %3[A-Z]%n", weekday, &tm.tm_mday,
                      month, &tm.tm_year, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, zone, &consumed);
  tm.tm_mon = -1;
  for (int i = 0; i < 12; ++i) {
    if (std::strcmp(month, kMonths[i]) == 0) tm.tm_mon = i;
  }
  if (n != 8 || static_cast<size_t>(consumed) != text.size() || std::strcmp(zone, "GMT") != 0 || tm.tm_mon < 0 ||
      tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60) {
    return Status::InvalidArgument("'" + text + "' is not a date like Mon, 19 Sep 2016 18:29:47 GMT");
  }
  auto days = DaysFromCivil(tm.tm_year, tm.tm_mon + 1, tm.tm_mday);
  if (!days) return Status::InvalidArgument("'" + text + "' is not a date that exists");
  return Time::FromSeconds(*days * 86400 + tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec);
}

Result<std::optional<api::SpotNotice>> ParseScheduledEvents(const std::string& body, Time now) {
  auto j = api::ParseJson(body);
  if (!j.ok()) return j.status();
  if (!j->is_object()) return Status::InvalidArgument("scheduled events: expected a JSON object");
  auto events = j->find("Events");
  if (events == j->end() || !events->is_array()) return Status::InvalidArgument("scheduled events: no \"Events\" array");
  for (const auto& e : *events) {
    if (!e.is_object()) return Status::InvalidArgument("scheduled events: an event is not an object");
    auto type = e.find("EventType");
    if (type == e.end() || !type->is_string() || type->get<std::string>() != "Preempt") continue;
    api::SpotNotice notice;
    notice.action = "terminate";  // Preempt with the Delete eviction policy; a Deallocate one stops
    notice.time = now;
    auto not_before = e.find("NotBefore");
    if (not_before != e.end() && not_before->is_string() && !not_before->get<std::string>().empty()) {
      auto t = ParseRfc1123(not_before->get<std::string>());
      if (!t.ok()) return t.status().WithContext("scheduled events: NotBefore");
      notice.time = *t;
    }
    return std::optional<api::SpotNotice>(notice);
  }
  return std::optional<api::SpotNotice>();
}

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
  auto when = ReadIsoTime(t, {.require_time = true, .require_zone = true});
  if (!when.ok()) return when.status().WithContext("instance-action: time");
  if (t.back() != 'Z') {
    // AWS writes this time in UTC; an offset means the document is not AWS's.
    return Status::InvalidArgument("instance-action: time '" + t + "' is not in UTC like 2026-12-02T15:04:05Z");
  }
  api::SpotNotice notice;
  notice.action = action->get<std::string>();
  notice.time = *when;
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

Result<std::unique_ptr<SpotNoticePoller>> SpotNoticePoller::Create(const std::string& url, SpotNoticeFormat format,
                                                                   std::function<Time()> now) {
  GF_ASSIGN_OR_RETURN(auto parts, SplitHttpUrl(url));
  std::unique_ptr<SpotNoticePoller> p(new SpotNoticePoller());
  p->url_ = url;
  p->path_ = parts.second;
  p->format_ = format;
  p->now_ = now ? std::move(now) : std::function<Time()>(WallNow);
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
  Result<std::optional<api::SpotNotice>> got = std::optional<api::SpotNotice>();
  switch (format_) {
    case SpotNoticeFormat::kAws: got = PollAws(); break;
    case SpotNoticeFormat::kGcp: got = PollGcp(); break;
    case SpotNoticeFormat::kAzure: got = PollAzure(); break;
  }
  if (got.ok()) {
    last_error_.clear();
    return *got;
  }
  if (got.status().message() != last_error_) {
    spdlog::warn("spot notice endpoint {}: {}; polling on", url_, got.status().message());
    last_error_ = got.status().message();
  }
  return std::nullopt;
}

namespace {

Status HttpError(const httplib::Result& res) {
  if (!res) return Status::Unavailable("cannot reach it (" + httplib::to_string(res.error()) + ")");
  return Status::Unavailable("HTTP " + std::to_string(res->status));
}

}  // namespace

Status SpotNoticePoller::RenewToken() {
  token_.clear();
  httplib::Headers headers = {{"X-aws-ec2-metadata-token-ttl-seconds", std::to_string(kTokenTtlSeconds)}};
  Time asked = now_();
  auto res = http_->Put(kTokenPath, headers, "", "text/plain");
  if (res && (res->status == 403 || res->status == 404 || res->status == 405 ||
              res->status == 501)) {
    spdlog::warn("spot notice endpoint {}: no IMDSv2 token (PUT {}: HTTP {}); reading it with IMDSv1 from now on",
                 url_, kTokenPath, res->status);
    imds_v1_ = true;
    return Status::Ok();
  }
  if (!res || res->status != 200) return HttpError(res).WithContext(std::string("IMDSv2 token ") + kTokenPath);
  if (res->body.empty()) return Status::Unavailable(std::string("IMDSv2 token ") + kTokenPath + ": empty answer");
  token_ = res->body;
  token_renew_at_ = asked + Duration::Seconds(kTokenTtlSeconds) - kTokenRenewMargin;
  return Status::Ok();
}

Result<std::optional<api::SpotNotice>> SpotNoticePoller::PollAws() {
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!imds_v1_ && (token_.empty() || now_() >= token_renew_at_)) GF_RETURN_IF_ERROR(RenewToken());
    httplib::Headers headers;
    if (!imds_v1_) headers.emplace("X-aws-ec2-metadata-token", token_);
    auto res = http_->Get(path_.c_str(), headers);
    if (res && res->status == 401 && !imds_v1_ && attempt == 0) {
      token_.clear();  // expired or revoked early: one more try with a new one
      continue;
    }
    if (res && res->status == 404) return std::optional<api::SpotNotice>();
    if (!res || res->status != 200) return HttpError(res);
    GF_ASSIGN_OR_RETURN(api::SpotNotice notice, ParseInstanceAction(res->body));
    return std::optional<api::SpotNotice>(notice);
  }
  return Status::Unavailable("HTTP 401 with a new IMDSv2 token");
}

Result<std::optional<api::SpotNotice>> SpotNoticePoller::PollGcp() {
  auto res = http_->Get(path_.c_str(), httplib::Headers{{"Metadata-Flavor", "Google"}});
  if (!res || res->status != 200) return HttpError(res);
  std::string body = res->body;
  while (!body.empty() && std::isspace(static_cast<unsigned char>(body.back()))) body.pop_back();
  if (body == "FALSE") return std::optional<api::SpotNotice>();
  if (body != "TRUE") return Status::InvalidArgument("preempted: expected TRUE or FALSE, got '" + body.substr(0, 40) + "'");
  api::SpotNotice notice;
  notice.action = "terminate";
  notice.time = now_();
  return std::optional<api::SpotNotice>(notice);
}

Result<std::optional<api::SpotNotice>> SpotNoticePoller::PollAzure() {
  auto res = http_->Get(path_.c_str(), httplib::Headers{{"Metadata", "true"}});
  if (!res || res->status != 200) return HttpError(res);
  return ParseScheduledEvents(res->body, now_());
}

}  // namespace gpufleet::agent
