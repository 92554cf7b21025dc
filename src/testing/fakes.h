// The fakes every test shares. Nothing here is linked into the product.
//
// FakeClock: time moves only when a test says so. RecordingSink: an ActionSink that remembers
// decisions in order. MakeNode / MakeJob: terse builders for hand-made clusters and traces.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "model/types.h"
#include "sched/action_sink.h"
#include "sched/clock.h"

namespace gpufleet::testing {

// Thread-safe: a test advances it while a controller's threads (Engine::Run) read it.
class FakeClock : public sched::Clock {
 public:
  explicit FakeClock(Time start = Time::FromSeconds(1'000'000)) : now_ms_(start.millis()) {}
  Time Now() const override { return Time::FromMillis(now_ms_.load()); }
  void Set(Time t) { now_ms_.store(t.millis()); }
  void Advance(Duration d) { now_ms_.fetch_add(d.millis()); }

 private:
  std::atomic<int64_t> now_ms_;
};

class RecordingSink : public sched::ActionSink {
 public:
  struct Action {
    enum class Kind { kStart, kPreempt } kind;
    JobId job;
    model::Placement placement;  // for kStart
    sched::PreemptReason reason = sched::PreemptReason::kPriority;
  };
  void Start(JobId job, const model::Placement& p) override {
    actions.push_back({Action::Kind::kStart, job, p, {}});
  }
  void Preempt(JobId job, sched::PreemptReason r) override {
    actions.push_back({Action::Kind::kPreempt, job, {}, r});
  }
  // Ids started / preempted, in order.
  std::vector<int64_t> Started() const;
  std::vector<int64_t> Preempted() const;
  void Clear() { actions.clear(); }

  std::vector<Action> actions;
};

// A node "name" with `gpus` GPUs of `gpu_model`; labels as "k=v" strings.
model::NodeSpec MakeNode(const std::string& name, const std::string& gpu_model, int gpus,
                         std::vector<std::string> labels = {});
// A job of `gpus` whole GPUs on one node, submitted at `submit_s` seconds.
model::JobSpec MakeJob(int gpus, int64_t submit_s = 0, const std::string& team = "");

}  // namespace gpufleet::testing
