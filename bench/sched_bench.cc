// sched_bench: what one scheduling pass of the core costs on a large cluster, and how many
// placement decisions per second it makes. docs/benchmarks.md records the figures and the goals
// (a pass with 10k pending jobs on 1k nodes < 5 ms; 100k pending on 10k nodes < 100 ms).
//
// The world is built outside the timed region, the way the live controller would build it: nodes
// arrive as NodeUp events, then running work fills them (1, 2, 4 and 8-GPU jobs and 2-node
// gangs, started two hours before; about one node in 25 keeps one GPU free), then the pending
// jobs arrive in one batch.
// Every job has a duration estimate (so EASY backfill computes real reservations) and a team
// (eight teams with equal quotas; the running work is skewed so some teams borrow, and
// fair-share has borrowed GPUs to reclaim).
//
// Benchmarks (policy in the name; fifo, backfill, las, fair-share from sched::MakePolicies):
//  - pass_after_finish: one running job finishes (plus the JobStopped confirmations of jobs
//    the previous pass preempted); that event forces a full pass, which starts what now fits.
//    Iterations follow each other on one world, the clock advancing 1 s each, a random running
//    job finishing each time: a steady state in which each pass frees a few GPUs, as in a busy
//    cluster. The queue drains by a few jobs over
//    the run, which the counters show (pending_end).
//  - pass_on_timer: a Timer event: a full pass in which nothing finished (the cost of walking
//    the queue alone). Stops that a pass asks for (fair-share reclaims) are confirmed outside
//    the timed region.
//  - decisions: N jobs submitted one by one (one pass each) into an empty cluster; the counter
//    `decisions` is starts per second of scheduler time. decisions_batch submits them in one
//    HandleAll (one pass for all).
//
// Run: build-bench/bench/sched_bench [--benchmark_filter=REGEX]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/check.h"
#include "sched/policy/registry.h"
#include "sched/scheduler.h"
#include "testing/fakes.h"

namespace gpufleet {
namespace {

using sched::Event;

constexpr int kTeams = 8;
constexpr int kGpusPerNode = 8;

// Counts starts, remembers which jobs started (candidates to finish later) and which were
// preempted (the next event confirms that they stopped).
class CountingSink : public sched::ActionSink {
 public:
  void Start(JobId job, const model::Placement&) override {
    ++starts;
    started.push_back(job);
  }
  void Preempt(JobId job, sched::PreemptReason) override { preempted.push_back(job); }
  int64_t starts = 0;
  std::vector<JobId> started;
  std::vector<JobId> preempted;
};

// A pending or running job of the benchmark mix: half 1-GPU, then 2, 4, 8 GPUs and 2-node gangs
// (16 GPUs, which the scheduler splits into 2 x 8).
int RandomGpus(std::mt19937_64& rng) {
  int r = static_cast<int>(rng() % 100);
  if (r < 50) return 1;
  if (r < 65) return 2;
  if (r < 80) return 4;
  if (r < 95) return 8;
  return 16;
}

model::JobSpec Spec(int gpus, Time submit, int team, std::mt19937_64& rng) {
  model::JobSpec s = testing::MakeJob(gpus, 0, "t" + std::to_string(team));
  s.submit = submit;
  // 10 minutes .. 24 hours.
  s.duration_estimate = Duration::Seconds(600 + static_cast<int64_t>(rng() % (24 * 3600 - 600)));
  return s;
}

struct World {
  testing::FakeClock clock;
  sched::ClusterView view;
  CountingSink sink;
  std::unique_ptr<sched::Scheduler> sched;
  std::vector<JobId> live;  // jobs that started; some have since stopped or finished
  std::mt19937_64 rng{1};   // picks the job that finishes next
  int64_t next_job = 1;
};

std::unique_ptr<World> MakeWorld(const std::string& policy, int nodes) {
  auto w = std::make_unique<World>();
  std::map<std::string, std::string> opts;
  const int64_t quota = int64_t{nodes} * kGpusPerNode / kTeams;
  if (policy == "fair-share") {
    for (int t = 0; t < kTeams; ++t) opts["quota.t" + std::to_string(t)] = std::to_string(quota);
  }
  auto cfg = sched::MakePolicies(policy, opts);
  CHECK(cfg.ok()) << cfg.status().message();
  w->sched = std::make_unique<sched::Scheduler>(w->clock, w->view, std::move(cfg->policies), w->sink);
  for (const auto& [team, gpus] : cfg->team_quota_gpus) w->sched->SetTeamQuota(team, gpus);
  return w;
}

void AddNode(World& w, int i) {
  model::NodeSpec spec = testing::MakeNode("n" + std::to_string(i), "A100", kGpusPerNode,
                                           {"rack=r" + std::to_string(i / 16), "zone=z" + std::to_string(i / 512)});
  (void)w.sched->Handle(sched::NodeUp{NodeId(i), spec});
}

JobId Submit(World& w, model::JobSpec spec) {
  JobId id(w.next_job++);
  Status s = w.sched->Handle(sched::JobSubmitted{id, std::move(spec)});
  CHECK(s.ok()) << s.message();
  return id;
}

// A mostly full cluster of `nodes` x 8 GPUs with `pending` jobs waiting.
std::unique_ptr<World> BusyWorld(const std::string& policy, int nodes, int pending, uint64_t seed) {
  auto w = MakeWorld(policy, nodes);
  std::mt19937_64 rng(seed);
  const Time t0 = w->clock.Now();
  // Running work is skewed towards the first teams, so that they borrow the others' quota.
  const int team_weight[kTeams] = {30, 20, 15, 10, 10, 5, 5, 5};
  auto running_team = [&]() {
    int r = static_cast<int>(rng() % 100);
    for (int t = 0; t < kTeams; ++t) {
      if (r < team_weight[t]) return t;
      r -= team_weight[t];
    }
    return kTeams - 1;
  };
  // Fill node by node: while a node (or a pair for a gang) is the only one with free GPUs, every
  // placement lands on it, so building costs O(nodes x jobs) cheap checks, not a best-fit scan
  // over a half-empty cluster for each job.
  static const std::vector<std::vector<int>> kPatterns = {
      {8}, {4, 4}, {4, 2, 2}, {4, 2, 1, 1}, {2, 2, 2, 2}, {2, 2, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 1}};
  std::vector<JobId> one_gpu_on_node(nodes, JobId());
  // The running work started two hours ago: it has attained service (LAS has demoted it and
  // may preempt it for newcomers) and part of its estimated time is gone.
  const Time submit = t0 - Duration::Hours(2);
  w->clock.Set(submit);
  for (int i = 0; i < nodes;) {
    if (i + 1 < nodes && rng() % 20 == 0) {  // a 2-node gang on a fresh pair
      AddNode(*w, i);
      AddNode(*w, i + 1);
      Submit(*w, Spec(16, submit, running_team(), rng));
      i += 2;
      continue;
    }
    AddNode(*w, i);
    const auto& pattern = kPatterns[rng() % kPatterns.size()];
    for (int g : pattern) {
      JobId id = Submit(*w, Spec(g, submit, running_team(), rng));
      if (g == 1) one_gpu_on_node[i] = id;
    }
    ++i;
  }
  CHECK(w->sched->pending_count() == 0) << "fill left jobs pending";
  // A few holes: one GPU free on about one node in 25.
  for (int i = 0; i < nodes; i += 25) {
    if (one_gpu_on_node[i].valid()) (void)w->sched->Handle(sched::JobFinished{one_gpu_on_node[i]});
  }
  w->clock.Set(t0);
  (void)w->sched->Handle(sched::Timer{});  // LAS demotions that fell due meanwhile
  // The queue, in one batch (one pass, as a burst of arrivals would be).
  std::vector<Event> batch;
  batch.reserve(pending);
  for (int k = 0; k < pending; ++k) {
    model::JobSpec s = Spec(RandomGpus(rng), t0, static_cast<int>(rng() % kTeams), rng);
    batch.emplace_back(sched::JobSubmitted{JobId(w->next_job++), std::move(s)});
  }
  Status s = w->sched->HandleAll(batch);
  CHECK(s.ok()) << s.message();
  return w;
}

// A running job chosen at random to finish next; an invalid id when nothing runs.
JobId NextToFinish(World& w) {
  w.live.insert(w.live.end(), w.sink.started.begin(), w.sink.started.end());
  w.sink.started.clear();
  while (!w.live.empty()) {
    size_t k = w.rng() % w.live.size();
    JobId id = w.live[k];
    w.live[k] = w.live.back();
    w.live.pop_back();
    if (w.sched->PhaseOf(id) == sched::JobPhase::kRunning) return id;
  }
  return JobId();
}

// What the timed passes did, summed over iterations.
struct Totals {
  int64_t starts = 0, placements = 0, preemptions = 0;
  void Add(const sched::SchedulerStats& before, const sched::SchedulerStats& after) {
    starts += after.starts - before.starts;
    placements += after.placement_calls - before.placement_calls;
    preemptions += after.preemptions - before.preemptions;
  }
};

void SetCommonCounters(benchmark::State& state, const World& w, const Totals& t) {
  const double n = static_cast<double>(state.iterations());
  state.counters["starts/pass"] = static_cast<double>(t.starts) / n;
  state.counters["place/pass"] = static_cast<double>(t.placements) / n;
  state.counters["preempt/pass"] = static_cast<double>(t.preemptions) / n;
  state.counters["pending_end"] = static_cast<double>(w.sched->pending_count());
  state.counters["running_end"] = static_cast<double>(w.sched->running_count());
}

void PassAfterFinish(benchmark::State& state, std::string policy) {
  const int nodes = static_cast<int>(state.range(0));
  const int pending = static_cast<int>(state.range(1));
  auto w = BusyWorld(policy, nodes, pending, 42);
  Totals totals;
  std::vector<Event> events;
  for (auto _ : state) {
    state.PauseTiming();
    w->clock.Advance(Duration::Seconds(1));
    events.clear();
    JobId id = NextToFinish(*w);
    if (!id.valid()) {
      state.SkipWithError("no running job left to finish");
      break;
    }
    events.emplace_back(sched::JobFinished{id});
    // The world confirms what the previous pass asked to stop.
    for (JobId p : w->sink.preempted) events.emplace_back(sched::JobStopped{p});
    w->sink.preempted.clear();
    const sched::SchedulerStats before = w->sched->stats();
    state.ResumeTiming();
    benchmark::DoNotOptimize(w->sched->HandleAll(events));
    state.PauseTiming();
    totals.Add(before, w->sched->stats());
    state.ResumeTiming();
  }
  SetCommonCounters(state, *w, totals);
  state.SetLabel(policy);
}

void PassOnTimer(benchmark::State& state, std::string policy) {
  const int nodes = static_cast<int>(state.range(0));
  const int pending = static_cast<int>(state.range(1));
  auto w = BusyWorld(policy, nodes, pending, 42);
  Totals totals;
  std::vector<Event> stopped;
  for (auto _ : state) {
    const sched::SchedulerStats before = w->sched->stats();
    benchmark::DoNotOptimize(w->sched->Handle(sched::Timer{}));
    state.PauseTiming();
    totals.Add(before, w->sched->stats());
    if (!w->sink.preempted.empty()) {
      // Confirm the stops the pass asked for (untimed; that runs a pass of its own), so that
      // the next timed pass does not see a growing pile of stopping jobs.
      stopped.clear();
      for (JobId p : w->sink.preempted) stopped.emplace_back(sched::JobStopped{p});
      w->sink.preempted.clear();
      benchmark::DoNotOptimize(w->sched->HandleAll(stopped));
    }
    state.ResumeTiming();
  }
  SetCommonCounters(state, *w, totals);
  state.SetLabel(policy);
}

// `jobs` submissions into an empty cluster of `nodes` x 8 GPUs; all of them fit.
void Decisions(benchmark::State& state, std::string policy, bool batch) {
  const int nodes = static_cast<int>(state.range(0));
  const int jobs = static_cast<int>(state.range(1));
  int64_t starts = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto w = MakeWorld(policy, nodes);
    for (int i = 0; i < nodes; ++i) AddNode(*w, i);
    std::mt19937_64 rng(7);
    std::vector<Event> events;
    events.reserve(jobs);
    for (int k = 0; k < jobs; ++k) {
      events.emplace_back(sched::JobSubmitted{JobId(k + 1), Spec(RandomGpus(rng), w->clock.Now(), k % kTeams, rng)});
    }
    state.ResumeTiming();
    if (batch) {
      benchmark::DoNotOptimize(w->sched->HandleAll(events));
    } else {
      for (const Event& e : events) benchmark::DoNotOptimize(w->sched->Handle(e));
    }
    state.PauseTiming();
    starts += w->sink.starts;
    w.reset();
    state.ResumeTiming();
  }
  state.counters["decisions"] = benchmark::Counter(static_cast<double>(starts), benchmark::Counter::kIsRate);
  state.counters["starts/iter"] = static_cast<double>(starts) / static_cast<double>(state.iterations());
  state.SetLabel(policy);
}

void Register() {
  const std::vector<std::string> policies = {"fifo", "backfill", "las", "fair-share"};
  // {nodes, pending, iterations}: fixed iteration counts, so that each benchmark builds its world once.
  struct Size {
    int nodes, pending, iterations;
  };
  const std::vector<Size> sizes = {{1000, 10000, 300}, {10000, 100000, 60}};
  for (const auto& p : policies) {
    for (const Size& s : sizes) {
      benchmark::RegisterBenchmark(("pass_after_finish/" + p).c_str(), PassAfterFinish, p)
          ->Args({s.nodes, s.pending})
          ->ArgNames({"nodes", "pending"})
          ->Iterations(s.iterations)
          ->Unit(benchmark::kMillisecond);
    }
  }
  for (const auto& p : policies) {
    for (const Size& s : sizes) {
      benchmark::RegisterBenchmark(("pass_on_timer/" + p).c_str(), PassOnTimer, p)
          ->Args({s.nodes, s.pending})
          ->ArgNames({"nodes", "pending"})
          ->Iterations(s.iterations)
          ->Unit(benchmark::kMillisecond);
    }
  }
  for (const auto& p : policies) {
    benchmark::RegisterBenchmark(("decisions/" + p).c_str(), Decisions, p, false)
        ->Args({1000, 2000})
        ->Args({10000, 20000})
        ->ArgNames({"nodes", "jobs"})
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("decisions_batch/" + p).c_str(), Decisions, p, true)
        ->Args({1000, 2000})
        ->Args({10000, 20000})
        ->ArgNames({"nodes", "jobs"})
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace
}  // namespace gpufleet

int main(int argc, char** argv) {
  gpufleet::Register();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
