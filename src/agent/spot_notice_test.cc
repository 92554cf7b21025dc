// Tests of the spot notice parser and poller against an endpoint served on 127.0.0.1.
#include "agent/spot_notice.h"

#include <httplib.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace gpufleet::agent {
namespace {

TEST(SpotNoticeTest, ParsesTheAwsInstanceActionDocument) {
  auto n = ParseInstanceAction(R"({"action": "terminate", "time": "2026-12-02T15:04:05Z"})");
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(n->action, "terminate");
  EXPECT_EQ(n->time.millis(), 1796223845000);  // date -u -d 2026-12-02T15:04:05Z +%s
  EXPECT_EQ(ParseInstanceAction(R"({"action": "stop", "time": "2026-01-01T00:00:00Z"})")->action, "stop");
}

TEST(SpotNoticeTest, RejectsDocumentsItCannotRead) {
  EXPECT_FALSE(ParseInstanceAction("not json").ok());
  EXPECT_FALSE(ParseInstanceAction(R"({"time": "2026-12-02T15:04:05Z"})").ok());
  EXPECT_FALSE(ParseInstanceAction(R"({"action": "terminate"})").ok());
  EXPECT_FALSE(ParseInstanceAction(R"({"action": "terminate", "time": "tomorrow"})").ok());
  EXPECT_FALSE(ParseInstanceAction(R"({"action": "terminate", "time": "2026-12-02T15:04:05+01:00"})").ok());
}

TEST(SpotNoticeTest, SplitsOnlyHttpUrls) {
  auto s = SplitHttpUrl("http://169.254.169.254/latest/meta-data/spot/instance-action");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->first, "http://169.254.169.254");
  EXPECT_EQ(s->second, "/latest/meta-data/spot/instance-action");
  EXPECT_EQ(SplitHttpUrl("http://127.0.0.1:8080")->second, "/");
  EXPECT_FALSE(SplitHttpUrl("https://example/x").ok());
  EXPECT_FALSE(SplitHttpUrl("http:///x").ok());
  EXPECT_FALSE(SpotNoticePoller::Create("ftp://127.0.0.1/x").ok());
}

TEST(SpotNoticeTest, PollerSeesNothingOn404OrErrorsAndTheNoticeOn200) {
  std::atomic<int> mode{404};
  httplib::Server server;
  server.Get("/latest/meta-data/spot/instance-action", [&](const httplib::Request&, httplib::Response& res) {
    res.status = mode.load();
    if (mode == 200) res.set_content(R"({"action": "stop", "time": "2026-12-02T15:04:05Z"})", "text/plain");
    if (mode == 500) res.set_content("oops", "text/plain");
  });
  int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread t([&] { server.listen_after_bind(); });

  auto poller = SpotNoticePoller::Create("http://127.0.0.1:" + std::to_string(port) +
                                         "/latest/meta-data/spot/instance-action");
  ASSERT_TRUE(poller.ok()) << poller.status().message();
  EXPECT_FALSE((*poller)->Poll().has_value());
  mode = 500;
  EXPECT_FALSE((*poller)->Poll().has_value());
  mode = 200;
  auto n = (*poller)->Poll();
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->action, "stop");
  EXPECT_EQ(n->time.millis(), 1796223845000);
  server.stop();
  t.join();
  // The endpoint is gone: no notice, no hang.
  EXPECT_FALSE((*poller)->Poll().has_value());
}

// A metadata endpoint on 127.0.0.1 (port 0), served until the object dies.
class LocalEndpoint {
 public:
  explicit LocalEndpoint(httplib::Server& server) : server_(server) {
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~LocalEndpoint() {
    server_.stop();
    thread_.join();
  }
  std::string Url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }
  int port() const { return port_; }

 private:
  httplib::Server& server_;
  int port_ = 0;
  std::thread thread_;
};

TEST(SpotNoticeTest, ParsesFormatNames) {
  EXPECT_EQ(*ParseSpotNoticeFormat("aws"), SpotNoticeFormat::kAws);
  EXPECT_EQ(*ParseSpotNoticeFormat("gcp"), SpotNoticeFormat::kGcp);
  EXPECT_EQ(*ParseSpotNoticeFormat("azure"), SpotNoticeFormat::kAzure);
  auto bad = ParseSpotNoticeFormat("AWS");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("aws, gcp or azure"), std::string::npos) << bad.status().message();
  EXPECT_STREQ(SpotNoticeFormatName(SpotNoticeFormat::kAzure), "azure");
}

TEST(SpotNoticeTest, ParsesRfc1123Dates) {
  auto t = ParseRfc1123("Mon, 19 Sep 2016 18:29:47 GMT");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->millis(), 1474309787000);  // date -u -d '2016-09-19 18:29:47' +%s
  EXPECT_EQ(ParseRfc1123("Wed, 02 Dec 2026 15:04:05 GMT")->millis(), 1796223845000);
  EXPECT_FALSE(ParseRfc1123("2016-09-19T18:29:47Z").ok());
  EXPECT_FALSE(ParseRfc1123("Mon, 19 Sep 2016 18:29:47 CET").ok());
  EXPECT_FALSE(ParseRfc1123("Mon, 19 Foo 2016 18:29:47 GMT").ok());
  EXPECT_FALSE(ParseRfc1123("Mon, 19 Sep 2016 18:29:47 GMT trailing").ok());
}

TEST(SpotNoticeTest, ScheduledEventsGiveTheFirstPreemptEvent) {
  // Given Azure's documented document with a Freeze and then a Preempt event, expect the Preempt.
  const Time now = Time::FromSeconds(1474309700);
  auto n = ParseScheduledEvents(R"({"DocumentIncarnation": 2, "Events": [
      {"EventId": "A", "EventType": "Freeze", "ResourceType": "VirtualMachine", "Resources": ["vm1"],
       "EventStatus": "Scheduled", "NotBefore": "Mon, 19 Sep 2016 18:20:00 GMT"},
      {"EventId": "B", "EventType": "Preempt", "ResourceType": "VirtualMachine", "Resources": ["vm1"],
       "EventStatus": "Scheduled", "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT", "Description": "",
       "EventSource": "Platform", "DurationInSeconds": -1}]})", now);
  ASSERT_TRUE(n.ok()) << n.status().message();
  ASSERT_TRUE(n->has_value());
  EXPECT_EQ((*n)->action, "terminate");
  EXPECT_EQ((*n)->time.millis(), 1474309787000);
  // No NotBefore (an event already started): now.
  auto started = ParseScheduledEvents(R"({"Events": [{"EventType": "Preempt", "NotBefore": ""}]})", now);
  ASSERT_TRUE(started.ok() && started->has_value());
  EXPECT_EQ((*started)->time.millis(), now.millis());
  auto none = ParseScheduledEvents(R"({"DocumentIncarnation": 1, "Events": []})", now);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  EXPECT_FALSE(ParseScheduledEvents("[]", now).ok());
  EXPECT_FALSE(ParseScheduledEvents(R"({"Events": [{"EventType": "Preempt", "NotBefore": "soon"}]})", now).ok());
}

TEST(SpotNoticeTest, AwsPollerUsesAnImdsV2TokenAndRenewsItBeforeItExpires) {
  // Given an endpoint that answers only with a token it handed out, expect one PUT, GETs that
  // carry the token, and a new PUT once the clock reaches the token's last minute.
  std::mutex mu;
  std::vector<std::string> puts;  // the TTL header of each PUT
  std::vector<std::string> seen;  // the token header of each GET
  int tokens = 0;
  bool notice = false;
  httplib::Server server;
  server.Put("/latest/api/token", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu);
    puts.push_back(req.get_header_value("X-aws-ec2-metadata-token-ttl-seconds"));
    res.set_content("token-" + std::to_string(++tokens), "text/plain");
  });
  server.Get("/latest/meta-data/spot/instance-action", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu);
    std::string token = req.get_header_value("X-aws-ec2-metadata-token");
    seen.push_back(token);
    if (token != "token-" + std::to_string(tokens)) {
      res.status = 401;
      return;
    }
    res.status = notice ? 200 : 404;
    if (notice) res.set_content(R"({"action": "terminate", "time": "2026-12-02T15:04:05Z"})", "text/plain");
  });
  LocalEndpoint endpoint(server);
  Time now = Time::FromSeconds(1000);
  auto poller = SpotNoticePoller::Create(endpoint.Url("/latest/meta-data/spot/instance-action"),
                                         SpotNoticeFormat::kAws, [&] { return now; });
  ASSERT_TRUE(poller.ok()) << poller.status().message();
  EXPECT_FALSE((*poller)->Poll().has_value());
  now += Duration::Seconds(21600 - 61);
  EXPECT_FALSE((*poller)->Poll().has_value());
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(puts, std::vector<std::string>{"21600"});
    EXPECT_EQ(seen, (std::vector<std::string>{"token-1", "token-1"}));
  }
  now += Duration::Seconds(1);  // a minute before it expires
  {
    std::lock_guard<std::mutex> lock(mu);
    notice = true;
  }
  auto n = (*poller)->Poll();
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->action, "terminate");
  EXPECT_EQ(n->time.millis(), 1796223845000);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(puts.size(), 2u);
  EXPECT_EQ(seen.back(), "token-2");
}

TEST(SpotNoticeTest, AwsPollerRenewsTheTokenOn401) {
  // Given an endpoint that revokes its token early (401), expect a new token and the GET again,
  // within the same Poll.
  std::mutex mu;
  int tokens = 0;
  std::vector<std::string> seen;
  httplib::Server server;
  server.Put("/latest/api/token", [&](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu);
    res.set_content("t" + std::to_string(++tokens), "text/plain");
  });
  server.Get("/latest/meta-data/spot/instance-action", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(req.get_header_value("X-aws-ec2-metadata-token"));
    res.status = req.get_header_value("X-aws-ec2-metadata-token") == "t2" ? 200 : 401;
    if (res.status == 200) res.set_content(R"({"action": "stop", "time": "2026-12-02T15:04:05Z"})", "text/plain");
  });
  LocalEndpoint endpoint(server);
  auto poller = SpotNoticePoller::Create(endpoint.Url("/latest/meta-data/spot/instance-action"),
                                         SpotNoticeFormat::kAws, [] { return Time::FromSeconds(1000); });
  ASSERT_TRUE(poller.ok());
  auto n = (*poller)->Poll();
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->action, "stop");
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(seen, (std::vector<std::string>{"t1", "t2"}));
}

TEST(SpotNoticeTest, AwsPollerFallsBackToImdsV1WhenThereIsNoTokenEndpoint) {
  // Given an endpoint without PUT /latest/api/token (405, like the local provider's), expect
  // plain GETs without a token from then on, and no further PUTs.
  std::atomic<int> puts{0};
  std::atomic<int> gets_with_token{0};
  httplib::Server server;
  server.Put("/latest/api/token", [&](const httplib::Request&, httplib::Response& res) {
    ++puts;
    res.status = 405;
  });
  server.Get("/latest/meta-data/spot/instance-action", [&](const httplib::Request& req, httplib::Response& res) {
    if (req.has_header("X-aws-ec2-metadata-token")) ++gets_with_token;
    res.status = 200;
    res.set_content(R"({"action": "terminate", "time": "2026-12-02T15:04:05Z"})", "text/plain");
  });
  LocalEndpoint endpoint(server);
  auto poller = SpotNoticePoller::Create(endpoint.Url("/latest/meta-data/spot/instance-action"));
  ASSERT_TRUE(poller.ok());
  EXPECT_TRUE((*poller)->Poll().has_value());
  EXPECT_TRUE((*poller)->Poll().has_value());
  EXPECT_EQ(puts.load(), 1);
  EXPECT_EQ(gets_with_token.load(), 0);
}

TEST(SpotNoticeTest, AwsPollerReportsNothingWhileTheTokenEndpointFails) {
  // Given a token endpoint that answers 500, expect no notice and no GET without a token.
  std::atomic<int> gets{0};
  httplib::Server server;
  server.Put("/latest/api/token", [&](const httplib::Request&, httplib::Response& res) { res.status = 500; });
  server.Get("/latest/meta-data/spot/instance-action", [&](const httplib::Request&, httplib::Response& res) {
    ++gets;
    res.status = 404;
  });
  LocalEndpoint endpoint(server);
  auto poller = SpotNoticePoller::Create(endpoint.Url("/latest/meta-data/spot/instance-action"));
  ASSERT_TRUE(poller.ok());
  EXPECT_FALSE((*poller)->Poll().has_value());
  EXPECT_EQ(gets.load(), 0);
}

TEST(SpotNoticeTest, GcpPollerTurnsPreemptedTrueIntoANoticeAtNow) {
  // Given GCE's preempted endpoint, expect the Metadata-Flavor header, nothing while it says
  // FALSE, and a terminate notice stamped with the poller's clock once it says TRUE.
  std::atomic<bool> preempted{false};
  std::atomic<int> without_header{0};
  httplib::Server server;
  server.Get("/computeMetadata/v1/instance/preempted", [&](const httplib::Request& req, httplib::Response& res) {
    if (req.get_header_value("Metadata-Flavor") != "Google") {
      ++without_header;
      res.status = 403;
      return;
    }
    res.set_content(preempted ? "TRUE" : "FALSE", "application/text");
  });
  LocalEndpoint endpoint(server);
  const Time now = Time::FromSeconds(1796223845);
  auto poller = SpotNoticePoller::Create(endpoint.Url("/computeMetadata/v1/instance/preempted"),
                                         SpotNoticeFormat::kGcp, [&] { return now; });
  ASSERT_TRUE(poller.ok());
  EXPECT_FALSE((*poller)->Poll().has_value());
  preempted = true;
  auto n = (*poller)->Poll();
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->action, "terminate");
  EXPECT_EQ(n->time.millis(), now.millis());
  EXPECT_EQ(without_header.load(), 0);
}

TEST(SpotNoticeTest, AzurePollerTurnsAPreemptEventIntoANotice) {
  // Given Scheduled Events with no event, then a Reboot, then a Preempt, expect a notice only
  // for the Preempt, at its NotBefore; every request carries Metadata: true.
  std::atomic<int> stage{0};
  std::atomic<int> without_header{0};
  httplib::Server server;
  server.Get("/metadata/scheduledevents", [&](const httplib::Request& req, httplib::Response& res) {
    if (req.get_header_value("Metadata") != "true" || req.get_param_value("api-version") != "2020-07-01") {
      ++without_header;
      res.status = 400;
      return;
    }
    const char* bodies[] = {
        R"({"DocumentIncarnation": 0, "Events": []})",
        R"({"DocumentIncarnation": 1, "Events": [{"EventId": "r", "EventType": "Reboot",
            "ResourceType": "VirtualMachine", "Resources": ["vm1"], "EventStatus": "Scheduled",
            "NotBefore": "Wed, 02 Dec 2026 15:00:00 GMT"}]})",
        R"({"DocumentIncarnation": 2, "Events": [{"EventId": "p", "EventType": "Preempt",
            "ResourceType": "VirtualMachine", "Resources": ["vm1"], "EventStatus": "Scheduled",
            "NotBefore": "Wed, 02 Dec 2026 15:04:05 GMT", "EventSource": "Platform"}]})"};
    res.set_content(bodies[stage.load()], "application/json");
  });
  LocalEndpoint endpoint(server);
  auto poller = SpotNoticePoller::Create(endpoint.Url("/metadata/scheduledevents?api-version=2020-07-01"),
                                         SpotNoticeFormat::kAzure, [] { return Time::FromSeconds(1); });
  ASSERT_TRUE(poller.ok());
  EXPECT_FALSE((*poller)->Poll().has_value());
  stage = 1;
  EXPECT_FALSE((*poller)->Poll().has_value());
  stage = 2;
  auto n = (*poller)->Poll();
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->action, "terminate");
  EXPECT_EQ(n->time.millis(), 1796223845000);
  EXPECT_EQ(without_header.load(), 0);
}

}  // namespace
}  // namespace gpufleet::agent
