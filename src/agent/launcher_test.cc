// Tests of ProcessLauncher with real processes (sh, sleep, env, setsid). Each test waits for the
// real process to end with a bounded loop on Poll (at most 10 s), not with a sleep of a guessed
// length. The tests that need cgroups (processes that leave their group) skip themselves where
// CgroupNote() says cgroups cannot be used; those about users skip themselves when not root.
#include "agent/launcher.h"

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <thread>
#include <fstream>
#include <future>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/cgroup.h"

namespace gpufleet::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

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

// The lines KEY=VALUE of `env`'s output.
std::map<std::string, std::string> EnvLines(const std::string& text) {
  std::map<std::string, std::string> env;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

bool UsesCgroups(const ProcessLauncher& launcher) {
  return launcher.CgroupNote().rfind("cgroup v2 at ", 0) == 0;
}

// Reads one int from `fd`, as a helper process writes it; -1 when the pipe closes first.
int ReadInt(int fd) {
  int value = -1;
  size_t got = 0;
  while (got < sizeof value) {
    ssize_t n = read(fd, reinterpret_cast<char*>(&value) + got, sizeof value - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    got += static_cast<size_t>(n);
  }
  return value;
}

void WriteInt(int fd, int value) {
  ssize_t unused = write(fd, &value, sizeof value);
  (void)unused;
}

class ProcessLauncherTest : public ::testing::Test {
 protected:
  ProcessLauncherTest()
      : name_("launcher_test_" + std::to_string(getpid()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name()),
        dir_(fs::temp_directory_path() / name_),
        launcher_(Options()) {}

  void SetUp() override {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::permissions(dir_, fs::perms::all);  // the tests that run jobs as nobody write here
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Most tests are not about users, so the fixture's launcher may run jobs as the test's own
  // user, root included; the tests about users make launchers of their own. A launcher made
  // with another `suffix` gets a cgroup root of its own.
  // The cgroup root a launcher made by Options() picks for itself.
  std::string AutoRootFor(const std::string& name) const {
    return CgroupTree::AutoRoot(name, std::filesystem::weakly_canonical(dir_ / "state").string()).value();
  }

  LauncherOptions Options(const std::string& suffix = "") const {
    LauncherOptions o;
    o.allow_root = true;
    o.name = name_ + suffix;
    o.state_dir = (dir_ / "state").string();
    return o;
  }

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
  static std::vector<Exit> PollUntil(ProcessLauncher& launcher, size_t n,
                                     Time now = Time::FromSeconds(100)) {
    std::vector<Exit> all;
    for (int i = 0; i < 2000 && all.size() < n; ++i) {
      for (Exit& e : launcher.Poll(now)) all.push_back(std::move(e));
      if (all.size() < n) ShortNap();
    }
    return all;
  }
  std::vector<Exit> PollUntil(size_t n, Time now = Time::FromSeconds(100)) {
    return PollUntil(launcher_, n, now);
  }

  std::vector<std::string> PartRecords() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir_ / "state", ec)) {
      if (entry.path().extension() == ".part") out.push_back(entry.path().string());
    }
    return out;
  }

  // A helper process standing in for the agent: it launches `spec` with a launcher of its own,
  // writes the shim's pid (or -1) to its report pipe, runs `then` (which may write more ints),
  // and waits to be killed. Returns its pid and the read end of the pipe, the shim's pid read.
  struct FakeAgent {
    pid_t pid = -1;
    int shim = -1;
    int report = -1;  // the read end; the caller closes it
  };
  FakeAgent ForkAgent(const LaunchSpec& spec, const std::function<void(ProcessLauncher&, int)>& then = {}) {
    FakeAgent a;
    LauncherOptions options = Options();
    int report[2];
    if (pipe(report) != 0) return a;
    a.pid = fork();
    if (a.pid == 0) {
      close(report[0]);
      ProcessLauncher launcher(options);
      auto r = launcher.Launch(spec);
      WriteInt(report[1], r.ok() ? *r : -1);
      if (then) then(launcher, report[1]);
      for (;;) pause();
    }
    close(report[1]);
    a.report = report[0];
    if (a.pid > 0) a.shim = ReadInt(a.report);
    return a;
  }

  std::string name_;
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

TEST_F(ProcessLauncherTest, LaunchesOnOneThreadWhileAnotherPollsAndLists) {
  // Given one thread launching (and stopping every third part) while this one polls and lists,
  // as the agent's command thread and main loop do, expect every part's exit exactly once with
  // its own code, and nothing left. Run under TSan (scripts/sanitize.sh --tsan) this also checks
  // that the two threads share no unguarded state.
  constexpr int kParts = 24;
  std::atomic<bool> launched_all{false}, polled_all{false};
  std::vector<std::string> errors;
  std::thread launcher_thread([&] {
    for (int i = 0; i < kParts; ++i) {
      std::string key = "p" + std::to_string(i);
      auto pid = launcher_.Launch(Shell(key, i % 3 == 0 ? "sleep 30" : "exit " + std::to_string(i)));
      if (!pid.ok()) errors.push_back(key + ": " + pid.status().message());
      if (i % 3 == 0) {
        Status st = launcher_.Stop(key, SIGTERM, Duration::Seconds(5), Time::FromSeconds(0));
        if (!st.ok()) errors.push_back(key + ": " + st.message());
      }
    }
    launched_all = true;
    // The launching thread outlives its parts (their parent-death signal follows it).
    while (!polled_all) ShortNap();
  });
  std::map<std::string, std::vector<Exit>> by_key;
  size_t seen = 0;
  for (int i = 0; i < 4000 && seen < kParts; ++i) {
    for (Exit& e : launcher_.Poll(Time::FromSeconds(1))) {
      by_key[e.key].push_back(std::move(e));
      ++seen;
    }
    (void)launcher_.List();
    if (seen < kParts) ShortNap();
  }
  polled_all = true;
  launcher_thread.join();
  EXPECT_TRUE(launched_all);
  EXPECT_THAT(errors, ::testing::IsEmpty());
  ASSERT_EQ(by_key.size(), static_cast<size_t>(kParts));
  for (int i = 0; i < kParts; ++i) {
    const auto& exits = by_key["p" + std::to_string(i)];
    ASSERT_EQ(exits.size(), 1u) << "p" << i;
    if (i % 3 == 0) {
      EXPECT_TRUE(exits[0].stopped) << "p" << i;
      EXPECT_EQ(exits[0].signal, SIGTERM) << "p" << i;
    } else {
      EXPECT_EQ(exits[0].exit_code, i) << "p" << i;
    }
  }
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

TEST_F(ProcessLauncherTest, ChildSeesEnvironmentAndWorkdirAndProcessGroupOfThePart) {
  // Given extra variables and a workdir that does not exist yet, expect the job to run in the
  // created workdir with the variables (overriding the agent's), stdin from /dev/null, as a
  // child of the part's pid (the shim) in the process group that pid leads.
  setenv("GPUFLEET_LAUNCHER_TEST_INHERITED", "from-agent", 1);
  LaunchSpec spec = Shell("env", R"sh(echo "cwd=$(pwd)"; echo "job=$JOB_ID"; )sh"
                                 R"sh(echo "inherited=$GPUFLEET_LAUNCHER_TEST_INHERITED"; )sh"
                                 R"sh(echo "stdin=$(cat | wc -c)"; )sh"
                                 R"sh(echo "pgid=$(cut -d' ' -f5 /proc/$$/stat)"; echo "ppid=$PPID")sh");
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
  EXPECT_THAT(log, HasSubstr("ppid=" + std::to_string(*pid) + "\n"));
  EXPECT_THAT(log, HasSubstr("pgid=" + std::to_string(*pid) + "\n"));
}

TEST_F(ProcessLauncherTest, JobDoesNotSeeTheAgentsEnvironment) {
  // Given a secret and a locale variable in the agent's environment, expect the job to see the
  // locale variable, PATH, HOME, USER and its own variables, and not the secret.
  setenv("GPUFLEET_JOIN_TOKEN", "secret", 1);
  setenv("LC_GPUFLEET_TEST", "kept", 1);
  LaunchSpec spec = Spec("env", {"env"});
  spec.env = {{"JOB_ID", "42"}};
  auto pid = launcher_.Launch(spec);
  unsetenv("GPUFLEET_JOIN_TOKEN");
  unsetenv("LC_GPUFLEET_TEST");
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  ASSERT_EQ(PollUntil(1).size(), 1u);
  std::string log = ReadFile(spec.log_path);
  EXPECT_THAT(log, Not(HasSubstr("GPUFLEET_JOIN_TOKEN")));
  EXPECT_THAT(log, Not(HasSubstr("secret")));
  std::map<std::string, std::string> env = EnvLines(log);
  EXPECT_FALSE(env["PATH"].empty());
  EXPECT_EQ(env["JOB_ID"], "42");
  EXPECT_EQ(env["LC_GPUFLEET_TEST"], "kept");
  struct passwd* pw = getpwuid(geteuid());
  if (pw != nullptr) {
    EXPECT_EQ(env["HOME"], pw->pw_dir);
    EXPECT_EQ(env["USER"], pw->pw_name);
    EXPECT_EQ(env["LOGNAME"], pw->pw_name);
  }
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
  const std::string message = r.status().message();
  EXPECT_EQ(message.rfind("exec gpufleet-no-such-program-xyz: command not found (no file of that name in any PATH "
                          "folder; PATH=", 0),
            0u)
      << message;
  // A file of that name that may not be run: said to be there.
  const std::string dir = (dir_ / "noexec-bin").string();
  fs::create_directories(dir);
  { std::ofstream(dir + "/gpufleet-noexec-xyz") << "#!/bin/sh\n"; }
  LaunchSpec noexec = Spec("noexec", {"gpufleet-noexec-xyz"});
  noexec.env["PATH"] = dir;
  auto denied = launcher_.Launch(noexec);
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().message().rfind("exec gpufleet-noexec-xyz: Permission denied (" + dir +
                                                "/gpufleet-noexec-xyz is there, but not an executable file", 0),
            0u)
      << denied.status().message();
  EXPECT_NE(message.find("PATH=" + std::string(std::getenv("PATH") ? std::getenv("PATH") : "")), std::string::npos)
      << message;
  auto full = launcher_.Launch(Spec("nope2", {"/no/such/dir/train", "x"}));
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().message(), "exec /no/such/dir/train: No such file or directory") << "a path is not looked up";
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

TEST_F(ProcessLauncherTest, ProcessesOfAShellTheCheckpointSignalEndedGetTheirWholeGrace) {
  // Given a part whose command is a shell (as `run: "python3 train.py"` starts it) that dies of
  // SIGTERM at once, while the process it started traps SIGTERM and takes a moment to write its
  // checkpoint, expect the part to end only once that process has saved and exited, well inside
  // the grace (it was killed with the shell's exit), flagged as stopped and not killed.
  if (!UsesCgroups(launcher_)) GTEST_SKIP() << launcher_.CgroupNote();
  fs::path ready = dir_ / "ready", ckpt = dir_ / "ckpt";
  std::string inner = "trap 'sleep 0.3; echo saved > " + ckpt.string() + "; exit 0' TERM; echo up > " +
                      ready.string() + "; while :; do sleep 0.01; done";
  std::string script = "sh -c \"" + inner + "\" & wait";
  ASSERT_TRUE(launcher_.Launch(Shell("ckpt-under-shell", script)).ok());
  ASSERT_TRUE(WaitForFile(ready));
  const Time t0 = Time::FromSeconds(1000);
  ASSERT_TRUE(launcher_.Stop("ckpt-under-shell", SIGTERM, Duration::Seconds(30), t0).ok());
  std::vector<Exit> exits = PollUntil(1, t0 + Duration::Seconds(1));  // well inside the grace
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_TRUE(exits[0].stopped);
  EXPECT_FALSE(exits[0].killed_after_grace);
  EXPECT_EQ(ReadFile(ckpt), "saved\n") << "the checkpoint was cut short";
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
  // Given user "nobody", expect the child to run with nobody's uid when the agent is root; when
  // it is not, expect a clear error for a user other than its own (root here).
  LaunchSpec spec = Shell("user", "id -u; echo \"home=$HOME\"");
  spec.user = "nobody";
  spec.workdir = (dir_ / "nobody-work").string();
  fs::permissions(dir_, fs::perms::all);  // let nobody reach its workdir
  if (geteuid() != 0) {
    spec.user = "root";
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

TEST_F(ProcessLauncherTest, AWorkdirItsUserCouldNotMakeIsNotMadeForIt) {
  // Given an agent that is root and a part as nobody whose workdir lies in a folder only root
  // may write (as another user's home would be), expect the launch refused with the folder named
  // and nothing made: the agent does not hand a user a folder where that user could not make one;
  // the same where the mode bits allow it but nobody cannot reach the folder (made as nobody).
  if (geteuid() != 0) GTEST_SKIP() << "needs the agent to run as root";
  if (getpwnam("nobody") == nullptr) GTEST_SKIP() << "no user 'nobody' on this machine";
  fs::create_directories(dir_ / "closed");
  fs::permissions(dir_ / "closed", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                       fs::perms::others_read | fs::perms::others_exec);
  LaunchSpec spec = Shell("closed", "true");
  spec.user = "nobody";
  spec.workdir = (dir_ / "closed" / "x").string();
  auto r = launcher_.Launch(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("may not make it (" + fs::weakly_canonical(dir_ / "closed").string()));
  EXPECT_FALSE(fs::exists(dir_ / "closed" / "x"));
  // The same folder reached through ".." from one that all may write: checked where the kernel
  // would make it.
  fs::create_directories(dir_ / "open");
  fs::permissions(dir_ / "open", fs::perms::all);
  spec.workdir = (dir_ / "open" / "n" / ".." / ".." / "closed" / "x").string();
  r = launcher_.Launch(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("may not make it (" + fs::weakly_canonical(dir_ / "closed").string()));
  EXPECT_FALSE(fs::exists(dir_ / "closed" / "x"));
  EXPECT_FALSE(fs::exists(dir_ / "open" / "n"));
  // A folder all may write inside one only root may enter: the mode-bit check passes it, the
  // making as nobody cannot reach it.
  fs::create_directories(dir_ / "private" / "open");
  fs::permissions(dir_ / "private", fs::perms::owner_all);
  fs::permissions(dir_ / "private" / "open", fs::perms::all);
  spec.workdir = (dir_ / "private" / "open" / "x").string();
  r = launcher_.Launch(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("cannot be made as user nobody"));
  EXPECT_THAT(r.status().message(), HasSubstr("Permission denied"));
  EXPECT_FALSE(fs::exists(dir_ / "private" / "open" / "x"));
}

TEST_F(ProcessLauncherTest, AgentThatIsNotRootRunsPartsAsItselfEvenByName) {
  // Given an agent that is not root and a part naming the agent's own user, expect it to run.
  if (geteuid() == 0) GTEST_SKIP() << "needs the test to run as a user other than root";
  struct passwd* pw = getpwuid(geteuid());
  if (pw == nullptr) GTEST_SKIP() << "the test's uid has no passwd entry";
  LaunchSpec spec = Shell("self", "id -u");
  spec.user = pw->pw_name;
  auto r = launcher_.Launch(spec);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(PollUntil(1).size(), 1u);
  EXPECT_EQ(ReadFile(spec.log_path), std::to_string(geteuid()) + "\n");
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
  // Given a launcher going away with a part still running, expect the part killed and, with
  // cgroups, the part's cgroup and the launcher's root removed.
  int pid = 0;
  std::string root;
  {
    ProcessLauncher launcher(Options("-gone"));
    if (UsesCgroups(launcher)) root = AutoRootFor(name_ + "-gone");
    auto r = launcher.Launch(Spec("long", {"sleep", "100"}));
    ASSERT_TRUE(r.ok());
    pid = *r;
  }
  EXPECT_TRUE(ProcessGone(pid));
  if (!root.empty()) {
    EXPECT_FALSE(fs::exists(root)) << root;
  }
}

TEST_F(ProcessLauncherTest, RootIsRefusedUnlessAllowed) {
  // Given an agent running as root, expect a part with no user (and no default user), and one
  // for the user root, refused with a message that says what to do; with allow_root, expect the
  // job to run as uid 0.
  if (geteuid() != 0) GTEST_SKIP() << "needs the test to run as root";
  LauncherOptions strict_options;
  strict_options.name = name_ + "-strict";
  ProcessLauncher strict(strict_options);
  auto r = strict.Launch(Shell("job-42/0", "id -u"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().message(),
            "refusing to run job-42/0 as root (uid 0): run the agent with --job-user USER, or "
            "--allow-root-jobs");
  LaunchSpec named = Shell("job-42/1", "id -u");
  named.user = "root";
  r = strict.Launch(named);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("as root (uid 0)"));
  EXPECT_TRUE(strict.List().empty());

  ASSERT_TRUE(launcher_.Launch(named).ok());  // the fixture's launcher allows root
  ASSERT_EQ(PollUntil(1).size(), 1u);
  EXPECT_EQ(ReadFile(named.log_path), "0\n");
}

TEST_F(ProcessLauncherTest, DefaultUserRunsPartsWithoutAUser) {
  // Given a root agent with default_user nobody, expect a part without a user to run with
  // nobody's uid, HOME and USER.
  if (geteuid() != 0) GTEST_SKIP() << "needs the test to run as root";
  struct passwd* pw = getpwnam("nobody");
  if (pw == nullptr) GTEST_SKIP() << "no user 'nobody' on this machine";
  const uid_t nobody_uid = pw->pw_uid;
  const std::string nobody_home = pw->pw_dir;
  LauncherOptions options;
  options.name = name_ + "-nobody";
  options.default_user = "nobody";
  ProcessLauncher launcher(options);
  LaunchSpec spec = Shell("job", "id -u; echo \"home=$HOME user=$USER\"");
  auto r = launcher.Launch(spec);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<Exit> exits = PollUntil(launcher, 1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 0) << ReadFile(spec.log_path);
  EXPECT_EQ(ReadFile(spec.log_path),
            std::to_string(nobody_uid) + "\nhome=" + nobody_home + " user=nobody\n");
}

TEST_F(ProcessLauncherTest, NulBytesAndBadVariableNamesAreRefused) {
  // Given a NUL byte in an argument or a variable, an empty variable name, or one with '=',
  // expect InvalidArgument each and nothing started.
  const fs::path marker = dir_ / "ran";
  LaunchSpec nul_arg = Shell("nul-arg", "touch " + marker.string());
  nul_arg.argv.push_back(std::string("x\0y", 3));
  auto r = launcher_.Launch(nul_arg);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("argv[3] contains a NUL byte"));

  LaunchSpec nul_value = Shell("nul-value", "touch " + marker.string());
  nul_value.env = {{"A", std::string("1\0 2", 4)}};
  r = launcher_.Launch(nul_value);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("contains a NUL byte"));

  LaunchSpec nul_name = Shell("nul-name", "touch " + marker.string());
  nul_name.env = {{std::string("A\0B", 3), "1"}};
  EXPECT_EQ(launcher_.Launch(nul_name).status().code(), StatusCode::kInvalidArgument);

  LaunchSpec empty_name = Shell("empty-name", "touch " + marker.string());
  empty_name.env = {{"", "1"}};
  EXPECT_EQ(launcher_.Launch(empty_name).status().code(), StatusCode::kInvalidArgument);

  LaunchSpec equals = Shell("equals", "touch " + marker.string());
  equals.env = {{"A=B", "1"}};
  r = launcher_.Launch(equals);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("'A=B' contains '='"));

  EXPECT_TRUE(launcher_.List().empty());
  EXPECT_TRUE(launcher_.Poll(Time::FromSeconds(1)).empty());
  EXPECT_FALSE(fs::exists(marker));
}

TEST_F(ProcessLauncherTest, WorkdirMustLieUnderAnAllowedRoot) {
  // Given allowed roots, expect a workdir outside them refused (plainly, through "..", or
  // through a symlink) with nothing created, and one inside them used.
  const fs::path jobs = dir_ / "jobs";
  fs::create_directories(jobs);
  fs::create_directories(dir_ / "elsewhere");
  fs::create_directory_symlink(dir_ / "elsewhere", jobs / "link");
  LauncherOptions options = Options();
  options.workdir_roots = {jobs.string(), "/gpufleet-no-such-root"};
  ProcessLauncher launcher(options);

  LaunchSpec outside = Shell("out", "pwd");
  outside.workdir = "/etc";
  auto r = launcher.Launch(outside);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "launch out: workdir /etc is outside the allowed roots (" + jobs.string() +
                                      ", /gpufleet-no-such-root); give a directory under one of them (workdir: in the "
                                      "job file, --workdir for run; the CLI sends the directory it runs in when the "
                                      "job names none)");

  LaunchSpec dotdot = Shell("dotdot", "pwd");
  dotdot.workdir = (jobs / ".." / "escape").string();
  EXPECT_EQ(launcher.Launch(dotdot).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(dir_ / "escape"));

  LaunchSpec through_link = Shell("link", "pwd");
  through_link.workdir = (jobs / "link" / "run").string();
  EXPECT_EQ(launcher.Launch(through_link).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(dir_ / "elsewhere" / "run"));

  LaunchSpec inside = Shell("in", "pwd");
  inside.workdir = (jobs / "a" / ".." / "b" / "run").string();
  r = launcher.Launch(inside);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(PollUntil(launcher, 1).size(), 1u);
  EXPECT_EQ(ReadFile(inside.log_path), fs::weakly_canonical(jobs / "b" / "run").string() + "\n");
}

TEST_F(ProcessLauncherTest, JobRunsInACgroupOfItsOwn) {
  // Given cgroups, expect the job in <root>/<key with unsafe characters replaced>, with its
  // memory and cpu limits written where the cgroup offers the controllers, and the cgroup gone
  // once the part has been reaped.
  if (!UsesCgroups(launcher_)) GTEST_SKIP() << launcher_.CgroupNote();
  auto mount = FindCgroup2Mount(ReadFile("/proc/self/mountinfo"));
  ASSERT_TRUE(mount.ok());
  const std::string dir = AutoRootFor(name_) + "/job-42.a1.p0_0";
  fs::path ready = dir_ / "cgroup";
  LaunchSpec spec = Shell("job-42.a1.p0#0", "sed -n 's/^0:://p' /proc/self/cgroup > " +
                                                ready.string() + "; exec sleep 100");
  spec.memory_limit_mib = 64;
  spec.cpu_milli = 500;
  ASSERT_TRUE(launcher_.Launch(spec).ok());
  ASSERT_TRUE(WaitForFile(ready));
  std::string own = ReadFile(ready);
  if (!own.empty() && own.back() == '\n') own.pop_back();
  fs::path rel = fs::path(own).lexically_relative(mount->root);
  EXPECT_EQ((fs::path(mount->mount_point) / rel).lexically_normal().string(), dir);
  const std::string note = launcher_.CgroupNote();
  if (note.find("memory and cpu limits enforced") != std::string::npos ||
      note.find("memory limits enforced") != std::string::npos) {
    EXPECT_EQ(ReadFile(dir + "/memory.max"), "67108864\n");
  }
  if (note.find("memory and cpu limits enforced") != std::string::npos ||
      note.find("cpu limits enforced") != std::string::npos) {
    EXPECT_EQ(ReadFile(dir + "/cpu.max"), "50000 100000\n");
  }
  ASSERT_TRUE(launcher_.Signal(spec.key, SIGKILL).ok());
  ASSERT_EQ(PollUntil(1).size(), 1u);
  for (int i = 0; i < 2000 && fs::exists(dir); ++i) {
    launcher_.Poll(Time::FromSeconds(100));  // a busy cgroup is removed by a later Poll
    ShortNap();
  }
  EXPECT_FALSE(fs::exists(dir));
}

TEST_F(ProcessLauncherTest, StopKillsProcessesThatLeftTheGroup) {
  // Given a part that double-forks a process into a session of its own that ignores SIGTERM,
  // expect Stop with no grace to kill it too once Poll sees the deadline.
  if (!UsesCgroups(launcher_)) GTEST_SKIP() << launcher_.CgroupNote();
  fs::path pidfile = dir_ / "escaped.pid";
  std::string script = "setsid sh -c 'trap \"\" TERM; echo $$ > " + pidfile.string() +
                       "; exec sleep 1000' & wait";
  ASSERT_TRUE(launcher_.Launch(Shell("escape", script)).ok());
  ASSERT_TRUE(WaitForFile(pidfile));
  int escaped = std::stoi(ReadFile(pidfile));
  ASSERT_FALSE(ProcessGone(escaped));
  const Time t0 = Time::FromSeconds(1000);
  ASSERT_TRUE(launcher_.Stop("escape", SIGTERM, Duration::Zero(), t0).ok());
  std::vector<Exit> exits = PollUntil(1, t0);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_TRUE(exits[0].stopped);
  EXPECT_TRUE(WaitGone(escaped));
}

TEST_F(ProcessLauncherTest, ProcessesThatLeftTheGroupDieWithTheJob) {
  // Given a job that exits 0 and leaves behind a process in a session of its own, expect the
  // exit reported and that process killed.
  if (!UsesCgroups(launcher_)) GTEST_SKIP() << launcher_.CgroupNote();
  fs::path pidfile = dir_ / "escaped.pid";
  std::string script = "setsid sh -c 'echo $$ > " + pidfile.string() + ".tmp; mv " +
                       pidfile.string() + ".tmp " + pidfile.string() + "; exec sleep 1000' &"
                       " while [ ! -s " + pidfile.string() + " ]; do sleep 0.01; done";
  ASSERT_TRUE(launcher_.Launch(Shell("orphan", script)).ok());
  std::vector<Exit> exits = PollUntil(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 0);
  ASSERT_TRUE(WaitForFile(pidfile));
  EXPECT_TRUE(WaitGone(std::stoi(ReadFile(pidfile))));
}

TEST_F(ProcessLauncherTest, CheckpointSignalReachesProcessesThatLeftTheGroup) {
  // Given a part whose checkpointing process runs in a session of its own and saves on
  // SIGTERM, expect Signal to reach it.
  if (!UsesCgroups(launcher_)) GTEST_SKIP() << launcher_.CgroupNote();
  fs::path ready = dir_ / "ready", ckpt = dir_ / "ckpt";
  std::string script = "setsid sh -c 'trap \"echo saved > " + ckpt.string() +
                       "; exit 0\" TERM; echo up > " + ready.string() +
                       "; while :; do sleep 0.01; done' & wait";
  ASSERT_TRUE(launcher_.Launch(Shell("ckpt", script)).ok());
  ASSERT_TRUE(WaitForFile(ready));
  ASSERT_TRUE(launcher_.Signal("ckpt", SIGTERM).ok());
  ASSERT_TRUE(WaitForFile(ckpt));  // before Poll, which kills what the part leaves behind
  EXPECT_EQ(ReadFile(ckpt), "saved\n");
  std::vector<Exit> exits = PollUntil(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].signal, SIGTERM);  // the job's own death, reported through the shim
}

TEST_F(ProcessLauncherTest, KillingTheAgentKillsItsParts) {
  // Given a helper process standing in for the agent that launched a part with a background
  // sleep, expect SIGKILL to the helper to take the part's shim and the sleep with it.
  fs::path pidfile = dir_ / "sleep.pid";
  FakeAgent helper = ForkAgent(Shell("orphaned", "sleep 1000 & echo $! > " + pidfile.string() + "; wait"));
  ASSERT_GT(helper.pid, 0);
  close(helper.report);
  const pid_t agent = helper.pid;
  const int shim = helper.shim;
  ASSERT_GT(shim, 0);
  ASSERT_TRUE(WaitForFile(pidfile));
  int sleep_pid = std::stoi(ReadFile(pidfile));
  EXPECT_FALSE(ProcessGone(sleep_pid));
  ASSERT_EQ(kill(agent, SIGKILL), 0);
  ASSERT_EQ(waitpid(agent, nullptr, 0), agent);
  EXPECT_TRUE(WaitGone(shim));
  EXPECT_TRUE(WaitGone(sleep_pid));
  launcher_.KillLeftovers();  // the helper's records and empty cgroup
  EXPECT_TRUE(PartRecords().empty());
}

TEST_F(ProcessLauncherTest, KillingTheAgentDuringAStopKillsWhatTheJobLeftBehind) {
  // Given a helper process standing in for the agent that stops a part with a long grace, whose
  // shell exits at the stop's signal while a process it started ignores it, expect the part to
  // run on (the shim waits for that process) and SIGKILL to the helper to take the shim and that
  // process with it, rather than leave it running with nobody to kill it. (With a cgroup: without
  // one the shim does not wait, see launcher.h.)
  if (!UsesCgroups(launcher_)) GTEST_SKIP() << launcher_.CgroupNote();
  fs::path sleep_file = dir_ / "sleep.pid", shell_file = dir_ / "shell.pid";
  // (The pid is written once SIGTERM is ignored: a stop sent before would end it.)
  LaunchSpec spec = Shell("stopping", "sh -c 'trap \"\" TERM; echo $$ > " + sleep_file.string() +
                                          "; exec sleep 1000' & echo $$ > " + shell_file.string() +
                                          "; trap 'exit 0' TERM; while :; do sleep 0.01; done");
  FakeAgent helper = ForkAgent(spec, [&](ProcessLauncher& launcher, int report) {
    bool stopped = false;
    for (int i = 0; i < 2000 && !stopped; ++i) {
      std::error_code ec;
      if (fs::exists(shell_file, ec) && fs::file_size(shell_file, ec) > 0 && fs::exists(sleep_file, ec) &&
          fs::file_size(sleep_file, ec) > 0) {
        stopped = launcher.Stop("stopping", SIGTERM, Duration::Seconds(1000), Time::FromSeconds(1000)).ok();
      } else {
        ShortNap();
      }
    }
    WriteInt(report, stopped ? 1 : 0);
  });
  ASSERT_GT(helper.pid, 0);
  const pid_t agent = helper.pid;
  const int shim = helper.shim;
  const int stopped = ReadInt(helper.report);
  close(helper.report);
  ASSERT_GT(shim, 0);
  ASSERT_EQ(stopped, 1);
  int sleep_pid = std::stoi(ReadFile(sleep_file));
  int shell_pid = std::stoi(ReadFile(shell_file));
  ASSERT_TRUE(WaitGone(shell_pid)) << "the job's shell did not end at the stop's signal";
  EXPECT_FALSE(ProcessGone(sleep_pid));
  EXPECT_FALSE(ProcessGone(shim)) << "the shim ended with the job's shell, before the part's last process";
  ASSERT_EQ(kill(agent, SIGKILL), 0);
  ASSERT_EQ(waitpid(agent, nullptr, 0), agent);
  EXPECT_TRUE(WaitGone(shim));
  EXPECT_TRUE(WaitGone(sleep_pid)) << "a process of the stopped part outlived the agent";
  if (!ProcessGone(sleep_pid)) kill(sleep_pid, SIGKILL);
  launcher_.KillLeftovers();  // the helper's records and empty cgroup
  EXPECT_TRUE(PartRecords().empty());
}

TEST_F(ProcessLauncherTest, OrphansOfARunningJobAreReapedAndItsExitIsItsOwn) {
  // Given a job that leaves short-lived orphans behind (a double fork, as daemons do) and then
  // exits 3, expect no zombie of them left under the shim while the job runs, and the job's own
  // exit code reported.
  fs::path ready = dir_ / "ready", go = dir_ / "go", orphans = dir_ / "orphans", linger = dir_ / "linger";
  fs::path orphan_ppid = dir_ / "orphan.ppid";
  // One orphan stays until told, and says who its parent is once its own has gone: the shim
  // (its subreaper), not init.
  std::string script = "for i in 1 2 3; do (sh -c 'echo $$ >> " + orphans.string() + "; sleep 0.05' &) ; done; " +
                       "(sh -c 'sleep 0.2; grep PPid /proc/$$/status | cut -f2 > " + orphan_ppid.string() + "; while [ ! -e " + linger.string() +
                       " ]; do sleep 0.01; done' &); echo up > " + ready.string() + "; while [ ! -e " + go.string() +
                       " ]; do sleep 0.01; done; exit 3";
  auto pid = launcher_.Launch(Shell("orphans", script));
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  ASSERT_TRUE(WaitForFile(ready));
  ASSERT_TRUE(WaitForFile(orphan_ppid));
  EXPECT_EQ(std::stoi(ReadFile(orphan_ppid)), *pid) << "an orphan of the job went to another parent than the shim";
  std::ofstream(linger) << "go\n";
  std::vector<int> orphan_pids;
  for (int i = 0; i < 2000 && orphan_pids.size() < 3; ++i) {
    orphan_pids.clear();
    std::istringstream lines(ReadFile(orphans));
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty()) orphan_pids.push_back(std::stoi(line));
    }
    if (orphan_pids.size() < 3) ShortNap();
  }
  ASSERT_EQ(orphan_pids.size(), 3u);
  for (int p : orphan_pids) {
    // Gone from /proc altogether: reaped, not a zombie of the shim.
    bool reaped = false;
    for (int i = 0; i < 2000 && !reaped; ++i) {
      reaped = !fs::exists("/proc/" + std::to_string(p));
      if (!reaped) ShortNap();
    }
    EXPECT_TRUE(reaped) << "orphan " << p << " was left unreaped";
  }
  std::ofstream(go) << "go\n";
  std::vector<Exit> exits = PollUntil(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 3);
  EXPECT_EQ(exits[0].signal, 0);
}
TEST_F(ProcessLauncherTest, KillLeftoversKillsAStrayCgroupAndSparesItsOwnParts) {
  // Given a running part of this launcher and a cgroup under its root that it did not make,
  // holding a process, expect KillLeftovers to kill that process, remove that cgroup, say so,
  // and leave the part alone.
  if (!UsesCgroups(launcher_)) GTEST_SKIP() << launcher_.CgroupNote();
  auto mine = launcher_.Launch(Spec("mine", {"sleep", "100"}));
  ASSERT_TRUE(mine.ok());
  const std::string stray = AutoRootFor(name_) + "/stray";
  ASSERT_EQ(mkdir(stray.c_str(), 0755), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int fd = open((stray + "/cgroup.procs").c_str(), O_WRONLY);
    if (fd < 0 || write(fd, "0", 1) != 1) _exit(127);
    close(fd);
    setsid();
    execlp("sleep", "sleep", "1000", static_cast<char*>(nullptr));
    _exit(127);
  }
  bool joined = false;
  for (int i = 0; i < 2000 && !(joined = CgroupPopulated(stray)); ++i) ShortNap();
  ASSERT_TRUE(joined);

  std::vector<std::string> killed = launcher_.KillLeftovers();
  ASSERT_EQ(killed.size(), 1u);
  EXPECT_THAT(killed[0], HasSubstr("killed cgroup " + stray));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_FALSE(fs::exists(stray));
  ASSERT_EQ(launcher_.List().size(), 1u);
  EXPECT_EQ(kill(*mine, 0), 0);
  EXPECT_TRUE(launcher_.KillLeftovers().empty());
}

TEST_F(ProcessLauncherTest, TwoAgentsOfOneNameOnOneMachineLeaveEachOthersPartsAlone) {
  // Given two launchers with the same node name but their own state directories (two clusters
  // on one machine), expect apart cgroup roots, and the second's KillLeftovers, run at its start,
  // to spare the first's running part.
  if (!UsesCgroups(launcher_)) GTEST_SKIP() << launcher_.CgroupNote();
  auto mine = launcher_.Launch(Spec("mine", {"sleep", "100"}));
  ASSERT_TRUE(mine.ok());
  LauncherOptions other = Options();
  other.state_dir = (dir_ / "other-state").string();
  ProcessLauncher second(other);
  ASSERT_TRUE(UsesCgroups(second)) << second.CgroupNote();
  EXPECT_THAT(second.CgroupNote(), Not(HasSubstr(AutoRootFor(name_) + ":")));
  EXPECT_TRUE(second.KillLeftovers().empty());
  EXPECT_EQ(kill(*mine, 0), 0);
  ASSERT_EQ(launcher_.List().size(), 1u);
}

TEST_F(ProcessLauncherTest, KillLeftoversKillsThePartsOfAnAgentThatExecedAgain) {
  // Given a helper standing in for an agent that launched a part and then exec'ed another
  // program (no parent-death signal: the thread lives on), expect a new launcher with the same
  // state_dir to find the part's record, kill its group, remove the record, and say so.
  fs::path pidfile = dir_ / "sleep.pid";
  LaunchSpec spec = Shell("stale", "sleep 1000 & echo $! > " + pidfile.string() + "; wait");
  LauncherOptions options = Options("-stale");
  options.cgroup_root = "off";  // the record alone must be enough
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  pid_t agent = fork();
  ASSERT_GE(agent, 0);
  if (agent == 0) {
    close(report[0]);
    ProcessLauncher launcher(options);
    auto r = launcher.Launch(spec);
    WriteInt(report[1], r.ok() ? *r : -1);
    close(report[1]);
    execlp("sleep", "sleep", "1000", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(report[1]);
  int shim = ReadInt(report[0]);
  close(report[0]);
  ASSERT_GT(shim, 0);
  ASSERT_TRUE(WaitForFile(pidfile));
  int sleep_pid = std::stoi(ReadFile(pidfile));
  ASSERT_EQ(PartRecords().size(), 1u);

  ProcessLauncher restarted(options);
  std::vector<std::string> killed = restarted.KillLeftovers();
  ASSERT_EQ(killed.size(), 1u);
  EXPECT_THAT(killed[0], HasSubstr("killed part stale"));
  EXPECT_THAT(killed[0], HasSubstr("pid " + std::to_string(shim)));
  EXPECT_TRUE(WaitGone(sleep_pid));
  EXPECT_TRUE(WaitGone(shim));
  EXPECT_TRUE(PartRecords().empty());
  EXPECT_TRUE(restarted.KillLeftovers().empty());
  kill(agent, SIGKILL);
  waitpid(agent, nullptr, 0);
}

TEST_F(ProcessLauncherTest, RecordIsKeptWhileThePartRuns) {
  // Given a state_dir, expect a record naming the part while it runs and none once reaped.
  ASSERT_TRUE(launcher_.Launch(Spec("recorded", {"sleep", "100"})).ok());
  std::vector<std::string> records = PartRecords();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_THAT(ReadFile(records[0]), HasSubstr("key=recorded\n"));
  ASSERT_TRUE(launcher_.Stop("recorded", SIGTERM, Duration::Seconds(5), Time()).ok());
  ASSERT_EQ(PollUntil(1).size(), 1u);
  EXPECT_TRUE(PartRecords().empty());
}

TEST_F(ProcessLauncherTest, CgroupNoteSaysWhatContainsTheParts) {
  // Given cgroups turned off, expect the note to say that process groups are all there is; by
  // default, expect it to name the cgroup root or why cgroups are unavailable.
  LauncherOptions off = Options("-off");
  off.cgroup_root = "off";
  EXPECT_THAT(ProcessLauncher(off).CgroupNote(), HasSubstr("contained by their process groups only"));
  const std::string note = launcher_.CgroupNote();
  if (UsesCgroups(launcher_)) {
    EXPECT_THAT(note, HasSubstr(AutoRootFor(name_) + ": parts are contained"));
    EXPECT_THAT(note, HasSubstr("limits"));
  } else {
    EXPECT_THAT(note, HasSubstr("cgroups unavailable ("));
  }
  LauncherOptions bad = Options("-bad");
  bad.cgroup_root = (dir_ / "not-a-cgroup").string();
  EXPECT_THAT(ProcessLauncher(bad).CgroupNote(), HasSubstr("cgroups unavailable ("));
}

class MakeDirectoriesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpufleet-mkdirs.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    if (!root.empty()) std::filesystem::remove_all(root, ec);
  }
  std::filesystem::path root;
};

TEST_F(MakeDirectoriesTest, MakesTheMissingLevelsAndNamesWhatItMade) {
  // Given a folder with one existing level, expect the two missing levels made and returned
  // outermost first; then nothing to make; and a file in the way named in the error.
  auto made = MakeDirectories(root / "a" / "b");
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_EQ(*made, (std::vector<std::filesystem::path>{root / "a", root / "a" / "b"}));
  EXPECT_TRUE(std::filesystem::is_directory(root / "a" / "b"));
  auto again = MakeDirectories(root / "a" / "b");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());
  std::ofstream(root / "file") << "x";
  auto blocked = MakeDirectories(root / "file" / "c");
  ASSERT_FALSE(blocked.ok());
  EXPECT_THAT(blocked.status().message(), HasSubstr((root / "file").string() + " is not a directory"));
  EXPECT_FALSE(MakeDirectories(root / "file").ok());
  // "x/../y/": x and y made, the ".." level (root itself, whose mode callers would change) not
  // listed, y not listed twice.
  auto dotdot = MakeDirectories(root / "x" / ".." / "y" / "");
  ASSERT_TRUE(dotdot.ok()) << dotdot.status().message();
  EXPECT_EQ(*dotdot, (std::vector<std::filesystem::path>{root / "x", root / "x" / ".." / "y"}));
  EXPECT_TRUE(std::filesystem::is_directory(root / "y"));
  // A trailing "/." is the folder; a doubled separator is one; a path that ends in ".." makes
  // its levels but lists no ".." level.
  auto dot = MakeDirectories(root / "p" / ".");
  ASSERT_TRUE(dot.ok()) << dot.status().message();
  EXPECT_EQ(*dot, (std::vector<std::filesystem::path>{root / "p"}));
  auto doubled = MakeDirectories(root.string() + "/q//r");
  ASSERT_TRUE(doubled.ok()) << doubled.status().message();
  EXPECT_EQ(doubled->size(), 2u);
  EXPECT_TRUE(std::filesystem::is_directory(root / "q" / "r"));
  auto up = MakeDirectories(root / "m" / "n" / "..");
  ASSERT_TRUE(up.ok()) << up.status().message();
  EXPECT_EQ(*up, (std::vector<std::filesystem::path>{root / "m", root / "m" / "n"}));
  // Behind a link, ".." is the link target's parent, as the kernel walks it.
  std::filesystem::create_directories(root / "t" / "inner");
  std::filesystem::create_directory_symlink(root / "t" / "inner", root / "l");
  auto behind = MakeDirectories(root / "l" / ".." / "ckpt");
  ASSERT_TRUE(behind.ok()) << behind.status().message();
  EXPECT_EQ(*behind, (std::vector<std::filesystem::path>{root / "l" / ".." / "ckpt"}));
  EXPECT_TRUE(std::filesystem::is_directory(root / "t" / "ckpt"));
  EXPECT_FALSE(std::filesystem::exists(root / "ckpt"));
  // A link where a level should be is not a folder this call made, nor one it may use when it dangles.
  std::filesystem::create_symlink(root / "nowhere", root / "dangling");
  EXPECT_FALSE(MakeDirectories(root / "dangling").ok());
  std::filesystem::create_directory_symlink(root / "a", root / "link");
  auto through = MakeDirectories(root / "link" / "d");
  ASSERT_TRUE(through.ok()) << through.status().message();
  EXPECT_EQ(*through, (std::vector<std::filesystem::path>{root / "link" / "d"}));
}

TEST_F(MakeDirectoriesTest, AUserMayMakeAFolderOnlyWhereItMayWrite) {
  // Given a folder of this process's user, expect its user able to make folders below it and
  // another user not, until the folder is writable by one of that user's groups (a supplementary
  // one counts) or by all; the kernel's order applies (an owner without u+w may not, whatever
  // the others' bits).
  const uid_t me = ::geteuid();
  const gid_t my_group = ::getegid();
  const uid_t other = me + 1;
  const gid_t other_group = my_group + 1;
  ASSERT_EQ(::mkdir((root / "a").c_str(), 0755), 0);
  ASSERT_EQ(::chmod((root / "a").c_str(), 0755), 0);
  EXPECT_EQ(NotMakeableBy(root / "a" / "x" / "y", me, {my_group}), "");
  EXPECT_EQ(NotMakeableBy(root / "a" / "x" / "y", other, {other_group}), (root / "a").string());
  EXPECT_EQ(NotMakeableBy(root / "a", other, {other_group}), "") << "an existing folder needs no making";
  ASSERT_EQ(::chmod((root / "a").c_str(), 0775), 0);
  EXPECT_EQ(NotMakeableBy(root / "a" / "x", other, {other_group, my_group}), "") << "a supplementary group";
  EXPECT_EQ(NotMakeableBy(root / "a" / "x", other, {other_group}), (root / "a").string());
  ASSERT_EQ(::chmod((root / "a").c_str(), 01777), 0);
  EXPECT_EQ(NotMakeableBy(root / "a" / "x", other, {other_group}), "");
  ASSERT_EQ(::chmod((root / "a").c_str(), 0577), 0);
  EXPECT_EQ(NotMakeableBy(root / "a" / "x", me, {my_group}), (root / "a").string()) << "the owner's bits decide";
  ASSERT_EQ(::chmod((root / "a").c_str(), 0755), 0);
  std::ofstream(root / "file") << "x";
  EXPECT_EQ(NotMakeableBy(root / "file" / "x", me, {my_group}), (root / "file").string()) << "a file is no folder";
}

TEST_F(MakeDirectoriesTest, FoldersMadeAsAUserGoOnlyWhereThatUserMayWriteAndAreItsOwn) {
  // Given a root agent, a folder all may write and a folder only root may write with a link to it
  // from the open one (as a job's user could swap in after a check), expect MakeDirectories run
  // as nobody to make folders in the open one, owned by nobody without a chown, and its mkdir
  // through the link refused with nothing made there; another thread keeps root's identity and
  // groups meanwhile, and this one has them back after.
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  struct passwd* pw = ::getpwnam("nobody");
  if (pw == nullptr) GTEST_SKIP() << "no user 'nobody' on this machine";
  auto groups_now = [] {
    std::vector<gid_t> g(static_cast<size_t>(::getgroups(0, nullptr)));
    g.resize(static_cast<size_t>(::getgroups(static_cast<int>(g.size()), g.data())));
    return g;
  };
  const FsIdentity nobody{pw->pw_uid, pw->pw_gid, GroupsOf("nobody", pw->pw_gid)};
  ASSERT_NE(nobody.groups, groups_now()) << "the test needs nobody's groups to differ from root's";
  std::filesystem::permissions(root, std::filesystem::perms::owner_all | std::filesystem::perms::others_exec);
  ASSERT_EQ(::mkdir((root / "open").c_str(), 0777), 0);
  ASSERT_EQ(::chmod((root / "open").c_str(), 0777), 0);
  ASSERT_EQ(::mkdir((root / "closed").c_str(), 0755), 0);
  std::filesystem::create_directory_symlink(root / "closed", root / "open" / "link");
  const std::vector<gid_t> groups_before = groups_now();

  // A thread started before the switch reads its own identity while the switch holds (a thread
  // started during it would take this one's, as any new thread takes its creator's).
  std::promise<void> ask;
  std::promise<std::pair<uid_t, std::vector<gid_t>>> answer;
  std::thread other([&] {
    ask.get_future().wait();
    answer.set_value({static_cast<uid_t>(::setfsuid(static_cast<uid_t>(-1))), groups_now()});
  });
  Status made, through_link;
  std::vector<std::filesystem::path> levels;
  std::vector<gid_t> groups_inside;
  bool ran = false;
  std::pair<uid_t, std::vector<gid_t>> answer_while_switched{12345, {}};
  Status as = RunAsFsIdentity(nobody, [&] {
    ran = true;
    groups_inside = groups_now();
    auto m = MakeDirectories(root / "open" / "a" / "b");
    made = m.status();
    if (m.ok()) levels = *m;
    through_link = MakeDirectories(root / "open" / "link" / "x").status();
    ask.set_value();
    answer_while_switched = answer.get_future().get();  // read while this thread is nobody
  });
  if (!ran) ask.set_value();
  other.join();
  const auto [other_fsuid, other_groups] = answer_while_switched;
  ASSERT_TRUE(as.ok()) << as.message();
  EXPECT_EQ(groups_inside, nobody.groups);
  ASSERT_TRUE(made.ok()) << made.message();
  EXPECT_EQ(levels, (std::vector<std::filesystem::path>{root / "open" / "a", root / "open" / "a" / "b"}));
  for (const auto& level : levels) {
    struct stat st {};
    ASSERT_EQ(::stat(level.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, pw->pw_uid) << level;
    EXPECT_EQ(st.st_gid, pw->pw_gid) << level;
  }
  EXPECT_FALSE(through_link.ok()) << "made in a root-only folder through a link";
  EXPECT_THAT(through_link.message(), HasSubstr("create directory " + (root / "open" / "link" / "x").string() +
                                                ": Permission denied"));
  EXPECT_FALSE(std::filesystem::exists(root / "closed" / "x"));
  EXPECT_EQ(other_fsuid, 0u) << "another thread of the process acted as the user too";
  EXPECT_EQ(other_groups, groups_before) << "another thread took the user's groups too";
  EXPECT_EQ(::setfsuid(static_cast<uid_t>(-1)), 0) << "this thread is still the user for files";
  EXPECT_EQ(::setfsgid(static_cast<gid_t>(-1)), static_cast<int>(::getegid()));
  EXPECT_EQ(groups_now(), groups_before);
  EXPECT_EQ(::mkdir((root / "closed" / "y").c_str(), 0700), 0) << "root's powers over files are back";
}

}  // namespace
}  // namespace gpufleet::agent
