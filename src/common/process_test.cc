// Tests of the process helpers with real processes (sh, sleep, cat). Waits for a process to end
// poll with a 10 s bound; nothing asserts on elapsed time.
#include "common/process.h"

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpufleet {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

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

class ProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpufleet-process-test-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(ProcessTest, DetachedProcessLeadsItsOwnSessionAndWritesToTheLog) {
  // Given a detached sh that prints its session id, expect the line in the log and the process
  // reported gone once it exits.
  fs::path log = dir_ / "out.log";
  auto p = SpawnDetached({"sh", "-c", "echo sid=$(ps -o sid= -p $$ | tr -d ' ') pid=$$"}, log.string());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE(Eventually([&] { return !ProcessAlive(*p); }));
  std::string text = ReadFile(log);
  EXPECT_THAT(text, HasSubstr("sid=" + std::to_string(p->pid) + " pid=" + std::to_string(p->pid)));
}

TEST_F(ProcessTest, SpawnOfAMissingProgramFails) {
  auto p = SpawnDetached({"/nonexistent/agent"}, (dir_ / "x.log").string());
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("/nonexistent/agent"));
}

TEST_F(ProcessTest, ARecordedPidHeldByAnotherProcessCountsAsGone) {
  // Given a live process but a different start time on record, expect "gone": the pid was reused.
  auto p = SpawnDetached({"sleep", "1000"}, (dir_ / "s.log").string());
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(ProcessAlive(*p));
  ProcessHandle other = *p;
  other.start_ticks += 1;
  EXPECT_FALSE(ProcessAlive(other));
  SignalGroup(p->pid, SIGKILL);
  EXPECT_TRUE(Eventually([&] { return !ProcessAlive(*p); }));
}

TEST_F(ProcessTest, CommandGetsStdinAndReturnsItsOutputAndExitCode) {
  CommandOptions options;
  options.stdin_text = "hello\n";
  options.env["GREETING"] = "hi";
  auto r = RunCommand({"sh", "-c", "cat; echo $GREETING; echo oops >&2; exit 4"}, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_text, "hello\nhi\n");
  EXPECT_EQ(r->stderr_text, "oops\n");
  EXPECT_EQ(r->exit_code, 4);
  EXPECT_FALSE(r->ok());
  EXPECT_EQ(r->Describe(options.timeout), "exited with code 4");
}

TEST_F(ProcessTest, CommandPastItsTimeoutIsKilledWithItsGroup) {
  // Given a command whose child would outlive it, expect both killed at the timeout.
  CommandOptions options;
  options.timeout = Duration::Millis(300);
  fs::path pid_file = dir_ / "child.pid";
  auto r = RunCommand({"sh", "-c", "sleep 1000 & echo $! > " + pid_file.string() + "; wait"}, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->timed_out);
  ProcessHandle child{std::stoi(ReadFile(pid_file)), 0};
  EXPECT_TRUE(Eventually([&] { return !ProcessAlive(child); }));
}

// Runs `sh -c 'echo $$ > PID_FILE; exec sleep 1000'` through RunCommand in a forked process
// that the test then kills; returns the command's pid (0 if it never wrote it).
int CommandOfAKilledCaller(const fs::path& pid_file, bool die_with_parent) {
  const pid_t caller = fork();
  if (caller == 0) {
    CommandOptions options;
    options.timeout = Duration::Seconds(60);
    options.die_with_parent = die_with_parent;
    auto r = RunCommand({"sh", "-c", "echo $$ > " + pid_file.string() + ".tmp; mv " + pid_file.string() + ".tmp " +
                                         pid_file.string() + "; exec sleep 1000"},
                        options);
    _exit(r.ok() ? 0 : 1);
  }
  if (caller < 0 || !Eventually([&] { return fs::exists(pid_file); })) return 0;
  const int pid = std::stoi(ReadFile(pid_file));
  kill(caller, SIGKILL);
  waitpid(caller, nullptr, 0);
  return pid;
}

TEST_F(ProcessTest, ACommandThatMustDieWithItsCallerDoesAndOthersOutliveIt) {
  // Given a caller killed while its command runs, expect the command killed too when it was
  // started with die_with_parent (a burn-in suite of a killed agent), and left running otherwise.
  ProcessHandle bound{CommandOfAKilledCaller(dir_ / "bound.pid", true), 0};
  ASSERT_GT(bound.pid, 0);
  EXPECT_TRUE(Eventually([&] { return !ProcessAlive(bound); }));
  ProcessHandle free{CommandOfAKilledCaller(dir_ / "free.pid", false), 0};
  ASSERT_GT(free.pid, 0);
  EXPECT_TRUE(ProcessAlive(free));
  kill(free.pid, SIGKILL);
}

TEST_F(ProcessTest, CommandThatLeavesAProcessHoldingItsOutputStillReturns) {
  // Given a script that starts a background process without redirecting it, expect the call to
  // end when the script exits (with the script's output), not when the leftover does.
  CommandOptions options;
  options.timeout = Duration::Seconds(60);
  fs::path pid_file = dir_ / "leftover.pid";
  auto r = RunCommand({"sh", "-c", "sleep 1000 & echo $! > " + pid_file.string() + "; echo done"}, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->stdout_text, "done\n");
  kill(std::stoi(ReadFile(pid_file)), SIGKILL);
}

TEST_F(ProcessTest, CommandThatIgnoresItsStdinDoesNotKillTheCaller) {
  // Given a large stdin and a command that exits without reading it, expect its exit code back
  // (and this test process alive: the write's SIGPIPE is discarded).
  CommandOptions options;
  options.stdin_text = std::string(1 << 20, 'x');
  auto r = RunCommand({"sh", "-c", "exit 5"}, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 5);
}

TEST_F(ProcessTest, CommandStartsWithDefaultSignalsAndOnlyItsOwnDescriptors) {
  // Given a caller that ignores SIGUSR1, blocks SIGUSR2 and holds an open descriptor without
  // CLOEXEC, expect the command to see no ignored or blocked signal and no descriptor beyond
  // 0..2 and the one its own `ls` opens (exec_child: the steps every forked child takes).
  struct sigaction ign = {}, old_usr1 = {};
  ign.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGUSR1, &ign, &old_usr1), 0);
  sigset_t block, old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR2);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &block, &old_mask), 0);
  const int leaked = dup(1);
  ASSERT_GE(leaked, 0);
  auto r = RunCommand({"/bin/sh", "-c", "grep -E '^Sig(Ign|Blk):' /proc/self/status; ls /proc/self/fd | wc -l"}, {});
  close(leaked);
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  sigaction(SIGUSR1, &old_usr1, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->ok()) << r->stderr_text;
  EXPECT_THAT(r->stdout_text, HasSubstr("SigBlk:\t0000000000000000"));
  EXPECT_THAT(r->stdout_text, HasSubstr("SigIgn:\t0000000000000000"));
  // grep and the shell are gone by then: ls sees 0, 1, 2 and the directory it reads.
  EXPECT_THAT(r->stdout_text, HasSubstr("\n4\n"));
}

}  // namespace
}  // namespace gpufleet
