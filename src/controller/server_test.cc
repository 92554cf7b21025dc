// The API server over real HTTP on 127.0.0.1: the attacks of docs/security.md, each tried, each
// answered with the documented 4xx and no change to the store.
#include "controller/server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "api/codec.h"
#include "controller/auth.h"
#include "controller/http_listener.h"
#include "controller/rbac.h"
#include "controller/tls.h"
#include "testing/memory_store.h"

namespace gpufleet::controller {
namespace {

using nlohmann::json;

// The wall clock, moved forward on demand (token expiry).
class WallClock : public sched::Clock {
 public:
  Time Now() const override { return WallNow() + Duration::Millis(shift_ms_.load()); }
  void Advance(Duration d) { shift_ms_ += d.millis(); }

 private:
  std::atomic<int64_t> shift_ms_{0};
};

// A raw TCP connection from `from` (any 127.0.0.0/8 address) to 127.0.0.1:port.
int Connect(int port, const char* from = "127.0.0.1") {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  ::inet_pton(AF_INET, from, &local.sin_addr);
  ::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{30, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.find("\r\n\r\n") != std::string::npos && out.find("}\n") != std::string::npos) break;
  }
  return out;
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("gf-server-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    auth_ = std::make_unique<Authenticator>(store_);
    admin_ = *auth_->Create(api::TokenKind::kUser, "admin", "admin", "", WallNow());
    alice_ = *auth_->Create(api::TokenKind::kUser, "alice", "user", "vision", WallNow());
    bob_ = *auth_->Create(api::TokenKind::kUser, "bob", "user", "nlp", WallNow());
    join_ = *auth_->Create(api::TokenKind::kJoin, "", "agent", "", WallNow());
    EngineOptions eo;
    eo.policy = "fifo";
    eo.checkpoint_root = (dir_ / "ckpt").string();
    engine_ = std::make_unique<Engine>(clock_, store_, eo);
    ASSERT_TRUE(engine_->Recover().ok());
    ServerOptions so;
    so.port = 0;
    so.agent_port = 0;
    so.data_dir = dir_.string();
    so.max_body_bytes = 64 * 1024;
    so.max_page = 3;
    so.user_map.teams["vision"] = "gf-vision";
    so.user_map.subjects["mapped"] = "gf-mapped";
    Configure(so);
    server_ = std::make_unique<ApiServer>(*engine_, store_, *auth_, clock_, so);
    ASSERT_TRUE(server_->Start().ok());
    engine_thread_ = std::thread([this] { engine_->Run(); });
  }
  // Options a test fixture changes before the server starts.
  virtual void Configure(ServerOptions& so) {}
  void TearDown() override {
    engine_->ReleasePollers();
    server_->Stop();
    engine_->Stop();
    engine_thread_.join();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  httplib::Result Call(const std::string& method, const std::string& path, const std::string& token,
                       const std::string& body = "", bool agent_port = false) {
    httplib::Client c("127.0.0.1", agent_port ? server_->agent_port() : server_->port());
    c.set_read_timeout(60, 0);
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    if (method == "GET") return c.Get(path.c_str(), h);
    return c.Post(path.c_str(), h, body, "application/json");
  }
  json Body(const httplib::Result& r) {
    auto j = api::ParseJson(r->body);
    return j.ok() ? *j : json();
  }
  size_t StoredJobs() {
    auto jobs = store_.ListJobs({});
    return jobs.ok() ? jobs->size() : 0;
  }
  static std::string RegisterBody(const std::string& name) {
    api::RegisterRequest req;
    req.name = name;
    req.address = "127.0.0.1";
    req.spec.gpu_model = "H100";
    req.spec.gpus = 1;
    req.version = "test";
    return api::ToJson(req).dump();
  }
  std::string RegisterNode(const std::string& name) {
    auto r = Call("POST", "/v1/agents/register", join_, RegisterBody(name), true);
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    return r && r->status == 200 ? Body(r).value("token", "") : "";
  }

  std::filesystem::path dir_;
  WallClock clock_;
  testing::MemoryStore store_;
  std::unique_ptr<Authenticator> auth_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ApiServer> server_;
  std::thread engine_thread_;
  std::string admin_, alice_, bob_, join_;
};

const char* kJob = R"({"job": {"name": "j", "team": "vision", "resources": {"gpus": 1}, "run": ["true"]}, )";

TEST_F(ServerTest, RequestIdReusedForOtherJobsIsAConflictAndIdsAreScopedPerCaller) {
  // Given alice's submit with request id r1, expect the same body again to return the same job,
  // another body under r1 to be 409 with nothing stored, and bob's r1 to be his own submission.
  auto first = Call("POST", "/v1/jobs", alice_, std::string(kJob) + R"("request_id": "r1"})");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 201) << first->body;
  auto again = Call("POST", "/v1/jobs", alice_, std::string(kJob) + R"("request_id": "r1"})");
  EXPECT_EQ(again->status, 200) << again->body;
  {
    // The retry's audit record says it submitted nothing new.
    store::AuditFilter f;
    f.verb = "job.submit";
    auto records = store_.ListAudit(f);
    ASSERT_TRUE(records.ok() && !records->empty());
    EXPECT_NE(records->back().reason.find("a retry of request r1"), std::string::npos) << records->back().reason;
  }
  EXPECT_EQ(Body(again)["jobs"][0]["id"], Body(first)["jobs"][0]["id"]);
  EXPECT_EQ(Body(again)["jobs"][0]["name"], Body(first)["jobs"][0]["name"]) << "a retry names the job it gets back";
  auto other = Call("POST", "/v1/jobs", alice_,
                    R"({"job": {"name": "other", "team": "vision", "resources": {"gpus": 1}, "run": ["false"]},
                        "request_id": "r1"})");
  EXPECT_EQ(other->status, 409) << other->body;
  EXPECT_EQ(StoredJobs(), 1u);
  auto bobs = Call("POST", "/v1/jobs", bob_,
                   R"({"job": {"name": "b", "team": "nlp", "resources": {"gpus": 1}, "run": ["true"]},
                       "request_id": "r1"})");
  EXPECT_EQ(bobs->status, 201) << bobs->body;
  EXPECT_EQ(StoredJobs(), 2u);
  // Two tokens of one team that name no subject: each its own request ids.
  std::string t1 = *auth_->Create(api::TokenKind::kUser, "", "user", "vision", WallNow());
  std::string t2 = *auth_->Create(api::TokenKind::kUser, "", "user", "vision", WallNow());
  auto one = Call("POST", "/v1/jobs", t1, std::string(kJob) + R"("request_id": "train"})");
  EXPECT_EQ(one->status, 201) << one->body;
  auto two = Call("POST", "/v1/jobs", t2, std::string(kJob) + R"("request_id": "train"})");
  EXPECT_EQ(two->status, 201) << two->body;
  EXPECT_NE(Body(two)["jobs"][0]["id"], Body(one)["jobs"][0]["id"]);
  EXPECT_EQ(StoredJobs(), 4u);
  // A team-admin's person (subject "vision/erin") and a token whose subject is "vision": erin's
  // "r2" and the other's "erin/r2" are two submissions (they were one key, "vision/vision/erin/r2").
  auto ta = Call("POST", "/v1/tokens", admin_, R"({"role": "team-admin", "subject": "lead", "team": "vision"})");
  ASSERT_EQ(ta->status, 201) << ta->body;
  auto made = Call("POST", "/v1/tokens", Body(ta)["token"].get<std::string>(), R"({"role": "user", "subject": "erin"})");
  ASSERT_EQ(made->status, 201) << made->body;
  std::string erin = Body(made)["token"];
  std::string plain = *auth_->Create(api::TokenKind::kUser, "vision", "user", "vision", WallNow());
  auto by_erin = Call("POST", "/v1/jobs", erin, std::string(kJob) + R"("request_id": "r2"})");
  ASSERT_EQ(by_erin->status, 201) << by_erin->body;
  auto by_plain = Call("POST", "/v1/jobs", plain, std::string(kJob) + R"("request_id": "erin/r2"})");
  ASSERT_EQ(by_plain->status, 201) << by_plain->body;
  EXPECT_NE(Body(by_plain)["jobs"][0]["id"], Body(by_erin)["jobs"][0]["id"]);
}

TEST_F(ServerTest, NulInRequestIdIsRefused) {
  // Given a request id with a NUL byte, expect 400 and nothing stored.
  auto r = Call("POST", "/v1/jobs", alice_, std::string(kJob) + R"("request_id": "a\u0000b"})");
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(StoredJobs(), 0u);
}

TEST_F(ServerTest, ANulByteIsRefusedInAUsersBodyAndReplacedInAnAgents) {
  // Given bodies of users and admins with a NUL byte in a text (PostgreSQL can store none: a
  // transition with one failed the controller's batch, and every later one), expect 400 naming
  // the field and nothing changed; given a registration and a heartbeat with one (an agent older
  // than the one that writes U+FFFD for it), expect them taken with U+FFFD in its place (a
  // refused heartbeat would be sent again for ever, and the node lost).
  for (const auto& [path, body, said] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"/v1/teams/vision/budget", R"({"soft": 10, "hard\u0000": 1})", "a key of the body: a NUL byte"},
           {"/v1/teams/vision/quota", R"({"gpus": 1, "model": "H100\u0000"})", "model: a NUL byte"},
           {"/v1/jobs/cancel", R"({"ids": [1], "states": ["pending\u0000"]})", "states[0]: a NUL byte"},
           {"/v1/tokens", R"({"role": "user", "subject": "a\u0000b"})", "subject: a NUL byte"},
           {"/v1/jobs", std::string(kJob) + R"("default_workdir": "/tmp\u0000x"})",
            "default_workdir: expected an absolute path without NUL bytes"},
           {"/v1/jobs", R"({"yaml": "name: j\nteam: vision\nresources: {gpus: 1}\nrun: [\"true\"]\n", "source": "j\u0000.yaml"})",
            "source: expected the file's name"}}) {
    auto r = Call("POST", path, admin_, body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << path << ": " << r->body;
    EXPECT_NE(r->body.find(said), std::string::npos) << path << ": " << r->body;
  }
  EXPECT_EQ(StoredJobs(), 0u);

  api::RegisterRequest reg;
  reg.name = "nul-node";
  reg.address = "127.0.0.1";
  reg.spec.gpu_model = "H100";
  reg.spec.gpus = 1;
  reg.driver_version = std::string("550\0x", 5);
  auto r = Call("POST", "/v1/agents/register", join_, api::ToJson(reg).dump(), true);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string agent = Body(r).value("token", "");
  api::Heartbeat hb;
  hb.storage_fault = std::string("disk\0full", 9);
  auto beat = Call("POST", "/v1/agents/heartbeat", agent, api::ToJson(hb).dump(), true);
  ASSERT_TRUE(beat);
  EXPECT_EQ(beat->status, 200) << beat->body;
  auto nodes = Call("GET", "/v1/nodes", admin_);
  ASSERT_TRUE(nodes);
  const json listed = Body(nodes);
  ASSERT_TRUE(listed.contains("nodes") && listed["nodes"].size() == 1u) << nodes->body;
  EXPECT_EQ(listed["nodes"][0].value("driver_version", ""), "550\xEF\xBF\xBDx") << nodes->body;
  EXPECT_EQ(listed["nodes"][0].value("storage_fault", ""), "disk\xEF\xBF\xBD" "full") << nodes->body;
}

TEST_F(ServerTest, AJobBodyGivingAKeyTwiceIsRefusedAsAJobFileIs) {
  // Given a job whose name is given twice in the JSON body (nlohmann keeps the last, where a
  // YAML file is refused), expect 400 naming the key and nothing stored.
  auto r = Call("POST", "/v1/jobs", alice_,
                R"({"job": {"name": "a", "team": "vision", "name": "b", "resources": {"gpus": 1}, "run": ["true"]}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(r->body.find("job.name: given twice"), std::string::npos) << r->body;
  EXPECT_EQ(StoredJobs(), 0u);
}

TEST_F(ServerTest, ABudgetOrQuotaForANameThatIsNoTeamNameSaysWhatIsWrong) {
  // Given a team name with a space (URL-encoded) on the budget and quota routes, expect 400
  // saying what a team name is (it was 404 "no such route"), and a user who may not set either
  // still refused as such.
  for (const char* route : {"/v1/teams/bad%20team/budget", "/v1/teams/bad%20team/quota"}) {
    auto r = Call("POST", route, admin_, R"({"hard": 1})");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << route << ": " << r->body;
    EXPECT_NE(r->body.find("team: use 1-128 letters, digits"), std::string::npos) << route << ": " << r->body;
    auto user = Call("POST", route, alice_, R"({"hard": 1})");
    ASSERT_TRUE(user);
    EXPECT_EQ(user->status, 403) << route << ": " << user->body;
  }
}

TEST_F(ServerTest, JobsRunAsTheMappedUserAndNeverAsRoot) {
  // Given the map vision -> gf-vision, expect alice's job to carry user gf-vision, and a job naming
  // root (even an admin's) or another user (a user's) to be refused.
  auto ok = Call("POST", "/v1/jobs", alice_, std::string(kJob) + R"("request_id": "m1"})");
  ASSERT_EQ(ok->status, 201) << ok->body;
  auto rec = store_.GetJob(JobId(Body(ok)["jobs"][0]["id"].get<int64_t>()));
  ASSERT_TRUE(rec.ok() && rec->has_value());
  EXPECT_EQ((*rec)->request.user, "gf-vision");
  auto root = Call("POST", "/v1/jobs", admin_,
                   R"({"job": {"name": "r", "team": "vision", "user": "root", "resources": {"gpus": 1}, "run": ["id"]}})");
  EXPECT_EQ(root->status, 400) << root->body;  // refused at its user field, as a job file is
  EXPECT_NE(root->body.find("user: jobs cannot run as root"), std::string::npos) << root->body;
  auto other = Call("POST", "/v1/jobs", alice_,
                    R"({"job": {"name": "r", "team": "vision", "user": "bob", "resources": {"gpus": 1}, "run": ["id"]}})");
  EXPECT_EQ(other->status, 403) << other->body;
  EXPECT_EQ(StoredJobs(), 1u);
}

TEST_F(ServerTest, BearerSchemeIsCaseInsensitive) {
  // Given "authorization: bearer <token>" in lower case, expect it to authenticate.
  httplib::Client c("127.0.0.1", server_->port());
  auto r = c.Get("/v1/queue", {{"Authorization", "bearer " + alice_}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST_F(ServerTest, TokensRouteAnswersWrongTypesWith400) {
  // Given token requests with fields of the wrong type, expect 400 (not 500) and no new token.
  auto before = store_.ListTokens()->size();
  for (const char* body : {R"({"kind": 5})", R"({"role": ["admin"]})", R"({"team": {"a": 1}})", R"({"x": "y"})"}) {
    auto r = Call("POST", "/v1/tokens", admin_, body);
    EXPECT_EQ(r->status, 400) << body << " -> " << r->body;
  }
  EXPECT_EQ(store_.ListTokens()->size(), before);
}

TEST_F(ServerTest, UnauthenticatedBodyIsRefusedBeforeItIsRead) {
  // Given a request that declares a 60 KB body but has no token and sends no body, expect the
  // 401 at once: the server must not wait for (or buffer) the body.
  int fd = Connect(server_->port());
  ASSERT_GE(fd, 0);
  std::string head = "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n\r\n";
  ASSERT_EQ(::send(fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
  std::string answer = ReadAll(fd);
  ::close(fd);
  EXPECT_NE(answer.find(" 401 "), std::string::npos) << answer;
}

TEST_F(ServerTest, APostWithoutABodyIsAnsweredWithoutWaitingForOne) {
  // Given POST .../cancel as curl -X POST sends it (no Content-Length, no Transfer-Encoding) on a
  // connection it keeps open, expect the cancel answered, and a second request on the same
  // connection answered too: the server must not read the absent body until the client hangs up.
  auto sub = Call("POST", "/v1/jobs", alice_, std::string(kJob) + R"("request_id": "nb"})");
  ASSERT_EQ(sub->status, 201) << sub->body;
  int64_t id = Body(sub)["jobs"][0]["id"].get<int64_t>();
  int fd = Connect(server_->port());
  ASSERT_GE(fd, 0);
  std::string both = "POST /v1/jobs/" + std::to_string(id) + "/cancel HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                     alice_ + "\r\n\r\nGET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  ASSERT_EQ(::send(fd, both.data(), both.size(), MSG_NOSIGNAL), static_cast<ssize_t>(both.size()));
  std::string answer;  // both answers: read until the server closes (the second asked it to)
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) answer.append(buf, static_cast<size_t>(n));
  ::close(fd);
  size_t first = answer.find("HTTP/1.1 202 ");
  ASSERT_NE(first, std::string::npos) << answer;
  EXPECT_NE(answer.find("HTTP/1.1 200 ", first + 1), std::string::npos) << answer;
  auto rec = store_.GetJob(JobId(id));
  ASSERT_TRUE(rec.ok() && rec->has_value());
  EXPECT_TRUE((*rec)->state == api::JobState::kCancelled || (*rec)->state == api::JobState::kStopping)
      << static_cast<int>((*rec)->state);
}

TEST_F(ServerTest, OversizedBodiesAre413DeclaredOrChunked) {
  // Given bodies over the 64 KB limit, declared or chunked, expect 413 and nothing stored.
  std::string big(100 * 1024, 'x');
  auto declared = Call("POST", "/v1/jobs", alice_, big);
  ASSERT_TRUE(declared);
  EXPECT_EQ(declared->status, 413);
  int fd = Connect(server_->port());
  ASSERT_GE(fd, 0);
  std::string head = "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + alice_ +
                     "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
  ::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
  std::string chunk = "4000\r\n" + std::string(0x4000, 'y') + "\r\n";
  for (int i = 0; i < 40; ++i) {
    if (::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL) < 0) break;  // the server hung up
  }
  std::string answer = ReadAll(fd);
  ::close(fd);
  EXPECT_NE(answer.find(" 413 "), std::string::npos) << answer.substr(0, 200);
  EXPECT_EQ(StoredJobs(), 0u);
  auto health = Call("GET", "/v1/health", "");
  EXPECT_EQ(health->status, 200);
}

TEST(AlertVisibleTest, AnotherTeamsSpendAndJobProgressAreItsOwn) {
  // Given alerts labelled with team nlp, expect a vision token to see the node and GPU ones but
  // not nlp's budget or stalled-job alert (its spend, its job's last step); nlp and admins see all.
  const std::map<std::string, std::string> nlp = {{"team", "nlp"}, {"job_id", "8"}};
  EXPECT_FALSE(AlertVisible("JobStalled", nlp, false, "vision"));
  EXPECT_FALSE(AlertVisible("BudgetNearlySpent", nlp, false, "vision"));
  EXPECT_FALSE(AlertVisible("JobStalled", {}, false, "vision"));
  EXPECT_TRUE(AlertVisible("GpuAllocatedIdle", nlp, false, "vision"));
  EXPECT_TRUE(AlertVisible("NodeSilent", {{"node", "n1"}}, false, "vision"));
  EXPECT_TRUE(AlertVisible("JobStalled", nlp, false, "nlp"));
  EXPECT_TRUE(AlertVisible("BudgetNearlySpent", nlp, true, ""));
}

TEST_F(ServerTest, ABudgetUnderAMicroDollarIsRefusedNotTakenForNoLimit) {
  // Given a hard limit of $0.0000001 (0 micro-dollars once rounded, which means "no limit"),
  // expect 400 naming the field, and the team's $10 limit left as it was.
  ASSERT_EQ(Call("POST", "/v1/teams/vision/budget", admin_, R"({"hard": 10})")->status, 200);
  auto tiny = Call("POST", "/v1/teams/vision/budget", admin_, R"({"hard": 0.0000001})");
  ASSERT_EQ(tiny->status, 400) << tiny->body;
  EXPECT_NE(tiny->body.find("hard: at least 0.000001 dollars"), std::string::npos) << tiny->body;
  auto huge = Call("POST", "/v1/teams/vision/budget", admin_, R"({"hard": 1e308})");  // (the range, said)
  ASSERT_EQ(huge->status, 400) << huge->body;
  EXPECT_NE(huge->body.find("hard: expected dollars, a number from 0 to 1,000,000,000,000"), std::string::npos)
      << huge->body;
  auto shown = Call("GET", "/v1/cost?team=vision", admin_);
  ASSERT_EQ(shown->status, 200) << shown->body;
  EXPECT_NE(shown->body.find(R"("hard_micros":10000000)"), std::string::npos) << shown->body;
}

TEST_F(ServerTest, ABudgetStartingInTheFutureIsRefusedAndARollingOnesAnswerIsTheStartKept) {
  // Given a start a day ahead (spend would never count, the limit never apply), expect 400 naming
  // the field and the controller's clock, and the team left without a budget; given a weekly
  // budget with a start before this week's, expect the answer to say the start it keeps (this
  // week's), as the cost report does.
  auto ahead = Call("POST", "/v1/teams/vision/budget", admin_,
                    R"({"hard": 10, "since_ms": )" + std::to_string((clock_.Now() + Duration::Hours(24)).millis()) + "}");
  ASSERT_EQ(ahead->status, 400) << ahead->body;
  EXPECT_NE(ahead->body.find("since_ms: "), std::string::npos) << ahead->body;
  EXPECT_NE(ahead->body.find("is in the future"), std::string::npos) << ahead->body;
  auto none = Call("GET", "/v1/cost?team=vision", admin_);
  ASSERT_EQ(none->status, 200) << none->body;
  EXPECT_EQ(none->body.find("hard_micros"), std::string::npos) << none->body;
  // A start a few seconds ahead (a client's clock a little fast) counts from now; new_period
  // starts from now by the controller's clock.
  // (The server's clock runs on between the calls: the start is read against a window.)
  auto starts_now = [&](const std::string& body) {
    const int64_t before = clock_.Now().millis();
    auto r = Call("POST", "/v1/teams/nlp/budget", admin_, body);
    const int64_t after = clock_.Now().millis();
    EXPECT_EQ(r->status, 200) << r->body;
    const int64_t since = r->status == 200 ? Body(r)["since_ms"].get<int64_t>() : -1;
    EXPECT_TRUE(since >= before && since <= after) << since << " not in [" << before << ", " << after << "]";
  };
  starts_now(R"({"hard": 10, "since_ms": )" + std::to_string((clock_.Now() + Duration::Seconds(30)).millis()) + "}");
  clock_.Advance(Duration::Hours(1));
  starts_now(R"({"hard": 10, "new_period": true})");
  EXPECT_EQ(Call("POST", "/v1/teams/nlp/budget", admin_, R"({"hard": 10, "new_period": true, "since_ms": 5})")->status, 400);
  const Time week_start = PeriodStart(clock_.Now(), CalendarPeriod::kWeek);
  auto weekly = Call("POST", "/v1/teams/vision/budget", admin_,
                     R"({"hard": 10, "period": "weekly", "since_ms": )" +
                         std::to_string((week_start - Duration::Hours(24 * 6)).millis()) + "}");
  ASSERT_EQ(weekly->status, 200) << weekly->body;
  EXPECT_EQ(Body(weekly)["since_ms"], week_start.millis());
  auto shown = Call("GET", "/v1/cost?team=vision", admin_);
  ASSERT_EQ(shown->status, 200) << shown->body;
  EXPECT_NE(shown->body.find(R"("since_ms":)" + std::to_string(week_start.millis())), std::string::npos) << shown->body;
}

TEST_F(ServerTest, ABudgetSetAgainKeepsCountingFromItsStartUnlessANewStartIsGiven) {
  // Given a budget set at T0, expect setting it again an hour later with another soft limit to
  // keep since = T0 (what the team spent still counts; a stopped team stays stopped), and a
  // given since_ms, or a change to a rolling period, to start anew.
  auto first = Call("POST", "/v1/teams/vision/budget", admin_, R"({"hard": 10})");
  ASSERT_EQ(first->status, 200) << first->body;
  const int64_t t0 = Body(first)["since_ms"];
  clock_.Advance(Duration::Hours(1));
  auto again = Call("POST", "/v1/teams/vision/budget", admin_, R"({"hard": 10, "soft": 5})");
  ASSERT_EQ(again->status, 200) << again->body;
  EXPECT_EQ(Body(again)["since_ms"], t0);
  const int64_t now = clock_.Now().millis();
  auto fresh = Call("POST", "/v1/teams/vision/budget", admin_,
                    R"({"hard": 10, "since_ms": )" + std::to_string(now) + "}");
  ASSERT_EQ(fresh->status, 200) << fresh->body;
  EXPECT_EQ(Body(fresh)["since_ms"], now);
  auto monthly = Call("POST", "/v1/teams/vision/budget", admin_, R"({"hard": 10, "period": "monthly"})");
  ASSERT_EQ(monthly->status, 200) << monthly->body;
  EXPECT_NE(Body(monthly)["since_ms"], now);
}

TEST_F(ServerTest, TeamRoutesTakeOnlyTeamNamesAndBoundedTimesAndAHugeJobIdSaysSo) {
  // Given a 300-character team on the quota and budget routes, a budget since the end of time
  // and a job id of 20 digits, expect each refused with what is wrong, and nothing set.
  const std::string long_team(300, 'a');
  auto q = Call("POST", "/v1/teams/" + long_team + "/quota", admin_, R"({"gpus": 1})");
  EXPECT_EQ(q->status, 400) << q->body;
  EXPECT_NE(q->body.find("team: use 1-128 letters"), std::string::npos) << q->body;
  auto b = Call("POST", "/v1/teams/" + long_team + "/budget", admin_, R"({"hard": 10})");
  EXPECT_EQ(b->status, 400) << b->body;
  auto late = Call("POST", "/v1/teams/vision/budget", admin_, R"({"hard": 10, "since_ms": 9223372036854775807})");
  EXPECT_EQ(late->status, 400) << late->body;
  EXPECT_NE(late->body.find("since_ms: expected a time in ms since 1970"), std::string::npos) << late->body;
  EXPECT_EQ(Body(Call("GET", "/v1/quotas", admin_)).dump().find(long_team), std::string::npos);
  auto huge = Call("GET", "/v1/jobs/99999999999999999999", admin_);
  EXPECT_EQ(huge->status, 400) << huge->body;
  EXPECT_NE(huge->body.find("job id 99999999999999999999 is out of range"), std::string::npos) << huge->body;
}

TEST_F(ServerTest, AFormEncodedBodyOver8KiBIsToldToSendJson) {
  // Given a 10 KB job body under the limit, sent as curl -d sends it (form-encoded), expect 413
  // with the content type to use, and nothing stored; sent as JSON, expect it accepted.
  std::string body = R"({"job": {"name": "long-env", "run": "true", "resources": {"gpus": 1}, "env": {"PAD": ")" +
                     std::string(10 * 1024, 'p') + R"("}}})";
  httplib::Client c("127.0.0.1", server_->port());
  httplib::Headers h{{"Authorization", "Bearer " + alice_}};
  auto form = c.Post("/v1/jobs", h, body, "application/x-www-form-urlencoded");
  ASSERT_TRUE(form);
  EXPECT_EQ(form->status, 413);
  EXPECT_NE(form->body.find("Content-Type: application/json"), std::string::npos) << form->body;
  EXPECT_EQ(StoredJobs(), 0u);
  auto as_json = Call("POST", "/v1/jobs", alice_, body);
  ASSERT_TRUE(as_json);
  EXPECT_EQ(as_json->status, 201) << as_json->body;
  EXPECT_EQ(StoredJobs(), 1u);
}

TEST_F(ServerTest, AgentAndUserTokensStayOnTheirOwnListener) {
  // Given an agent token and a user token, expect each refused on the other's listener.
  std::string agent = RegisterNode("node-a");
  ASSERT_FALSE(agent.empty());
  auto on_user = Call("GET", "/v1/queue", agent);
  EXPECT_EQ(on_user->status, 403) << on_user->body;
  auto user_on_agent = Call("POST", "/v1/agents/heartbeat", alice_, "{}", true);
  EXPECT_EQ(user_on_agent->status, 403) << user_on_agent->body;
  auto agent_route_on_user = Call("POST", "/v1/agents/heartbeat", agent, "{}");
  EXPECT_NE(agent_route_on_user->status, 200);
}

TEST_F(ServerTest, JoinTokenCannotTakeOverALiveNodeAndOldAgentTokensStopWorking) {
  // Given node-a registered, expect a second join-token registration under its name to be
  // refused (409), and after node-a re-registers with its agent token, the old token to be 401.
  std::string first = RegisterNode("node-a");
  std::string req = RegisterBody("node-a");
  auto thief = Call("POST", "/v1/agents/register", join_, req, true);
  EXPECT_EQ(thief->status, 409) << thief->body;
  // ... saying when the name may be taken (the node is lost 30 s after its last heartbeat).
  ASSERT_TRUE(thief->has_header("Retry-After"));
  const int retry_after = std::stoi(thief->get_header_value("Retry-After"));
  EXPECT_GE(retry_after, 1);
  EXPECT_LE(retry_after, 32);
  auto again = Call("POST", "/v1/agents/register", first, req, true);
  ASSERT_EQ(again->status, 200) << again->body;
  std::string second = Body(again).value("token", "");
  auto old = Call("GET", "/v1/agents/commands?after=0&wait_ms=0", first, "", true);
  EXPECT_EQ(old->status, 401) << old->body;
  auto fresh = Call("GET", "/v1/agents/commands?after=0&wait_ms=0", second, "", true);
  EXPECT_EQ(fresh->status, 200) << fresh->body;
}

TEST_F(ServerTest, AnAgentWritesLogsOnlyForItsOwnParts) {
  // Given a job placed on one of two nodes, expect the other node's token to be refused (403) when
  // it writes that part's log, and the owner's write to land.
  std::string a = RegisterNode("node-a");
  std::string b = RegisterNode("node-b");
  auto sub = Call("POST", "/v1/jobs", admin_, std::string(kJob) + R"("request_id": "l1"})");
  ASSERT_EQ(sub->status, 201) << sub->body;
  int64_t id = Body(sub)["jobs"][0]["id"].get<int64_t>();
  std::string path = "/v1/agents/logs?job=" + std::to_string(id) + "&attempt=1&part=0&offset=0";
  int sa = 0, sb = 0;
  for (int i = 0; i < 200; ++i) {  // until the scheduler has placed it
    sa = Call("POST", path, a, "hello\n", true)->status;
    sb = Call("POST", path, b, "evil\n", true)->status;
    if (sa == 200 || sb == 200) break;
    std::this_thread::yield();
  }
  EXPECT_TRUE((sa == 200) != (sb == 200)) << sa << " / " << sb;
  EXPECT_EQ(sa == 200 ? sb : sa, 403);
}

TEST_F(ServerTest, ALogIsReadOnFromNextOffsetWhateverItsBytes) {
  // Given a part's log that starts with two bytes that are not UTF-8 and then holds 1.2 MB of
  // two-byte characters (the 1 MiB chunk would cut one in two), expect readers that follow
  // next_offset to get every character once: the bad bytes as U+FFFD, no character split, and
  // next_offset counting bytes of the log (not of the JSON text).
  std::string a = RegisterNode("node-a");
  auto sub = Call("POST", "/v1/jobs", admin_, std::string(kJob) + R"("request_id": "utf"})");
  ASSERT_EQ(sub->status, 201) << sub->body;
  const int64_t id = Body(sub)["jobs"][0]["id"].get<int64_t>();
  std::string text = "\xff\xfeok\n";
  text += "a";
  for (int i = 0; i < 600000; ++i) text += "\xc3\xa9";  // e acute
  const std::string base = "/v1/agents/logs?job=" + std::to_string(id) + "&attempt=1&part=0&offset=";
  int status = 0;
  for (int i = 0; i < 200 && status != 200; ++i) {  // until the scheduler has placed it
    status = Call("POST", base + "0", a, text.substr(0, 5), true)->status;
    if (status != 200) std::this_thread::yield();
  }
  ASSERT_EQ(status, 200);
  for (size_t at = 5; at < text.size(); at += 60000) {
    auto up = Call("POST", base + std::to_string(at), a, text.substr(at, 60000), true);
    ASSERT_EQ(up->status, 200) << up->body;
  }
  std::string got;
  int64_t offset = 0;
  int reads = 0;
  for (;;) {
    auto r = Call("GET", "/v1/jobs/" + std::to_string(id) + "/logs?offsets=" + std::to_string(offset), admin_);
    ASSERT_EQ(r->status, 200) << r->body;
    const json part = Body(r)["parts"][0];
    const std::string data = part["data"];
    if (data.empty()) break;
    got += data;
    offset = part["next_offset"].get<int64_t>();
    ++reads;
  }
  EXPECT_EQ(reads, 2);
  EXPECT_EQ(offset, static_cast<int64_t>(text.size()));
  std::string want = "\xef\xbf\xbd\xef\xbf\xbdok\na";  // U+FFFD twice
  for (int i = 0; i < 600000; ++i) want += "\xc3\xa9";
  EXPECT_TRUE(got == want) << got.size() << " bytes against " << want.size();
  // The job still runs: a character whose first byte only has arrived waits for the rest.
  const std::string logs = "/v1/jobs/" + std::to_string(id) + "/logs?offsets=";
  ASSERT_EQ(Call("POST", base + std::to_string(text.size()), a, "!\xc3", true)->status, 200);
  auto half = Body(Call("GET", logs + std::to_string(offset), admin_))["parts"][0];
  EXPECT_EQ(half["data"], "!");
  EXPECT_EQ(half["next_offset"].get<int64_t>(), offset + 1);
  ASSERT_EQ(Call("POST", base + std::to_string(text.size() + 2), a, "\xa9", true)->status, 200);
  auto whole = Body(Call("GET", logs + std::to_string(offset + 1), admin_))["parts"][0];
  EXPECT_EQ(whole["data"], "\xc3\xa9");
}

TEST_F(ServerTest, ANodeNameTheNodeRoutesCouldNotTakeIsRefusedAtRegistration) {
  // Given names with a space, a quote and non-ASCII letters, expect 400 naming the rule and no
  // node registered; a plain name registers and can be drained.
  for (const std::string name : {"x y", "bad\"name", "\xc3\xbcn\xc3\xaf"}) {
    auto r = Call("POST", "/v1/agents/register", join_, RegisterBody(name), true);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << name << ": " << r->body;
  }
  EXPECT_TRUE(engine_->Nodes().empty());
  RegisterNode("node_a.1");
  EXPECT_EQ(Call("POST", "/v1/nodes/node_a.1/drain", admin_)->status, 200);
}

TEST_F(ServerTest, ListingsArePaginated) {
  // Given 5 jobs and a page size of at most 3, expect pages of 3 and 2 linked by next_cursor, and a
  // larger limit refused.
  for (int i = 0; i < 5; ++i) {
    auto r = Call("POST", "/v1/jobs", admin_, std::string(kJob) + R"("request_id": "p)" + std::to_string(i) + "\"}");
    ASSERT_EQ(r->status, 201);
  }
  auto p1 = Call("GET", "/v1/jobs", admin_);
  ASSERT_EQ(p1->status, 200) << p1->body;
  ASSERT_EQ(Body(p1)["jobs"].size(), 3u);
  ASSERT_TRUE(Body(p1).contains("next_cursor"));
  auto p2 = Call("GET", "/v1/jobs?cursor=" + std::to_string(Body(p1)["next_cursor"].get<int64_t>()), admin_);
  EXPECT_EQ(Body(p2)["jobs"].size(), 2u);
  EXPECT_FALSE(Body(p2).contains("next_cursor"));
  auto too_big = Call("GET", "/v1/jobs?limit=4", admin_);
  EXPECT_EQ(too_big->status, 400);
  auto q = Call("GET", "/v1/queue?limit=2", admin_);
  EXPECT_EQ(Body(q)["jobs"].size(), 2u);
  EXPECT_EQ(Body(q)["total"], 5);
}

TEST_F(ServerTest, AStateFilterReadsPagesUntilItsLimitMatches) {
  // Given 7 jobs (pages of at most 3) of which the 1st and 6th are cancelled, expect one answer
  // with both (not a page of 3 holding one, then one with none); with limit 1, the first and a
  // cursor that leads to the second.
  std::vector<int64_t> ids;
  for (int i = 0; i < 7; ++i) {
    auto r = Call("POST", "/v1/jobs", admin_, std::string(kJob) + R"("request_id": "s)" + std::to_string(i) + "\"}");
    ASSERT_EQ(r->status, 201) << r->body;
    ids.push_back(Body(r)["jobs"][0]["id"].get<int64_t>());
  }
  for (int k : {0, 5}) ASSERT_LT(Call("POST", "/v1/jobs/" + std::to_string(ids[k]) + "/cancel", admin_)->status, 300);
  auto both = Body(Call("GET", "/v1/jobs?state=cancelled", admin_));
  ASSERT_EQ(both["jobs"].size(), 2u) << both.dump();
  EXPECT_EQ(both["jobs"][0]["id"], ids[5]);
  EXPECT_EQ(both["jobs"][1]["id"], ids[0]);
  EXPECT_FALSE(both.contains("next_cursor")) << both.dump();
  auto first = Body(Call("GET", "/v1/jobs?state=cancelled&limit=1", admin_));
  ASSERT_EQ(first["jobs"].size(), 1u);
  EXPECT_EQ(first["jobs"][0]["id"], ids[5]);
  ASSERT_TRUE(first.contains("next_cursor"));
  auto second = Body(Call("GET", "/v1/jobs?state=cancelled&limit=1&cursor=" +
                              std::to_string(first["next_cursor"].get<int64_t>()), admin_));
  ASSERT_EQ(second["jobs"].size(), 1u) << second.dump();
  EXPECT_EQ(second["jobs"][0]["id"], ids[0]);
}

TEST_F(ServerTest, HealthTurnsOkAgainWhenTheStoreRecovers) {
  // Given one failed commit, expect health degraded, then ok after the next commit succeeds.
  store_.FailNextWrite(Status::Unavailable("disk I/O error"));
  auto failed = Call("POST", "/v1/jobs", admin_, std::string(kJob) + R"("request_id": "h1"})");
  EXPECT_EQ(failed->status, 503) << failed->body;
  EXPECT_EQ(Body(Call("GET", "/v1/health", ""))["status"], "degraded");
  auto ok = Call("POST", "/v1/jobs", admin_, std::string(kJob) + R"("request_id": "h2"})");
  EXPECT_EQ(ok->status, 201) << ok->body;
  EXPECT_EQ(Body(Call("GET", "/v1/health", ""))["status"], "ok");
}

TEST_F(ServerTest, ALogWriteOnAFullDiskIsNoticedAndMarked) {
  // Given a part whose log file is /dev/full (every write fails with ENOSPC), expect the upload to
  // be answered 507 and the job's log shown as incomplete.
  std::string a = RegisterNode("node-a");
  auto sub = Call("POST", "/v1/jobs", admin_, std::string(kJob) + R"("request_id": "d1"})");
  int64_t id = Body(sub)["jobs"][0]["id"].get<int64_t>();
  auto log = dir_ / "logs" / ("job-" + std::to_string(id)) / "a1.p0.log";
  std::filesystem::create_directories(log.parent_path());
  std::filesystem::create_symlink("/dev/full", log);
  std::string path = "/v1/agents/logs?job=" + std::to_string(id) + "&attempt=1&part=0&offset=0";
  int status = 0;
  std::string answer;
  for (int i = 0; i < 200; ++i) {
    auto r = Call("POST", path, a, "some output\n", true);
    status = r->status;
    answer = r->body;
    if (status != 403) break;  // placed
    std::this_thread::yield();
  }
  EXPECT_EQ(status, 507) << answer;
  auto logs = Call("GET", "/v1/jobs/" + std::to_string(id) + "/logs", admin_);
  ASSERT_EQ(logs->status, 200) << logs->body;
  EXPECT_EQ(Body(logs)["parts"][0].value("incomplete", false), true) << logs->body;
}

TEST_F(ServerTest, IdleAndSlowSocketsAndLongPollsDoNotStarveAgentsOrOtherClients) {
  // Given 300 idle or trickling connections from 127.0.0.2 and 64 log long-polls on the user
  // listener, expect an agent's heartbeat and another client's request to be answered.
  std::string agent = RegisterNode("node-a");
  auto sub = Call("POST", "/v1/jobs", admin_, std::string(kJob) + R"("request_id": "s1"})");
  int64_t id = Body(sub)["jobs"][0]["id"].get<int64_t>();
  std::vector<int> socks;
  for (int i = 0; i < 300; ++i) {
    int fd = Connect(server_->port(), "127.0.0.2");
    if (fd < 0) continue;
    if (i % 2 == 0) ::send(fd, "GET /v1/queue HTTP/1.1\r\nHo", 26, MSG_NOSIGNAL);  // a head that never ends
    socks.push_back(fd);
  }
  std::vector<std::thread> polls;
  for (int i = 0; i < 64; ++i) {
    polls.emplace_back([this, id] {
      httplib::Client c("127.0.0.1", server_->port());
      c.set_read_timeout(60, 0);
      c.Get(("/v1/jobs/" + std::to_string(id) + "/logs?wait_ms=20000").c_str(),
            {{"Authorization", "Bearer " + admin_}});
    });
  }
  auto hb = Call("POST", "/v1/agents/heartbeat", agent, api::ToJson(api::Heartbeat{}).dump(), true);

  ASSERT_TRUE(hb);
  EXPECT_EQ(hb->status, 200) << hb->body;
  auto q = Call("GET", "/v1/queue", alice_);
  ASSERT_TRUE(q);
  EXPECT_EQ(q->status, 200) << q->body;
  for (int fd : socks) ::close(fd);
  engine_->ReleasePollers();
  server_->Stop();  // answers the long-polls
  for (auto& t : polls) t.join();
}

TEST_F(ServerTest, DashboardFilesNeedNoTokenAndHoldNoData) {
  // Given no token, expect the dashboard's page and script with their types and a strict CSP,
  // and no file outside its one folder; the data behind it still needs a token.
  auto page = Call("GET", "/", "");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(page->body.find("/ui/app.js"), std::string::npos);
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("default-src 'self'"), std::string::npos);
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("frame-ancestors 'none'"), std::string::npos);
  EXPECT_EQ(page->get_header_value("X-Frame-Options"), "DENY");
  auto script = Call("GET", "/ui/app.js", "");
  ASSERT_TRUE(script);
  EXPECT_EQ(script->status, 200);
  EXPECT_EQ(script->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  for (const char* path : {"/ui/nothing.js", "/ui/../state.db", "/ui/sub/app.js"}) {
    auto r = Call("GET", path, "");
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 404) << path;
  }
  EXPECT_EQ(Call("GET", "/v1/alerts", "")->status, 401);
  EXPECT_EQ(Call("GET", "/metrics", "")->status, 401);
}

TEST_F(ServerTest, QuotasAreSetByAdminsSeenByTheirTeamAndLimitSubmits) {
  // Given an admin setting vision's quota (2 H100s, no borrowing, 2 waiting jobs at most), expect
  // it stored and reported with the team's load; alice (vision) sees vision's only, bob (nlp)
  // none of it, and neither may set one; bad fields are 400 and change nothing; the third
  // waiting job is refused with 429 and not stored, nlp's is taken; after a restart of the
  // engine on the same store the quota is still there.
  auto set = Call("POST", "/v1/teams/vision/quota", admin_,
                  R"({"gpus": 2, "model": "h100", "borrow": false, "max_pending_jobs": 2})");
  ASSERT_EQ(set->status, 200) << set->body;
  EXPECT_EQ(Body(set)["model_gpus"]["H100"], 2);
  auto more = Call("POST", "/v1/teams/vision/quota", admin_, R"({"max_running_jobs": 5})");
  ASSERT_EQ(more->status, 200) << more->body;
  EXPECT_EQ(Body(more)["model_gpus"]["H100"], 2) << "a change keeps the rest of the quota";
  for (const char* bad : {R"({"gpus": -1})", R"({"model": "H999", "gpus": 1})", R"({"model": "H100"})",
                          R"({"borrow": "no"})", R"({"gpu": 3})", "[1]"}) {
    auto r = Call("POST", "/v1/teams/vision/quota", admin_, bad);
    EXPECT_EQ(r->status, 400) << bad << " -> " << r->body;
  }
  EXPECT_EQ(Call("POST", "/v1/teams/vision/quota", alice_, R"({"gpus": 100})")->status, 403);
  for (int i = 0; i < 2; ++i) {
    auto ok = Call("POST", "/v1/jobs", alice_, std::string(kJob) + R"("request_id": "q)" + std::to_string(i) + "\"}");
    ASSERT_EQ(ok->status, 201) << ok->body;
  }
  auto full = Call("POST", "/v1/jobs", alice_, std::string(kJob) + R"("request_id": "q2"})");
  EXPECT_EQ(full->status, 429) << full->body;
  EXPECT_NE(full->body.find("team vision has 2 job(s) waiting and may have at most 2"), std::string::npos) << full->body;
  EXPECT_EQ(StoredJobs(), 2u);
  auto nlp = Call("POST", "/v1/jobs", bob_, R"({"job": {"name": "n", "team": "nlp", "resources": {"gpus": 1}, "run": ["true"]}})");
  EXPECT_EQ(nlp->status, 201) << nlp->body;

  auto mine = Call("GET", "/v1/quotas", alice_);
  ASSERT_EQ(mine->status, 200);
  ASSERT_EQ(Body(mine)["teams"].size(), 1u) << mine->body;
  EXPECT_EQ(Body(mine)["teams"][0]["team"], "vision");
  EXPECT_EQ(Body(mine)["teams"][0]["pending_jobs"], 2);
  EXPECT_EQ(Body(mine)["teams"][0]["max_running_jobs"], 5);
  EXPECT_EQ(Body(mine)["teams"][0]["borrow"], false);
  auto others = Call("GET", "/v1/quotas", bob_);
  ASSERT_EQ(others->status, 200);
  EXPECT_EQ(others->body.find("vision"), std::string::npos) << others->body;
  auto all = Call("GET", "/v1/quotas", admin_);
  EXPECT_NE(all->body.find("vision"), std::string::npos);

  EngineOptions eo;
  eo.checkpoint_root = (dir_ / "ckpt2").string();
  Engine again(clock_, store_, eo);
  ASSERT_TRUE(again.Recover().ok());
  bool found = false;
  for (const auto& v : again.Quotas()) {
    if (v.team != "vision") continue;
    found = true;
    EXPECT_EQ(v.quota.model_gpus.at("H100"), 2);
    EXPECT_FALSE(v.quota.borrow);
    EXPECT_EQ(v.quota.max_pending_jobs, 2);
    EXPECT_EQ(v.quota.max_running_jobs, 5);
  }
  EXPECT_TRUE(found);
  auto cleared = Call("POST", "/v1/teams/vision/quota", admin_, R"({"clear": true})");
  ASSERT_EQ(cleared->status, 200) << cleared->body;
  EXPECT_EQ(Call("POST", "/v1/jobs", alice_, std::string(kJob) + R"("request_id": "q3"})")->status, 201);
}

TEST_F(ServerTest, AUserCannotTouchAnotherTeamsJobs) {
  // Given alice's (vision) job, expect bob (nlp) to be refused its cancel and logs, to see it
  // without command or environment, and to be refused vision's costs; the job stays as it was.
  auto sub = Call("POST", "/v1/jobs", alice_,
                  R"({"job": {"name": "secret", "team": "vision", "resources": {"gpus": 1}, "run": ["echo", "s3cr3t"],
                      "env": {"API_KEY": "k"}}})");
  ASSERT_EQ(sub->status, 201) << sub->body;
  std::string id = std::to_string(Body(sub)["jobs"][0]["id"].get<int64_t>());
  auto cancel = Call("POST", "/v1/jobs/" + id + "/cancel", bob_);
  EXPECT_EQ(cancel->status, 403) << cancel->body;
  auto logs = Call("GET", "/v1/jobs/" + id + "/logs", bob_);
  EXPECT_EQ(logs->status, 403) << logs->body;
  auto seen = Call("GET", "/v1/jobs/" + id, bob_);
  ASSERT_EQ(seen->status, 200);
  EXPECT_EQ(seen->body.find("s3cr3t"), std::string::npos) << seen->body;
  EXPECT_EQ(seen->body.find("API_KEY"), std::string::npos) << seen->body;
  auto own = Call("GET", "/v1/jobs/" + id, alice_);
  EXPECT_NE(own->body.find("s3cr3t"), std::string::npos) << "the owner's team sees the command";
  auto cost = Call("GET", "/v1/cost?team=vision", bob_);
  EXPECT_EQ(cost->status, 403) << cost->body;
  auto rec = store_.GetJob(JobId(std::stoll(id)));
  ASSERT_TRUE(rec.ok() && rec->has_value());
  EXPECT_NE((*rec)->state, api::JobState::kCancelled);
  auto by_owner = Call("POST", "/v1/jobs/" + id + "/cancel", alice_);
  EXPECT_EQ(by_owner->status, 202) << by_owner->body;
}

TEST_F(ServerTest, ManyJobsAreCancelledInOneRequestAfterEachIsChecked) {
  // Given an array of five vision tasks and one nlp job (no node: all wait), expect bodies that
  // are not a list of ids refused with 400 naming the place, bob (nlp) refused the vision tasks
  // with 403 naming the team and a missing id refused with 404 listing it, both changing
  // nothing; then alice's request cancels the five (a task named twice counts once), and a second
  // one lists them as ended.
  auto sub = Call("POST", "/v1/jobs", alice_,
                  R"({"request_id": "arr", "yaml": "name: t\nteam: vision\nresources: {gpus: 1}\nrun: 'true'\narray: {seed: [1, 2, 3, 4, 5]}\n"})");
  ASSERT_EQ(sub->status, 201) << sub->body;
  std::vector<int64_t> ids;
  const json submitted = Body(sub);
  for (const auto& j : submitted["jobs"]) ids.push_back(j["id"].get<int64_t>());
  ASSERT_EQ(ids.size(), 5u);
  auto other = Call("POST", "/v1/jobs", bob_,
                    R"({"job": {"team": "nlp", "resources": {"gpus": 1}, "run": ["true"]}, "request_id": "b1"})");
  ASSERT_EQ(other->status, 201) << other->body;
  const int64_t bobs = Body(other)["jobs"][0]["id"].get<int64_t>();
  auto ids_body = [](const std::vector<int64_t>& v) { return json({{"ids", v}}).dump(); };

  for (const auto& [body, says] : std::vector<std::pair<std::string, std::string>>{
           {"[1, 2]", "expected {\"ids\": [job ids] (at most 100000)"},
           {R"({"ids": [3]} x)", "column"},
           {R"({"ids": []})", "ids is empty"},
           {R"({"ids": [3, "4"]})", "ids[1]: a job id is a whole number from 1, got \"4\""},
           {R"({"ids": [3, 0]})", "ids[1]"},
           {R"({"ids": [3], "force": true})", "unknown field 'force'"}}) {
    auto r = Call("POST", "/v1/jobs/cancel", alice_, body);
    EXPECT_EQ(r->status, 400) << body;
    EXPECT_NE(Body(r)["error"]["message"].get<std::string>().find(says), std::string::npos) << r->body;
  }
  auto too_many = Call("POST", "/v1/jobs/cancel", alice_, ids_body(std::vector<int64_t>(100'001, ids[0])));
  EXPECT_EQ(too_many->status, 413) << too_many->body;

  auto denied = Call("POST", "/v1/jobs/cancel", bob_, ids_body({bobs, ids[0], ids[1]}));
  ASSERT_EQ(denied->status, 403) << denied->body;
  EXPECT_NE(denied->body.find("jobs " + std::to_string(ids[0]) + ", " + std::to_string(ids[1]) +
                              " belong to team vision; your token may cancel only team nlp's jobs; nothing was cancelled"),
            std::string::npos)
      << denied->body;
  EXPECT_EQ(Body(denied)["forbidden"], json({ids[0], ids[1]}));
  {
    store::AuditFilter denials;
    denials.verb = "job.cancel";
    auto log = store_.ListAudit(denials);
    ASSERT_TRUE(log.ok() && !log->empty());
    EXPECT_EQ(log->back().outcome, "denied");
    EXPECT_EQ(log->back().object, "jobs " + std::to_string(ids[0]) + "," + std::to_string(ids[1]));
  }
  auto missing = Call("POST", "/v1/jobs/cancel", alice_, ids_body({ids[0], 99999}));
  ASSERT_EQ(missing->status, 404) << missing->body;
  EXPECT_NE(missing->body.find("job 99999 does not exist; nothing was cancelled"), std::string::npos) << missing->body;
  EXPECT_EQ(Body(missing)["missing"], json({99999}));
  // Both at once: one answer names both, so that one fix is enough.
  auto both = Call("POST", "/v1/jobs/cancel", bob_, ids_body({ids[0], 99999}));
  ASSERT_EQ(both->status, 404) << both->body;
  EXPECT_EQ(Body(both)["missing"], json({99999}));
  EXPECT_EQ(Body(both)["forbidden"], json({ids[0]}));
  EXPECT_NE(both->body.find("job 99999 does not exist; job " + std::to_string(ids[0]) + " belongs to team vision"),
            std::string::npos)
      << both->body;
  for (int64_t id : {ids[0], bobs}) {
    auto rec = store_.GetJob(JobId(id));
    ASSERT_TRUE(rec.ok() && rec->has_value());
    EXPECT_EQ((*rec)->state, api::JobState::kPending) << "a refused request changed job " << id;
  }

  // Filters as they stand at the cancel: a state the jobs are not in leaves them; other teams'
  // jobs are left alone instead of refusing the request when asked.
  auto not_running = Call("POST", "/v1/jobs/cancel", alice_, R"({"ids": [)" + std::to_string(ids[0]) + R"(], "states": ["running"]})");
  ASSERT_EQ(not_running->status, 202) << not_running->body;
  EXPECT_EQ(Body(not_running)["skipped"], json::parse(R"([{"id": )" + std::to_string(ids[0]) + R"(, "why": "pending"}])"));
  EXPECT_EQ(Body(not_running)["cancelled"], json::array());
  for (const auto& [body, says] : std::vector<std::pair<std::string, std::string>>{
           {R"({"ids": [3], "states": ["succeeded"]})", "states[0]: expected a state an unfinished job has"},
           {R"({"ids": [3], "states": []})", "states: expected a non-empty list"},
           {R"({"ids": [3], "skip_other_teams": 1})", "skip_other_teams: expected true or false"}}) {
    auto r = Call("POST", "/v1/jobs/cancel", alice_, body);
    EXPECT_EQ(r->status, 400) << body;
    EXPECT_NE(Body(r)["error"]["message"].get<std::string>().find(says), std::string::npos) << r->body;
  }
  auto mine = Call("POST", "/v1/jobs/cancel", bob_,
                   json({{"ids", {ids[0], bobs}}, {"skip_other_teams", true}, {"states", {"pending"}}}).dump());
  ASSERT_EQ(mine->status, 202) << mine->body;
  EXPECT_EQ(Body(mine)["cancelled"], json({bobs}));
  EXPECT_EQ(Body(mine)["skipped"], json::parse(R"([{"id": )" + std::to_string(ids[0]) + R"(, "why": "team vision"}])"));
  EXPECT_EQ((*store_.GetJob(JobId(ids[0])))->state, api::JobState::kPending);

  std::vector<int64_t> named = ids;
  named.push_back(ids[2]);
  std::reverse(named.begin(), named.end());
  auto ok = Call("POST", "/v1/jobs/cancel", alice_, ids_body(named));
  ASSERT_EQ(ok->status, 202) << ok->body;
  EXPECT_EQ(Body(ok)["cancelled"], json(ids));
  EXPECT_EQ(Body(ok)["stopping"], json::array());
  EXPECT_TRUE(Body(ok)["cancel_requested"].get<bool>());
  for (int64_t id : ids) EXPECT_EQ((*store_.GetJob(JobId(id)))->state, api::JobState::kCancelled);
  EXPECT_EQ((*store_.GetJob(JobId(bobs)))->state, api::JobState::kCancelled);  // by bob, above
  store::AuditFilter f;
  f.verb = "job.cancel";
  auto records = store_.ListAudit(f);
  ASSERT_TRUE(records.ok() && !records->empty());
  EXPECT_EQ(records->back().object, api::JobsAuditObject(ids));
  EXPECT_EQ(records->back().subject, "alice");
  auto again = Call("POST", "/v1/jobs/cancel", alice_, ids_body({ids[0]}));
  ASSERT_EQ(again->status, 202) << again->body;
  EXPECT_FALSE(Body(again)["cancel_requested"].get<bool>());
  EXPECT_EQ(Body(again)["ended"], json::parse(R"([{"id": )" + std::to_string(ids[0]) + R"(, "state": "cancelled"}])"));
  // Another team's job that ended is left alone too (and not listed as ended to that team).
  auto theirs = Call("POST", "/v1/jobs/cancel", bob_,
                     json({{"ids", {ids[1], bobs}}, {"skip_other_teams", true}}).dump());
  ASSERT_EQ(theirs->status, 202) << theirs->body;
  EXPECT_EQ(Body(theirs)["skipped"], json::parse(R"([{"id": )" + std::to_string(ids[1]) + R"(, "why": "team vision"}])"));
  EXPECT_EQ(Body(theirs)["ended"], json::parse(R"([{"id": )" + std::to_string(bobs) + R"(, "state": "cancelled"}])"));
}

TEST_F(ServerTest, ARefusedSubmitsAuditRecordKeepsTheRequestIdItsBodyGave) {
  // Given bob (nlp) submitting for team vision with a request id in the body, expect 403 and an
  // audit record of the refusal that carries that request id.
  auto r = Call("POST", "/v1/jobs", bob_,
                R"({"request_id": "rid-other-team-1", "job": {"team": "vision", "resources": {"gpus": 1}, "run": ["true"]}})");
  ASSERT_EQ(r->status, 403) << r->body;
  store::AuditFilter f;
  f.verb = "job.submit";
  auto records = store_.ListAudit(f);
  ASSERT_TRUE(records.ok() && !records->empty());
  EXPECT_EQ(records->back().outcome, "denied");
  EXPECT_EQ(records->back().request_id, "rid-other-team-1");
}

TEST_F(ServerTest, AJobWithoutATeamIsItsSubmittersTeams) {
  // Given bob (team nlp) submitting a job that names no team, expect it stored under nlp.
  auto sub = Call("POST", "/v1/jobs", bob_, R"({"job": {"name": "j", "resources": {"gpus": 1}, "run": ["true"]}})");
  ASSERT_EQ(sub->status, 201) << sub->body;
  auto rec = store_.GetJob(JobId(Body(sub)["jobs"][0]["id"].get<int64_t>()));
  EXPECT_EQ((*rec)->request.spec.team, "nlp");
}

TEST_F(ServerTest, AJobThatNamesTheDefaultTeamIsNotTakenForOneThatNamesNone) {
  // Given bob (team nlp) submitting a job that says `team: default`, expect 403 naming both teams
  // (not the job filed under nlp as if it had named none), and nothing stored.
  auto sub = Call("POST", "/v1/jobs", bob_,
                  R"({"job": {"name": "j", "team": "default", "resources": {"gpus": 1}, "run": ["true"]}})");
  ASSERT_EQ(sub->status, 403) << sub->body;
  EXPECT_NE(sub->body.find("'nlp', not 'default'"), std::string::npos) << sub->body;
  auto jobs = store_.ListJobs({});
  ASSERT_TRUE(jobs.ok());
  EXPECT_TRUE(jobs->empty());
}

TEST_F(ServerTest, AnEnvironmentTheControllerCannotRunIsRefusedAtItsLine) {
  // Given a controller without environment presets, expect a job file naming one refused with a
  // 400 at the field's line and column, and nothing stored.
  auto sub = Call("POST", "/v1/jobs", bob_,
                  R"({"yaml": "name: e\nenvironment: pytorch-9\nrun: 'true'\n", "source": "e.yaml"})");
  ASSERT_EQ(sub->status, 400) << sub->body;
  EXPECT_NE(sub->body.find("e.yaml:2:14: environment: names environment 'pytorch-9' but this controller has no "
                           "environment presets"),
            std::string::npos)
      << sub->body;
  EXPECT_EQ(StoredJobs(), 0u);
}

TEST_F(ServerTest, ASourceThatIsNotAStringIsA400) {
  // Given a submit whose `source` (the file name errors cite) is a number, expect 400 naming it.
  auto sub = Call("POST", "/v1/jobs", bob_, R"({"yaml": "run: 'true'", "source": 5})");
  ASSERT_EQ(sub->status, 400) << sub->body;
  EXPECT_NE(sub->body.find("source: expected"), std::string::npos) << sub->body;
}

TEST_F(ServerTest, AStoreThatCannotCheckATokenGets503Not401) {
  // Given a store that cannot be read when a token is first checked (the database unreachable),
  // expect 503 saying the token could not be checked, not 401 (which would send the user for a
  // new token); once the store answers, the same token works, and an unknown one is still 401.
  store_.FailNextTokenReads(1, Status::Unavailable("connection lost"));
  auto r = Call("GET", "/v1/jobs", alice_);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_NE(r->body.find("cannot check the token now"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("connection lost"), std::string::npos) << r->body;
  r = Call("GET", "/v1/jobs", alice_);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  r = Call("GET", "/v1/jobs", "gf_user_0123456789abcdef0123456789abcdef");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401) << r->body;
}

TEST_F(ServerTest, ATokenCreationWhoseMakerCannotBeCheckedIs503NotRevoked) {
  // Given an admin whose token was checked already (held in memory), expect a token creation
  // while the store cannot be read to be 503 with the store's reason, not 401 "revoked".
  ASSERT_EQ(Call("GET", "/v1/jobs", admin_)->status, 200);
  store_.FailNextTokenReads(1, Status::Unavailable("connection lost"));
  auto r = Call("POST", "/v1/tokens", admin_, R"({"subject": "bob", "team": "ml"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_EQ(r->body.find("revoked"), std::string::npos) << r->body;
  EXPECT_EQ(Call("POST", "/v1/tokens", admin_, R"({"subject": "bob", "team": "ml"})")->status, 201);
}

TEST_F(ServerTest, TokensCanBeListedRevokedAndExpire) {
  // Given an admin, expect a team-admin token for vision to make vision user tokens but no admin
  // token and nothing for nlp; the list to show ids and never secrets; a revoked token and an
  // expired one to be refused.
  auto ta = Call("POST", "/v1/tokens", admin_, R"({"role": "team-admin", "subject": "carol", "team": "vision"})");
  ASSERT_EQ(ta->status, 201) << ta->body;
  std::string carol = Body(ta)["token"];
  EXPECT_EQ(Call("POST", "/v1/tokens", carol, R"({"role": "admin"})")->status, 403);
  EXPECT_EQ(Call("POST", "/v1/tokens", carol, R"({"role": "user", "team": "nlp"})")->status, 403);
  EXPECT_EQ(Call("POST", "/v1/tokens", carol, R"({"kind": "join"})")->status, 403);
  auto made = Call("POST", "/v1/tokens", carol, R"({"role": "user", "subject": "dave", "ttl": "1h"})");
  ASSERT_EQ(made->status, 201) << made->body;
  std::string dave = Body(made)["token"];
  EXPECT_EQ(Body(made)["team"], "vision");
  EXPECT_EQ(Call("GET", "/v1/queue", dave)->status, 200);

  auto list = Call("GET", "/v1/tokens", carol);
  ASSERT_EQ(list->status, 200);
  EXPECT_EQ(list->body.find("gf_"), std::string::npos) << "no secret in a list";
  std::set<std::string> teams;
  json listed = Body(list);
  for (const auto& t : listed["tokens"]) teams.insert(t["team"].get<std::string>());
  EXPECT_EQ(teams, std::set<std::string>{"vision"}) << list->status << " " << list->body;

  std::string bob_id = Sha256Hex(bob_).substr(0, 12);
  EXPECT_EQ(Call("POST", "/v1/tokens/" + bob_id + "/revoke", carol)->status, 404) << "another team's token";
  auto revoked = Call("POST", "/v1/tokens/" + bob_id + "/revoke", admin_);
  EXPECT_EQ(revoked->status, 200) << revoked->body;
  EXPECT_EQ(Call("GET", "/v1/queue", bob_)->status, 401);
  {
    // The refusal's audit record names whose revoked token it was.
    store::AuditFilter f;
    f.verb = "auth.login";
    auto refused = store_.ListAudit(f);
    ASSERT_TRUE(refused.ok() && !refused->empty());
    EXPECT_EQ(refused->back().subject, "bob");
    EXPECT_EQ(refused->back().team, "nlp");
  }
  {
    // A join token's revocation is recorded as a join token's (stored with the agent role).
    auto join = Call("POST", "/v1/tokens", admin_, R"({"kind": "join"})");
    ASSERT_EQ(join->status, 201) << join->body;
    ASSERT_EQ(Call("POST", "/v1/tokens/" + Body(join)["id"].get<std::string>() + "/revoke", admin_)->status, 200);
    store::AuditFilter f;
    f.verb = "token.revoke";
    auto log = store_.ListAudit(f);
    ASSERT_TRUE(log.ok() && !log->empty());
    EXPECT_EQ(log->back().reason, "revoked the join token") << log->back().reason;
  }

  clock_.Advance(Duration::Seconds(2 * 3600));
  auto expired = Call("GET", "/v1/queue", dave);
  EXPECT_EQ(expired->status, 401);
  EXPECT_NE(expired->body.find("expired"), std::string::npos) << expired->body;
}

TEST_F(ServerTest, RevokingATeamAdminTokenRevokesWhatItMadeAndWhatThoseMade) {
  // Given a team-admin (lead) who made a team-admin (shadow), who made a user (ghost), and a user
  // (kept) an admin made, expect the admin's revoke of lead to revoke shadow and ghost too, each
  // audited, kept to work on, and the token list to say who made each token.
  auto lead = Call("POST", "/v1/tokens", admin_, R"({"role": "team-admin", "subject": "lead", "team": "vision"})");
  ASSERT_EQ(lead->status, 201) << lead->body;
  auto shadow = Call("POST", "/v1/tokens", Body(lead)["token"].get<std::string>(), R"({"role": "team-admin", "subject": "shadow"})");
  ASSERT_EQ(shadow->status, 201) << shadow->body;
  auto ghost = Call("POST", "/v1/tokens", Body(shadow)["token"].get<std::string>(), R"({"role": "user", "subject": "ghost"})");
  ASSERT_EQ(ghost->status, 201) << ghost->body;
  auto kept = Call("POST", "/v1/tokens", admin_, R"({"role": "user", "subject": "kept", "team": "vision"})");
  ASSERT_EQ(kept->status, 201) << kept->body;
  auto list = Call("GET", "/v1/tokens", admin_);
  ASSERT_EQ(list->status, 200);
  for (const auto& t : Body(list)["tokens"]) {
    if (t["id"] == Body(shadow)["id"]) {
      EXPECT_EQ(t["made_by"], Body(lead)["id"]) << t;
    }
  }
  auto revoked = Call("POST", "/v1/tokens/" + Body(lead)["id"].get<std::string>() + "/revoke", admin_);
  ASSERT_EQ(revoked->status, 200) << revoked->body;
  EXPECT_EQ(Body(revoked)["also_revoked"].size(), 2u) << revoked->body;
  for (const auto* r : {&lead, &shadow, &ghost}) {
    EXPECT_EQ(Call("GET", "/v1/queue", Body(*r)["token"].get<std::string>())->status, 401) << (*r)->body;
  }
  EXPECT_EQ(Call("GET", "/v1/queue", Body(kept)["token"].get<std::string>())->status, 200);
  store::AuditFilter f;
  f.verb = "token.revoke";
  auto audit = store_.ListAudit(f);
  ASSERT_TRUE(audit.ok());
  EXPECT_EQ(audit->size(), 3u);
  bool named_ghost = false;
  for (const auto& a : *audit) named_ghost |= a.object == "token " + Body(ghost)["id"].get<std::string>();
  EXPECT_TRUE(named_ghost);
  // A token made by a team-admin revoked earlier (by itself, while it was its maker's) is reached
  // through it: revoking lead again finishes the walk instead of answering "already revoked".
  auto lead2 = Call("POST", "/v1/tokens", admin_, R"({"role": "team-admin", "subject": "lead2", "team": "vision"})");
  auto mid = Call("POST", "/v1/tokens", Body(lead2)["token"].get<std::string>(), R"({"role": "team-admin", "subject": "mid"})");
  auto leaf = Call("POST", "/v1/tokens", Body(mid)["token"].get<std::string>(), R"({"role": "user", "subject": "leaf"})");
  ASSERT_EQ(leaf->status, 201) << leaf->body;
  ASSERT_EQ(Call("POST", "/v1/tokens/" + Body(mid)["id"].get<std::string>() + "/revoke", admin_)->status, 200);
  EXPECT_EQ(Call("GET", "/v1/queue", Body(leaf)["token"].get<std::string>())->status, 401) << "mid's revoke took leaf";
  auto leaf2 = Call("POST", "/v1/tokens", Body(lead2)["token"].get<std::string>(), R"({"role": "user", "subject": "leaf2"})");
  ASSERT_EQ(Call("POST", "/v1/tokens/" + Body(lead2)["id"].get<std::string>() + "/revoke", admin_)->status, 200);
  EXPECT_EQ(Call("GET", "/v1/queue", Body(leaf2)["token"].get<std::string>())->status, 401);
  EXPECT_EQ(Call("POST", "/v1/tokens/" + Body(lead2)["id"].get<std::string>() + "/revoke", admin_)->status, 409)
      << "nothing left to revoke: already revoked";
  // A team-admin may not revoke the team-admin it was made through (the walk would take its own
  // token; skipping it left everything it made working): 409, and nothing revoked.
  auto top = Call("POST", "/v1/tokens", admin_, R"({"role": "team-admin", "subject": "top", "team": "vision"})");
  auto under = Call("POST", "/v1/tokens", Body(top)["token"].get<std::string>(), R"({"role": "team-admin", "subject": "under"})");
  auto below = Call("POST", "/v1/tokens", Body(under)["token"].get<std::string>(), R"({"role": "team-admin", "subject": "below"})");
  ASSERT_EQ(below->status, 201) << below->body;
  auto up = Call("POST", "/v1/tokens/" + Body(top)["id"].get<std::string>() + "/revoke", Body(below)["token"].get<std::string>());
  EXPECT_EQ(up->status, 409) << up->body;
  EXPECT_NE(up->body.find("ask an admin"), std::string::npos) << up->body;
  EXPECT_EQ(Call("GET", "/v1/queue", Body(top)["token"].get<std::string>())->status, 200);
  // A token revoked after its request was let in makes nothing (the store says it is revoked
  // although the request's check found it valid): 401, no token made.
  auto stale = store_.FindToken(Sha256Hex(Body(under)["token"].get<std::string>()));
  ASSERT_TRUE(stale.ok() && *stale);
  api::TokenRecord gone = **stale;
  gone.revoked = true;
  ASSERT_TRUE(store_.PutToken(gone).ok());
  auto late = Call("POST", "/v1/tokens", Body(under)["token"].get<std::string>(), R"({"role": "user", "subject": "late"})");
  EXPECT_EQ(late->status, 401) << late->body;
  // A team-admin does not see the id of the admin token that made a token of its team.
  auto seen = Call("GET", "/v1/tokens", Body(Call("POST", "/v1/tokens", admin_,
                                                  R"({"role": "team-admin", "subject": "lead3", "team": "vision"})"))["token"]
                                            .get<std::string>());
  ASSERT_EQ(seen->status, 200);
  for (const auto& t : Body(seen)["tokens"]) {
    if (t["subject"] == "kept") {
      EXPECT_EQ(t["made_by"], "") << t;
    }
  }
}

TEST_F(ServerTest, ATokenThatExpiresMakesNoneThatOutlivesItAndTheAuditNamesEachMadeToken) {
  // Given a team-admin token that expires in 2 hours, expect the tokens it makes without a ttl,
  // or with a longer one, to expire with it (and one with a shorter ttl to keep it); expect each
  // token.create record to name the token's id and its expiry, as revocations name theirs.
  auto ta = Call("POST", "/v1/tokens", admin_, R"({"role": "team-admin", "subject": "temp", "team": "vision", "ttl": "2h"})");
  ASSERT_EQ(ta->status, 201) << ta->body;
  const int64_t parent_expiry = Body(ta)["expires_ms"];
  std::string temp = Body(ta)["token"];
  auto forever = Call("POST", "/v1/tokens", temp, R"({"role": "team-admin", "subject": "backdoor"})");
  ASSERT_EQ(forever->status, 201) << forever->body;
  EXPECT_EQ(Body(forever)["expires_ms"], parent_expiry);
  auto longer = Call("POST", "/v1/tokens", temp, R"({"role": "user", "subject": "u", "ttl": "30d"})");
  ASSERT_EQ(longer->status, 201) << longer->body;
  EXPECT_EQ(Body(longer)["expires_ms"], parent_expiry);
  auto shorter = Call("POST", "/v1/tokens", temp, R"({"role": "user", "subject": "v", "ttl": "1h"})");
  ASSERT_EQ(shorter->status, 201) << shorter->body;

  EXPECT_LT(Body(shorter)["expires_ms"].get<int64_t>(), parent_expiry);
  clock_.Advance(Duration::Hours(3));
  EXPECT_EQ(Call("GET", "/v1/queue", std::string(Body(forever)["token"]))->status, 401);

  store::AuditFilter f;
  f.verb = "token.create";
  auto made = store_.ListAudit(f);
  ASSERT_TRUE(made.ok());
  ASSERT_GE(made->size(), 4u);
  const api::AuditRecord& last = made->back();
  EXPECT_EQ(last.object, "token " + std::string(Body(shorter)["id"])) << last.object;
  EXPECT_NE(last.reason.find("expires 20"), std::string::npos) << last.reason;
  EXPECT_EQ((*made)[made->size() - 4].object, "token " + std::string(Body(ta)["id"]));
  // A ttl of nothing, or of more than a century, is refused saying its range.
  for (const char* ttl : {"0s", "36501d", "99999999d"}) {
    auto bad = Call("POST", "/v1/tokens", admin_, std::string(R"({"role": "user", "subject": "w", "ttl": ")") + ttl + "\"}");
    EXPECT_EQ(bad->status, 400) << bad->body;
    EXPECT_NE(bad->body.find("ttl: expected a duration from 1s to 100 years (36500d)"), std::string::npos) << bad->body;
  }
}

TEST_F(ServerTest, ATeamAdminNeitherSeesNorRevokesTokensAboveItsRole) {
  // Given an admin token and a metrics token that name team vision, and a vision team-admin,
  // expect the team-admin's list to leave them out and their revokes to answer 404, the admin's
  // token to keep working; its own team's user tokens it lists and revokes.
  auto vision_admin = Call("POST", "/v1/tokens", admin_, R"({"role": "admin", "subject": "ops", "team": "vision"})");
  ASSERT_EQ(vision_admin->status, 201) << vision_admin->body;
  auto metrics = Call("POST", "/v1/tokens", admin_, R"({"role": "metrics", "subject": "prom", "team": "vision"})");
  ASSERT_EQ(metrics->status, 201) << metrics->body;
  auto ta = Call("POST", "/v1/tokens", admin_, R"({"role": "team-admin", "subject": "carol", "team": "vision"})");
  ASSERT_EQ(ta->status, 201) << ta->body;
  const std::string carol = Body(ta)["token"];
  // And a team-admin of team "default" (which an admin must name: left out, it is refused): the
  // bootstrap admin's token (no team) is not one of its team's.
  auto no_team = Call("POST", "/v1/tokens", admin_, R"({"role": "team-admin", "subject": "erin"})");
  EXPECT_EQ(no_team->status, 400) << no_team->body;
  EXPECT_NE(no_team->body.find("a team-admin token needs the team it administers"), std::string::npos) << no_team->body;
  auto tb = Call("POST", "/v1/tokens", admin_, R"({"role": "team-admin", "subject": "erin", "team": "default"})");
  ASSERT_EQ(tb->status, 201) << tb->body;
  const std::string erin = Body(tb)["token"];

  std::set<std::string> roles;
  const json carols = Body(Call("GET", "/v1/tokens", carol));
  for (const auto& t : carols["tokens"]) roles.insert(t["role"].get<std::string>());
  EXPECT_EQ(roles, (std::set<std::string>{"team-admin", "user"})) << carols.dump();
  const json erins = Body(Call("GET", "/v1/tokens", erin));
  ASSERT_FALSE(erins["tokens"].empty()) << erins.dump();
  for (const auto& t : erins["tokens"]) EXPECT_NE(t["role"], "admin") << t.dump();
  for (const std::string& secret : {Body(vision_admin)["token"].get<std::string>(), Body(metrics)["token"].get<std::string>()}) {
    const std::string id = Sha256Hex(secret).substr(0, 12);
    EXPECT_EQ(Call("POST", "/v1/tokens/" + id + "/revoke", carol)->status, 404);
  }
  EXPECT_EQ(Call("POST", "/v1/tokens/" + Sha256Hex(admin_).substr(0, 12) + "/revoke", erin)->status, 404);
  EXPECT_EQ(Call("GET", "/v1/audit", Body(vision_admin)["token"].get<std::string>())->status, 200);
  EXPECT_EQ(Call("GET", "/v1/audit", admin_)->status, 200);
  EXPECT_EQ(Call("POST", "/v1/tokens/" + Sha256Hex(alice_).substr(0, 12) + "/revoke", carol)->status, 200);
}

TEST_F(ServerTest, ATeamAdminsSubjectsAreQualifiedByItsTeam) {
  // Given a vision team-admin, expect the tokens it makes for bob (nlp's subject), for the
  // bootstrap admin's subject, for the controller's own and for a subject the user map runs as a
  // Unix user to be named vision/bob, vision/admin, ...: none of them is who it names, and the
  // user map's entry for "mapped" does not reach vision/mapped (it runs as vision's user); an
  // admin names subjects as given.
  auto ta = Call("POST", "/v1/tokens", admin_, R"({"role": "team-admin", "subject": "carol", "team": "vision"})");
  ASSERT_EQ(ta->status, 201) << ta->body;
  EXPECT_EQ(Body(ta)["subject"], "carol");
  const std::string carol = Body(ta)["token"];
  for (const std::string subject : {"bob", "admin", "autoscaler", "mapped"}) {
    auto r = Call("POST", "/v1/tokens", carol, R"({"role": "user", "subject": ")" + subject + "\"}");
    ASSERT_EQ(r->status, 201) << subject << ": " << r->body;
    EXPECT_EQ(Body(r)["subject"], "vision/" + subject) << r->body;
    EXPECT_EQ(Body(r)["team"], "vision") << r->body;
  }
  ServerOptions so;
  so.user_map.teams["vision"] = "gf-vision";
  so.user_map.subjects["mapped"] = "gf-mapped";
  EXPECT_EQ(so.user_map.For("vision/mapped", "vision"), "gf-vision");
  EXPECT_EQ(so.user_map.For("mapped", "nlp"), "gf-mapped");
  auto by_admin = Call("POST", "/v1/tokens", admin_, R"({"role": "user", "subject": "mapped", "team": "nlp"})");
  ASSERT_EQ(by_admin->status, 201) << by_admin->body;
  EXPECT_EQ(Body(by_admin)["subject"], "mapped");
  // Names that are not names: refused for everyone, and nothing is made.
  const size_t before = store_.ListTokens()->size();
  EXPECT_EQ(Call("POST", "/v1/tokens", admin_, R"({"role": "user", "subject": "w", "team": "Team Alpha!"})")->status, 400);
  EXPECT_EQ(Call("POST", "/v1/tokens", admin_, R"({"role": "user", "subject": "a\nb", "team": "nlp"})")->status, 400);
  EXPECT_EQ(Call("POST", "/v1/tokens", carol, R"({"role": "user", "subject": "x/y"})")->status, 400);
  EXPECT_EQ(store_.ListTokens()->size(), before);
}

TEST_F(ServerTest, AmbiguousOrPointlessRequestsAreRefusedNotGuessed) {
  // Given a join token asked for with a role, a submit that gives both `job` and `yaml`, and a
  // token revoked twice, expect 400, 400 and 409, with nothing made or submitted.
  const size_t tokens = store_.ListTokens()->size();
  auto join = Call("POST", "/v1/tokens", admin_, R"({"kind": "join", "role": "admin"})");
  EXPECT_EQ(join->status, 400) << join->body;
  EXPECT_EQ(store_.ListTokens()->size(), tokens);
  // (What earlier CLIs sent with every join token is still taken.)
  EXPECT_EQ(Call("POST", "/v1/tokens", admin_, R"({"kind": "join", "role": "user"})")->status, 201);
  auto both = Call("POST", "/v1/jobs", alice_,
                   R"({"job": {"resources": {"gpus": 1}, "run": ["true"]}, "yaml": "run: ["false"]
resources: {gpus: 1}
"})");
  EXPECT_EQ(both->status, 400) << both->body;
  store::JobFilter f;
  EXPECT_TRUE(store_.ListJobs(f)->empty());
  const std::string bob_id = Sha256Hex(bob_).substr(0, 12);
  EXPECT_EQ(Call("POST", "/v1/tokens/" + bob_id + "/revoke", admin_)->status, 200);
  auto again = Call("POST", "/v1/tokens/" + bob_id + "/revoke", admin_);
  EXPECT_EQ(again->status, 409) << again->body;
  EXPECT_NE(again->body.find("already revoked"), std::string::npos) << again->body;
}

TEST_F(ServerTest, AnotherTeamsJobIsShownWithoutItsReasons) {
  // Given a vision job whose last transition names its paths, expect bob (nlp) to see its state
  // in the list, the queue, the job and its history but not those reasons, and explain to give
  // him no reasons of it; alice sees them all; a job that does not exist is 404 for explain.
  auto sub = Call("POST", "/v1/jobs", alice_,
                  R"({"job": {"name": "secret", "team": "vision", "resources": {"gpus": 1}, "run": ["true"],
                      "workdir": "/srv/vision-secret"}})");
  ASSERT_EQ(sub->status, 201) << sub->body;
  const JobId id(Body(sub)["jobs"][0]["id"].get<int64_t>());
  const std::string path = "/v1/jobs/" + std::to_string(id.value());
  auto rec = store_.GetJob(id);
  ASSERT_TRUE(rec.ok() && rec->has_value());
  api::JobRecord failed = **rec;
  failed.state = api::JobState::kFailed;
  failed.reason = "exited with code 127 (cannot start: exec /srv/vision-secret/train: no such file)";
  failed.updated = WallNow();
  ASSERT_TRUE(store_.Update({store::JobUpdate{failed, api::Transition{WallNow(), api::JobState::kPending,
                                                                       api::JobState::kFailed, failed.reason}}})
                  .ok());
  for (const std::string& route : {std::string("/v1/jobs"), path}) {
    auto theirs = Call("GET", route, bob_);
    ASSERT_EQ(theirs->status, 200) << route << ": " << theirs->body;
    EXPECT_EQ(theirs->body.find("vision-secret"), std::string::npos) << route << ": " << theirs->body;
    EXPECT_NE(theirs->body.find("the reason is shown to that team"), std::string::npos) << route << ": " << theirs->body;
    auto own = Call("GET", route, alice_);
    ASSERT_EQ(own->status, 200) << route;
    EXPECT_NE(own->body.find("cannot start: exec /srv/vision-secret"), std::string::npos) << route << ": " << own->body;
  }
  // (The engine still holds the job as waiting: explain answers from it.)
  auto explain = Call("GET", path + "/explain", bob_);
  ASSERT_EQ(explain->status, 200) << explain->body;
  ASSERT_EQ(Body(explain)["reasons"].size(), 1u) << explain->body;
  EXPECT_NE(Body(explain)["reasons"][0].get<std::string>().find("shown to that team"), std::string::npos);
  EXPECT_GE(Body(Call("GET", path + "/explain", alice_))["reasons"].size(), 1u);
  EXPECT_EQ(Body(Call("GET", path + "/explain", alice_))["reasons"][0].get<std::string>().find("shown to that team"),
            std::string::npos);
  EXPECT_EQ(Body(Call("GET", path, bob_))["state"], "failed");
  EXPECT_EQ(Call("GET", "/v1/jobs/999999/explain", bob_)->status, 404);
}

TEST_F(ServerTest, AQuotaOfAnotherTeamIsRefusedNotShownAsNone) {
  // Given bob (nlp), expect his read of vision's quota refused with 403 naming his team, his own
  // team's answered, and a team that is no name a 400.
  auto theirs = Call("GET", "/v1/quotas?team=vision", bob_);
  EXPECT_EQ(theirs->status, 403) << theirs->body;
  EXPECT_NE(theirs->body.find("team nlp"), std::string::npos) << theirs->body;
  EXPECT_EQ(Call("GET", "/v1/quotas?team=nlp", bob_)->status, 200);
  EXPECT_EQ(Call("GET", "/v1/quotas?team=a%20b", admin_)->status, 400);
}

// The table's answer for a role on a route, as docs/security.md writes it.
std::string Cell(Role role, Verb verb) {
  switch (ScopeOf(role, verb)) {
    case Scope::kAll: return "yes";
    case Scope::kOwnTeam: return role == Role::kAgent ? "own node" : "own team";
    case Scope::kNone: return "-";
  }
  return "?";
}

std::string MatrixMarkdown() {
  std::string out = "| route | verb |";
  for (Role r : AllRoles()) out += std::string(" ") + RoleName(r) + " |";
  out += "\n|---|---|";
  for (size_t i = 0; i < AllRoles().size(); ++i) out += "---|";
  out += "\n";
  for (const auto& rule : ApiRoutes()) {
    if (rule.verb == Verb::kHealth || rule.verb == Verb::kWebUi) continue;
    out += std::string("| `") + rule.method + " " + rule.example + "` | " + VerbName(rule.verb) + " |";
    for (Role r : AllRoles()) out += " " + Cell(r, rule.verb) + " |";
    out += "\n";
  }
  return out;
}

TEST(RbacTest, TheMatrixInDocsSecurityIsTheTableInTheCode) {
  // Given docs/security.md, expect its role matrix to be exactly the one the code enforces.
  std::ifstream in(std::string(GPUFLEET_SOURCE_DIR) + "/docs/security.md");
  std::stringstream doc;
  doc << in.rdbuf();
  std::string want = MatrixMarkdown();
  EXPECT_NE(doc.str().find(want), std::string::npos) << "docs/security.md should contain:\n" << want;
}

TEST_F(ServerTest, EveryRouteAnswersEveryRoleAsTheTableSays) {
  // Given a token of every role (team vision) and a vision job, expect each route to refuse the
  // roles without its verb (403) and no token (401), and to let the others through to the handler.
  auto sub = Call("POST", "/v1/jobs", alice_, std::string(kJob) + R"("request_id": "matrix"})");
  ASSERT_EQ(sub->status, 201) << sub->body;
  std::map<Role, std::string> tokens;
  for (Role r : AllRoles()) {
    if (r == Role::kAgent) {
      tokens[r] = RegisterNode("matrix-node");
    } else if (r == Role::kJoin) {
      tokens[r] = join_;
    } else {
      tokens[r] = *auth_->Create(api::TokenKind::kUser, std::string("m-") + RoleName(r), RoleName(r), "vision", WallNow());
    }
  }
  for (const auto& rule : ApiRoutes()) {
    if (rule.verb == Verb::kHealth || rule.verb == Verb::kWebUi) continue;
    std::string body = rule.verb == Verb::kAgentReport ? api::ToJson(api::Heartbeat{}).dump() : "{}";
    auto none = Call(rule.method, rule.example, "", body, rule.agents);
    ASSERT_TRUE(none);
    EXPECT_EQ(none->status, 401) << rule.method << " " << rule.example << " without a token";
    for (Role r : AllRoles()) {
      auto got = Call(rule.method, rule.example, tokens[r], body, rule.agents);
      ASSERT_TRUE(got) << rule.example;
      if (Holds(r, rule.verb)) {
        EXPECT_NE(got->status, 401) << rule.example << " as " << RoleName(r) << ": " << got->body;
        EXPECT_NE(got->status, 403) << rule.example << " as " << RoleName(r) << ": " << got->body;
      } else {
        EXPECT_EQ(got->status, 403) << rule.example << " as " << RoleName(r) << ": " << got->body;
      }
    }
  }
}

std::vector<api::AuditRecord> AuditLog(store::StateStore& store) {
  auto r = store.ListAudit({});
  return r.ok() ? *r : std::vector<api::AuditRecord>{};
}

TEST_F(ServerTest, EveryChangeAndEveryRefusalLeavesExactlyOneAuditRecord) {
  // Given each mutating route called once allowed, once by a role without its verb and once with
  // a bad token, expect one audit record per call, naming caller, source, verb and outcome.
  std::string agent_body = RegisterBody("audit-node");
  auto sub = Call("POST", "/v1/jobs", alice_, std::string(kJob) + R"("request_id": "a1"})");
  ASSERT_EQ(sub->status, 201);
  std::string id = std::to_string(Body(sub)["jobs"][0]["id"].get<int64_t>());
  auto sub3 = Call("POST", "/v1/jobs", alice_, std::string(kJob) + R"("request_id": "a3"})");
  ASSERT_EQ(sub3->status, 201);
  std::string id3 = std::to_string(Body(sub3)["jobs"][0]["id"].get<int64_t>());
  std::string viewer = *auth_->Create(api::TokenKind::kUser, "vic", "viewer", "vision", WallNow());
  struct Case {
    std::string method, path, body, verb;
    bool agents;
  };
  std::vector<Case> cases = {
      {"POST", "/v1/jobs", std::string(kJob) + R"("request_id": "a2"})", "job.submit", false},
      {"POST", "/v1/jobs/" + id + "/cancel", "", "job.cancel", false},
      {"POST", "/v1/jobs/cancel", R"({"ids": [)" + id3 + "]}", "job.cancel", false},
      {"POST", "/v1/nodes/audit-node/drain", "", "node.drain", false},
      {"POST", "/v1/nodes/audit-node/undrain", "", "node.undrain", false},
      {"POST", "/v1/teams/vision/budget", R"({"hard": 10})", "budget.set", false},
      {"POST", "/v1/tokens", R"({"subject": "erin", "team": "vision"})", "token.create", false},
  };
  ASSERT_FALSE(RegisterNode("audit-node").empty());
  for (const auto& c : cases) {
    size_t before = AuditLog(store_).size();
    auto ok = Call(c.method, c.path, admin_, c.body, c.agents);
    ASSERT_LT(ok->status, 300) << c.path << ": " << ok->body;
    auto denied = Call(c.method, c.path, viewer, c.body, c.agents);
    EXPECT_EQ(denied->status, 403) << c.path;
    auto bad = Call(c.method, c.path, "gf_user_00000000000000000000000000000000", c.body, c.agents);
    EXPECT_EQ(bad->status, 401) << c.path;
    auto log = AuditLog(store_);
    ASSERT_EQ(log.size(), before + 3) << c.path;
    const auto& a = log[before];
    EXPECT_EQ(a.verb, c.verb);
    EXPECT_EQ(a.outcome, "allowed");
    EXPECT_EQ(a.subject, "admin");
    EXPECT_EQ(a.role, "admin");
    EXPECT_EQ(a.source, "127.0.0.1");
    EXPECT_EQ(log[before + 1].outcome, "denied");
    EXPECT_EQ(log[before + 1].subject, "vic");
    EXPECT_EQ(log[before + 1].verb, c.verb);
    EXPECT_NE(log[before + 1].reason.find("may not"), std::string::npos) << log[before + 1].reason;
    // A refusal of a call on a job, node, team or token names it as the allowed call does
    // (it is refused before routing); a refused create has no object yet.
    if (std::count(c.path.begin(), c.path.end(), '/') > 2 && c.path != "/v1/jobs/cancel") {
      EXPECT_EQ(log[before + 1].object, a.object) << c.path;
    }
    if (c.path == "/v1/jobs/cancel") {
      EXPECT_EQ(a.object, "job " + id3);  // the jobs the body named
    }
    EXPECT_EQ(log[before + 2].verb, "auth.login");
    EXPECT_EQ(log[before + 2].outcome, "denied");
  }
  // A node's registration is a change too.
  size_t before = AuditLog(store_).size();
  ASSERT_FALSE(RegisterNode("audit-node-2").empty());
  auto log = AuditLog(store_);
  ASSERT_EQ(log.size(), before + 1);
  EXPECT_EQ(log.back().verb, "node.register");
  EXPECT_EQ(log.back().role, "join");
  EXPECT_EQ(log.back().object, "node audit-node-2");
  // ... committed with the node's record: a failed write leaves only the failed attempt.
  before = log.size();
  store_.FailNextWrite(Status::Unavailable("disk full"));
  auto r = Call("POST", "/v1/agents/register", join_, RegisterBody("audit-node-3"), true);
  EXPECT_EQ(r->status, 503) << r->body;
  log = AuditLog(store_);
  ASSERT_EQ(log.size(), before + 1);
  EXPECT_EQ(log.back().outcome, "failed");
  // Every verb recorded here is one GET /v1/audit?verb= accepts (its list is kept by hand).
  const std::vector<std::string>& known = AuditVerbNames();
  for (const auto& rec : log) {
    EXPECT_TRUE(std::find(known.begin(), known.end(), rec.verb) != known.end()) << rec.verb;
  }
}

TEST_F(ServerTest, ATokenAndItsAuditRecordCommitTogether) {
  // Given a store that fails the next write, expect a token creation to fail with no token and
  // no "allowed" record stored, and one "failed" record of the attempt.
  size_t tokens = store_.ListTokens()->size();
  size_t before = AuditLog(store_).size();
  store_.FailNextWrite(Status::Unavailable("disk full"));
  auto r = Call("POST", "/v1/tokens", admin_, R"({"subject": "frank"})");
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_EQ(store_.ListTokens()->size(), tokens);
  auto log = AuditLog(store_);
  ASSERT_EQ(log.size(), before + 1);
  EXPECT_EQ(log.back().verb, "token.create");
  EXPECT_EQ(log.back().outcome, "failed");
}

TEST_F(ServerTest, ChangesTheEngineCommitsAndTheirAuditRecordsCommitTogether) {
  // Given a submit, a budget, a quota and a drain that the engine makes durable, expect one
  // "allowed" record each, written with the change (the submit's names the job id the store
  // gave); given a store that fails the next write, expect a submit and a budget to fail with
  // nothing stored and only a "failed" record of each attempt.
  RegisterNode("node-q");
  size_t before = AuditLog(store_).size();
  auto sub = Call("POST", "/v1/jobs", alice_, std::string(kJob) + R"("request_id": "aud"})");
  ASSERT_EQ(sub->status, 201) << sub->body;
  const std::string id = std::to_string(Body(sub)["jobs"][0]["id"].get<int64_t>());
  ASSERT_EQ(Call("POST", "/v1/teams/vision/budget", admin_, R"({"hard": 10})")->status, 200);
  ASSERT_EQ(Call("POST", "/v1/teams/vision/quota", admin_, R"({"gpus": 4})")->status, 200);
  ASSERT_EQ(Call("POST", "/v1/nodes/node-q/drain", admin_)->status, 200);
  auto log = AuditLog(store_);
  ASSERT_EQ(log.size(), before + 4);
  EXPECT_EQ(log[before].verb, "job.submit");
  EXPECT_EQ(log[before].object, "job " + id);
  EXPECT_EQ(log[before].request_id, "aud");
  EXPECT_EQ(log[before].outcome, "allowed");
  EXPECT_EQ(log[before].subject, "alice");
  EXPECT_EQ(log[before + 1].verb, "budget.set");
  EXPECT_EQ(log[before + 2].verb, "quota.set");
  EXPECT_EQ(log[before + 3].verb, "node.drain");
  EXPECT_EQ(log[before + 3].object, "node node-q");

  size_t jobs = StoredJobs();
  store_.FailNextWrite(Status::Unavailable("disk full"));
  auto failed = Call("POST", "/v1/jobs", alice_, std::string(kJob) + R"("request_id": "aud2"})");
  EXPECT_EQ(failed->status, 503) << failed->body;
  EXPECT_EQ(StoredJobs(), jobs);
  store_.FailNextWrite(Status::Unavailable("disk full"));
  EXPECT_EQ(Call("POST", "/v1/teams/nlp/budget", admin_, R"({"hard": 10})")->status, 503);
  log = AuditLog(store_);
  ASSERT_EQ(log.size(), before + 6);
  EXPECT_EQ(log[before + 4].verb, "job.submit");
  EXPECT_EQ(log[before + 4].outcome, "failed");
  EXPECT_EQ(log[before + 5].verb, "budget.set");
  EXPECT_EQ(log[before + 5].outcome, "failed");
}

TEST_F(ServerTest, AnArraySubmitIsAuditedAsARangeOfJobs) {
  // Given an array of five tasks, then a single job, expect the audit objects "jobs A-B (5)" (not
  // every id: an array of 100,000 tasks would make a record of 600 KB) and "job C".
  auto arr = Call("POST", "/v1/jobs", alice_,
                  R"({"job": {"name": "s-{{i}}", "team": "vision", "resources": {"gpus": 1}, "run": ["echo", "{{i}}"],
                              "array": {"i": [1, 2, 3, 4, 5]}}, "request_id": "a1"})");
  ASSERT_EQ(arr->status, 201) << arr->body;
  const json jobs = Body(arr)["jobs"];
  ASSERT_EQ(jobs.size(), 5u);
  store::AuditFilter f;
  f.verb = "job.submit";
  auto records = store_.ListAudit(f);
  ASSERT_TRUE(records.ok() && !records->empty());
  EXPECT_EQ(records->back().object, "jobs " + jobs[0]["id"].dump() + "-" + jobs[4]["id"].dump() + " (5)");
  auto one = Call("POST", "/v1/jobs", alice_, std::string(kJob) + R"("request_id": "a2"})");
  ASSERT_EQ(one->status, 201) << one->body;
  records = store_.ListAudit(f);
  ASSERT_TRUE(records.ok() && !records->empty());
  EXPECT_EQ(records->back().object, "job " + Body(one)["jobs"][0]["id"].dump());
}

TEST_F(ServerTest, AdminsReadTheAuditLogWithFilters) {
  // Given some changes, expect GET /v1/audit to list them for an admin, filtered by subject and
  // verb prefix, and to refuse a user.
  Call("POST", "/v1/jobs", alice_, std::string(kJob) + R"("request_id": "f1"})");
  Call("POST", "/v1/tokens", admin_, R"({"subject": "gina"})");
  auto all = Call("GET", "/v1/audit", admin_);
  ASSERT_EQ(all->status, 200) << all->body;
  json body = Body(all);
  EXPECT_GE(body["records"].size(), 2u);
  auto alices = Call("GET", "/v1/audit?subject=alice&verb=job.", admin_);
  json a = Body(alices);
  ASSERT_EQ(a["records"].size(), 1u) << alices->body;
  EXPECT_EQ(a["records"][0]["verb"], "job.submit");
  EXPECT_EQ(a["records"][0]["request_id"], "f1");
  EXPECT_EQ(Call("GET", "/v1/audit", alice_)->status, 403);
  // A verb the log cannot hold is a 400 that names the closest, not an empty answer.
  auto typo = Call("GET", "/v1/audit?verb=job.sumbit", admin_);
  EXPECT_EQ(typo->status, 400) << typo->body;
  EXPECT_NE(typo->body.find("unknown audit verb 'job.sumbit' (closest: job.submit)"), std::string::npos) << typo->body;
  EXPECT_EQ(Call("GET", "/v1/audit?verb=jobz.", admin_)->status, 400);
  for (const char* ok : {"pool.rent", "auth.login", "node.", "node.undrain"}) {
    EXPECT_EQ(Call("GET", std::string("/v1/audit?verb=") + ok, admin_)->status, 200) << ok;
  }
}

class LimitedServerTest : public ServerTest {
 protected:
  void Configure(ServerOptions& so) override {
    so.token_rate_per_s = 0.001;  // one request per 1000 s once the burst is spent
    so.token_burst = 3;
    so.failed_auth_per_s = 0.5;  // one more every 2 s once the burst is spent
    so.failed_auth_burst = 4;
    so.max_log_bytes_per_part = 16;
  }
};

TEST_F(LimitedServerTest, ATokenOverItsRateGets429WithRetryAfter) {
  // Given a burst of 3, expect the 4th request of one token to be 429 with Retry-After, and
  // another token to be unaffected.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Call("GET", "/v1/queue", alice_)->status, 200);
  auto limited = Call("GET", "/v1/queue", alice_);
  EXPECT_EQ(limited->status, 429) << limited->body;
  EXPECT_FALSE(limited->get_header_value("Retry-After").empty());
  EXPECT_EQ(Call("GET", "/v1/queue", bob_)->status, 200);
}

// Sends a GET with `token` from `from` (an address of 127.0.0.0/8); returns the status code.
int StatusFrom(int port, const char* from, const std::string& path, const std::string& token) {
  int fd = Connect(port, from);
  if (fd < 0) return -1;
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token + "\r\nConnection: close\r\n\r\n";
  ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string answer = ReadAll(fd);
  ::close(fd);
  return answer.size() > 12 ? std::stoi(answer.substr(9, 3)) : -1;
}

TEST_F(LimitedServerTest, AnAddressSendingBadTokensIsHeldAndNotAuditedOneByOne) {
  // Given a burst of 4 failed authentications per address, expect 127.0.0.2's bad tokens answered
  // 401 four times, then 429 with one audit record saying so however many follow; a valid token
  // from that address, and a bad one from another address, are not held; once the bucket has
  // refilled (the clock moved 2 s), a bad token is 401 again and the audit log counts the ones
  // held back.
  auto logins = [this] {
    store::AuditFilter f;
    f.limit = 100000;
    f.verb = "auth.login";
    return store_.ListAudit(f)->size();
  };
  const size_t before = logins();
  const std::string bad = "gf_user_00000000000000000000000000000000";
  for (int i = 0; i < 4; ++i) EXPECT_EQ(StatusFrom(server_->port(), "127.0.0.2", "/v1/queue", bad), 401) << i;
  for (int i = 0; i < 20; ++i) EXPECT_EQ(StatusFrom(server_->port(), "127.0.0.2", "/v1/queue", bad), 429) << i;
  EXPECT_EQ(logins(), before + 4 + 1);
  EXPECT_EQ(StatusFrom(server_->port(), "127.0.0.2", "/v1/queue", admin_), 200);
  EXPECT_EQ(StatusFrom(server_->port(), "127.0.0.3", "/v1/queue", bad), 401);
  clock_.Advance(Duration::Seconds(2));
  EXPECT_EQ(StatusFrom(server_->port(), "127.0.0.2", "/v1/queue", bad), 401);
  // Still held (the bucket is not full again): the next one is 429 and starts no new record.
  EXPECT_EQ(StatusFrom(server_->port(), "127.0.0.2", "/v1/queue", bad), 429);
  store::AuditFilter f;
  f.limit = 100000;
  f.verb = "auth.login";
  auto records = *store_.ListAudit(f);
  ASSERT_EQ(records.size(), before + 4 + 1 + 1 + 1);
  bool counted = false;
  for (const auto& r : records) counted = counted || r.reason.find("and 19 earlier requests") != std::string::npos;
  EXPECT_TRUE(counted) << "the 20 held back, less the one recorded when holding began";
}

TEST(FailureKeyTest, AnIPv6ClientIsCountedByItsSlash64) {
  // Expect IPv4 addresses as they are, an IPv4-mapped IPv6 address as its IPv4 address, and
  // two addresses of one /64 under one key.
  EXPECT_EQ(FailureKey("127.0.0.2"), "127.0.0.2");
  EXPECT_EQ(FailureKey("::ffff:10.1.2.3"), "10.1.2.3");
  EXPECT_EQ(FailureKey("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::/64");
  EXPECT_EQ(FailureKey("2001:db8:1:2:bbbb:cccc:dddd:eeee"), FailureKey("2001:db8:1:2::7"));
  EXPECT_NE(FailureKey("2001:db8:1:3::1"), FailureKey("2001:db8:1:2::1"));
}

TEST_F(LimitedServerTest, ALogIsCutAtItsCapWithAMarker) {
  // Given a 16-byte cap per part, expect the first 16 bytes kept, a marker line after them, the
  // agent told everything was taken (so it moves on), and later uploads dropped.
  std::string a = RegisterNode("node-a");
  auto sub = Call("POST", "/v1/jobs", admin_, std::string(kJob) + R"("request_id": "cap"})");
  int64_t id = Body(sub)["jobs"][0]["id"].get<int64_t>();
  std::string base = "/v1/agents/logs?job=" + std::to_string(id) + "&attempt=1&part=0&offset=";
  int status = 0;
  for (int i = 0; i < 200 && status != 200; ++i) {
    status = Call("POST", base + "0", a, "0123456789abcdefXYZ-dropped\n", true)->status;
  }
  ASSERT_EQ(status, 200);
  auto more = Call("POST", base + "28", a, "second-chunk\n", true);
  EXPECT_EQ(more->status, 200) << more->body;
  EXPECT_EQ(Body(more)["size"], 28 + 13);
  std::ifstream in(dir_ / "logs" / ("job-" + std::to_string(id)) / "a1.p0.log");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str().substr(0, 16), "0123456789abcdef");
  EXPECT_NE(text.str().find("this log is cut at 16 bytes"), std::string::npos) << text.str();
  EXPECT_EQ(text.str().find("XYZ"), std::string::npos);
  EXPECT_EQ(text.str().find("second-chunk"), std::string::npos);
}

// Requests one after another on one kept-alive connection: each answered, whether the worker
// hands the socket back to epoll at once (wait 0) or waits on it for the next request (a wait far
// longer than the test, so the second request is always served by the waiting worker).
class KeepAliveServerTest : public ServerTest, public ::testing::WithParamInterface<int> {
 protected:
  void Configure(ServerOptions& so) override { so.user_limits.keep_alive_wait = Duration::Seconds(GetParam()); }
};

TEST_P(KeepAliveServerTest, RequestsInTurnOnOneConnectionAreEachAnswered) {
  int fd = Connect(server_->port());
  ASSERT_GE(fd, 0);
  struct Closer {
    int& fd;
    ~Closer() {
      if (fd >= 0) ::close(fd);
    }
  } closer{fd};
  const std::string get = "GET /v1/queue HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + alice_ + "\r\n\r\n";
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(::send(fd, get.data(), get.size(), MSG_NOSIGNAL), static_cast<ssize_t>(get.size()));
    std::string answer = ReadAll(fd);
    EXPECT_EQ(answer.rfind("HTTP/1.1 200 ", 0), 0u) << "request " << i << ": " << answer.substr(0, 200);
  }
  // A client that hangs up ends the wait: the worker closes the connection and the server stops
  // without waiting out the rest of it.
  ::close(fd);
  fd = -1;
  auto health = Call("GET", "/v1/health", "");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

INSTANTIATE_TEST_SUITE_P(WaitSeconds, KeepAliveServerTest, ::testing::Values(0, 3600));

// TLS: the listeners serve HTTPS with the dev CA's certificate.
class TlsServerTest : public ServerTest {
 protected:
  void Configure(ServerOptions& so) override {
    auto certs = EnsureDevCertificates((dir_ / "tls").string());
    ASSERT_TRUE(certs.ok()) << certs.status().message();
    certs_ = *certs;
    so.tls_cert = certs_.cert_file;
    so.tls_key = certs_.key_file;
  }
  // An HTTPS client of the API (or the agent listener) that trusts `ca` alone; empty: the
  // system's CAs.
  std::unique_ptr<httplib::Client> Https(const std::string& ca, bool agent_port = false) {
    auto c = std::make_unique<httplib::Client>("https://127.0.0.1:" +
                                               std::to_string(agent_port ? server_->agent_port() : server_->port()));
    if (!ca.empty()) c->set_ca_cert_path(ca);
    c->enable_server_certificate_verification(true);
    c->set_read_timeout(30, 0);
    return c;
  }
  DevCertificates certs_;
};

TEST_F(TlsServerTest, ClientsThatPinTheCaTalkHttpsOnBothListeners) {
  // Given clients trusting the dev CA, expect the API to answer a user (health, queue, a submit
  // with a body) and the agent listener to register a node.
  auto api = Https(certs_.ca_file);
  httplib::Headers alice{{"Authorization", "Bearer " + alice_}};
  auto health = api->Get("/v1/health");
  ASSERT_TRUE(health) << httplib::to_string(health.error());
  EXPECT_EQ(health->status, 200);
  auto sub = api->Post("/v1/jobs", alice, std::string(kJob) + R"("request_id": "tls"})", "application/json");
  ASSERT_TRUE(sub);
  EXPECT_EQ(sub->status, 201) << sub->body;
  auto queue = api->Get("/v1/queue", alice);
  ASSERT_TRUE(queue);
  EXPECT_EQ(queue->status, 200);
  auto agents = Https(certs_.ca_file, true);
  auto reg = agents->Post("/v1/agents/register", {{"Authorization", "Bearer " + join_}}, RegisterBody("node-tls"),
                          "application/json");
  ASSERT_TRUE(reg);
  EXPECT_EQ(reg->status, 200) << reg->body;
}

TEST_F(TlsServerTest, BodiesLargerThanOneTlsReadArriveWhole) {
  // Given a submit whose body spans several TLS records (a 40 KB env value; the listener reads
  // 4 KiB at a time), expect it stored as sent, as over plain HTTP.
  auto api = Https(certs_.ca_file);
  const std::string big(40'000, 'a');
  auto sub = api->Post("/v1/jobs", {{"Authorization", "Bearer " + alice_}},
                       R"({"job": {"name": "big", "team": "vision", "resources": {"gpus": 1}, "run": ["true"], )"
                       R"("env": {"X": ")" + big + R"("}}, "request_id": "big"})",
                       "application/json");
  ASSERT_TRUE(sub) << httplib::to_string(sub.error());
  ASSERT_EQ(sub->status, 201) << sub->body;
  auto job = api->Get("/v1/jobs/" + std::to_string(Body(sub)["jobs"][0]["id"].get<int64_t>()),
                      httplib::Headers{{"Authorization", "Bearer " + alice_}});
  ASSERT_TRUE(job);
  EXPECT_NE(job->body.find(big), std::string::npos);
}

TEST_F(TlsServerTest, ACertificateFromAnotherCaOrPlainHttpGetsNoAnswer) {
  // Given a client that trusts another CA (another dev cluster's) or only the system's, expect
  // the handshake refused by the client; given plain HTTP on the TLS port, expect no HTTP answer
  // and nothing stored; the server still serves a trusting client afterwards.
  auto other = EnsureDevCertificates((dir_ / "other-tls").string());
  ASSERT_TRUE(other.ok());
  auto wrong = Https(other->ca_file)->Post("/v1/jobs", {{"Authorization", "Bearer " + alice_}},
                                           std::string(kJob) + R"("request_id": "w"})", "application/json");
  EXPECT_FALSE(wrong);
  EXPECT_EQ(wrong.error(), httplib::Error::SSLServerVerification);
  auto system = Https("")->Get("/v1/health");
  EXPECT_FALSE(system);
  auto plain = Call("POST", "/v1/jobs", alice_, std::string(kJob) + R"("request_id": "p"})");
  EXPECT_FALSE(plain && plain->status == 201);
  EXPECT_EQ(StoredJobs(), 0u);
  auto ok = Https(certs_.ca_file)->Get("/v1/health");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST(TlsTest, DevCertificatesAreKeptWhileValidAndTheCaOutlivesAServerCertificate) {
  // Given a dev CA made once, expect a second call to reuse every file; asked for another host,
  // expect a new server certificate for it, signed by the same CA (clients keep their pin); the
  // keys are private to their owner.
  auto dir = std::filesystem::temp_directory_path() / ("gf-tls-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  auto first = EnsureDevCertificates(dir.string());
  ASSERT_TRUE(first.ok()) << first.status().message();
  const std::string ca = read(first->ca_file), cert = read(first->cert_file);
  EXPECT_NE(ca.find("BEGIN CERTIFICATE"), std::string::npos);
  for (const std::string& key : {first->key_file, (dir / "ca.key").string()}) {
    auto perms = std::filesystem::status(key).permissions();
    EXPECT_EQ(perms & (std::filesystem::perms::group_all | std::filesystem::perms::others_all),
              std::filesystem::perms::none)
        << key;
  }
  auto again = EnsureDevCertificates(dir.string());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(read(again->ca_file), ca);
  EXPECT_EQ(read(again->cert_file), cert);
  auto wider = EnsureDevCertificates(dir.string(), {"127.0.0.1", "gpu-controller.internal"});
  ASSERT_TRUE(wider.ok());
  EXPECT_EQ(read(wider->ca_file), ca);
  EXPECT_NE(read(wider->cert_file), cert);
  EXPECT_TRUE(MakeServerTlsContext(wider->cert_file, wider->key_file).ok());
  std::filesystem::remove_all(dir);
}

TEST(TlsTest, BadCertificateFilesAreRefusedWithTheFileNamed) {
  // Given a missing file, a file that is not PEM, and a key of another certificate, expect
  // errors naming the flag and the file.
  auto dir = std::filesystem::temp_directory_path() / ("gf-tls-bad-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto a = EnsureDevCertificates((dir / "a").string());
  auto b = EnsureDevCertificates((dir / "b").string());
  ASSERT_TRUE(a.ok() && b.ok());
  auto missing = MakeServerTlsContext((dir / "none.pem").string(), a->key_file);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--tls-cert " + (dir / "none.pem").string()), std::string::npos);
  std::ofstream((dir / "junk.pem").string()) << "not a certificate\n";
  auto junk = MakeServerTlsContext((dir / "junk.pem").string(), a->key_file);
  ASSERT_FALSE(junk.ok());
  EXPECT_NE(junk.status().message().find("not a PEM certificate"), std::string::npos) << junk.status().message();
  auto mismatch = MakeServerTlsContext(a->cert_file, b->key_file);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("is not the key of the certificate"), std::string::npos)
      << mismatch.status().message();
  std::filesystem::remove_all(dir);
}

TEST(TlsTest, PlainHttpIsRefusedOnAddressesOthersCanReach) {
  // Given a non-loopback listen address and no TLS, expect Start to refuse before binding, naming
  // --tls-cert and --insecure; loopback addresses are recognised as such.
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("127.3.2.1"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackHost("10.0.0.5"));
  EXPECT_FALSE(IsLoopbackHost("::"));
  WallClock clock;
  testing::MemoryStore store;
  Authenticator auth(store);
  EngineOptions eo;
  eo.checkpoint_root = "/tmp";
  Engine engine(clock, store, eo);
  ServerOptions so;
  so.host = "0.0.0.0";
  so.port = 0;
  so.agent_port = 0;
  ApiServer server(engine, store, auth, clock, so);
  Status st = server.Start();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("--insecure"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("--tls-cert"), std::string::npos) << st.message();
}

TEST(UserMapFileTest, ErrorsNameFileLineAndColumnOfTheEntry) {
  // Given a user map whose entry maps to root, expect the line and column of that value; given an
  // unknown top-level key, its key's; given an empty file, its start.
  const std::string path = ::testing::TempDir() + "/users.yaml";
  auto error_of = [&](const std::string& text) {
    { std::ofstream(path) << text; }
    Result<UserMap> m = LoadUserMap(path);
    EXPECT_FALSE(m.ok()) << text;
    return m.ok() ? std::string() : m.status().message();
  };
  EXPECT_EQ(error_of("subjects:\n  alice: alice\n  bob: root\n"),
            path + ":3:8: subjects.bob: must name a Unix user other than root");
  EXPECT_EQ(error_of("teams: {vision: gf-vision}\ngroups: {a: b}\n"),
            path + ":2:1: groups: unknown key (expected subjects, teams)");
  EXPECT_EQ(error_of("subjects: [alice]\n"), path + ":1:11: subjects: must map names to Unix users");
  EXPECT_EQ(error_of(""), path + ":1:1: expected 'subjects:' and/or 'teams:' maps");
  { std::ofstream(path) << "subjects: {alice: alice}\nteams: {vision: gf-vision}\n"; }
  Result<UserMap> good = LoadUserMap(path);
  ASSERT_TRUE(good.ok()) << good.status().message();
  EXPECT_EQ(good->For("alice", "vision"), "alice");
  EXPECT_EQ(good->For("carol", "vision"), "gf-vision");
}


// The listener's writes, on routes of its own: a response head that declares its length waits for
// its body's first bytes and goes out with them; a head with no body after it (HEAD, 204) still
// goes out when the handler ends; and a body far larger than the socket's buffers arrives whole.
class ListenerWritesTest : public ::testing::Test {
 protected:
  static constexpr size_t kBig = 3'000'000;

  void SetUp() override {
    big_.resize(kBig);
    for (size_t i = 0; i < kBig; ++i) big_[i] = static_cast<char>('a' + i % 26);
    routes_.Get("/big", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(big_, "text/plain");
    });
    routes_.Get("/empty", [](const httplib::Request&, httplib::Response& res) { res.status = 204; });
    routes_.Get("/small", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("{\"small\":true}\n", "application/json");
    });
    listener_ = std::make_unique<HttpListener>(routes_, ListenerLimits{}, "test");
    ASSERT_TRUE(listener_->Bind("127.0.0.1", 0).ok());
    ASSERT_TRUE(listener_->Start().ok());
  }
  void TearDown() override { listener_->Stop(); }

  // Reads one response with a Content-Length (or none, for HEAD) from fd: its head and body.
  static std::pair<std::string, std::string> ReadResponse(int fd, bool head_only = false) {
    std::string in;
    char buf[65536];
    size_t end = std::string::npos;
    while ((end = in.find("\r\n\r\n")) == std::string::npos) {
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return {in, ""};
      in.append(buf, static_cast<size_t>(n));
    }
    std::string head = in.substr(0, end + 4);
    std::string body = in.substr(end + 4);
    size_t length = 0;
    if (auto at = head.find("Content-Length: "); at != std::string::npos) length = std::stoul(head.substr(at + 16));
    if (head_only) length = 0;
    while (body.size() < length) {
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      body.append(buf, static_cast<size_t>(n));
    }
    return {head, body};
  }
  static bool SendText(int fd, const std::string& text) {
    return ::send(fd, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
  }

  RouteTable routes_;
  std::unique_ptr<HttpListener> listener_;
  std::string big_;
};

TEST_F(ListenerWritesTest, HeadsAndBodiesOfEveryKindArriveWholeOnOneConnection) {
  int fd = Connect(listener_->port());
  ASSERT_GE(fd, 0);
  // A small answer: its head and body leave in one send, so the first read has both.
  ASSERT_TRUE(SendText(fd, "GET /small HTTP/1.1\r\nHost: x\r\n\r\n"));
  {
    char first[4096];
    ssize_t n = ::recv(fd, first, sizeof first, 0);
    ASSERT_GT(n, 0);
    std::string got(first, static_cast<size_t>(n));
    EXPECT_EQ(got.rfind("HTTP/1.1 200 ", 0), 0u) << got;
    EXPECT_TRUE(got.ends_with("\r\n\r\n{\"small\":true}\n")) << "the first read: " << got;
  }
  // A body of 3 MB, larger than the socket's buffers: the server's sends wait for room.
  ASSERT_TRUE(SendText(fd, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto [head, body] = ReadResponse(fd);
  EXPECT_EQ(head.rfind("HTTP/1.1 200 ", 0), 0u) << head;
  EXPECT_NE(head.find("Content-Length: 3000000\r\n"), std::string::npos) << head;
  ASSERT_EQ(body.size(), kBig);
  EXPECT_TRUE(body == big_) << "the body differs from what the handler set";

  // HEAD: the length of the body, and no body; the connection serves the next request.
  ASSERT_TRUE(SendText(fd, "HEAD /big HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto [head2, body2] = ReadResponse(fd, /*head_only=*/true);
  EXPECT_EQ(head2.rfind("HTTP/1.1 200 ", 0), 0u) << head2;
  EXPECT_EQ(body2, "");

  ASSERT_TRUE(SendText(fd, "GET /empty HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto [head3, body3] = ReadResponse(fd);
  EXPECT_EQ(head3.rfind("HTTP/1.1 204 ", 0), 0u) << head3;
  EXPECT_EQ(body3, "");

  ::close(fd);
}

}  // namespace
}  // namespace gpufleet::controller
