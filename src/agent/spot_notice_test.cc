// Tests of the spot notice parser and poller against an endpoint served on 127.0.0.1.
#include "agent/spot_notice.h"

#include <httplib.h>

#include <atomic>
#include <thread>

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

}  // namespace
}  // namespace gpufleet::agent
