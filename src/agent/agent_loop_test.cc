// The agent's main loop against a controller served on 127.0.0.1 by the test: what its
// heartbeats carry, and over how many connections it sends them.
#include <httplib.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "agent/agent.h"
#include "agent/gpu_probe.h"
#include "api/agent_protocol.h"
#include "model/gpu_catalog.h"
#include "testing/fakes.h"

namespace gpufleet::agent {
namespace {

const api::PartKey kKey{JobId(7), 1, 0};
const api::PartKey kSecondKey{JobId(8), 1, 0};

// Registers the agent with the given heartbeat interval, hands it one start command, and keeps
// every heartbeat and the client port of every registration and heartbeat.
class FakeController {
 public:
  // The part runs `argv`, by default a shell that waits for `release_file`.
  FakeController(Duration heartbeat_interval, std::string release_file, std::vector<std::string> argv = {})
      : interval_(heartbeat_interval), release_file_(std::move(release_file)), argv_(std::move(argv)) {
    srv_.Post("/v1/agents/register", [this](const httplib::Request& req, httplib::Response& res) {
      Note(req);
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++registrations_;
        if (refusals_left_ > 0) {
          // The name of a live node: refused, with when it may be taken when so told.
          --refusals_left_;
          res.status = 409;
          if (refuse_with_retry_after_) res.set_header("Retry-After", "1");
          res.set_content(R"({"error": {"code": "conflict", "message": "node 'loop-node' is registered and alive"}})",
                          "application/json");
          return;
        }
      }
      api::RegisterReply r;
      r.node = NodeId(1);
      r.token = "agent-token";
      r.epoch = "e1";
      r.heartbeat_interval = interval_;
      r.lost_after = Duration::Seconds(3600);
      {
        std::lock_guard<std::mutex> lock(mu_);
        r.checkpoint_root = checkpoint_root_;
      }
      res.set_content(api::ToJson(r).dump(), "application/json");
    });
    srv_.Get("/v1/agents/commands", [this](const httplib::Request& req, httplib::Response& res) {
      api::CommandBatch b;
      b.epoch = "e1";
      std::unique_lock<std::mutex> lock(mu_);
      poll_epochs_.insert(req.get_param_value("epoch"));
      // The start waits for the first heartbeat (sent on registering), so that every later beat
      // is sent for an event or on the interval.
      if (!start_sent_ && heard_ > 0) {
        start_sent_ = true;
        cv_.notify_all();
        api::StartPart s;
        s.key = kKey;
        s.argv = argv_.empty()
                     ? std::vector<std::string>{"/bin/sh", "-c",
                                                "while [ ! -e '" + release_file_ + "' ]; do sleep 0.02; done"}
                     : argv_;
        s.env = {{"PATH", "/usr/bin:/bin"}};
        if (!checkpoint_dir_.empty()) s.env["GPUFLEET_CHECKPOINT_DIR"] = checkpoint_dir_;
        s.gpus = {0};
        for (int g = 1; g < processes_; ++g) s.gpus.push_back(g);
        s.processes = processes_;
        s.rank_base = rank_base_;
        s.grace = Duration::Seconds(5);
        b.commands.push_back(api::Command{1, s, std::nullopt});
      } else if (repeat_start_ && ExitSeenLocked() && !AlreadyRanSeenLocked()) {
        // The same start again, once the part has ended (a controller restored from a backup
        // taken before the part ran would send it), until the agent answers it: while the part's
        // exit is still to be reported, the agent takes it for a repeat and stays silent.
        ++repeat_sent_;
        api::StartPart s;
        s.key = kKey;
        s.argv = {"/bin/sh", "-c", "echo ran-twice > '" + release_file_ + ".twice'"};
        s.env = {{"PATH", "/usr/bin:/bin"}};
        s.grace = Duration::Seconds(5);
        b.commands.push_back(api::Command{2 + repeat_sent_, s, std::nullopt});
      } else if (!second_argv_.empty() && !second_sent_ && held_uploads_ > 0) {
        // The second part, once a log upload is being held.
        second_sent_ = true;
        api::StartPart s;
        s.key = kSecondKey;
        s.argv = second_argv_;
        s.env = {{"PATH", "/usr/bin:/bin"}};
        s.grace = Duration::Seconds(5);
        b.commands.push_back(api::Command{2, s, std::nullopt});
      } else {
        // A long poll with nothing to say: answer once something changes, or soon.
        cv_.wait_for(lock, std::chrono::milliseconds(100));
      }
      res.set_content(api::ToJson(b).dump(), "application/json");
    });
    srv_.Post("/v1/agents/logs", [this](const httplib::Request& req, httplib::Response& res) {
      Note(req);
      const int64_t offset = std::stoll(req.get_param_value("offset"));
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (hold_logs_) {
          // Held unanswered (a slow or distant controller) until the test lets it go.
          ++held_uploads_;
          cv_.notify_all();
          cv_.wait(lock, [&] { return !hold_logs_; });
        }
        const int64_t have = static_cast<int64_t>(log_.size());
        if (cut_offered_ >= 0) {
          // Past its cap: counts what is offered, keeps nothing (as the controller does).
          cut_offered_ = std::max<int64_t>(cut_offered_, offset + static_cast<int64_t>(req.body.size()));
          res.set_content(nlohmann::json{{"size", cut_offered_}, {"cut", true}}.dump(), "application/json");
          return;
        }
        if (offset != have) {
          // Not where this controller's copy ends (it lost some, as a standby that took over
          // might): 409 with its size, from which the agent sends again.
          res.status = 409;
          res.set_content(nlohmann::json{{"size", have}}.dump(), "application/json");
          return;
        }
        if (cut_ > 0 && have + static_cast<int64_t>(req.body.size()) > cut_) {
          log_ += req.body.substr(0, static_cast<size_t>(cut_ - have));
          cut_offered_ = offset + static_cast<int64_t>(req.body.size());
          cv_.notify_all();
          res.set_content(nlohmann::json{{"size", cut_offered_}, {"cut", true}}.dump(), "application/json");
          return;
        }
        log_ += req.body;
        cv_.notify_all();
      }
      res.set_content(nlohmann::json{{"size", offset + static_cast<int64_t>(req.body.size())}}.dump(),
                      "application/json");
    });
    srv_.Post("/v1/agents/heartbeat", [this](const httplib::Request& req, httplib::Response& res) {
      Note(req);
      auto hb = api::HeartbeatFromJson(nlohmann::json::parse(req.body));
      api::HeartbeatReply reply;
      reply.epoch = "e1";
      std::lock_guard<std::mutex> lock(mu_);
      ++heard_;
      cv_.notify_all();
      if (failing_beats_ > 0) {
        // Heard but not answered (as a controller that fails mid-request).
        --failing_beats_;
        res.status = 500;
        return;
      }
      if (hb.ok()) {
        for (const auto& e : hb->events) reply.acked = std::max(reply.acked, e.seq);
        beats_.push_back(std::move(*hb));
      } else {
        bad_beats_++;
      }
      cv_.notify_all();
      res.set_content(api::ToJson(reply).dump(), "application/json");
    });
    // Keep a client's connection as long as it likes (cpp-httplib closes one after 5 requests by
    // default), so that a new connection means the agent made one.
    srv_.set_keep_alive_max_count(1'000'000);
    srv_.set_keep_alive_timeout(5);  // (the server's stop waits for idle connections this long)
    port_ = srv_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { srv_.listen_after_bind(); });
  }
  ~FakeController() {
    ReleaseLogUploads();
    srv_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  bool bound() const { return port_ > 0; }

  // Once the part has exited, the next poll hands out its start again.
  void RepeatStartAfterExit() {
    std::lock_guard<std::mutex> lock(mu_);
    repeat_start_ = true;
  }
  // Waits (up to a minute) for an exit of kKey that says the node ran it before.
  std::optional<api::PartEvent> WaitForAlreadyRan() {
    std::unique_lock<std::mutex> lock(mu_);
    std::optional<api::PartEvent> found;
    cv_.wait_for(lock, std::chrono::seconds(60), [&] {
      for (const auto& b : beats_) {
        for (const auto& e : b.events) {
          if (e.key == kKey && e.kind == api::PartEventKind::kExited && e.already_ran) found = e;
        }
      }
      return found.has_value();
    });
    return found;
  }

  // The part runs one process per GPU on GPUs 0..n-1 (RANK from `rank_base`).
  void SetProcesses(int n, int rank_base) {
    std::lock_guard<std::mutex> lock(mu_);
    processes_ = n;
    rank_base_ = rank_base;
  }
  // The checkpoint root registration names, and the part's GPUFLEET_CHECKPOINT_DIR.
  void SetCheckpoints(std::string root, std::string dir) {
    std::lock_guard<std::mutex> lock(mu_);
    checkpoint_root_ = std::move(root);
    checkpoint_dir_ = std::move(dir);
  }
  // Log uploads wait unanswered from now until ReleaseLogUploads; once one waits, the next poll
  // for commands hands out a second part (kSecondKey) that runs `argv`.
  void HoldLogUploads(std::vector<std::string> argv) {
    std::lock_guard<std::mutex> lock(mu_);
    hold_logs_ = true;
    second_argv_ = std::move(argv);
  }
  void ReleaseLogUploads() {
    std::lock_guard<std::mutex> lock(mu_);
    hold_logs_ = false;
    cv_.notify_all();
  }
  // Keeps at most `bytes` of the part's log and answers "cut" from then on, as the controller
  // does past its per-part cap.
  void CutLogAt(int64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    cut_ = bytes;
  }
  // What the agent has offered of the log once it was cut (-1 before the cut).
  int64_t offered_past_cut() {
    std::lock_guard<std::mutex> lock(mu_);
    return cut_offered_;
  }
  // Drops what it has of the part's log (as a controller that lost it would).
  void ForgetLog() {
    std::lock_guard<std::mutex> lock(mu_);
    log_.clear();
  }
  // Waits (up to a minute) until the part's log, as uploaded, is `text`.
  bool WaitForLog(const std::string& text) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(60), [&] { return log_ == text; });
  }
  // Waits (up to a minute) until a log upload is being held.
  bool WaitForHeldUpload() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(60), [&] { return held_uploads_ > 0; });
  }
  // The next `n` registrations get 409 (a live node's name), with Retry-After when `retry_after`.
  void RefuseRegistrations(int n, bool retry_after) {
    std::lock_guard<std::mutex> lock(mu_);
    refusals_left_ = n;
    refuse_with_retry_after_ = retry_after;
  }
  int registrations() {
    std::lock_guard<std::mutex> lock(mu_);
    return registrations_;
  }
  // The `epoch` query parameter of every command poll ("" when a poll sent none).
  std::set<std::string> poll_epochs() {
    std::lock_guard<std::mutex> lock(mu_);
    return poll_epochs_;
  }
  // The next `n` heartbeats get HTTP 500.
  void FailBeats(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    failing_beats_ = n;
  }
  // Waits (up to a minute) until an answered heartbeat carries kKey's activity.
  bool WaitForActivity() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(60), [&] {
      for (const auto& b : beats_) {
        for (const auto& a : b.activity) {
          if (a.key == kKey) return true;
        }
      }
      return false;
    });
  }
  // Waits (up to a minute) until `n` heartbeats have come.
  bool WaitForBeats(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(60), [&] { return beats_.size() >= n; });
  }
  // Waits (up to a minute) until some heartbeat carries an event of this kind for kKey.
  bool WaitForEvent(api::PartEventKind kind) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(60), [&] {
      for (const auto& b : beats_) {
        for (const auto& e : b.events) {
          if (e.key == kKey && e.kind == kind) return true;
        }
      }
      return false;
    });
  }
  // Heartbeats received, answered or not; a wait (up to a minute) until `n` have come.
  int heard() {
    std::lock_guard<std::mutex> lock(mu_);
    return heard_;
  }
  bool WaitForHeard(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(60), [&] { return heard_ >= n; });
  }
  // Waits (up to a minute) until the part's start has been handed out.
  bool WaitForStartSent() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(60), [&] { return start_sent_; });
  }
  std::vector<api::Heartbeat> beats() {
    std::lock_guard<std::mutex> lock(mu_);
    return beats_;
  }
  std::set<int> client_ports() {
    std::lock_guard<std::mutex> lock(mu_);
    return ports_;
  }
  std::string log() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }
  int requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  int bad_beats() {
    std::lock_guard<std::mutex> lock(mu_);
    return bad_beats_;
  }

 private:
  void Note(const httplib::Request& req) {
    std::lock_guard<std::mutex> lock(mu_);
    ports_.insert(req.remote_port);
    ++requests_;
  }

  Duration interval_;
  std::string release_file_;
  std::vector<std::string> argv_;
  httplib::Server srv_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool start_sent_ = false;
  std::vector<api::Heartbeat> beats_;
  int bad_beats_ = 0;
  std::set<int> ports_;
  int requests_ = 0;
  int failing_beats_ = 0;
  int refusals_left_ = 0;
  bool refuse_with_retry_after_ = false;
  int registrations_ = 0;
  std::set<std::string> poll_epochs_;
  int heard_ = 0;  // heartbeats received, answered or not
  bool hold_logs_ = false;
  int held_uploads_ = 0;
  std::vector<std::string> second_argv_;
  bool second_sent_ = false;
  bool repeat_start_ = false;
  int repeat_sent_ = 0;
  int processes_ = 1;
  int rank_base_ = 0;
  bool AlreadyRanSeenLocked() const {
    for (const auto& b : beats_) {
      for (const auto& e : b.events) {
        if (e.key == kKey && e.kind == api::PartEventKind::kExited && e.already_ran) return true;
      }
    }
    return false;
  }
  bool ExitSeenLocked() const {
    for (const auto& b : beats_) {
      for (const auto& e : b.events) {
        if (e.key == kKey && e.kind == api::PartEventKind::kExited) return true;
      }
    }
    return false;
  }
  std::string checkpoint_root_, checkpoint_dir_;
  std::string log_;  // every uploaded byte, in order
  int64_t cut_ = 0;             // 0: no cap
  int64_t cut_offered_ = -1;    // once cut: how far the agent has offered the log
};

// An agent (one fake H100) running on its own thread until this goes out of scope, however the
// test ends: then the part's release file is written and the agent stopped.
class BackgroundAgent {
 public:
  BackgroundAgent(const AgentOptions& options, std::string release) : release_(std::move(release)) {
    auto probe = FakeGpuProbe::Create({.spec = "1xH100"}, model::GpuCatalog::BuiltIn());
    if (!probe.ok()) return;
    agent_ = std::make_unique<Agent>(options, std::move(*probe));
    run_ = std::thread([this] { (void)agent_->Run(stop_); });
  }
  ~BackgroundAgent() {
    std::ofstream(release_).put('x');
    stop_ = true;
    if (run_.joinable()) run_.join();
  }
  bool started() const { return agent_ != nullptr; }

 private:
  std::string release_;
  std::unique_ptr<Agent> agent_;
  std::atomic<bool> stop_{false};
  std::thread run_;
};

class AgentLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpufleet-agent-loop.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    ::chmod(root_.c_str(), 0755);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  // The agent's options against `controller`: jobs as `job_user`, or as the agent's own user.
  AgentOptions Options(const FakeController& controller, const std::string& job_user = "") const {
    AgentOptions o;
    o.server = controller.url();
    o.join_token = "join";
    o.name = "loop-node";
    o.data_dir = root_ + "/data";
    o.poll_wait = Duration::Millis(100);
    o.cgroup_root = "off";
    if (!job_user.empty()) {
      o.job_user = job_user;
    } else if (::geteuid() == 0) {
      o.job_user = "root";
      o.allow_root_jobs = true;
    }
    return o;
  }

  // Runs an agent against `controller` until a heartbeat reports its part's exit; that exit, and
  // in `log` what the controller had been sent of the part's log by then.
  std::optional<api::PartEvent> RunUntilExit(FakeController& controller, const std::string& job_user = "",
                                             std::string* log = nullptr, const std::string& gpus = "1xH100") {
    auto probe = FakeGpuProbe::Create({.spec = gpus}, model::GpuCatalog::BuiltIn());
    if (!probe.ok() || !controller.bound()) return std::nullopt;
    Agent agent(Options(controller, job_user), std::move(*probe));
    std::atomic<bool> stop{false};
    std::thread run([&] { (void)agent.Run(stop); });
    const bool exited = controller.WaitForEvent(api::PartEventKind::kExited);
    if (log) *log = controller.log();
    stop = true;
    run.join();
    if (!exited) return std::nullopt;
    std::optional<api::PartEvent> exit;
    for (const auto& b : controller.beats()) {
      for (const auto& e : b.events) {
        if (e.key == kKey && e.kind == api::PartEventKind::kExited) exit = e;
      }
    }
    return exit;
  }

  // Runs an agent against `controller` until its part has started and, once `beats_before_release`
  // heartbeats have come (and with `wait_for_activity`, one with the part's activity), exited.
  void RunOnePart(FakeController& controller, size_t beats_before_release = 0, bool wait_for_activity = false,
                  const std::string& job_user = "") {
    ASSERT_TRUE(controller.bound());
    auto probe = FakeGpuProbe::Create({.spec = "1xH100"}, model::GpuCatalog::BuiltIn());
    ASSERT_TRUE(probe.ok()) << probe.status().message();
    AgentOptions o = Options(controller, job_user);
    // The part's log has output from the start (as after an agent restart), so that a beat that
    // reads activity finds some whenever the part runs.
    std::filesystem::create_directories(o.data_dir + "/logs");
    std::ofstream(o.data_dir + "/logs/" + kKey.ToString() + ".log") << "earlier output\n";
    Agent agent(o, std::move(*probe));
    std::atomic<bool> stop{false};
    Status result;
    std::thread run([&] { result = agent.Run(stop); });
    const bool started = controller.WaitForEvent(api::PartEventKind::kStarted) &&
                         controller.WaitForBeats(beats_before_release) &&
                         (!wait_for_activity || controller.WaitForActivity());
    std::ofstream(release_file()).put('x');
    const bool exited = started && controller.WaitForEvent(api::PartEventKind::kExited);
    stop = true;
    run.join();
    ASSERT_TRUE(started) << "no heartbeat reported the part started";
    ASSERT_TRUE(exited) << "no heartbeat reported the part exited";
    EXPECT_TRUE(result.ok()) << result.message();
    EXPECT_EQ(controller.bad_beats(), 0);
  }
  std::string release_file() const { return root_ + "/release"; }

  std::string root_;
};

bool CarriesActivityOf(const api::Heartbeat& b, const api::PartKey& key) {
  for (const auto& a : b.activity) {
    if (a.key == key) return true;
  }
  return false;
}

TEST_F(AgentLoopTest, HeartbeatsSentForEventsLeaveActivityToTheIntervalsBeats) {
  // Given a heartbeat interval of an hour, expect the beats that carry the part's start and exit
  // (sent at once, not on the interval) to carry no activity: reading it costs a stat and a file
  // read per running part, and the watchdog needs it only once per interval.
  FakeController controller(Duration::Seconds(3600), release_file());
  RunOnePart(controller);
  const auto beats = controller.beats();
  ASSERT_GE(beats.size(), 2u);
  for (size_t i = 0; i < beats.size(); ++i) {
    EXPECT_FALSE(CarriesActivityOf(beats[i], kKey)) << "heartbeat " << i << " carried the part's activity";
  }
  // Every command poll said which controller epoch its `after` counts in (the registration's).
  EXPECT_EQ(controller.poll_epochs(), std::set<std::string>{"e1"});
}

TEST_F(AgentLoopTest, HeartbeatsOnTheIntervalCarryTheRunningPartsActivity) {
  // Given an interval short enough that every beat is due, expect the part's activity (its log's
  // age) in a beat while it runs.
  FakeController controller(Duration::Millis(1), release_file());
  RunOnePart(controller);
  bool seen = false;
  for (const auto& b : controller.beats()) seen = seen || CarriesActivityOf(b, kKey);
  EXPECT_TRUE(seen) << "no heartbeat carried the running part's activity";
}

TEST_F(AgentLoopTest, ActivityInABeatThatFailedIsSentAgainSoonNotAnIntervalLater) {
  // Given an hour's interval and a first heartbeat (the one that carries the interval's activity)
  // answered with HTTP 500, expect the running part's activity in a later beat without waiting
  // the hour: the watchdog has not heard it.
  FakeController controller(Duration::Seconds(3600), release_file());
  controller.FailBeats(1);
  RunOnePart(controller, 0, /*wait_for_activity=*/true);
  bool seen = false;
  for (const auto& b : controller.beats()) seen = seen || CarriesActivityOf(b, kKey);
  EXPECT_TRUE(seen);
}

TEST(EventRetryDelayTest, DoublesFromATenthOfASecondUpToTheCapAndSpreadsByHalf) {
  // Given misses in a row, expect 100 ms doubled per miss up to the cap, scaled by the spread
  // (held within 0.5 to 1), and no wait once a request was answered; a very long outage neither
  // overflows nor passes the cap.
  const Duration cap = Duration::Seconds(5);
  EXPECT_EQ(EventRetryDelay(0, cap, 1.0), Duration::Zero());
  EXPECT_EQ(EventRetryDelay(1, cap, 1.0), Duration::Millis(100));
  EXPECT_EQ(EventRetryDelay(2, cap, 1.0), Duration::Millis(200));
  EXPECT_EQ(EventRetryDelay(3, cap, 1.0), Duration::Millis(400));
  EXPECT_EQ(EventRetryDelay(6, cap, 1.0), Duration::Millis(3200));
  EXPECT_EQ(EventRetryDelay(7, cap, 1.0), cap);
  EXPECT_EQ(EventRetryDelay(1'000'000, cap, 1.0), cap);
  EXPECT_EQ(EventRetryDelay(3, cap, 0.5), Duration::Millis(200));
  EXPECT_EQ(EventRetryDelay(3, cap, 0.75), Duration::Millis(300));
  EXPECT_EQ(EventRetryDelay(3, cap, 0.1), Duration::Millis(200)) << "a spread below a half counts as a half";
  EXPECT_EQ(EventRetryDelay(3, cap, 7.0), Duration::Millis(400)) << "a spread above one counts as one";
  EXPECT_EQ(EventRetryDelay(1, Duration::Millis(50), 1.0), Duration::Millis(50)) << "a cap below the first wait";
}

TEST_F(AgentLoopTest, EventsHeldWhileTheControllerFailsStillArriveWhenItAnswers) {
  // Given an hour's interval and a controller that answers its first four heartbeats with HTTP
  // 500 (the beats then wait longer each time), expect the part's start and exit to arrive once
  // it answers, and nothing sent that the controller could not read.
  FakeController controller(Duration::Seconds(3600), release_file());
  controller.FailBeats(4);
  RunOnePart(controller);
  int exits = 0;
  for (const auto& b : controller.beats()) {
    for (const auto& e : b.events) exits += e.key == kKey && e.kind == api::PartEventKind::kExited;
  }
  EXPECT_GE(exits, 1);
}

TEST_F(AgentLoopTest, EventsWaitOutTheHoldAfterEachUnansweredBeat) {
  // Given the agent's loop on a fake clock, an hour's interval and a controller that answers no
  // heartbeat, expect no beat while the clock stands still, however many passes the loop makes;
  // none before the shortest hold after the second miss (half of 200 ms) has passed, one once
  // the longest has; and the part's exit delivered once the controller answers again.
  testing::FakeClock clock(WallNow());
  FakeController controller(Duration::Seconds(3600), release_file());
  controller.FailBeats(1'000'000);
  auto probe = FakeGpuProbe::Create({.spec = "1xH100"}, model::GpuCatalog::BuiltIn());
  ASSERT_TRUE(probe.ok() && controller.bound());
  AgentOptions o = Options(controller);
  o.clock = [&] { return clock.Now(); };
  Agent agent(o, std::move(*probe));
  std::atomic<bool> stop{false};
  std::thread run([&] { (void)agent.Run(stop); });
  // However the test ends: the controller answers and the clock runs on, so that the agent's
  // shutdown (which waits on both) ends.
  struct StopOnExit {
    std::atomic<bool>& stop;
    std::thread& run;
    FakeController& controller;
    testing::FakeClock& clock;
    ~StopOnExit() {
      controller.FailBeats(0);
      stop = true;
      std::atomic<bool> ended{false};
      std::thread ticking([&] {
        while (!ended) {
          clock.Advance(Duration::Seconds(1));
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      });
      run.join();
      ended = true;
      ticking.join();
    }
  } stop_on_exit{stop, run, controller, clock};
  const auto passes = std::chrono::seconds(60);
  auto settle = [&] { return agent.WaitForLoopPasses(agent.loop_passes() + 10, passes); };

  // The clock moves only once the loop has taken in the last miss (a pass or more after the beat
  // went: the beat and its answer are one pass), so that each hold starts where the test thinks.
  ASSERT_TRUE(controller.WaitForHeard(1));  // the beat sent on registering: the first miss
  ASSERT_TRUE(controller.WaitForStartSent());
  ASSERT_TRUE(settle());
  EXPECT_EQ(controller.heard(), 1) << "a beat went before the first hold was over";
  clock.Advance(Duration::Millis(100));  // past the first hold (50 to 100 ms)
  ASSERT_TRUE(controller.WaitForHeard(2)) << "the part's start was not sent after the first hold";
  ASSERT_TRUE(settle());
  EXPECT_EQ(controller.heard(), 2) << "a beat went while the clock stood still";
  clock.Advance(Duration::Millis(99));  // the second hold is 100 to 200 ms
  ASSERT_TRUE(settle());
  EXPECT_EQ(controller.heard(), 2) << "a beat went before the shortest second hold was over";
  clock.Advance(Duration::Millis(101));
  ASSERT_TRUE(controller.WaitForHeard(3)) << "no beat after the longest second hold";
  ASSERT_TRUE(settle());

  controller.FailBeats(0);
  // Past the third hold (200 to 400 ms). The activity that the first beat carried unheard falls
  // due again a second after it (by this clock): the counts above hold only while the clock stays
  // short of that, as it does (700 ms in all).
  clock.Advance(Duration::Millis(400));
  ASSERT_TRUE(controller.WaitForEvent(api::PartEventKind::kStarted));
  std::ofstream(release_file()).put('x');
  EXPECT_TRUE(controller.WaitForEvent(api::PartEventKind::kExited));
}

TEST_F(AgentLoopTest, ASlowLogUploadDoesNotHoldUpAStart) {
  // Given a part with output and a controller that holds its log upload unanswered (as a slow or
  // distant one would), expect a second part handed out meanwhile to run while the upload still
  // waits: uploads go without the agent's lock, which a start needs.
  const std::string fifo = root_ + "/second-ran";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0666), 0);
  // Opened first without waiting for a writer, so that the wait below is poll's.
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  FakeController controller(Duration::Seconds(3600), release_file(),
                            {"/bin/sh", "-c", "echo output; while [ ! -e '" + release_file() + "' ]; do sleep 0.02; done"});
  controller.HoldLogUploads({"/bin/sh", "-c", "echo ran > '" + fifo + "'"});
  auto probe = FakeGpuProbe::Create({.spec = "1xH100"}, model::GpuCatalog::BuiltIn());
  ASSERT_TRUE(probe.ok() && controller.bound());
  AgentOptions o = Options(controller);
  o.request_timeout = Duration::Seconds(600);  // the agent waits for the held upload's answer throughout
  Agent agent(o, std::move(*probe));
  std::atomic<bool> stop{false};
  std::thread run([&] { (void)agent.Run(stop); });
  // However the test ends: the upload answered, the first part released, the agent stopped.
  struct Finish {
    FakeController& controller;
    std::string release;
    std::atomic<bool>& stop;
    std::thread& run;
    int reader;
    ~Finish() {
      controller.ReleaseLogUploads();
      std::ofstream(release).put('x');
      stop = true;
      run.join();
      ::close(reader);
    }
  } finish{controller, release_file(), stop, run, reader};
  ASSERT_TRUE(controller.WaitForHeldUpload());
  struct pollfd p {reader, POLLIN, 0};
  const int ready = ::poll(&p, 1, 60'000);  // the upload stays held until Finish lets it go
  EXPECT_EQ(ready, 1) << "the second part did not run while the first part's log upload waited";
}

TEST_F(AgentLoopTest, ARunningPartsLogIsSentAgainFromWhereTheControllerSaysItsCopyEnds) {
  // Given a running part whose first output was uploaded and a controller that then loses its
  // copy (it answers the next upload 409 with size 0), expect the whole log uploaded again while
  // the part still runs.
  const std::string more = root_ + "/more";
  FakeController controller(Duration::Seconds(3600), release_file(),
                            {"/bin/sh", "-c",
                             "echo first; while [ ! -e '" + more + "' ]; do sleep 0.02; done; echo second; "
                             "while [ ! -e '" + release_file() + "' ]; do sleep 0.02; done"});
  ASSERT_TRUE(controller.bound());
  BackgroundAgent agent(Options(controller), release_file());
  ASSERT_TRUE(agent.started());
  ASSERT_TRUE(controller.WaitForLog("first\n"));
  controller.ForgetLog();
  std::ofstream(more).put('x');
  EXPECT_TRUE(controller.WaitForLog("first\nsecond\n")) << "the log was not sent again from the start";
}

TEST_F(AgentLoopTest, ALogPastTheControllersCapIsFreedOnTheNodeAndAFinishedPartsLogRemoved) {
  // Given a controller that keeps 64 KiB of a part's log and a part that prints 40 MiB and waits,
  // expect the node's copy to stop taking disk for what was sent past the cap (its size stays,
  // its blocks go) while the part runs, and the file removed once the part has ended and its
  // log is up (a node that runs many jobs must not fill its disk with their logs).
  const std::string printed = root_ + "/printed";
  FakeController controller(Duration::Seconds(3600), release_file(),
                            {"/bin/sh", "-c",
                             "yes 0123456789abcdef | head -c 41943040; touch '" + printed + "'; "
                             "while [ ! -e '" + release_file() + "' ]; do sleep 0.02; done"});
  controller.CutLogAt(64 * 1024);
  ASSERT_TRUE(controller.bound());
  AgentOptions options = Options(controller);
  BackgroundAgent agent(options, release_file());
  ASSERT_TRUE(agent.started());
  const std::string log_path = options.data_dir + "/logs/" + kKey.ToString() + ".log";
  constexpr int64_t kPrinted = 41943040;
  // Every byte offered, and the file's blocks freed past the cap (a minute at most).
  struct stat sb {};
  for (int i = 0; i < 3000; ++i) {
    if (controller.offered_past_cut() == kPrinted && ::stat(log_path.c_str(), &sb) == 0 &&
        sb.st_blocks * 512 < 20 * 1024 * 1024) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(controller.offered_past_cut(), kPrinted);
  ASSERT_EQ(::stat(log_path.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_size, kPrinted) << "the node's copy keeps its size (offsets stay)";
  // Freed in steps of 16 MiB, keeping the last MiB: of 40 MiB, at least 20 MiB go.
  EXPECT_LT(sb.st_blocks * 512, 20 * 1024 * 1024) << "what was sent past the cap still takes disk";
  EXPECT_EQ(controller.log().size(), 64u * 1024);
  // The kept head is intact: a controller that took over with less would ask for it again.
  std::ifstream head(log_path, std::ios::binary);
  std::string first(64 * 1024, '\0');
  head.read(first.data(), static_cast<std::streamsize>(first.size()));
  EXPECT_EQ(first, controller.log());
  // The part ends: its log is up, its exit reported; the file goes.
  std::ofstream(release_file()).put('x');
  ASSERT_TRUE(controller.WaitForEvent(api::PartEventKind::kExited));
  bool removed = false;
  for (int i = 0; i < 3000 && !removed; ++i) {
    removed = !std::filesystem::exists(log_path);
    if (!removed) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(removed) << "a finished part's log stays on the node";
}

TEST_F(AgentLoopTest, RegistrationAndHeartbeatsShareOneKeptAliveConnection) {
  // Expect the main loop's requests (registration, heartbeats, log uploads; ten or more) from one
  // client port: one connection kept alive, not a connection (and a TLS handshake) per beat.
  FakeController controller(Duration::Millis(1), release_file());
  RunOnePart(controller, /*beats_before_release=*/8);
  EXPECT_GE(controller.requests(), 10);
  EXPECT_EQ(controller.client_ports().size(), 1u);
}

TEST_F(AgentLoopTest, ANameRefusedWithRetryAfterIsAskedForAgainAndARefusalWithoutItEndsTheAgent) {
  // Given a controller that refuses the first two registrations as a live node's name with
  // Retry-After (a store restored from a backup knows the node but not this agent's token),
  // expect the agent to ask again and run its part once registered; without Retry-After (a
  // refusal retrying cannot change), expect Run to end with the refusal after one try.
  FakeController controller(Duration::Seconds(3600), release_file());
  controller.RefuseRegistrations(2, /*retry_after=*/true);
  RunOnePart(controller);
  EXPECT_EQ(controller.registrations(), 3);

  FakeController refusing(Duration::Seconds(3600), release_file());
  ASSERT_TRUE(refusing.bound());
  refusing.RefuseRegistrations(1'000, /*retry_after=*/false);
  auto probe = FakeGpuProbe::Create({.spec = "1xH100"}, model::GpuCatalog::BuiltIn());
  ASSERT_TRUE(probe.ok());
  Agent agent(Options(refusing), std::move(*probe));
  std::atomic<bool> stop{false};
  Status st = agent.Run(stop);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_NE(st.message().find("registered and alive"), std::string::npos) << st.message();
  EXPECT_EQ(refusing.registrations(), 1);

  // A server with no agent routes (the controller's API port): refused at once, saying which
  // URL --server wants, not retried for ever.
  httplib::Server api_port;
  const int port = api_port.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serving([&] { api_port.listen_after_bind(); });
  AgentOptions wrong = Options(refusing);
  wrong.server = "http://127.0.0.1:" + std::to_string(port);
  auto probe2 = FakeGpuProbe::Create({.spec = "1xH100"}, model::GpuCatalog::BuiltIn());
  ASSERT_TRUE(probe2.ok());
  Agent lost(wrong, std::move(*probe2));
  Status not_agents = lost.Run(stop);
  api_port.stop();
  serving.join();
  EXPECT_EQ(not_agents.code(), StatusCode::kInvalidArgument) << not_agents.message();
  EXPECT_NE(not_agents.message().find("HTTP 404"), std::string::npos) << not_agents.message();
  EXPECT_NE(not_agents.message().find("agent URL (its --agent-listen"), std::string::npos) << not_agents.message();
}

TEST_F(AgentLoopTest, ASecondAgentOnTheSameDataDirectoryIsRefusedAndTouchesNothing) {
  // Given an agent running a part, expect a second agent given the same data directory to be
  // refused before it registers (it would kill the first one's part as a leftover and take over
  // its node's token), and the part to run on to its end.
  FakeController controller(Duration::Seconds(3600), release_file());
  auto probe = FakeGpuProbe::Create({.spec = "1xH100"}, model::GpuCatalog::BuiltIn());
  ASSERT_TRUE(probe.ok());
  Agent first(Options(controller), std::move(*probe));
  std::atomic<bool> stop{false};
  std::thread run([&] { (void)first.Run(stop); });
  ASSERT_TRUE(controller.WaitForEvent(api::PartEventKind::kStarted));
  auto probe2 = FakeGpuProbe::Create({.spec = "1xH100"}, model::GpuCatalog::BuiltIn());
  ASSERT_TRUE(probe2.ok());
  Agent second(Options(controller), std::move(*probe2));
  std::atomic<bool> stop2{false};
  Status st = second.Run(stop2);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.message();
  EXPECT_NE(st.message().find("another agent is running on"), std::string::npos) << st.message();
  EXPECT_EQ(controller.registrations(), 1);
  std::ofstream(release_file()) << "go";
  const bool exited = controller.WaitForEvent(api::PartEventKind::kExited);
  stop = true;
  run.join();
  ASSERT_TRUE(exited);
  for (const auto& b : controller.beats()) {
    for (const auto& e : b.events) {
      if (e.key == kKey && e.kind == api::PartEventKind::kExited) {
        EXPECT_EQ(e.exit_code, 0) << "killed by the second agent";
      }
    }
  }
}

TEST_F(AgentLoopTest, APartThatCannotStartIsReportedWithItsLogUploadedFirst) {
  // Given a program that does not exist, expect the exit reported as 127 with the reason, and
  // the reason in the uploaded log (written and uploaded before the exit is reported).
  FakeController controller(Duration::Seconds(3600), release_file(), {"/nonexistent/gpufleet-test-program"});
  std::string log_at_exit;
  auto exit = RunUntilExit(controller, "", &log_at_exit);
  ASSERT_TRUE(exit.has_value()) << "no heartbeat reported the part's exit";
  EXPECT_EQ(exit->exit_code, 127);
  EXPECT_NE(exit->message.find("cannot start"), std::string::npos) << exit->message;
  EXPECT_NE(log_at_exit.find("gpufleet: cannot start"), std::string::npos) << log_at_exit;
}

TEST_F(AgentLoopTest, AProcessOfAPartThatFailsStopsItsOtherProcessesAndTheirExitIsItsOwn) {
  // Given a part of two processes (one per GPU, RANK 2 and 3) where RANK 3 exits with code 7 and
  // RANK 2 would wait for ever (a rank blocked in a collective), expect the part to exit at once
  // (RANK 2 stopped with the part's signal), reported as failed with RANK 3's code and why, not
  // as a stopped part; without the stop the exit would never come.
  FakeController controller(Duration::Seconds(3600), release_file(),
                            {"/bin/sh", "-c", "if [ \"$RANK\" = 3 ]; then exit 7; fi; exec sleep 1000"});
  controller.SetProcesses(2, 2);
  auto exit = RunUntilExit(controller, "", nullptr, "2xH100");
  ASSERT_TRUE(exit.has_value()) << "the part never exited: its other process was left running";
  EXPECT_EQ(exit->exit_code, 7);
  EXPECT_FALSE(exit->stopped) << "a failed part reported as stopped";
  EXPECT_NE(exit->message.find("RANK 3 exited with code 7; the part's other processes were stopped"),
            std::string::npos)
      << exit->message;
}

TEST_F(AgentLoopTest, AStartOfAPartThatRanHereBeforeIsAnsweredNotDroppedOrRunAgain) {
  // Given the start of a part that ran here and exited, sent again (by a controller restored from
  // an older backup), expect an exit that says the node ran it before, and nothing run again.
  FakeController controller(Duration::Seconds(3600), release_file(), {"/bin/true"});
  controller.RepeatStartAfterExit();
  auto probe = FakeGpuProbe::Create({.spec = "1xH100"}, model::GpuCatalog::BuiltIn());
  ASSERT_TRUE(probe.ok() && controller.bound());
  Agent agent(Options(controller, ""), std::move(*probe));
  std::atomic<bool> stop{false};
  std::thread run([&] { (void)agent.Run(stop); });
  auto again = controller.WaitForAlreadyRan();
  stop = true;
  run.join();
  ASSERT_TRUE(again.has_value()) << "the repeated start was dropped without a word";
  EXPECT_EQ(again->exit_code, -1);
  EXPECT_NE(again->message.find("before and does not start it again"), std::string::npos) << again->message;
  EXPECT_FALSE(std::filesystem::exists(release_file() + ".twice")) << "the part ran a second time";
}

TEST_F(AgentLoopTest, ACheckpointFolderIsMadeForTheJobsUserInTheControllersRootOnly) {
  // Given an agent that is root and jobs that run as nobody, expect the checkpoint folder in the
  // checkpoint root the controller named at registration made for nobody (0700); and one that a
  // job names in a folder only root may write (as /etc or another user's home) not made, the part
  // refused with the reason.
  if (::geteuid() != 0) GTEST_SKIP() << "needs the agent to run as root";
  struct passwd* nobody = ::getpwnam("nobody");
  if (nobody == nullptr) GTEST_SKIP() << "no user 'nobody' on this machine";
  ASSERT_EQ(::mkdir((root_ + "/ckroot").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((root_ + "/closed").c_str(), 0755), 0);
  {
    FakeController controller(Duration::Seconds(3600), release_file());
    controller.SetCheckpoints(root_ + "/ckroot", root_ + "/ckroot/job-7");
    RunOnePart(controller, 0, false, "nobody");
    struct stat st {};
    ASSERT_EQ(::stat((root_ + "/ckroot/job-7").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, nobody->pw_uid);
    EXPECT_EQ(st.st_mode & 07777, 0700u);
  }
  // Made where the kernel's walk reaches, for nobody: a folder all may write, through ".."; the
  // job is told that place.
  ASSERT_EQ(::mkdir((root_ + "/open").c_str(), 0777), 0);
  ASSERT_EQ(::chmod((root_ + "/open").c_str(), 0777), 0);
  {
    std::filesystem::remove_all(root_ + "/data");
    FakeController controller(Duration::Seconds(3600), release_file(),
                              {"/bin/sh", "-c", "echo ok > \"$GPUFLEET_CHECKPOINT_DIR/probe\""});
    controller.SetCheckpoints(root_ + "/ckroot", root_ + "/open/n/../mine");
    auto exit = RunUntilExit(controller, "nobody");
    ASSERT_TRUE(exit.has_value());
    EXPECT_EQ(exit->exit_code, 0) << exit->message;
    struct stat st {};
    ASSERT_EQ(::stat((root_ + "/open/mine").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, nobody->pw_uid);
    EXPECT_TRUE(std::filesystem::exists(root_ + "/open/mine/probe"));
    EXPECT_FALSE(std::filesystem::exists(root_ + "/open/n"));
  }
  // A missing controller root is made for the agent alone (root's, 0711), the job's folder in it
  // for nobody.
  {
    std::filesystem::remove_all(root_ + "/data");
    std::filesystem::remove(release_file());
    FakeController controller(Duration::Seconds(3600), release_file());
    controller.SetCheckpoints(root_ + "/fresh/root", root_ + "/fresh/root/job-7");
    RunOnePart(controller, 0, false, "nobody");
    struct stat st {};
    ASSERT_EQ(::stat((root_ + "/fresh/root").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 0u);
    EXPECT_EQ(st.st_mode & 07777, 0711u);
    ASSERT_EQ(::stat((root_ + "/fresh/root/job-7").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, nobody->pw_uid);
  }
  // Refused, nothing made: a folder only root may write; the same reached through ".." from one
  // all may write; another job's folder in the controller's root; the job's own default folder
  // in a root that is a link, or that another user owns; a job whose user this node lacks; a
  // folder the job's user may write but not reach.
  ASSERT_EQ(::mkdir((root_ + "/theirs").c_str(), 0755), 0);
  const uid_t someone = 12345;  // neither root nor the job's user
  ASSERT_EQ(::chown((root_ + "/theirs").c_str(), someone, someone), 0);
  std::filesystem::create_directory_symlink(root_ + "/closed", root_ + "/link");
  struct Case {
    std::string root, named, reached, said, user = "nobody";
  };
  const std::string may_not = " does not exist, and the job's user may not make it";
  ASSERT_EQ(::mkdir((root_ + "/open/ckroot").c_str(), 0755), 0);  // below a folder all may write, not sticky
  ASSERT_EQ(::mkdir((root_ + "/closed/sub").c_str(), 0755), 0);
  std::filesystem::create_directory_symlink(root_ + "/closed/sub", root_ + "/lnk");  // lnk/.. is closed
  // A folder all may write inside one only root may enter: the mode-bit check passes it, the
  // making as the job's user cannot reach it.
  ASSERT_EQ(::mkdir((root_ + "/private").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((root_ + "/private/open").c_str(), 0777), 0);
  ASSERT_EQ(::chmod((root_ + "/private/open").c_str(), 0777), 0);
  const std::vector<Case> refused = {
      {root_ + "/ckroot", root_ + "/closed/evil", root_ + "/closed/evil", root_ + "/closed/evil" + may_not},
      {root_ + "/ckroot", root_ + "/open/n/../../closed/evil", root_ + "/closed/evil",
       root_ + "/open/n/../../closed/evil" + may_not},
      {root_ + "/ckroot", root_ + "/ckroot/job-8", root_ + "/ckroot/job-8", root_ + "/ckroot/job-8" + may_not},
      {root_ + "/link", root_ + "/link/job-7", root_ + "/closed/job-7", root_ + "/link is a link"},
      {root_ + "/theirs", root_ + "/theirs/job-7", root_ + "/theirs/job-7",
       root_ + "/theirs belongs to uid " + std::to_string(someone)},
      {root_ + "/ckroot2", root_ + "/ckroot2/job-7", root_ + "/ckroot2", "'gpufleet-no-such-user' is unknown",
       "gpufleet-no-such-user"},
      {root_ + "/ckroot2", root_ + "/ckroot2/job-7", root_ + "/ckroot2", "is root, and this agent runs no job as root",
       "root"},
      {root_ + "/open/ckroot", root_ + "/open/ckroot/job-7", root_ + "/open/ckroot/job-7",
       root_ + "/open may be written by others than root"},
      {root_ + "/lnk/../ckroot3", root_ + "/lnk/../ckroot3/job-7", root_ + "/closed/ckroot3", "has a \"..\" in it"},
      {root_ + "/ckroot", root_ + "/private/open/mine", root_ + "/private/open/mine",
       root_ + "/private/open/mine cannot be made as the job's user"},
  };
  for (const Case& c : refused) {
    SCOPED_TRACE(c.named);
    std::filesystem::remove_all(root_ + "/data");
    FakeController controller(Duration::Seconds(3600), release_file());
    controller.SetCheckpoints(c.root, c.named);
    auto exit = RunUntilExit(controller, c.user);
    ASSERT_TRUE(exit.has_value()) << "no heartbeat reported the part's exit";
    EXPECT_EQ(exit->exit_code, 127);
    EXPECT_NE(exit->message.find(c.said), std::string::npos) << exit->message;
    EXPECT_FALSE(std::filesystem::exists(c.reached));
    EXPECT_FALSE(std::filesystem::exists(root_ + "/open/n"));
    EXPECT_FALSE(std::filesystem::exists(root_ + "/data/work/job-7")) << "a refused part gets no folders";
    EXPECT_FALSE(std::filesystem::exists(root_ + "/data/work/progress/" + kKey.ToString()));
  }
}

}  // namespace
}  // namespace gpufleet::agent
