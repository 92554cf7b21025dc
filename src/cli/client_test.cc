#include "cli/client.h"
#include "cli/client_common.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace gpufleet::cli {
namespace {

// A controller on 127.0.0.1: the leader answers {"served_by": NAME}; a standby answers 503 naming
// `leader` in X-Gpufleet-Leader, as `gpufleet server --leader-lease` does. Counts what it was sent.
class FakeController {
 public:
  FakeController(std::string name, std::optional<std::string> leader) : name_(std::move(name)), leader_(leader) {
    auto handle = [this](const httplib::Request&, httplib::Response& res) {
      ++requests_;
      std::optional<std::string> leader;
      {
        std::lock_guard<std::mutex> lock(mu_);
        leader = leader_;
      }
      if (leader) {
        res.status = 503;
        res.set_header("X-Gpufleet-Leader", *leader);
        res.set_content(R"({"error": {"code": "unavailable", "message": "not the leader; the leader is )" + *leader +
                            R"("}})",
                        "application/json");
        return;
      }
      res.set_content(R"({"served_by": ")" + name_ + R"("})", "application/json");
    };
    server_.Get("/v1/jobs", handle);
    server_.Post("/v1/jobs", handle);
    port_ = server_.bind_to_any_port("127.0.0.1");  // listening from here: connections wait in the backlog
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~FakeController() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_; }
  // From now on: the leader.
  void Lead() {
    std::lock_guard<std::mutex> lock(mu_);
    leader_.reset();
  }
  // From now on: a standby naming `leader`.
  void StandBy(const std::string& leader) {
    std::lock_guard<std::mutex> lock(mu_);
    leader_ = leader;
  }

 private:
  std::string name_;
  std::mutex mu_;
  std::optional<std::string> leader_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<int> requests_{0};
};

// A URL nothing listens on: a port that was bound, never listened on, and let go (connections
// to it are refused at once).
std::string DeadUrl() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  return "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
}

ApiClient ClientFor(const std::string& servers) {
  ClientConfig config;
  config.server = servers;
  config.source = "test";
  return ApiClient(config);
}

TEST(UsdTest, ALimitUnderACentKeepsItsDigitsWhereAmountsRoundToTheCent) {
  // Given a budget of $0.001 (it printed "$0.00", as if there were none) or $0.005, expect its
  // digits; whole cents print as amounts do.
  EXPECT_EQ(client::UsdExact(1000), "$0.001");
  EXPECT_EQ(client::UsdExact(5000), "$0.005");
  EXPECT_EQ(client::UsdExact(1234567), "$1.234567");
  EXPECT_EQ(client::UsdExact(20000000000), "$20000.00");
  EXPECT_EQ(client::UsdExact(10000), "$0.01");
  EXPECT_EQ(client::Usd(1000), "$0.00");
}

TEST(ApiClientTest, StandbyFirstSendsToTheLeaderItNamesAndRemembersIt) {
  // Given the standby first on the list and the leader second, expect a submit to reach the
  // leader through the standby's 503, and the next request to go straight to the leader.
  FakeController leader("leader", std::nullopt);
  FakeController standby("standby", leader.url());
  ApiClient client = ClientFor(standby.url() + "," + leader.url());
  ApiResult r = client.Post("/v1/jobs", nlohmann::json::object());
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.body["served_by"], "leader");
  EXPECT_EQ(client.server(), leader.url());
  ASSERT_TRUE(client.Get("/v1/jobs").ok());
  EXPECT_EQ(standby.requests(), 1);
  EXPECT_EQ(leader.requests(), 2);
}

// A directory for one test's remembered leaders, removed after it.
class LeaderMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpufleet-leader-memory.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  ApiClient Client(const std::string& servers) const {
    ClientConfig config;
    config.server = servers;
    config.source = "test";
    config.leader_memory_dir = dir_ + "/cache/gpufleet";
    return ApiClient(config);
  }
  std::string dir_;
};

TEST_F(LeaderMemoryTest, TheNextClientGoesStraightToTheLeaderTheLastOneFound) {
  // Given a standby first on the list, expect the first client to reach the leader through the
  // standby, and a second client (the next command) given the same list to send to the leader
  // without asking the standby again.
  FakeController leader("leader", std::nullopt);
  FakeController standby("standby", leader.url());
  const std::string list = standby.url() + "," + leader.url();
  {
    ApiClient first = Client(list);
    ASSERT_TRUE(first.Post("/v1/jobs", nlohmann::json::object()).ok());
  }
  EXPECT_EQ(standby.requests(), 1);
  ApiClient second = Client(list);
  EXPECT_EQ(second.server(), leader.url());
  ApiResult r = second.Get("/v1/jobs");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.body["served_by"], "leader");
  EXPECT_EQ(standby.requests(), 1);
  EXPECT_EQ(leader.requests(), 2);
  // The file is the user's alone.
  for (const auto& entry : std::filesystem::directory_iterator(dir_ + "/cache/gpufleet")) {
    EXPECT_EQ(entry.status().permissions() & std::filesystem::perms::group_all, std::filesystem::perms::none);
    EXPECT_EQ(entry.status().permissions() & std::filesystem::perms::others_all, std::filesystem::perms::none);
  }
}

TEST_F(LeaderMemoryTest, ARememberedLeaderThatStandsByNowSendsToTheNewOne) {
  // Given a remembered leader that has since become a standby naming another listed controller,
  // expect the next command served by the new leader and the memory moved to it.
  FakeController a("a", std::nullopt);
  FakeController b("b", a.url());
  const std::string list = b.url() + "," + a.url();
  ASSERT_TRUE(Client(list).Get("/v1/jobs").ok());
  EXPECT_EQ(Client(list).server(), a.url());
  a.StandBy(b.url());  // b took over
  b.Lead();
  ApiClient client = Client(list);
  EXPECT_EQ(client.server(), a.url());
  ApiResult r = client.Get("/v1/jobs");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.body["served_by"], "b");
  EXPECT_EQ(Client(list).server(), b.url());
}

TEST_F(LeaderMemoryTest, OneUrlOrAnUnwritableDirectoryRemembersNothingAndStillWorks) {
  // Given one URL, expect no memory file; given a directory that cannot be made (a file is in the
  // way), expect requests to be served all the same.
  FakeController leader("leader", std::nullopt);
  ASSERT_TRUE(Client(leader.url()).Get("/v1/jobs").ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/cache"));
  std::filesystem::create_directories(dir_ + "/cache");
  { std::ofstream(dir_ + "/cache/gpufleet") << "not a directory\n"; }
  FakeController standby("standby", leader.url());
  ApiClient client = Client(standby.url() + "," + leader.url());
  ApiResult r = client.Get("/v1/jobs");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.body["served_by"], "leader");
}

TEST(ApiClientTest, UnreachableControllerIsSkippedForTheNext) {
  // Given a controller that cannot be reached first, expect the request to be served by the next.
  FakeController leader("leader", std::nullopt);
  ApiClient client = ClientFor(DeadUrl() + "," + leader.url());
  ApiResult r = client.Get("/v1/jobs");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.body["served_by"], "leader");
  EXPECT_EQ(client.server(), leader.url());
}

TEST(ApiClientTest, LeaderNamedOutsideTheListIsFollowed) {
  // Given one URL, a standby naming a leader the client was not given, expect the leader to serve.
  FakeController leader("leader", std::nullopt);
  FakeController standby("standby", leader.url());
  ApiClient client = ClientFor(standby.url());
  ApiResult r = client.Get("/v1/jobs");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.body["served_by"], "leader");
}

TEST(ApiClientTest, OnlyStandbysAnswer503AfterEachWasTriedOnce) {
  // Given two standbys naming a leader that cannot be reached, expect the standby's 503 (exit 1,
  // its message) once each URL and the named leader were tried, each once: no loop.
  const std::string gone = DeadUrl();
  FakeController a("a", gone);
  FakeController b("b", gone);
  ApiClient client = ClientFor(a.url() + "," + b.url());
  ApiResult r = client.Get("/v1/jobs");
  EXPECT_EQ(r.http_status, 503);
  EXPECT_EQ(r.exit_code, kExitFailed);
  EXPECT_NE(r.error.find("not the leader"), std::string::npos) << r.error;
  EXPECT_EQ(a.requests(), 1);
  EXPECT_EQ(b.requests(), 1);
}

TEST(ApiClientTest, NoControllerReachableSaysWhichWereTried) {
  // Given two URLs nothing listens on, expect exit 3 and a message naming both.
  const std::string a = DeadUrl(), b = DeadUrl();
  ApiClient client = ClientFor(a + "," + b);
  ApiResult r = client.Get("/v1/jobs");
  EXPECT_EQ(r.exit_code, kExitUnreachable);
  EXPECT_NE(r.error.find(a + "," + b), std::string::npos) << r.error;
}

TEST(ApiClientTest, EntryThatIsNotAUrlIsAUsageError) {
  // Given a list with an entry without a scheme, expect CheckServer to name it.
  ApiClient client = ClientFor("http://127.0.0.1:1,controller:8470");
  EXPECT_NE(client.CheckServer().find("'controller:8470'"), std::string::npos) << client.CheckServer();
  EXPECT_EQ(client.Get("/v1/jobs").exit_code, kExitUsage);
}

TEST(RedactSecretsTest, TokensInEchoedTextAreCutToTheirPrefix) {
  // Given a parse error that quotes a token typed where it did not belong, expect the secret gone
  // and its kind kept; text that only looks like the prefix stays as it is.
  EXPECT_EQ(client::RedactSecrets("not expected: gf_user_37e6b6aab1940df1005b37c023193387 --token"),
            "not expected: gf_user_\u2026 --token");
  EXPECT_EQ(client::RedactSecrets("gf_join_0123456789abcdef,gf_admin_ffffffffffff"), "gf_join_\u2026,gf_admin_\u2026");
  EXPECT_EQ(client::RedactSecrets("gf_ gf_user gf_user_12 gf__abcdef0123 gf_x_zz"), "gf_ gf_user gf_user_12 gf__abcdef0123 gf_x_zz");
  EXPECT_EQ(client::RedactSecrets(""), "");
}

TEST(PrintableTest, ControlCharactersFromTheControllerCannotReachTheTerminalRaw) {
  // Given text with an erase-line sequence, a bare CR, a newline, DEL and UTF-8's CSI (U+009B),
  // expect each written visibly and plain text, tabs aside, unchanged (é and ° kept as UTF-8).
  EXPECT_EQ(client::Printable("ok \x1b[2K\x1b[1Agone"), "ok \\x1b[2K\\x1b[1Agone");
  EXPECT_EQ(client::Printable("a\rb\nc\td\x7f"), "a\\rb\\nc\\td\\x7f");
  EXPECT_EQ(client::Printable("x\xc2\x9b" "31my"), "x\\x9b31my");
  EXPECT_EQ(client::Printable("caf\xc3\xa9 at 90 \xc2\xb0" "C"), "caf\xc3\xa9 at 90 \xc2\xb0" "C");
  EXPECT_EQ(client::Printable(""), "");
}

}  // namespace
}  // namespace gpufleet::cli

namespace gpufleet::cli {
namespace {

TEST(LogPrinterTest, PartsLinesArePrefixedWholeWithTheirBytes) {
  // Given output of two parts, interleaved, with a NUL and bytes that are not UTF-8 in a line and
  // an unfinished last line, expect each line with its part's prefix and every byte of it.
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  client::LogPrinter printer(out);
  printer.Write(0, std::string("bin:\0\x01\xff\xfe tail\nhal", 17), true);
  printer.Write(1, "one\n", true);
  printer.Write(0, "f\nlast", true);
  printer.Flush();
  std::rewind(out);
  std::string got;
  for (int c; (c = std::fgetc(out)) != EOF;) got += static_cast<char>(c);
  std::fclose(out);
  EXPECT_EQ(got, std::string("[part 0] bin:\0\x01\xff\xfe tail\n[part 1] one\n[part 0] half\n[part 0] last\n", 64));
}

TEST(RuntimeTest, AStopsGraceCountsAsRuntimeAndEachRunAddsUp) {
  // Given a job that ran 10 s, was preempted with a 5 s stop, waited, ran 20 s and was cancelled
  // with a 30 s stop, expect 65 s: the graces held the GPUs (and were billed) too; and a job
  // running since 100 s to count until now.
  using api::JobState;
  auto t = [](int64_t s, JobState from, JobState to) { return api::Transition{Time::FromSeconds(s), from, to, ""}; };
  std::vector<api::Transition> h = {
      t(0, JobState::kPending, JobState::kStarting),   t(1, JobState::kStarting, JobState::kRunning),
      t(11, JobState::kRunning, JobState::kStopping),  t(16, JobState::kStopping, JobState::kPreempted),
      t(16, JobState::kPreempted, JobState::kPending), t(40, JobState::kPending, JobState::kStarting),
      t(40, JobState::kStarting, JobState::kRunning),  t(60, JobState::kRunning, JobState::kStopping),
      t(90, JobState::kStopping, JobState::kCancelled)};
  EXPECT_EQ(client::RuntimeMs(h, 1'000'000), 65'000);
  std::vector<api::Transition> running = {t(100, JobState::kStarting, JobState::kRunning)};
  EXPECT_EQ(client::RuntimeMs(running, 130'000), 30'000);
}

}  // namespace
}  // namespace gpufleet::cli
