// Tests of the local provider with real processes: the "agent" is sh or sleep. Time is injected
// into Create, Delete and Poll; real waiting happens only for a process to die or start (bounded
// loops of at most 10 s). The notice endpoint is read over HTTP on 127.0.0.1.
#include "provider/local_provider.h"

#include <sys/stat.h>

#include <httplib.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/process.h"

namespace gpufleet::provider {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const Time kT0 = Time::FromSeconds(1'767'225'600);  // 2026-01-01T00:00:00Z

bool Eventually(const std::function<bool()>& condition) {
  for (int i = 0; i < 2000; ++i) {
    if (condition()) return true;
    struct timespec ts = {0, 5'000'000};
    nanosleep(&ts, nullptr);
  }
  return condition();
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool PidGone(int pid) { return !ProcessAlive(ProcessHandle{pid, 0}); }

InstanceRequest Request(const std::string& name, const std::string& market = "spot") {
  return InstanceRequest{name, "local " + market, "H100", 8, market, 2'500'000, "local-a", {{"team", "t"}}};
}

std::vector<ProviderEventKind> Kinds(const std::vector<ProviderEvent>& events) {
  std::vector<ProviderEventKind> out;
  for (const auto& e : events) out.push_back(e.kind);
  return out;
}

// GET of a notice URL: status and body.
std::pair<int, std::string> Get(const std::string& url) {
  size_t slash = url.find('/', std::string("http://").size());
  httplib::Client client(url.substr(0, slash));
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(5, 0);
  auto res = client.Get(url.substr(slash).c_str());
  if (!res) return {-1, ""};
  return {res->status, res->body};
}

class LocalProviderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("gpufleet-local-" + std::to_string(getpid()) + "-" + info->name());
    fs::remove_all(dir_);
    config_.state_dir = dir_.string();
    config_.boot_delay = Duration::Zero();
    config_.stop_grace = Duration::Seconds(10);
    config_.notice_lead = Duration::Seconds(20);
    // The "agent": records its pid, then waits.
    config_.agent_command = {"sh", "-c", "echo $$ > {state_dir}/{name}.pid; exec sleep 1000"};
  }

  void TearDown() override {
    // Leave no process behind: the process group of every instance record is killed.
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(dir_, ec)) {
      if (e.path().extension() != ".json" || e.path().parent_path().filename() != "instances") continue;
      auto record = nlohmann::json::parse(ReadFile(e.path()), nullptr, /*allow_exceptions=*/false);
      int pid = record.is_object() ? record.value("pid", 0) : 0;
      if (pid > 0) {
        SignalGroup(pid, SIGKILL);
        Eventually([&] { return PidGone(pid); });
      }
    }
    providers_.clear();
    fs::remove_all(dir_);
  }

  Provider& Open() {
    auto p = OpenLocalProvider(config_);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    providers_.push_back(std::move(p).value());
    return *providers_.back();
  }

  // The pid the instance's command wrote, once it has.
  int PidOf(const std::string& name, const fs::path& dir) {
    fs::path f = dir / (name + ".pid");
    EXPECT_TRUE(Eventually([&] { return fs::exists(f) && !ReadFile(f).empty(); })) << f;
    return std::stoi(ReadFile(f));
  }
  int PidOf(const std::string& name) { return PidOf(name, dir_); }

  Instance Find(Provider& p, const std::string& id) {
    auto list = p.List();
    EXPECT_TRUE(list.ok());
    for (const auto& in : *list) {
      if (in.id == id) return in;
    }
    return Instance{};
  }

  fs::path dir_;
  LocalConfig config_;
  std::vector<std::unique_ptr<Provider>> providers_;
};

TEST_F(LocalProviderTest, StateDirectoryIsMadePassableItsRecordsStayPrivate) {
  // Given a state directory made private (0700, as under the controller's umask), expect Open to
  // let other users through it (the emulated machines' agents keep their jobs' folders below it,
  // and jobs may run as nobody) and to add no read permission.
  fs::create_directories(dir_);
  ASSERT_EQ(::chmod(dir_.c_str(), 0700), 0);
  Open();
  struct stat st {};
  ASSERT_EQ(::stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0711u);
}

TEST_F(LocalProviderTest, AgentStartsOnlyOnceTheBootDelayHasPassed) {
  // Given a 30 s boot delay, expect nothing spawned at 29 s and the agent started at 30 s, with
  // its placeholders filled in.
  config_.boot_delay = Duration::Seconds(30);
  config_.agent_command = {"sh", "-c",
                           "echo {name} {gpus} {gpu_model} {market} {price_per_hour} {zone} {instance_id} "
                           "{notice_url} > {state_dir}/{name}.args; echo $$ > {state_dir}/{name}.pid; exec sleep 1000"};
  Provider& p = Open();
  auto in = p.Create(Request("n1"), kT0);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_EQ(in->state, kBooting);

  EXPECT_THAT(p.Poll(kT0 + Duration::Seconds(29)), IsEmpty());
  EXPECT_EQ(Find(p, in->id).state, kBooting);
  EXPECT_FALSE(fs::exists(dir_ / "logs" / (in->id + ".log")));

  auto events = p.Poll(kT0 + Duration::Seconds(30));
  EXPECT_THAT(Kinds(events), ElementsAre(ProviderEventKind::kStarted));
  Instance now = Find(p, in->id);
  EXPECT_EQ(now.state, kRunning);
  EXPECT_EQ(now.started, kT0 + Duration::Seconds(30));
  PidOf("n1");
  EXPECT_EQ(ReadFile(dir_ / "n1.args"),
            "n1 8 H100 spot 2.5 local-a " + in->id + " " + in->notice_url + "\n");
  EXPECT_THAT(in->notice_url, HasSubstr("/" + in->id + "/latest/meta-data/spot/instance-action"));
}

TEST_F(LocalProviderTest, DeleteKillsTheWholeProcessGroupAfterTheGrace) {
  // Given an agent whose group ignores SIGTERM and has a child, expect Delete to leave it
  // terminating until the grace runs out, then both processes killed and the record gone.
  config_.agent_command = {"sh", "-c",
                           "trap '' TERM; sleep 1000 & echo $! > {state_dir}/{name}.child; "
                           "echo $$ > {state_dir}/{name}.pid; wait"};
  Provider& p = Open();
  auto in = p.Create(Request("n1", "on-demand"), kT0);
  ASSERT_TRUE(in.ok());
  p.Poll(kT0);
  int leader = PidOf("n1");  // written after the child's pid
  int child = std::stoi(ReadFile(dir_ / "n1.child"));

  ASSERT_TRUE(p.Delete(in->id, kT0 + Duration::Seconds(1)).ok());
  EXPECT_EQ(Find(p, in->id).state, kTerminating);
  EXPECT_THAT(p.Poll(kT0 + Duration::Seconds(5)), IsEmpty());
  EXPECT_FALSE(PidGone(leader));
  EXPECT_FALSE(PidGone(child));

  std::vector<ProviderEvent> events;
  ASSERT_TRUE(Eventually([&] {
    for (auto& e : p.Poll(kT0 + Duration::Seconds(11))) events.push_back(e);
    return !events.empty();
  }));
  EXPECT_THAT(Kinds(events), ElementsAre(ProviderEventKind::kTerminated));
  EXPECT_TRUE(Eventually([&] { return PidGone(leader) && PidGone(child); }));
  EXPECT_THAT(*p.List(), IsEmpty());
  EXPECT_TRUE(p.Delete(in->id, kT0 + Duration::Seconds(12)).ok()) << "a second Delete is fine";
}

TEST_F(LocalProviderTest, DeleteOfABootingInstanceForgetsItAtOnce) {
  config_.boot_delay = Duration::Seconds(60);
  Provider& p = Open();
  auto in = p.Create(Request("n1"), kT0);
  ASSERT_TRUE(in.ok());
  ASSERT_TRUE(p.Delete(in->id, kT0 + Duration::Seconds(1)).ok());
  EXPECT_THAT(*p.List(), IsEmpty());
  EXPECT_THAT(p.Poll(kT0 + Duration::Minutes(5)), IsEmpty()) << "nothing boots after a Delete";
  EXPECT_TRUE(p.Delete("i-unknown", kT0).ok());
}

TEST_F(LocalProviderTest, EmulatedSpotCapacityRefusesSomeSpotCreatesAndNeverOnDemand) {
  // Given spot capacity half of the time (1 h with, 1 h without, on average), expect some spot
  // creates over a day refused with ResourceExhausted and others accepted, the same answers from
  // a second provider with the same seed, and every on-demand create accepted.
  config_.boot_delay = Duration::Hours(100);  // nothing boots: only the create answers matter
  config_.capacity_available = Duration::Hours(1);
  config_.capacity_outage = Duration::Hours(1);
  auto answers = [&](Provider& p, const std::string& prefix) {
    std::string out;
    for (int i = 0; i < 48; ++i) {
      auto in = p.Create(Request(prefix + std::to_string(i)), kT0 + Duration::Minutes(30 * i));
      if (!in.ok()) {
        EXPECT_EQ(in.status().code(), StatusCode::kResourceExhausted) << in.status().ToString();
        EXPECT_NE(in.status().message().find("no spot capacity for offer local spot"), std::string::npos);
      }
      out += in.ok() ? '+' : '-';
    }
    return out;
  };
  const std::string first = answers(Open(), "a");
  EXPECT_NE(first.find('+'), std::string::npos) << first;
  EXPECT_NE(first.find('-'), std::string::npos) << first;
  config_.state_dir = (dir_ / "second").string();
  EXPECT_EQ(answers(Open(), "b"), first);
  Provider& p = Open();
  for (int i = 0; i < 48; ++i) {
    EXPECT_TRUE(p.Create(Request("od" + std::to_string(i), "on-demand"), kT0 + Duration::Minutes(30 * i)).ok());
  }
}

TEST_F(LocalProviderTest, ANewProviderOnTheSameStateDirectoryListsTheSameInstances) {
  // Given one running and one booting instance, expect a provider opened after the first is
  // gone to list both as they were, the agent still running, and fresh ids for new instances.
  config_.boot_delay = Duration::Seconds(10);
  Provider& first = Open();
  auto a = first.Create(Request("a"), kT0);
  ASSERT_TRUE(a.ok());
  first.Poll(kT0 + Duration::Seconds(10));
  auto b = first.Create(Request("b", "reserved"), kT0 + Duration::Seconds(10));
  ASSERT_TRUE(b.ok());
  int pid = PidOf("a");
  auto before = first.List();
  ASSERT_TRUE(before.ok());
  providers_.clear();

  Provider& second = Open();
  auto after = second.List();
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ((*after)[i].id, (*before)[i].id);
    EXPECT_EQ((*after)[i].name, (*before)[i].name);
    EXPECT_EQ((*after)[i].state, (*before)[i].state);
    EXPECT_EQ((*after)[i].created, (*before)[i].created);
    EXPECT_EQ((*after)[i].market, (*before)[i].market);
    EXPECT_EQ((*after)[i].labels, (*before)[i].labels);
  }
  EXPECT_EQ((*after)[0].state, kRunning);
  EXPECT_EQ((*after)[1].state, kBooting);
  EXPECT_FALSE(PidGone(pid)) << "the agent outlives the provider";
  EXPECT_THAT(Kinds(second.Poll(kT0 + Duration::Seconds(20))), ElementsAre(ProviderEventKind::kStarted))
      << "the booting one boots under the new provider";
  auto c = second.Create(Request("c"), kT0 + Duration::Seconds(20));
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c->id, a->id);
  EXPECT_NE(c->id, b->id);
  EXPECT_EQ(second.Create(Request("a"), kT0).status().code(), StatusCode::kAlreadyExists);
}

TEST_F(LocalProviderTest, AnAgentThatExitsIsReportedDiedAndStaysListedUntilDeleted) {
  // The agent exits with 3 once the test creates its "exit" file.
  config_.agent_command = {"sh", "-c",
                           "echo $$ > {state_dir}/{name}.pid; "
                           "while [ ! -e {state_dir}/{name}.exit ]; do sleep 0.01; done; exit 3"};
  Provider& p = Open();
  auto in = p.Create(Request("n1", "on-demand"), kT0);
  ASSERT_TRUE(in.ok());
  EXPECT_THAT(Kinds(p.Poll(kT0)), ElementsAre(ProviderEventKind::kStarted));
  EXPECT_EQ(Find(p, in->id).state, kRunning);
  std::ofstream(dir_ / "n1.exit") << "now\n";
  ASSERT_TRUE(Eventually([&] { return Find(p, in->id).state == kTerminated; }));
  auto events = p.Poll(kT0 + Duration::Seconds(1));
  ASSERT_THAT(Kinds(events), ElementsAre(ProviderEventKind::kDied));
  EXPECT_EQ(events[0].name, "n1");
  Instance gone = Find(p, in->id);
  EXPECT_EQ(gone.state, kTerminated);
  EXPECT_EQ(gone.end_reason, "process exited");
  EXPECT_EQ(gone.ended, kT0 + Duration::Seconds(1));
  EXPECT_THAT(p.Poll(kT0 + Duration::Seconds(2)), IsEmpty()) << "reported once";
  ASSERT_TRUE(p.Delete(in->id, kT0 + Duration::Seconds(3)).ok());
  EXPECT_THAT(*p.List(), IsEmpty());
}

TEST_F(LocalProviderTest, AnAgentThatCannotStartIsReportedDied) {
  config_.agent_command = {"/nonexistent/gpufleet", "agent", "--name", "{name}"};
  Provider& p = Open();
  auto in = p.Create(Request("n1"), kT0);
  ASSERT_TRUE(in.ok());
  auto events = p.Poll(kT0);
  ASSERT_THAT(Kinds(events), ElementsAre(ProviderEventKind::kDied));
  EXPECT_THAT(events[0].detail, HasSubstr("/nonexistent/gpufleet"));
}

TEST_F(LocalProviderTest, CreateChecksTheRequest) {
  Provider& p = Open();
  EXPECT_THAT(p.Create(Request(""), kT0).status().message(), HasSubstr("name"));
  EXPECT_THAT(p.Create(Request("x", "cheap"), kT0).status().message(), HasSubstr("cheap"));
}

// Polls every `step` from kT0 to kT0 + `span`, returning "name@seconds-after-kT0" of each notice.
std::vector<std::string> NoticeTimes(Provider& p, Duration step, Duration span) {
  std::vector<std::string> out;
  for (Time t = kT0; t <= kT0 + span; t += step) {
    for (const auto& e : p.Poll(t)) {
      if (e.kind == ProviderEventKind::kSpotNotice) out.push_back(e.name + "@" + std::to_string((t - kT0).seconds()));
    }
  }
  return out;
}

TEST_F(LocalProviderTest, SeededHazardInterruptsTheSameSpotInstancesAtTheSameTimes) {
  // Given two clouds with the same seed and the same instances, expect the same notices at the
  // same times; on-demand is never interrupted; another seed gives another history.
  config_.interruptions_per_hour = 4;
  config_.seed = 7;
  auto run = [&](uint64_t seed, const std::string& tag) {
    LocalConfig c = config_;
    c.seed = seed;
    c.state_dir = (dir_ / tag).string();
    auto p = OpenLocalProvider(c);
    EXPECT_TRUE(p.ok());
    for (const char* n : {"a", "b", "c"}) EXPECT_TRUE((*p)->Create(Request(n), kT0).ok());
    EXPECT_TRUE((*p)->Create(Request("d", "on-demand"), kT0).ok());
    auto times = NoticeTimes(**p, Duration::Seconds(10), Duration::Hours(3));
    // Leave nothing running.
    for (const char* n : {"a", "b", "c", "d"}) {
      fs::path f = dir_ / tag / (std::string(n) + ".pid");
      if (Eventually([&] { return fs::exists(f) && !ReadFile(f).empty(); })) {
        SignalGroup(std::stoi(ReadFile(f)), SIGKILL);
      }
    }
    return times;
  };
  auto first = run(7, "one");
  auto again = run(7, "two");
  auto other = run(8, "three");
  EXPECT_EQ(first, again);
  EXPECT_NE(first, other);
  EXPECT_EQ(first.size(), 3u) << ::testing::PrintToString(first);
  for (const auto& n : first) EXPECT_NE(n[0], 'd');
}

TEST_F(LocalProviderTest, ScheduleReplaysNoticeThenInterruption) {
  // Given a schedule that interrupts "b" 60 s after its start and spot instance 0 ("a") after
  // 90 s, expect: 404 before; at 60 s b's notice (AWS JSON, time = notice + lead) and b still
  // running; at 80 s b's process group killed and b interrupted; a noticed at 90 s; the
  // on-demand "c" never.
  config_.schedule = {{Duration::Seconds(60), "b"}, {Duration::Seconds(90), "0"}};
  Provider& p = Open();
  auto a = p.Create(Request("a"), kT0);
  auto b = p.Create(Request("b"), kT0);
  auto c = p.Create(Request("c", "on-demand"), kT0);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(p.Poll(kT0).size(), 3u);
  int b_pid = PidOf("b");

  EXPECT_THAT(p.Poll(kT0 + Duration::Seconds(59)), IsEmpty());
  EXPECT_EQ(Get(b->notice_url).first, 404);

  auto events = p.Poll(kT0 + Duration::Seconds(60));
  ASSERT_THAT(Kinds(events), ElementsAre(ProviderEventKind::kSpotNotice));
  EXPECT_EQ(events[0].name, "b");
  EXPECT_EQ(events[0].deadline, kT0 + Duration::Seconds(80));
  auto [status, body] = Get(b->notice_url);
  EXPECT_EQ(status, 200);
  auto j = nlohmann::json::parse(body);
  EXPECT_EQ(j["action"], "terminate");
  EXPECT_EQ(j["time"], "2026-01-01T00:01:20Z");
  EXPECT_EQ(Get(a->notice_url).first, 404);

  EXPECT_THAT(p.Poll(kT0 + Duration::Seconds(79)), IsEmpty());
  EXPECT_FALSE(PidGone(b_pid));
  events = p.Poll(kT0 + Duration::Seconds(80));
  ASSERT_THAT(Kinds(events), ElementsAre(ProviderEventKind::kInterrupted));
  EXPECT_EQ(events[0].name, "b");
  EXPECT_TRUE(Eventually([&] { return PidGone(b_pid); }));
  Instance gone = Find(p, b->id);
  EXPECT_EQ(gone.state, kTerminated);
  EXPECT_EQ(gone.end_reason, "spot interruption");

  events = p.Poll(kT0 + Duration::Seconds(90));
  ASSERT_THAT(Kinds(events), ElementsAre(ProviderEventKind::kSpotNotice));
  EXPECT_EQ(events[0].name, "a");
  EXPECT_EQ(Get(a->notice_url).first, 200);
  EXPECT_THAT(p.Poll(kT0 + Duration::Hours(1)), ::testing::SizeIs(1)) << "a's interruption; c stays";
  EXPECT_EQ(Find(p, c->id).state, kRunning);
}

TEST_F(LocalProviderTest, APlannedInterruptionSurvivesARestart) {
  // Given a published notice, expect the restarted provider to serve it again (at its new
  // port: this one is ephemeral) and to carry the interruption out on time.
  config_.schedule = {{Duration::Seconds(60), "a"}};
  Provider& first = Open();
  auto a = first.Create(Request("a"), kT0);
  ASSERT_TRUE(a.ok());
  first.Poll(kT0);
  EXPECT_THAT(Kinds(first.Poll(kT0 + Duration::Seconds(60))), ElementsAre(ProviderEventKind::kSpotNotice));
  providers_.clear();

  Provider& second = Open();
  Instance in = Find(second, a->id);
  EXPECT_EQ(Get(in.notice_url).first, 200);
  EXPECT_THAT(Kinds(second.Poll(kT0 + Duration::Seconds(80))), ElementsAre(ProviderEventKind::kInterrupted));
}

TEST_F(LocalProviderTest, DeeplyNestedStateFilesAreRefusedNotParsed) {
  // Given an instance record, then a counters file, nesting 100,000 arrays in the state
  // directory, expect opening the provider to fail naming the file and the depth, not to crash.
  fs::create_directories(dir_ / "instances");
  const fs::path record = dir_ / "instances" / "deep.json";
  std::ofstream(record) << std::string(100'000, '[');
  auto opened = OpenLocalProvider(config_);
  ASSERT_FALSE(opened.ok());
  EXPECT_THAT(opened.status().message(), HasSubstr("deep.json: bad instance record: nesting deeper than 64 levels"));
  fs::remove(record);
  std::ofstream(dir_ / "counters.json") << "{\"next_seq\": " << std::string(100'000, '[');
  opened = OpenLocalProvider(config_);
  ASSERT_FALSE(opened.ok());
  EXPECT_THAT(opened.status().message(), HasSubstr("counters.json: nesting deeper than 64 levels at line 1, column 77"));
  fs::remove(dir_ / "counters.json");
}

TEST(LocalProviderConfigTest, UnknownPlaceholderIsRejected) {
  EXPECT_THAT(CheckAgentCommand({"agent", "--name", "{nmae}"}).message(), HasSubstr("{nmae}"));
  EXPECT_TRUE(CheckAgentCommand({"sh", "-c", "echo '{\"json\": 1}' {name}"}).ok());
}

}  // namespace
}  // namespace gpufleet::provider
