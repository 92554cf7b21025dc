// Tests of ProcessLauncher with real processes (sh, sleep, env). Each test waits for the real
// process to end with a bounded loop on Poll (at most 10 s), not with a sleep of a guessed length.
#include "agent/launcher.h"

#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpufleet::agent {
namespace {

using ::testing::HasSubstr;

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void ShortNap() {
  struct timespec ts = {0, 5'000'000};  // 5 ms between polls of a real process
  nanosleep(&ts, nullptr);
}

// True once `path` exists and is not empty, polling for at most 10 s (for files that an
// external process writes).
bool WaitForFile(const fs::path& path) {
  for (int i = 0; i < 2000; ++i) {
    std::error_code ec;
    if (fs::exists(path, ec) && fs::file_size(path, ec) > 0) return true;
    ShortNap();
  }
  return false;
}

// A process is gone when /proc has no entry for it or it is a zombie waiting for its parent.
bool ProcessGone(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string line;
  std::getline(stat, line);
  size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
}

bool WaitGone(int pid) {
  for (int i = 0; i < 2000; ++i) {
    if (ProcessGone(pid)) return true;
    ShortNap();
  }
  return false;
}

class ProcessLauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("launcher_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  LaunchSpec Spec(const std::string& key, std::vector<std::string> argv) {
    LaunchSpec s;
    s.key = key;
    s.argv = std::move(argv);
    s.workdir = (dir_ / "work").string();
    s.log_path = (dir_ / "logs" / (key + ".log")).string();
    return s;
  }
  LaunchSpec Shell(const std::string& key, const std::string& script) {
    return Spec(key, {"sh", "-c", script});
  }

  // Polls at `now` until `n` parts have ended, for at most 10 s of real time.
  std::vector<Exit> PollUntil(size_t n, Time now = Time::FromSeconds(100)) {
    std::vector<Exit> all;
    for (int i = 0; i < 2000 && all.size() < n; ++i) {
      for (Exit& e : launcher_.Poll(now)) all.push_back(std::move(e));
      if (all.size() < n) ShortNap();
    }
    return all;
  }

  fs::path dir_;
  ProcessLauncher launcher_;
};

TEST_F(ProcessLauncherTest, ReportsExitCodes) {
  // Given parts that exit 0 and 3, expect both reported with their codes, in launch order.
  ASSERT_TRUE(launcher_.Launch(Shell("ok", "exit 0")).ok());
  ASSERT_TRUE(launcher_.Launch(Shell("bad", "exit 3")).ok());
  std::vector<Exit> exits = PollUntil(2);
  ASSERT_EQ(exits.size(), 2u);
  std::map<std::string, Exit> by_key;
  for (const Exit& e : exits) by_key[e.key] = e;
  EXPECT_TRUE(by_key["ok"].success());
  EXPECT_EQ(by_key["ok"].exit_code, 0);
  EXPECT_EQ(by_key["bad"].exit_code, 3);
  EXPECT_EQ(by_key["bad"].signal, 0);
  EXPECT_FALSE(by_key["bad"].success());
  EXPECT_EQ(by_key["bad"].Describe(), "exited with code 3");
  EXPECT_TRUE(launcher_.List().empty());
}

TEST_F(ProcessLauncherTest, ReportsDeathBySignal) {
  // Given a part that kills itself with SIGSEGV, expect the signal and no exit code.
  ASSERT_TRUE(launcher_.Launch(Shell("crash", "kill -SEGV $$")).ok());
  std::vector<Exit> exits = PollUntil(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].signal, SIGSEGV);
  EXPECT_EQ(exits[0].exit_code, -1);
  EXPECT_FALSE(exits[0].stopped);
  EXPECT_EQ(exits[0].Describe(), "killed by signal 11 (SIGSEGV)");
}

TEST_F(ProcessLauncherTest, ChildSeesEnvironmentAndWorkdirAndOwnProcessGroup) {
  // Given extra variables and a workdir that does not exist yet, expect the child to run in the
  // created workdir with the variables, the agent's PATH, stdin from /dev/null, as the leader of
  // its own process group.
  setenv("GPUFLEET_LAUNCHER_TEST_INHERITED", "from-agent", 1);
  LaunchSpec spec = Shell("env", R"sh(echo "cwd=$(pwd)"; echo "job=$JOB_ID"; )sh"
                                 R"sh(echo "inherited=$GPUFLEET_LAUNCHER_TEST_INHERITED"; )sh"
                                 R"sh(echo "stdin=$(cat | wc -c)"; )sh"
                                 R"sh(echo "pgid=$(cut -d' ' -f5 /proc/$$/stat)"; echo "pid=$$")sh");
  spec.workdir = (dir_ / "deep" / "work" / "dir").string();
  spec.env = {{"JOB_ID", "42"}, {"GPUFLEET_LAUNCHER_TEST_INHERITED", "overridden"}};
  auto pid = launcher_.Launch(spec);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  unsetenv("GPUFLEET_LAUNCHER_TEST_INHERITED");
  ASSERT_EQ(PollUntil(1).size(), 1u);
  std::string log = ReadFile(spec.log_path);
  EXPECT_THAT(log, HasSubstr("cwd=" + spec.workdir + "\n"));
  EXPECT_THAT(log, HasSubstr("job=42\n"));
  EXPECT_THAT(log, HasSubstr("inherited=overridden\n"));
  EXPECT_THAT(log, HasSubstr("stdin=0\n"));
  EXPECT_THAT(log, HasSubstr("pid=" + std::to_string(*pid) + "\n"));
  EXPECT_THAT(log, HasSubstr("pgid=" + std::to_string(*pid) + "\n"));
}

TEST_F(ProcessLauncherTest, AppendsStdoutAndStderrToTheLog) {
  // Given a log that already has a line, expect stdout and stderr appended after it, in order.
  LaunchSpec spec = Shell("log", "echo to-stdout; echo to-stderr >&2; echo again");
  fs::create_directories(fs::path(spec.log_path).parent_path());
  std::ofstream(spec.log_path) << "earlier run\n";
  ASSERT_TRUE(launcher_.Launch(spec).ok());
  ASSERT_EQ(PollUntil(1).size(), 1u);
  EXPECT_EQ(ReadFile(spec.log_path), "earlier run\nto-stdout\nto-stderr\nagain\n");
}

TEST_F(ProcessLauncherTest, ChildGetsNoAgentDescriptors) {
  // Given a descriptor the agent holds open without CLOEXEC, expect the child not to inherit it.
  int fd = dup(1);
  ASSERT_GE(fd, 3);
  LaunchSpec spec = Spec("fds", {"ls", "/proc/self/fd"});
  ASSERT_TRUE(launcher_.Launch(spec).ok());
  ASSERT_EQ(PollUntil(1).size(), 1u);
  close(fd);
  // 0..2 and the descriptor ls itself opens on /proc/self/fd, nothing else.
  std::istringstream fds(ReadFile(spec.log_path));
  int listed = 0;
  for (int n; fds >> n; ++listed) EXPECT_LE(n, 3) << "child inherited fd " << n;
  EXPECT_GE(listed, 3);  // 0, 1, 2
}

TEST_F(ProcessLauncherTest, ExecFailureIsAnErrorNotAnExit127) {
  // Given a program that does not exist, expect Launch to fail with exec's reason and leave
  // nothing running.
  auto r = launcher_.Launch(Spec("nope", {"gpufleet-no-such-program-xyz", "train.py"}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "exec gpufleet-no-such-program-xyz: No such file or directory");
  EXPECT_TRUE(launcher_.List().empty());
  EXPECT_TRUE(launcher_.Poll(Time::FromSeconds(1)).empty());
}

TEST_F(ProcessLauncherTest, RejectsBadSpecsAndDuplicateKeys) {
  // Given an empty argv, a missing log path, or a key already running, expect an error each.
  EXPECT_EQ(launcher_.Launch(Spec("a", {})).status().code(), StatusCode::kInvalidArgument);
  LaunchSpec no_log = Spec("b", {"true"});
  no_log.log_path.clear();
  EXPECT_EQ(launcher_.Launch(no_log).status().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(launcher_.Launch(Spec("c", {"sleep", "100"})).ok());
  EXPECT_EQ(launcher_.Launch(Spec("c", {"true"})).status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(launcher_.Signal("unknown", SIGTERM).code(), StatusCode::kNotFound);
  EXPECT_EQ(launcher_.Stop("unknown", SIGTERM, Duration::Seconds(1), Time()).code(),
            StatusCode::kNotFound);
}

TEST_F(ProcessLauncherTest, SignalReachesGrandchildren) {
  // Given a shell that waits on a background sleep, expect SIGTERM to the part to kill both.
  fs::path pidfile = dir_ / "sleep.pid";
  ASSERT_TRUE(launcher_.Launch(Shell("tree", "sleep 100 & echo $! > " + pidfile.string() + "; wait")).ok());
  ASSERT_TRUE(WaitForFile(pidfile));
  int sleep_pid = std::stoi(ReadFile(pidfile));
  EXPECT_FALSE(ProcessGone(sleep_pid));
  ASSERT_TRUE(launcher_.Signal("tree", SIGTERM).ok());
  std::vector<Exit> exits = PollUntil(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].signal, SIGTERM);
  EXPECT_TRUE(WaitGone(sleep_pid));
}

TEST_F(ProcessLauncherTest, LeftoversDieWithTheLeader) {
  // Given a leader that exits 0 and leaves a background sleep in its group, expect the exit
  // reported and the sleep killed.
  fs::path pidfile = dir_ / "sleep.pid";
  ASSERT_TRUE(launcher_.Launch(Shell("orphan", "sleep 100 & echo $! > " + pidfile.string())).ok());
  std::vector<Exit> exits = PollUntil(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 0);
  ASSERT_TRUE(WaitForFile(pidfile));
  EXPECT_TRUE(WaitGone(std::stoi(ReadFile(pidfile))));
}

TEST_F(ProcessLauncherTest, StopWithinGraceLetsTheJobExitCleanly) {
  // Given a part that traps SIGTERM, writes a checkpoint and exits 0, expect a clean exit
  // flagged as stopped, and no SIGKILL even when polled after the deadline.
  fs::path ready = dir_ / "ready", ckpt = dir_ / "ckpt";
  std::string script = "trap 'echo saved > " + ckpt.string() + "; exit 0' TERM; echo up > " +
                       ready.string() + "; while :; do sleep 0.01; done";
  ASSERT_TRUE(launcher_.Launch(Shell("trap", script)).ok());
  ASSERT_TRUE(WaitForFile(ready));
  const Time t0 = Time::FromSeconds(1000);
  ASSERT_TRUE(launcher_.Stop("trap", SIGTERM, Duration::Seconds(30), t0).ok());
  std::vector<Running> running = launcher_.List();
  ASSERT_EQ(running.size(), 1u);
  EXPECT_TRUE(running[0].stopping);
  EXPECT_EQ(running[0].kill_at, t0 + Duration::Seconds(30));
  std::vector<Exit> exits = PollUntil(1, t0 + Duration::Seconds(1));  // well inside the grace
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 0);
  EXPECT_TRUE(exits[0].stopped);
  EXPECT_FALSE(exits[0].killed_after_grace);
  EXPECT_EQ(exits[0].Describe(), "exited with code 0, after a stop");
  EXPECT_EQ(ReadFile(ckpt), "saved\n");
}

TEST_F(ProcessLauncherTest, StopKillsAfterGraceWhenTermIsIgnored) {
  // Given a part that ignores SIGTERM, expect it alive through the grace period and killed by
  // SIGKILL once Poll sees a time past the deadline.
  fs::path ready = dir_ / "ready";
  std::string script = "trap '' TERM; echo up > " + ready.string() + "; while :; do sleep 0.01; done";
  ASSERT_TRUE(launcher_.Launch(Shell("stubborn", script)).ok());
  ASSERT_TRUE(WaitForFile(ready));
  const Time t0 = Time::FromSeconds(1000);
  ASSERT_TRUE(launcher_.Stop("stubborn", SIGTERM, Duration::Seconds(10), t0).ok());
  // Before the deadline nothing is killed: the shell lives on (its sleeps come and go).
  EXPECT_TRUE(launcher_.Poll(t0 + Duration::Seconds(9)).empty());
  ASSERT_EQ(launcher_.List().size(), 1u);
  int pid = launcher_.List()[0].pid;
  EXPECT_EQ(kill(pid, 0), 0);
  std::vector<Exit> exits = PollUntil(1, t0 + Duration::Seconds(10));
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].signal, SIGKILL);
  EXPECT_TRUE(exits[0].stopped);
  EXPECT_TRUE(exits[0].killed_after_grace);
  EXPECT_EQ(exits[0].Describe(), "killed by signal 9 (SIGKILL), killed after the stop's grace ran out");
}

TEST_F(ProcessLauncherTest, RunsAsConfiguredUserOnlyWhenRoot) {
  // Given user "nobody", expect the child to run with nobody's uid when the agent is root, and
  // a clear error otherwise.
  LaunchSpec spec = Shell("user", "id -u; echo \"home=$HOME\"");
  spec.user = "nobody";
  spec.workdir = (dir_ / "nobody-work").string();
  fs::permissions(dir_, fs::perms::all);  // let nobody reach its workdir
  if (geteuid() != 0) {
    auto r = launcher_.Launch(spec);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_THAT(r.status().message(), HasSubstr("needs the agent to run as root"));
    return;
  }
  struct passwd* pw = getpwnam("nobody");
  if (pw == nullptr) GTEST_SKIP() << "no user 'nobody' on this machine";
  auto r = launcher_.Launch(spec);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<Exit> exits = PollUntil(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 0) << ReadFile(spec.log_path);
  EXPECT_EQ(ReadFile(spec.log_path),
            std::to_string(pw->pw_uid) + "\nhome=" + std::string(pw->pw_dir) + "\n");
  struct stat st;
  ASSERT_EQ(stat(spec.workdir.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, pw->pw_uid);  // the workdir it created belongs to the user
}

TEST_F(ProcessLauncherTest, UnknownUserIsAnError) {
  // Given a user that does not exist, expect an error naming it (or the not-root error).
  LaunchSpec spec = Shell("user", "true");
  spec.user = "gpufleet-no-such-user";
  auto r = launcher_.Launch(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  if (geteuid() == 0) {
    EXPECT_THAT(r.status().message(), HasSubstr("unknown user 'gpufleet-no-such-user'"));
  }
}

TEST_F(ProcessLauncherTest, DestructorKillsWhatIsStillRunning) {
  // Given a launcher going away with a part still running, expect the part's group killed.
  int pid = 0;
  {
    ProcessLauncher launcher;
    auto r = launcher.Launch(Spec("long", {"sleep", "100"}));
    ASSERT_TRUE(r.ok());
    pid = *r;
  }
  EXPECT_TRUE(ProcessGone(pid));
}

}  // namespace
}  // namespace gpufleet::agent
