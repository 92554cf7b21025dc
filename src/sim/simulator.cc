#include "sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <random>
#include <tuple>

#include "sched/policy/registry.h"
#include "sched/scheduler.h"

namespace gpufleet::sim {

namespace {

using sched::PreemptReason;

enum class Kind : uint8_t { kArrival, kFinish, kStopped, kNodeFail, kNodeRepair, kTimer, kSample };

struct Ev {
  Time t;
  int64_t seq;
  Kind kind;
  int64_t index;  // job or node index
  int64_t epoch;  // job run number, to ignore stale finishes
  bool operator>(const Ev& o) const { return std::tie(t, seq) > std::tie(o.t, o.seq); }
};

class SimClock : public sched::Clock {
 public:
  Time Now() const override { return now; }
  Time now;
};

struct SimJob {
  Duration work;               // on the reference GPU
  Duration done;               // reference-GPU work completed and saved
  int64_t epoch = 0;
  bool running = false;
  Time run_start;
  double speed = 1.0;
  Time pending_since;
  Duration overhead_due;       // restart overhead for the next run
  int64_t cost_rate = 0;       // micro-dollars per hour of the current run's share of its nodes
};

class World : public sched::ActionSink {
 public:
  World(const std::vector<TraceJob>& trace, const ClusterSpec& cluster, const SimOptions& o,
        const model::GpuCatalog& catalog)
      : trace_(trace), cluster_(cluster), o_(o), catalog_(catalog), rng_(o.seed) {}

  Result<SimResult> Run();

  void Start(JobId id, const model::Placement& p) override;
  void Preempt(JobId id, PreemptReason reason) override;

 private:
  void Push(Time t, Kind k, int64_t index, int64_t epoch = 0) {
    queue_.push(Ev{t, next_seq_++, k, index, epoch});
  }
  Duration ExpGap(double mean_hours) {
    double u = std::generate_canonical<double, 53>(rng_);
    double hours = -std::log(1.0 - u) * mean_hours;
    return Duration::Millis(static_cast<int64_t>(hours * 3.6e6) + 1);
  }
  // A job pays each of its nodes' price times its share of that node (model::PartCostRate).
  int64_t CostRate(const model::Placement& p) const {
    int64_t rate = 0;
    for (const auto& part : p.parts) {
      rate += model::PartCostRate(cluster_.nodes[static_cast<size_t>(part.node.value())], part);
    }
    return rate;
  }
  void Charge(JobRecord& rec, const SimJob& j, Duration wall) {
    rec.cost_micros += static_cast<int64_t>(static_cast<__int128>(j.cost_rate) * wall.millis() / 3'600'000);
  }
  void NodeRate(size_t n, int sign) {
    const model::NodeSpec& spec = cluster_.nodes[n];
    node_rate_[static_cast<int>(spec.market)] += sign * spec.price_micros_per_hour;
  }
  Duration CheckpointInterval(size_t i) const {
    Duration own = trace_[i].spec.checkpoint_interval;
    return own > Duration::Zero() ? own : o_.checkpoint_interval;
  }

  const std::vector<TraceJob>& trace_;
  const ClusterSpec& cluster_;
  const SimOptions& o_;
  const model::GpuCatalog& catalog_;
  std::mt19937_64 rng_;
  std::priority_queue<Ev, std::vector<Ev>, std::greater<Ev>> queue_;
  int64_t next_seq_ = 0;
  SimClock clock_;
  std::vector<SimJob> jobs_;
  SimResult result_;
  std::string reference_;
  int64_t busy_milli_ = 0;
  int64_t node_rate_[3] = {0, 0, 0};        // micro-dollars per hour of the nodes up, by market
  __int128 node_cost_acc_[3] = {0, 0, 0};   // micro-dollars x ms / h, integrated between events
  int64_t running_ = 0;
  int64_t finished_ = 0;
  sched::Scheduler* sched_ = nullptr;
};

void World::Start(JobId id, const model::Placement& p) {
  size_t i = static_cast<size_t>(id.value());
  SimJob& j = jobs_[i];
  JobRecord& rec = result_.jobs[i];
  Time now = clock_.now;
  if (!rec.first_start) rec.first_start = now;
  rec.queued += now - j.pending_since;
  rec.gpu_model = p.gpu_model;
  j.running = true;
  j.run_start = now;
  j.speed = catalog_.RelativeSpeed(reference_, p.gpu_model, o_.boundness);
  if (j.speed <= 0) j.speed = 1.0;
  ++j.epoch;
  busy_milli_ += p.total_gpu_milli();
  ++running_;
  j.cost_rate = CostRate(p);
  Duration left = j.work - j.done;
  int64_t wall_ms = static_cast<int64_t>(std::ceil(static_cast<double>(left.millis()) / j.speed));
  Push(now + j.overhead_due + Duration::Millis(std::max<int64_t>(wall_ms, 1)), Kind::kFinish,
       static_cast<int64_t>(i), j.epoch);
}

void World::Preempt(JobId id, PreemptReason reason) {
  size_t i = static_cast<size_t>(id.value());
  SimJob& j = jobs_[i];
  JobRecord& rec = result_.jobs[i];
  Time now = clock_.now;
  CHECK(j.running) << "preempt of a job that is not running";
  // Work done this run (after the restart overhead), in reference-GPU time.
  Duration wall = now - j.run_start;
  Duration useful_wall = std::max(Duration::Zero(), wall - j.overhead_due);
  Duration saved_wall = useful_wall;
  bool graceful = reason != PreemptReason::kNodeFailure && o_.checkpoint_on_preempt;
  if (!graceful) {
    Duration c = CheckpointInterval(i);
    saved_wall = c > Duration::Zero() ? c * (useful_wall.millis() / c.millis()) : Duration::Zero();
  }
  Duration saved_work = Duration::Millis(static_cast<int64_t>(static_cast<double>(saved_wall.millis()) * j.speed));
  j.done = std::min(j.work, j.done + saved_work);
  int64_t milli = trace_[i].spec.total_gpu_milli();
  rec.run_gpu_ms += wall.millis() * milli / 1000;
  rec.lost_gpu_ms += (wall - saved_wall).millis() * milli / 1000;
  Charge(rec, j, wall);
  if (reason == PreemptReason::kNodeFailure) {
    ++rec.failures;
  } else if (reason != PreemptReason::kCancelled) {
    ++rec.preemptions;
  }
  busy_milli_ -= milli;
  --running_;
  j.running = false;
  j.overhead_due = o_.restart_overhead;
  j.pending_since = now;
  ++j.epoch;
  Push(now, Kind::kStopped, static_cast<int64_t>(i));
}

Result<SimResult> World::Run() {
  if (cluster_.nodes.empty()) return Status::InvalidArgument("the cluster has no nodes");
  reference_ = o_.reference_gpu;
  if (reference_.empty()) {
    for (const auto& n : cluster_.nodes) {
      if (n.gpus > 0) {
        reference_ = n.gpu_model;
        break;
      }
    }
  }
  auto opts = sched::MakePolicies(o_.policy, o_.policy_options);
  if (!opts.ok()) return opts.status();
  result_.policy = opts->policies.Name();
  result_.cluster_gpus = cluster_.total_gpus();
  sched::ClusterView view;
  auto quotas = opts->team_quota_gpus;
  sched::Scheduler sched(clock_, view, std::move(opts->policies), *this);
  sched_ = &sched;
  for (const auto& [team, gpus] : cluster_.team_quota_gpus) sched.SetTeamQuota(team, gpus);
  for (const auto& [team, m] : cluster_.team_money) {
    sched::TeamBudget b;
    b.since = trace_.empty() ? Time() : trace_.front().spec.submit;
    b.hard_micros = m.hard_micros;
    b.soft_micros = m.soft_micros;
    b.max_rate_micros = m.max_hourly_micros;
    sched.SetTeamBudget(team, b);
  }
  for (const auto& [team, gpus] : quotas) sched.SetTeamQuota(team, gpus);

  if (trace_.empty()) return Status::InvalidArgument("the trace has no jobs");
  const Time first = trace_.front().spec.submit;
  clock_.now = first;
  for (size_t n = 0; n < cluster_.nodes.size(); ++n) {
    GF_RETURN_IF_ERROR(sched.Handle(sched::NodeUp{NodeId(static_cast<int64_t>(n)), cluster_.nodes[n]}));
    NodeRate(n, +1);
    if (o_.node_mtbf_hours > 0) Push(first + ExpGap(o_.node_mtbf_hours), Kind::kNodeFail, static_cast<int64_t>(n));
  }

  jobs_.resize(trace_.size());
  result_.jobs.resize(trace_.size());
  Time last_submit = first;
  for (size_t i = 0; i < trace_.size(); ++i) {
    const TraceJob& tj = trace_[i];
    Duration offset = tj.spec.submit - first;
    if (o_.load_factor != 1.0) {
      offset = Duration::Millis(static_cast<int64_t>(static_cast<double>(offset.millis()) / o_.load_factor));
    }
    Time submit = first + offset;
    last_submit = std::max(last_submit, submit);
    jobs_[i].work = std::max(tj.work, Duration::Millis(1));
    JobRecord& rec = result_.jobs[i];
    rec.id = tj.id;
    rec.team = tj.spec.team;
    rec.gpus = tj.spec.fractional() ? 1 : tj.spec.total_gpus();
    rec.gpu_milli = tj.spec.total_gpu_milli();
    rec.submit = submit;
    rec.work = tj.work;
    Push(submit, Kind::kArrival, static_cast<int64_t>(i));
  }
  Duration step = o_.sample_step;
  if (step <= Duration::Zero()) {
    step = std::max(Duration::Seconds(60), (last_submit - first) / 2000);
  }
  Push(first, Kind::kSample, 0);

  const int64_t total = static_cast<int64_t>(trace_.size());
  int64_t remaining_arrivals = total;
  std::optional<Time> timer_at;
  std::vector<sched::Event> batch;
  int64_t progress_tick = 0;
  Time last_t = first;
  while (!queue_.empty()) {
    const Time t = queue_.top().t;
    // Integrate busy and online GPU time exactly over the interval since the last event.
    int64_t dt = (t - last_t).millis();
    result_.busy_gpu_ms += busy_milli_ * dt / model::kMilliGpuPerGpu;
    result_.online_gpu_ms += view.OnlineMilli() * dt / model::kMilliGpuPerGpu;
    for (int m = 0; m < 3; ++m) node_cost_acc_[m] += static_cast<__int128>(node_rate_[m]) * dt;
    last_t = t;
    clock_.now = t;
    batch.clear();
    bool sample = false;
    while (!queue_.empty() && queue_.top().t == t) {
      Ev e = queue_.top();
      queue_.pop();
      switch (e.kind) {
        case Kind::kArrival: {
          model::JobSpec spec = trace_[e.index].spec;
          spec.submit = t;
          // Traces name GPUs their own way (Alibaba's V100M16): use the catalog's names, as
          // the cluster spec does.
          std::vector<std::string> names;
          for (const std::string& m : spec.gpu_models) {
            const model::GpuModel* g = catalog_.Find(m);
            std::string name = g ? g->name : m;
            if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
          }
          spec.gpu_models = std::move(names);
          if (o_.estimates == Estimates::kOracle) spec.duration_estimate = trace_[e.index].work;
          if (spec.checkpoint_interval <= Duration::Zero()) spec.checkpoint_interval = o_.checkpoint_interval;
          jobs_[e.index].pending_since = t;
          batch.push_back(sched::JobSubmitted{JobId(e.index), std::move(spec)});
          --remaining_arrivals;
          break;
        }
        case Kind::kFinish: {
          SimJob& j = jobs_[e.index];
          if (!j.running || e.epoch != j.epoch) break;  // stale: the job was stopped
          JobRecord& rec = result_.jobs[e.index];
          int64_t milli = trace_[e.index].spec.total_gpu_milli();
          rec.run_gpu_ms += (t - j.run_start).millis() * milli / 1000;
          Charge(rec, j, t - j.run_start);
          rec.finish = t;
          j.running = false;
          j.done = j.work;
          busy_milli_ -= milli;
          --running_;
          ++finished_;
          batch.push_back(sched::JobFinished{JobId(e.index)});
          break;
        }
        case Kind::kStopped:
          batch.push_back(sched::JobStopped{JobId(e.index)});
          break;
        case Kind::kNodeFail:
          ++result_.node_failures;
          batch.push_back(sched::NodeDown{NodeId(e.index)});
          NodeRate(static_cast<size_t>(e.index), -1);
          Push(t + o_.repair_time, Kind::kNodeRepair, e.index);
          break;
        case Kind::kNodeRepair:
          batch.push_back(sched::NodeUp{NodeId(e.index), cluster_.nodes[e.index]});
          NodeRate(static_cast<size_t>(e.index), +1);
          if (remaining_arrivals > 0 || running_ > 0 || sched.pending_count() > 0) {
            Push(t + ExpGap(o_.node_mtbf_hours), Kind::kNodeFail, e.index);
          }
          break;
        case Kind::kTimer:
          if (timer_at && *timer_at == t) timer_at.reset();
          batch.push_back(sched::Timer{});
          break;
        case Kind::kSample:
          sample = true;
          break;
      }
    }
    if (!batch.empty()) {
      Status s = sched.HandleAll(batch);
      if (!s.ok() && s.code() != StatusCode::kNotFound) return s.WithContext("at " + FormatIso8601(t));
    }
    if (std::optional<Time> wake = sched.NextWakeup()) {
      if (!timer_at || *wake < *timer_at) {
        timer_at = std::max(*wake, t);
        Push(*timer_at, Kind::kTimer, 0);
      }
    }
    if (sample) {
      result_.series.push_back(SeriesPoint{t, busy_milli_, view.OnlineMilli(),
                                           static_cast<int64_t>(sched.pending_count()), running_});
      // Keep sampling while anything is left to happen.
      if (remaining_arrivals > 0 || running_ > 0) Push(t + step, Kind::kSample, 0);
    }
    if (o_.progress && ++progress_tick % 4096 == 0) o_.progress(finished_, total);
    // Nothing left but failures, repairs or timers with no job in the system: done.
    if (remaining_arrivals == 0 && running_ == 0 && sched.pending_count() == 0 && sched.stopping_count() == 0) break;
    if (remaining_arrivals == 0 && running_ == 0 && sched.running_count() == 0 && sched.stopping_count() == 0 &&
        !sched.NextWakeup()) {
      // Only pending jobs that can never start are left (infeasible, or no capacity returns).
      bool only_failures = true;
      auto copy = queue_;
      while (!copy.empty()) {
        Kind k = copy.top().kind;
        copy.pop();
        if (k != Kind::kSample && k != Kind::kNodeFail) only_failures = false;
      }
      if (only_failures) break;
    }
  }
  if (o_.progress) o_.progress(finished_, total);
  result_.start = first;
  result_.end = clock_.now;
  for (const auto& rec : result_.jobs) {
    if (rec.finish) result_.end = std::max(result_.end, *rec.finish);
  }
  result_.scheduling_passes = sched.stats().passes;
  // Node cost: what was paid for the nodes while they were up, by market.
  for (int m = 0; m < 3; ++m) {
    int64_t micros = static_cast<int64_t>(node_cost_acc_[m] / 3'600'000);
    if (micros == 0) continue;
    result_.cost_micros += micros;
    result_.cost_by_market_micros[model::MarketName(static_cast<model::Market>(m))] += micros;
  }
  // Final sample so the series covers the whole run.
  if (result_.series.empty() || result_.series.back().t != result_.end) result_.series.push_back(SeriesPoint{result_.end, busy_milli_, view.OnlineMilli(),
                                       static_cast<int64_t>(sched.pending_count()), running_});
  // Jobs still waiting at the end count their wait so far.
  for (size_t i = 0; i < jobs_.size(); ++i) {
    if (!result_.jobs[i].finish && !jobs_[i].running) result_.jobs[i].queued += result_.end - jobs_[i].pending_since;
  }
  sched_ = nullptr;
  return std::move(result_);
}

}  // namespace

Result<SimResult> Simulate(const std::vector<TraceJob>& jobs, const ClusterSpec& cluster,
                           const SimOptions& options, const model::GpuCatalog& catalog) {
  if (options.load_factor <= 0) return Status::InvalidArgument("load factor must be positive");
  World world(jobs, cluster, options, catalog);
  return world.Run();
}

}  // namespace gpufleet::sim
