// Tests of the exec provider: the shipped example scripts (examples/providers/exec-local, with
// `sleep` standing in for the agent) and small failing scripts.
#include "provider/exec_provider.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/process.h"

namespace gpufleet::provider {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

const Time kT0 = Time::FromSeconds(1'767'225'600);

bool Eventually(const std::function<bool()>& condition) {
  for (int i = 0; i < 2000; ++i) {
    if (condition()) return true;
    struct timespec ts = {0, 5'000'000};
    nanosleep(&ts, nullptr);
  }
  return condition();
}

InstanceRequest Request(const std::string& name) {
  return InstanceRequest{name, "local spot", "H100", 8, "spot", 2'500'000, "local-a", {}};
}

class ExecProviderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("gpufleet-exec-" + std::to_string(getpid()) + "-" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    // A test that stopped halfway leaves no agent behind.
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_ / "instances", ec)) {
      std::ifstream in(e.path());
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      size_t at = text.find("\"pid\": ");
      if (at != std::string::npos) SignalGroup(std::stoi(text.substr(at + 7)), SIGKILL);
    }
    fs::remove_all(dir_);
  }

  // The example scripts, with their records in dir_ and `sleep` as the agent.
  ExecConfig Examples() {
    const std::string ex = std::string(GPUFLEET_SOURCE_DIR) + "/examples/providers/exec-local/";
    ExecConfig c;
    c.create = {ex + "create.sh"};
    c.del = {ex + "delete.sh"};
    c.list = {ex + "list.sh"};
    c.timeout = Duration::Seconds(60);
    c.env["EXEC_LOCAL_DIR"] = dir_.string();
    c.env["EXEC_LOCAL_AGENT_COMMAND"] = "echo $NAME $GPUS $GPU_MODEL $PRICE_PER_HOUR; exec sleep 1000";
    return c;
  }

  // A config whose every script is `sh -c <body>`.
  static ExecConfig Scripts(const std::string& create, const std::string& del, const std::string& list) {
    ExecConfig c;
    c.create = {"sh", "-c", create};
    c.del = {"sh", "-c", del};
    c.list = {"sh", "-c", list};
    c.timeout = Duration::Seconds(60);
    return c;
  }

  fs::path dir_;
};

TEST_F(ExecProviderTest, ExampleScriptsCreateListAndDelete) {
  // Given the exec-local examples, expect create to start an agent process, list to show it
  // running, delete to kill it and forget it, and a second delete to succeed.
  auto p = MakeExecProvider(Examples());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto in = (*p)->Create(Request("n1"), kT0);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_THAT(in->id, Not(IsEmpty()));
  EXPECT_EQ(in->name, "n1");
  EXPECT_EQ(in->state, kRunning);
  EXPECT_EQ(in->gpus, 8);

  auto list = (*p)->List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id, in->id);
  EXPECT_EQ((*list)[0].state, kRunning);
  EXPECT_EQ((*list)[0].market, "spot");

  // The record names the process; the log holds what the "agent" printed.
  fs::path log = dir_ / "logs" / (in->id + ".log");
  ASSERT_TRUE(Eventually([&] { return fs::file_size(log) > 0; }));
  auto dup = (*p)->Create(Request("n1"), kT0);
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(dup.status().message(), HasSubstr("already has the name n1"));

  ASSERT_TRUE((*p)->Delete(in->id, kT0).ok());
  list = (*p)->List();
  ASSERT_TRUE(list.ok());
  EXPECT_THAT(*list, IsEmpty());
  EXPECT_TRUE((*p)->Delete(in->id, kT0).ok()) << "deleting a gone instance is fine";
}

TEST_F(ExecProviderTest, ExampleListReportsAnAgentThatDied) {
  ExecConfig c = Examples();
  c.env["EXEC_LOCAL_AGENT_COMMAND"] = "exit 0";
  auto p = MakeExecProvider(c);
  ASSERT_TRUE(p.ok());
  auto in = (*p)->Create(Request("n1"), kT0);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  ASSERT_TRUE(Eventually([&] {
    auto list = (*p)->List();
    return list.ok() && list->size() == 1 && (*list)[0].state == kTerminated;
  }));
  ASSERT_TRUE((*p)->Delete(in->id, kT0).ok());
}

TEST_F(ExecProviderTest, FailingScriptIsQuotedWithItsExitCodeAndStderr) {
  auto p = MakeExecProvider(Scripts("echo line1 >&2; echo 'quota exceeded for p5' >&2; exit 3", "exit 0", "echo []"));
  ASSERT_TRUE(p.ok());
  auto in = (*p)->Create(Request("n1"), kT0);
  ASSERT_FALSE(in.ok());
  const std::string& m = in.status().message();
  EXPECT_THAT(m, HasSubstr("create script 'sh -c echo line1"));
  EXPECT_THAT(m, HasSubstr("exited with code 3"));
  EXPECT_THAT(m, HasSubstr("line1\nquota exceeded for p5"));
}

TEST_F(ExecProviderTest, OnlyTheLastLinesOfStderrAreQuoted) {
  auto p = MakeExecProvider(Scripts("echo []", "for i in 1 2 3 4 5 6 7 8; do echo err$i >&2; done; exit 1", "echo []"));
  ASSERT_TRUE(p.ok());
  Status s = (*p)->Delete("i-1", kT0);
  EXPECT_THAT(s.message(), HasSubstr("delete script"));
  EXPECT_THAT(s.message(), HasSubstr("err4\nerr5\nerr6\nerr7\nerr8"));
  EXPECT_THAT(s.message(), Not(HasSubstr("err3")));
}

TEST_F(ExecProviderTest, ScriptPastTheTimeoutIsKilledAndReported) {
  ExecConfig c = Scripts("echo []", "exit 0", "echo starting >&2; exec sleep 1000");
  c.timeout = Duration::Millis(300);
  auto p = MakeExecProvider(c);
  ASSERT_TRUE(p.ok());
  auto list = (*p)->List();
  ASSERT_FALSE(list.ok());
  EXPECT_THAT(list.status().message(), HasSubstr("list script"));
  EXPECT_THAT(list.status().message(), HasSubstr("timed out after 300ms"));
  EXPECT_THAT(list.status().message(), HasSubstr("starting"));
}

TEST_F(ExecProviderTest, OutputThatIsNotTheAskedJsonIsAnError) {
  auto p = MakeExecProvider(Scripts("echo 'Instance launched!'; echo warn >&2", "exit 0", "echo '{\"id\": \"i-1\"}'"));
  ASSERT_TRUE(p.ok());
  auto in = (*p)->Create(Request("n1"), kT0);
  ASSERT_FALSE(in.ok());
  EXPECT_THAT(in.status().message(), HasSubstr("create script"));
  EXPECT_THAT(in.status().message(), HasSubstr("not JSON"));
  EXPECT_THAT(in.status().message(), HasSubstr("Instance launched!"));
  EXPECT_THAT(in.status().message(), HasSubstr("warn"));
  auto list = (*p)->List();
  ASSERT_FALSE(list.ok());
  EXPECT_THAT(list.status().message(), HasSubstr("expected a JSON array"));

  auto no_id = MakeExecProvider(Scripts("echo '{\"name\": \"n1\"}'", "exit 0", "echo []"));
  ASSERT_TRUE(no_id.ok());
  EXPECT_THAT((*no_id)->Create(Request("n1"), kT0).status().message(), HasSubstr("no \"id\""));
}

TEST_F(ExecProviderTest, ScriptsGetTheRequestOnStdin) {
  // Given a create script that echoes its stdin's name back as the id, expect the request's JSON
  // to have reached it, and the instance's created time to be the injected now.
  auto p = MakeExecProvider(Scripts(
      "python3 -c 'import json,sys; r=json.load(sys.stdin); print(json.dumps({\"id\": \"i-\" + r[\"name\"], "
      "\"state\": \"booting\"}))'",
      "exit 0", "echo []"));
  ASSERT_TRUE(p.ok());
  auto in = (*p)->Create(Request("n7"), kT0);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_EQ(in->id, "i-n7");
  EXPECT_EQ(in->created, kT0);
  EXPECT_EQ(in->zone, "local-a");
}

TEST_F(ExecProviderTest, MissingScriptIsAClearError) {
  ExecConfig c = Scripts("echo []", "exit 0", "echo []");
  c.list = {"/nonexistent/list-instances"};
  auto p = MakeExecProvider(c);
  ASSERT_TRUE(p.ok());
  EXPECT_THAT((*p)->List().status().message(), HasSubstr("/nonexistent/list-instances"));
  EXPECT_FALSE(MakeExecProvider(ExecConfig{}).ok());
}

}  // namespace
}  // namespace gpufleet::provider
