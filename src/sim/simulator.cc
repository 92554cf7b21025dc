#include "sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <queue>
#include <random>
#include <set>
#include <tuple>
#include <map>
#include <memory>
#include <unordered_map>

#include "common/check.h"

#include "common/strings.h"
#include "model/capacity.h"
#include "sched/autoscaler.h"
#include "sched/policy/registry.h"
#include "sched/scheduler.h"

namespace gpufleet::sim {

namespace {

using sched::PreemptReason;

enum class Kind : uint8_t {
  kArrival, kFinish, kStopped, kNodeFail, kNodeRepair, kTimer, kSample,
  kNodeBoot,    // a rented node is up
  kSpotNotice,  // a spot node will be taken back after the notice
  kNodeGone,    // ... and now it is
  kScale,       // the autoscaler asked to decide again
};

// 24 bytes: a long replay's heap holds tens of thousands of events (a preempted run's finish
// stays until its time comes), and each pop reads a path of them.
struct Ev {
  Ev() = default;
  Ev(Time at, int64_t seq, Kind kind, int64_t index, int64_t epoch)
      : t(at),
        seq_kind(static_cast<uint64_t>(seq) << 8 | static_cast<uint8_t>(kind)),
        index(static_cast<uint32_t>(index)),
        epoch(static_cast<uint32_t>(epoch)) {
    CHECK(seq >= 0 && seq < (int64_t{1} << 56)) << "event sequence number out of range: " << seq;
    CHECK(index >= 0 && index <= int64_t{UINT32_MAX}) << "event index out of range: " << index;
    CHECK(epoch >= 0 && epoch <= int64_t{UINT32_MAX}) << "event epoch out of range: " << epoch;
  }
  Time t;
  uint64_t seq_kind = 0;  // sequence number << 8 | kind: orders as the sequence number alone
  uint32_t index = 0;     // job or node index
  uint32_t epoch = 0;     // run or node life number, to ignore stale events
  Kind kind() const { return static_cast<Kind>(seq_kind & 0xff); }
  bool operator>(const Ev& o) const { return t != o.t ? t > o.t : seq_kind > o.seq_kind; }
};
static_assert(sizeof(Ev) == 24);

// Events by (time, sequence number). Arrivals, known from the start, are not stored: the k-th in
// (time, sequence) order is made when it is due, beside a heap of the rest, so that the heap holds
// only what the run adds (finishes, stops, timers, samples) and stays small, and a long trace
// costs no event per job; the two are merged in the same order one heap would give.
//
// A run that is stopped leaves its finish in the heap, stale, until its time comes; a preemptive
// replay leaves tens of thousands there, and the heap outgrows the caches. When most of the heap
// is stale finishes, they leave it: each becomes a bare instant (its time, in a sorted list),
// still visited as it was, since an instant is where the run's totals are integrated and budgets
// are watched, but no longer popped as an event that does nothing.
class EventQueue {
 public:
  // `count` arrivals; arrival(k) is the k-th, in (time, sequence) order.
  void SetArrivals(size_t count, std::function<Ev(size_t)> arrival) {
    arrival_ = std::move(arrival);
    count_ = count;
    next_ = 0;
    if (count_ > 0) current_ = arrival_(0);
  }
  void push(const Ev& e) {
    // Sift up in a 4-ary heap (children of i: 4i+1 .. 4i+4): half the levels of a binary heap,
    // and a node's children share a cache line or two, which is what a large heap's pops pay for.
    size_t i = heap_.size();
    heap_.push_back(e);
    while (i > 0) {
      const size_t parent = (i - 1) / kArity;
      if (!(heap_[parent] > e)) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }
  // Stale finishes leave the heap once at least `min_count` are there and they are half of it
  // or more; `is_stale` tells them apart.
  void SetStaleFinishes(int64_t min_count, std::function<bool(const Ev&)> is_stale) {
    stale_min_ = std::max<int64_t>(1, min_count);
    is_stale_ = std::move(is_stale);
  }
  bool empty() const { return NoEvents() && NoStale(); }
  // The next instant: the first event's time, or a stale finish's if earlier.
  Time NextTime() const {
    if (NoEvents()) return FirstStale();
    const Time t = top().t;
    return NoStale() || t < FirstStale() ? t : FirstStale();
  }
  // Whether an event (not a bare instant) is due at `t`, the current instant.
  bool HasEventAt(Time t) const { return !NoEvents() && top().t == t; }
  // Ends instant `t`: the stale finishes that fell on it are gone.
  void EndInstant(Time t) {
    while (!stale_.empty() && stale_.back() == t) stale_.pop_back();
    while (!recent_stale_.empty() && recent_stale_.back() == t) recent_stale_.pop_back();
  }
  // A finish in the heap turned stale (+1: its run stopped) or a stale one was popped (-1).
  void StaleFinish(int delta) {
    stale_in_heap_ += delta;
    if (stale_in_heap_ < stale_min_ || 2 * stale_in_heap_ < static_cast<int64_t>(heap_.size())) return;
    auto live_end = std::partition(heap_.begin(), heap_.end(), [&](const Ev& e) { return !is_stale_(e); });
    // Into the recent list, which joins the long one once it is an eighth of its size: the long
    // one holds every stale finish not yet reached (twenty thousand in las-Philly), and merging
    // each sweep into it would move it all each time.
    const size_t recent_before = recent_stale_.size();
    for (auto it = live_end; it != heap_.end(); ++it) recent_stale_.push_back(it->t);
    MergeNewTimes(recent_stale_, recent_before);
    if (recent_stale_.size() * 8 >= stale_.size()) {
      const size_t before = stale_.size();
      stale_.insert(stale_.end(), recent_stale_.begin(), recent_stale_.end());
      MergeNewTimes(stale_, before);
      recent_stale_.clear();
    }
    moved_out_ += heap_.end() - live_end;
    heap_.erase(live_end, heap_.end());
    Heapify();
    stale_in_heap_ = 0;
  }
  int64_t moved_out() const { return moved_out_; }  // stale finishes moved out of the heap so far
  const Ev& top() const { return FromArrivals() ? current_ : heap_.front(); }
  void pop() {
    if (FromArrivals()) {
      if (++next_ < count_) current_ = arrival_(next_);
    } else {
      PopHeap();
    }
  }
  // Calls f(kind) for each event left, arrivals once for all of them, in no particular order.
  template <class F>
  void ForEachKind(F f) const {
    if (next_ < count_) f(Kind::kArrival);
    if (!NoStale()) f(Kind::kFinish);
    for (const Ev& e : heap_) f(e.kind());
  }

 private:
  static constexpr size_t kArity = 4;
  bool NoEvents() const { return next_ == count_ && heap_.empty(); }
  bool NoStale() const { return stale_.empty() && recent_stale_.empty(); }
  Time FirstStale() const {
    if (stale_.empty()) return recent_stale_.back();
    return recent_stale_.empty() || stale_.back() < recent_stale_.back() ? stale_.back() : recent_stale_.back();
  }
  // Puts the times appended to `list` after its first `old_count` (a list latest first) in order.
  static void MergeNewTimes(std::vector<Time>& list, size_t old_count) {
    const auto middle = list.begin() + static_cast<long>(old_count);
    std::sort(middle, list.end(), std::greater<>());
    std::inplace_merge(list.begin(), middle, list.end(), std::greater<>());
  }
  bool FromArrivals() const {
    if (next_ == count_) return false;
    return heap_.empty() || heap_.front() > current_;
  }
  // Removes the least event: the last one sifts down from the root. Events are totally ordered
  // by (time, sequence number), so the order of pops does not depend on the heap's shape.
  void PopHeap() {
    const Ev last = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) SiftDown(0, last);
  }
  // Puts `e` at the hole `i` or below, each entry on the way moving up into the hole.
  void SiftDown(size_t i, const Ev e) {
    const size_t n = heap_.size();
    for (;;) {
      const size_t first = i * kArity + 1;
      if (first >= n) break;
      size_t least = first;
      const size_t end = std::min(first + kArity, n);
      for (size_t c = first + 1; c < end; ++c) {
        if (heap_[least] > heap_[c]) least = c;
      }
      if (!(e > heap_[least])) break;
      heap_[i] = heap_[least];
      i = least;
    }
    heap_[i] = e;
  }
  // Orders the heap after entries were taken out of it: each parent, the last first, sifts down
  // (linear time).
  void Heapify() {
    const size_t n = heap_.size();
    if (n < 2) return;
    for (size_t i = (n - 2) / kArity + 1; i-- > 0;) SiftDown(i, heap_[i]);
  }
  std::function<Ev(size_t)> arrival_;
  size_t count_ = 0;
  size_t next_ = 0;
  Ev current_{};
  std::vector<Ev> heap_;
  std::vector<Time> stale_;     // times of stale finishes taken out of the heap, latest first
  std::vector<Time> recent_stale_;  // the same, of the sweeps since stale_ last took them in
  int64_t stale_in_heap_ = 0;   // stale finishes still in the heap
  int64_t stale_min_ = 1024;    // SimOptions::stale_events_min
  std::function<bool(const Ev&)> is_stale_;
  int64_t moved_out_ = 0;
};

class SimClock : public sched::Clock {
 public:
  Time Now() const override { return now; }
  Time now;
};

// What is reported of a job beyond what its trace entry says (id, team, shape, work): kept while
// it is in the system, made into a JobRecord when it ends.
struct JobRun {
  Time submit;
  std::optional<Time> first_start;
  std::optional<Time> finish;
  Duration queued;
  int32_t preemptions = 0;
  int32_t failures = 0;
  int32_t reclaims = 0;
  int32_t gpu_model = -1;  // of the last placement, in World::gpu_models_; -1: never placed
  int64_t lost_gpu_ms = 0;
  int64_t overhead_gpu_ms = 0;
  int64_t run_gpu_ms = 0;
  int64_t cost_micros = 0;
};

// A job in the system (pending or running). Kept small: a long replay can hold a queue of
// hundreds of thousands; its spec is the trace's and the scheduler's.
struct SimJob {
  Duration work;               // on the reference GPU
  Duration done;               // reference-GPU work completed and saved
  int64_t epoch = 0;
  bool running = false;
  Time run_start;
  double speed = 1.0;
  Time pending_since;
  Duration overhead_due;       // restart overhead for the next run
  std::vector<int64_t> nodes;  // nodes of the current run
  int64_t busy_by_market[3] = {0, 0, 0};  // milli-GPUs of the current run, by its nodes' market
  int64_t reserved_rate_milli = 0;         // what its reserved GPUs cost, micro-dollars per hour x 1000
  JobRun rec;
};

// A node of the simulated cluster: the cluster spec's, or rented by the autoscaler.
struct SimNode {
  enum class State : uint8_t { kBooting, kUp, kDraining, kDown, kGone };
  model::NodeSpec spec;
  State state = State::kUp;
  bool rented = false;
  int offer = -1;
  double hazard = 0;  // spot interruptions per hour
  Time booting_since;
  std::vector<JobId> for_jobs;
  int jobs = 0;       // runs holding GPUs on it
  Time idle_since;
  bool billed = false;
  bool used = false;  // has held a job
  std::string charged_team;  // rented: billed whole to this team (Scheduler::ChargeNode)
  int64_t epoch = 0;  // bumped when it goes away, so its stale events are ignored
};

class World : public sched::ActionSink {
 public:
  World(const CompactTrace& trace, const ClusterSpec& cluster, const SimOptions& o,
        const model::GpuCatalog& catalog)
      : trace_(trace), cluster_(cluster), o_(o), catalog_(catalog), rng_(o.seed) {}

  Result<SimResult> Run();

  void Start(JobId id, const model::Placement& p) override;
  void Preempt(JobId id, PreemptReason reason) override;

 private:
  bool Autoscaling() const { return !cluster_.autoscale.offers.empty(); }
  // The steps of Run, in order.
  void BuildNodes(std::map<std::string, int>& largest);
  void Configure(sched::Scheduler& sched, const std::map<std::string, int>& largest,
                 const std::map<std::string, int64_t>& policy_quotas);
  Result<Duration> Begin(sched::Scheduler& sched, Time first);
  void Arrive(size_t i, Time t, std::vector<sched::Event>& batch);
  void Finish(size_t i, int64_t epoch, Time t, std::vector<sched::Event>& batch);
  // A job that has arrived and not yet been retired.
  SimJob& Live(size_t i) {
    SimJob* j = FindLive(i);
    CHECK(j != nullptr) << "job " << i << " is not in the system";
    return *j;
  }
  const SimJob& Live(size_t i) const { return const_cast<World*>(this)->Live(i); }
  // Whether `e` is a finish of a run that has been stopped (Finish ignores it).
  bool IsStaleFinish(const Ev& e) {
    if (e.kind() != Kind::kFinish) return false;
    const SimJob* j = FindLive(e.index);
    return j == nullptr || !j->running || static_cast<int64_t>(e.epoch) != j->epoch;
  }
  // Job `i` if it is in the system, else nullptr.
  SimJob* FindLive(size_t i) {
    const uint32_t slot = i < slot_of_.size() ? slot_of_[i] : 0;
    return slot == 0 ? nullptr : &slots_[slot - 1];
  }
  // Job `i` enters the system: a fresh state in a free slot.
  SimJob& AddLive(size_t i) {
    if (slot_of_.size() <= i) slot_of_.resize(trace_.size() > i ? trace_.size() : i + 1, 0);
    CHECK(slot_of_[i] == 0) << "job " << i << " arrived twice";
    uint32_t slot;
    if (free_slots_.empty()) {
      CHECK(slots_.size() < UINT32_MAX) << "at most 2^32 - 1 jobs in the system at once";
      slots_.emplace_back();
      slot = static_cast<uint32_t>(slots_.size());
    } else {
      slot = free_slots_.back();
      free_slots_.pop_back();
      slots_[slot - 1] = SimJob{};
    }
    slot_of_[i] = slot;
    return slots_[slot - 1];
  }
  // Job `i` leaves the system: its state, moved out; its slot is free for the next arrival.
  SimJob TakeLive(size_t i) {
    const uint32_t slot = i < slot_of_.size() ? slot_of_[i] : 0;
    CHECK(slot != 0) << "job " << i << " retired twice";
    slot_of_[i] = 0;
    free_slots_.push_back(slot);
    return std::move(slots_[slot - 1]);
  }
  // Job `i` has ended: its record goes to the result (or its tally) and its state is freed.
  void Retire(size_t i, std::string never_ran = {});
  // Job `i`'s spec as the scheduler is given it when it arrives at `t`.
  model::JobSpec SubmittedSpec(size_t i, Time t) const;
  int32_t GpuModelIndex(const std::string& name) {
    for (size_t k = 0; k < gpu_models_.size(); ++k) {
      if (gpu_models_[k] == name) return static_cast<int32_t>(k);
    }
    gpu_models_.push_back(name);
    double speed = catalog_.RelativeSpeed(reference_, name, o_.boundness);
    gpu_model_speed_.push_back(speed > 0 ? speed : 1.0);
    return static_cast<int32_t>(gpu_models_.size() - 1);
  }
  void NodeEvent(const Ev& e, Time t, bool work_left, std::vector<sched::Event>& batch);
  void NodeLost(size_t n, Time t, std::vector<sched::Event>& batch);
  bool Done(const sched::Scheduler& sched, int64_t remaining_arrivals) const;
  void Report(const sched::Scheduler& sched, const sched::ClusterView& view, Time first);
  void Bill(size_t n, bool on);
  std::string NeverRanReason(const sched::Scheduler& sched, const sched::ClusterView& view, size_t i) const;
  void NodeIdleChange(size_t n, int delta);
  void WatchBudgets(const sched::Scheduler& sched);
  bool HasCapacity(size_t offer, Time now);
  std::vector<model::CapacityProcess> capacity_;  // per autoscale offer
  bool AllPendingHeld(const sched::Scheduler& sched) const;
  void ScheduleInterruption(size_t n);
  // One autoscaler decision at `now`: rents become booting nodes, releases go away.
  Status Autoscale(sched::Scheduler& sched, std::optional<Time>& scale_at);
  void Push(Time t, Kind k, int64_t index, int64_t epoch = 0) {
    queue_.push(Ev{t, next_seq_++, k, index, epoch});
  }
  Duration ExpGap(double mean_hours) {
    double u = std::generate_canonical<double, 53>(rng_);
    double hours = -std::log(1.0 - u) * mean_hours;
    return Duration::Millis(static_cast<int64_t>(hours * 3.6e6) + 1);
  }
  // A job's cost is the scheduler's (Scheduler::CostOf: its share of each node's price, every
  // run up to now), as the live engine reports it; asked when a run ends, before the scheduler
  // hears of the end.
  void Charge(JobRun& rec, size_t i) const { rec.cost_micros = sched_->CostOf(JobId(static_cast<int64_t>(i))); }
  void NodeRate(size_t n, int sign) {
    const model::NodeSpec& spec = nodes_[n].spec;
    node_rate_[static_cast<int>(spec.market)] += sign * spec.price_micros_per_hour;
    paid_milli_[static_cast<int>(spec.market)] += sign * int64_t{spec.gpus} * model::kMilliGpuPerGpu;
  }
  Duration CheckpointInterval(size_t i) const {
    Duration own = trace_.shape(i).checkpoint_interval;
    return own > Duration::Zero() ? own : o_.checkpoint_interval;
  }

  const CompactTrace& trace_;
  const ClusterSpec& cluster_;
  const SimOptions& o_;
  const model::GpuCatalog& catalog_;
  std::mt19937_64 rng_;
  EventQueue queue_;
  int64_t next_seq_ = 0;
  SimClock clock_;
  // Jobs in the system (arrived, not yet retired), by trace index: slot_of_[i] is 1 + the slot of
  // job i in slots_, or 0. A long replay holds the state of the jobs waiting and running only,
  // not of every job it has seen: slots are reused, and each job of the trace costs its 4-byte
  // index. A deque keeps references to a job's state valid while others arrive.
  std::vector<uint32_t> slot_of_;
  std::deque<SimJob> slots_;
  std::vector<uint32_t> free_slots_;
  std::vector<size_t> ended_;  // finished in this instant's batch, retired after it
  std::vector<uint32_t> arrival_order_;  // job indices by arrival, when the trace is not sorted
  Time last_finish_;
  std::vector<std::string> gpu_models_;  // the models jobs were placed on (JobRun::gpu_model)
  std::vector<double> gpu_model_speed_;  // per entry of gpu_models_: its speed against reference_
  SimResult result_;
  std::string reference_;
  int64_t busy_milli_ = 0;
  int64_t node_rate_[3] = {0, 0, 0};        // micro-dollars per hour of the nodes up, by market
  int64_t paid_milli_[3] = {0, 0, 0};       // milli-GPUs of those nodes, by market
  int64_t busy_market_milli_[3] = {0, 0, 0};  // milli-GPUs held by jobs, by their nodes' market
  // Micro-dollars per hour x 1000 of the reserved GPUs jobs hold: after reserved_billing_end, the
  // reserved GPUs still in use are paid (the next window's capacity they take), idle ones not.
  int64_t busy_reserved_rate_milli_ = 0;
  __int128 node_cost_acc_[3] = {0, 0, 0};   // micro-dollars x ms / h, integrated between events
  int64_t running_ = 0;
  int64_t finished_ = 0;
  int64_t unused_rents_ = 0;  // rented nodes released in a row without having held a job since the last start
  int64_t wasted_runs_ = 0;  // runs stopped in a row without a job finishing or saving work
  sched::Scheduler* sched_ = nullptr;
  std::vector<SimNode> nodes_;
  std::unique_ptr<sched::Autoscaler> scaler_;
  // The autoscaler's input, kept from decision to decision: its offers (set once, in the order
  // of cluster_.autoscale.offers) never change; its nodes are the rented nodes in renting order
  // (PoolNode::id is the index in nodes_), each spec and offer copied once, when rented, what
  // changes updated before each decision, and gone ones pruned then.
  sched::ScaleInput scale_in_;
  bool any_hard_budget_ = false;  // some team has a hard budget: rented nodes may be budget_spent
  std::map<std::string, int> rented_per_offer_;  // node names: <offer>-<k>
  std::vector<sched::Event> side_events_;        // node events raised outside the batch loop
  std::map<std::string, Time> soft_reached_;     // team -> when its spend reached its soft budget
  std::map<std::string, Time> hard_stopped_;     // team -> when its hard budget stopped it
};

// Why job `i`, which never started, did not: asked of the placement policy on the cluster as the
// run left it (idle: every job that could have started has finished) and of the budgets.
std::string World::NeverRanReason(const sched::Scheduler& sched, const sched::ClusterView& view, size_t i) const {
  std::string hold = sched.BudgetHold(JobId(static_cast<int64_t>(i)));
  if (!hold.empty()) return "held: " + hold;
  sched::PlaceOptions po;
  po.explain = true;
  const sched::JobView* admitted = sched.ViewOf(JobId(static_cast<int64_t>(i)));
  model::JobSpec submitted;
  if (!admitted || !admitted->spec) submitted = SubmittedSpec(i, Live(i).rec.submit);
  const model::JobSpec& spec = admitted && admitted->spec ? *admitted->spec : submitted;
  sched::PlaceResult r = sched.policies().placement->Place(spec, view, po);
  switch (r.kind) {
    case sched::PlaceResult::Kind::kInfeasible: return "can never run: " + r.reason;
    case sched::PlaceResult::Kind::kWait: return "waiting when the run ended: " + r.reason;
    case sched::PlaceResult::Kind::kPlaced: break;
  }
  return "waiting when the run ended: it fits the cluster as the run left it";
}

void World::Bill(size_t n, bool on) {
  SimNode& node = nodes_[n];
  if (node.billed == on) return;
  node.billed = on;
  NodeRate(n, on ? +1 : -1);
  // A rented node is billed whole, its idle part to the team it was rented for.
  if (sched_ && !node.charged_team.empty()) {
    if (on) {
      sched_->ChargeNode(node.spec.name, node.charged_team, node.spec.price_micros_per_hour, clock_.now);
    } else {
      sched_->EndNodeCharge(node.spec.name);
    }
  }
}

// Notes when each team's spend reaches its soft budget (the exact instant, from its cost per hour
// since the last event) and when its hard budget stops it.
void World::WatchBudgets(const sched::Scheduler& sched) {
  for (const auto& [team, m] : cluster_.team_money) {
    const bool want_soft = m.soft_micros > 0 && !soft_reached_.count(team);
    const bool want_hard = m.hard_micros > 0 && !hard_stopped_.count(team);
    if (!want_soft && !want_hard) continue;
    sched::TeamSpend s = sched.SpendOf(team);
    if (want_soft && s.spent_micros >= m.soft_micros) {
      Time at = clock_.now;
      if (s.rate_micros > 0) {
        // From the exact spend: the rounded one would put the instant up to a millisecond late,
        // depending on which events the run happened to stop at.
        const __int128 over_ms = (s.spent_exact - static_cast<__int128>(m.soft_micros) * 3'600'000) / s.rate_micros;
        at = clock_.now - Duration::Millis(static_cast<int64_t>(over_ms));
      }
      soft_reached_[team] = at;
    }
    if (want_hard && (s.hard_stop || s.over_hard)) hard_stopped_[team] = clock_.now;
  }
}

bool World::AllPendingHeld(const sched::Scheduler& sched) const {
  if (sched.pending_count() == 0 || cluster_.team_money.empty()) return false;
  for (JobId id : sched.QueueOrder()) {
    if (sched.BudgetHold(id).empty()) return false;
  }
  return true;
}

// Whether offer `o` has capacity at `now` (model::CapacityProcess), seeded from the run's seed and
// the offer's name (not its place in the list: two clusters that list the same offers in another
// order see the same outages), apart from the other random draws so that turning it on changes
// nothing else.
bool World::HasCapacity(size_t o, Time now) {
  if (capacity_.size() <= o) {
    for (size_t k = capacity_.size(); k < cluster_.autoscale.offers.size(); ++k) {
      const AutoscaleOffer& a = cluster_.autoscale.offers[k];
      capacity_.emplace_back(a.capacity_available, a.capacity_outage,
                             o_.seed * 0x9E3779B97F4A7C15ULL + Fnv1a64(a.name));
    }
  }
  return capacity_[o].Available(now);
}

void World::NodeIdleChange(size_t n, int delta) {
  SimNode& node = nodes_[n];
  node.jobs += delta;
  if (node.jobs == 0) node.idle_since = clock_.now;
}

void World::ScheduleInterruption(size_t n) {
  SimNode& node = nodes_[n];
  if (node.hazard <= 0 || node.spec.market != model::Market::kSpot) return;
  Push(clock_.now + ExpGap(1.0 / node.hazard), Kind::kSpotNotice, static_cast<int64_t>(n), node.epoch);
}

Status World::Autoscale(sched::Scheduler& sched, std::optional<Time>& scale_at) {
  const Time now = clock_.now;
  sched::ScaleInput& in = scale_in_;
  in.now = now;
  // The scheduler's own view, as the live pool gets it: held jobs rent nothing.
  sched.ScalingQueueInto(o_.restart_overhead, in.pending);
  // Rented nodes that are gone leave the list here, whatever took them (release, failure,
  // reclaim): a long replay rents thousands, of which a few hundred are there at once.
  auto node_of = [&](const sched::PoolNode& p) -> const SimNode& { return nodes_[static_cast<size_t>(p.id.value())]; };
  std::erase_if(in.nodes, [&](const sched::PoolNode& p) { return node_of(p).state == SimNode::State::kGone; });
  std::map<std::string, bool> stopped;  // team -> its hard budget has stopped it
  for (sched::PoolNode& p : in.nodes) {
    const SimNode& node = node_of(p);
    if (any_hard_budget_ && !node.charged_team.empty()) {
      // The team billed for it now (a stopped team's charge moves to a team working there), as
      // the live pool reads it.
      std::string billed = sched.ChargedTeam(node.spec.name);
      if (billed.empty()) billed = node.charged_team;
      auto [it, fresh] = stopped.try_emplace(billed, false);
      if (fresh) it->second = sched.HardStopReached(billed);
      p.budget_spent = it->second;
    }
    if (p.for_jobs != node.for_jobs) p.for_jobs = node.for_jobs;
    switch (node.state) {
      case SimNode::State::kBooting: p.state = sched::PoolNodeState::kBooting; break;
      case SimNode::State::kUp: p.state = sched::PoolNodeState::kUp; break;
      default: p.state = sched::PoolNodeState::kDraining; break;
    }
    p.idle_since.reset();
    if (node.state == SimNode::State::kUp && node.jobs == 0) p.idle_since = node.idle_since;
  }
  sched::ScalePlan plan = scaler_->Decide(in);
  for (const sched::Release& r : plan.releases) {
    const size_t n = static_cast<size_t>(r.node.value());
    SimNode& node = nodes_[n];
    if (node.state == SimNode::State::kUp) {
      side_events_.push_back(sched::NodeDown{r.node});
    }
    if (node.state == SimNode::State::kBooting && !r.budget) ++result_.boot_timeouts;
    if (r.budget) ++result_.budget_releases;
    if (node.rented && !node.used) ++unused_rents_;
    node.state = SimNode::State::kGone;
    ++node.epoch;
    Bill(n, false);
    ++result_.nodes_released;
  }
  for (const sched::Rent& r : plan.rents) {
    const AutoscaleOffer& offer = cluster_.autoscale.offers[static_cast<size_t>(r.offer)];
    if (!HasCapacity(static_cast<size_t>(r.offer), now)) {
      // The cloud says no: the autoscaler avoids the offer for its backoff and the jobs try the
      // next one at once.
      scaler_->ReportRentFailed(offer.name, now);
      ++result_.capacity_misses;
      if (!scale_at || *scale_at > now + Duration::Millis(1)) {
        scale_at = now + Duration::Millis(1);
        Push(*scale_at, Kind::kScale, 0);
      }
      continue;
    }
    for (int k = 0; k < r.count; ++k) {
      SimNode node;
      node.spec = offer.node;
      node.spec.name = offer.name + "-" + std::to_string(rented_per_offer_[offer.name]++);
      node.state = SimNode::State::kBooting;
      node.rented = true;
      node.offer = r.offer;
      node.hazard = offer.interruptions_per_hour;
      node.booting_since = now;
      node.for_jobs = r.for_jobs;
      if (!r.for_jobs.empty()) {
        node.charged_team = trace_.shape(static_cast<size_t>(r.for_jobs.front().value())).team;
      }
      nodes_.push_back(std::move(node));
      const size_t n = nodes_.size() - 1;
      sched::PoolNode p;
      p.id = NodeId(static_cast<int64_t>(n));
      p.spec = nodes_[n].spec;
      p.offer = offer.name;
      p.for_jobs = nodes_[n].for_jobs;
      p.booting_since = now;
      p.state = sched::PoolNodeState::kBooting;
      scale_in_.nodes.push_back(std::move(p));
      Bill(n, true);
      Push(now + offer.boot_delay, Kind::kNodeBoot, static_cast<int64_t>(n), 0);
      ++result_.nodes_rented;
    }
  }
  if (plan.next_wakeup && (!scale_at || *plan.next_wakeup < *scale_at || *scale_at <= now)) {
    scale_at = std::max(*plan.next_wakeup, now + Duration::Millis(1));
    Push(*scale_at, Kind::kScale, 0);
  }
  if (!side_events_.empty()) {
    std::vector<sched::Event> events;
    events.swap(side_events_);
    Status st = sched.HandleAll(events);
    if (!st.ok() && st.code() != StatusCode::kNotFound) return st;
  }
  return Status::Ok();
}

void World::Start(JobId id, const model::Placement& p) {
  size_t i = static_cast<size_t>(id.value());
  SimJob& j = Live(i);
  JobRun& rec = j.rec;
  Time now = clock_.now;
  if (!rec.first_start) rec.first_start = now;
  rec.queued += now - j.pending_since;
  unused_rents_ = 0;
  rec.gpu_model = GpuModelIndex(p.gpu_model);
  j.running = true;
  j.run_start = now;
  j.speed = gpu_model_speed_[rec.gpu_model];
  ++j.epoch;
  busy_milli_ += p.total_gpu_milli();
  ++running_;
  j.nodes.clear();
  for (const auto& part : p.parts) {
    const int64_t n = part.node.value();
    const int market = static_cast<int>(nodes_[static_cast<size_t>(n)].spec.market);
    const int64_t held = static_cast<int64_t>(part.gpus.size()) * part.gpu_milli;
    j.busy_by_market[market] += held;
    busy_market_milli_[market] += held;
    const model::NodeSpec& spec = nodes_[static_cast<size_t>(n)].spec;
    if (spec.market == model::Market::kReserved && spec.gpus > 0) {
      const int64_t rate = held * spec.price_micros_per_hour / spec.gpus;
      j.reserved_rate_milli += rate;
      busy_reserved_rate_milli_ += rate;
    }
    if (std::find(j.nodes.begin(), j.nodes.end(), n) == j.nodes.end()) {
      j.nodes.push_back(n);
      NodeIdleChange(static_cast<size_t>(n), +1);
      nodes_[static_cast<size_t>(n)].used = true;
    }
  }
  Duration left = j.work - j.done;
  int64_t wall_ms = static_cast<int64_t>(std::ceil(static_cast<double>(left.millis()) / j.speed));
  Push(now + j.overhead_due + Duration::Millis(std::max<int64_t>(wall_ms, 1)), Kind::kFinish,
       static_cast<int64_t>(i), j.epoch);
}

void World::Preempt(JobId id, PreemptReason reason) {
  size_t i = static_cast<size_t>(id.value());
  SimJob& j = Live(i);
  JobRun& rec = j.rec;
  Time now = clock_.now;
  // A job that finished at this very instant, in the same batch as the event that stops it: its
  // JobFinished follows in the batch and ends it.
  if (!j.running && rec.finish && *rec.finish == now) return;
  CHECK(j.running) << "preempt of a job that is not running";
  // The run's wall time is restart overhead first, then work; of the work, what a checkpoint
  // saved survives and the rest is lost.
  Duration wall = now - j.run_start;
  Duration overhead = std::min(wall, j.overhead_due);
  Duration useful_wall = wall - overhead;
  Duration saved_wall = useful_wall;
  bool graceful = reason != PreemptReason::kNodeFailure && o_.checkpoint_on_preempt;
  if (!graceful) {
    Duration c = CheckpointInterval(i);
    saved_wall = c > Duration::Zero() ? c * (useful_wall.millis() / c.millis()) : Duration::Zero();
  }
  Duration saved_work = Duration::Millis(static_cast<int64_t>(static_cast<double>(saved_wall.millis()) * j.speed));
  j.done = std::min(j.work, j.done + saved_work);
  // A run that ends without saving any work is wasted; too many in a row and the replay is stuck.
  wasted_runs_ = saved_work > Duration::Zero() ? 0 : wasted_runs_ + 1;
  int64_t milli = trace_.shape(i).total_gpu_milli();
  // In GPU-ms, lost is what is left of the run after its overhead and saved work, so the books
  // add up exactly even for GPU slices (run = saved + lost + overhead).
  const int64_t run_gpu_ms = wall.millis() * milli / 1000;
  const int64_t overhead_gpu_ms = overhead.millis() * milli / 1000;
  const int64_t saved_gpu_ms = saved_wall.millis() * milli / 1000;
  rec.run_gpu_ms += run_gpu_ms;
  rec.overhead_gpu_ms += overhead_gpu_ms;
  rec.lost_gpu_ms += run_gpu_ms - overhead_gpu_ms - saved_gpu_ms;
  Charge(rec, i);
  // A spot reclaim is the provider's doing, not a scheduling decision: it is counted apart.
  if (reason == PreemptReason::kNodeFailure) {
    ++rec.failures;
  } else if (reason == PreemptReason::kReclaimed) {
    ++rec.reclaims;
  } else if (reason != PreemptReason::kCancelled) {
    ++rec.preemptions;
  }
  for (int64_t n : j.nodes) NodeIdleChange(static_cast<size_t>(n), -1);
  j.nodes.clear();
  for (int m = 0; m < 3; ++m) {
    busy_market_milli_[m] -= j.busy_by_market[m];
    j.busy_by_market[m] = 0;
  }
  busy_reserved_rate_milli_ -= j.reserved_rate_milli;
  j.reserved_rate_milli = 0;
  busy_milli_ -= milli;
  --running_;
  j.running = false;
  j.overhead_due = o_.restart_overhead;
  j.pending_since = now;
  ++j.epoch;  // the run's finish, in the queue, is stale
  queue_.StaleFinish(+1);
  Push(now, Kind::kStopped, static_cast<int64_t>(i));
}

// The nodes of the cluster spec and, when autoscaling, the offers it may rent; `largest` gets the
// largest node each GPU model can have.
void World::BuildNodes(std::map<std::string, int>& largest) {
  reference_ = o_.reference_gpu;
  if (reference_.empty()) {
    for (const auto& n : cluster_.nodes) {
      if (n.gpus > 0) {
        reference_ = n.gpu_model;
        break;
      }
    }
  }
  if (reference_.empty() && Autoscaling()) reference_ = cluster_.autoscale.offers.front().node.gpu_model;
  for (size_t n = 0; n < cluster_.nodes.size(); ++n) {
    SimNode node;
    node.spec = cluster_.nodes[n];
    node.hazard = n < cluster_.interruptions_per_hour.size() ? cluster_.interruptions_per_hour[n] : 0;
    nodes_.push_back(std::move(node));
  }
  for (const auto& n : cluster_.nodes) largest[n.gpu_model] = std::max(largest[n.gpu_model], n.gpus);
  if (Autoscaling()) {
    scaler_ = std::make_unique<sched::Autoscaler>(cluster_.autoscale.options);
    for (const AutoscaleOffer& a : cluster_.autoscale.offers) {
      sched::RentableOffer r;
      r.name = a.name;
      r.gpu_model = a.node.gpu_model;
      r.gpus_per_node = a.node.gpus;
      r.market = a.node.market;
      r.price_micros_per_hour = a.node.price_micros_per_hour;
      r.boot_estimate = a.boot_delay;
      auto zone = a.node.labels.find(model::kLabelZone);
      r.zone = zone == a.node.labels.end() ? "" : zone->second;
      r.speed = catalog_.RelativeSpeed(reference_, a.node.gpu_model, o_.boundness);
      if (r.speed <= 0) r.speed = 1.0;
      r.interruptions_per_hour = a.interruptions_per_hour;
      r.labels = a.node.labels;
      r.cpu_milli = a.node.cpu_milli;
      r.mem_mib = a.node.mem_mib;
      scale_in_.offers.push_back(std::move(r));
      largest[a.node.gpu_model] = std::max(largest[a.node.gpu_model], a.node.gpus);
    }
    scale_in_.limits = cluster_.autoscale.limits;
    for (const auto& [team, m] : cluster_.team_money) any_hard_budget_ = any_hard_budget_ || m.hard_micros > 0;
  }
}

// What the scheduler is told before the first event: node sizes that may come, quotas, budgets.
void World::Configure(sched::Scheduler& sched, const std::map<std::string, int>& largest,
                      const std::map<std::string, int64_t>& policy_quotas) {
  // Split against every node the pool may have, rented ones included, so that a job submitted
  // to an empty autoscaled pool, or while the largest nodes are down, is not left larger than
  // any node: the scheduler splits at admission, as it does live.
  for (const auto& [model_name, gpus] : largest) sched.SetNodeSizeHint(model_name, gpus);
  for (const auto& [team, gpus] : cluster_.team_quota_gpus) sched.SetTeamQuota(team, gpus);
  for (const auto& [team, m] : cluster_.team_money) {
    sched::TeamBudget b;
    b.since = trace_.empty() ? Time() : trace_.submit(0);
    b.hard_micros = m.hard_micros;
    b.soft_micros = m.soft_micros;
    b.max_rate_micros = m.max_hourly_micros;
    sched.SetTeamBudget(team, b);
  }
  for (const auto& [team, gpus] : policy_quotas) sched.SetTeamQuota(team, gpus);
}

// The cluster's nodes come up at the first submission; every job's arrival is queued (load factor
// applied) and its record started. Returns the sampling step.
Result<Duration> World::Begin(sched::Scheduler& sched, Time first) {
  clock_.now = first;
  for (size_t n = 0; n < cluster_.nodes.size(); ++n) {
    GF_RETURN_IF_ERROR(sched.Handle(sched::NodeUp{NodeId(static_cast<int64_t>(n)), cluster_.nodes[n]}));
    Bill(n, true);
    nodes_[n].idle_since = first;
    if (o_.node_mtbf_hours > 0) Push(first + ExpGap(o_.node_mtbf_hours), Kind::kNodeFail, static_cast<int64_t>(n));
    ScheduleInterruption(n);
  }

  if (o_.keep_jobs) {
    result_.jobs.resize(trace_.size());
  } else {
    result_.tally = JobTally(trace_.size());
  }
  // Job i arrives as event number seq0 + i; arrivals are made when due (EventQueue).
  const int64_t seq0 = next_seq_;
  next_seq_ += static_cast<int64_t>(trace_.size());
  auto submit_of = [this, first](size_t i) {
    Duration offset = trace_.submit(i) - first;
    if (o_.load_factor != 1.0) {
      offset = Duration::Millis(static_cast<int64_t>(static_cast<double>(offset.millis()) / o_.load_factor));
    }
    return first + offset;
  };
  Time last_submit = first;
  bool sorted = true;
  for (size_t i = 0; i < trace_.size(); ++i) {
    const Time submit = submit_of(i);
    if (submit < last_submit && i > 0) sorted = false;
    last_submit = std::max(last_submit, submit);
  }
  // A trace read from a file is sorted by submit time; one given by a caller may not be, and then
  // its arrival order is found once (ties in trace order, as their sequence numbers have it).
  if (!sorted) {
    CHECK(trace_.size() <= UINT32_MAX) << "at most 2^32 jobs";
    arrival_order_.resize(trace_.size());
    for (size_t i = 0; i < trace_.size(); ++i) arrival_order_[i] = static_cast<uint32_t>(i);
    std::stable_sort(arrival_order_.begin(), arrival_order_.end(),
                     [&](uint32_t a, uint32_t b) { return submit_of(a) < submit_of(b); });
  }
  queue_.SetStaleFinishes(o_.stale_events_min, [this](const Ev& e) { return IsStaleFinish(e); });
  queue_.SetArrivals(trace_.size(), [this, seq0, submit_of](size_t k) {
    const size_t i = arrival_order_.empty() ? k : arrival_order_[k];
    return Ev{submit_of(i), seq0 + static_cast<int64_t>(i), Kind::kArrival, static_cast<int64_t>(i), 0};
  });
  Duration step = o_.sample_step;
  if (step <= Duration::Zero()) {
    step = std::max(Duration::Seconds(60), (last_submit - first) / 2000);
  }
  Push(first, Kind::kSample, 0);
  return step;
}

// Job `i` arriving at `t`, as the scheduler gets it: catalog GPU names, estimates, the default
// checkpoint interval.
model::JobSpec World::SubmittedSpec(size_t i, Time t) const {
  model::JobSpec spec = trace_.Spec(i);
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
  if (o_.estimates == Estimates::kOracle) spec.duration_estimate = trace_.work(i);
  if (spec.checkpoint_interval <= Duration::Zero()) spec.checkpoint_interval = o_.checkpoint_interval;
  return spec;
}

// Job `i` arrives at `t`.
void World::Arrive(size_t i, Time t, std::vector<sched::Event>& batch) {
  SimJob& j = AddLive(i);
  j.work = std::max(trace_.work(i), Duration::Millis(1));
  j.pending_since = t;
  j.rec.submit = t;
  batch.push_back(sched::JobSubmitted{JobId(static_cast<int64_t>(i)), SubmittedSpec(i, t)});
}

// Job `i`'s run `epoch` ends at `t` with its work done.
void World::Finish(size_t i, int64_t epoch, Time t, std::vector<sched::Event>& batch) {
  SimJob* live = FindLive(i);
  if (live == nullptr || !live->running || epoch != live->epoch) {
    // Stale: the job was stopped (and may have finished since).
    queue_.StaleFinish(-1);
    return;
  }
  SimJob& j = *live;
  JobRun& rec = j.rec;
  int64_t milli = trace_.shape(i).total_gpu_milli();
  rec.run_gpu_ms += (t - j.run_start).millis() * milli / 1000;
  // The last run pays its restart overhead too.
  rec.overhead_gpu_ms += std::min(t - j.run_start, j.overhead_due).millis() * milli / 1000;
  Charge(rec, i);
  rec.finish = t;
  last_finish_ = std::max(last_finish_, t);
  wasted_runs_ = 0;
  ended_.push_back(i);
  j.running = false;
  j.done = j.work;
  for (int64_t n : j.nodes) NodeIdleChange(static_cast<size_t>(n), -1);
  j.nodes.clear();
  for (int m = 0; m < 3; ++m) {
    busy_market_milli_[m] -= j.busy_by_market[m];
    j.busy_by_market[m] = 0;
  }
  busy_reserved_rate_milli_ -= j.reserved_rate_milli;
  j.reserved_rate_milli = 0;
  busy_milli_ -= milli;
  --running_;
  ++finished_;
  batch.push_back(sched::JobFinished{JobId(static_cast<int64_t>(i))});
}

// A node event at `t`: a failure, a repair, a rented node booting, a spot notice, or a reclaimed
// node going away. `work_left`: jobs are still to come, running or pending (a repair arms the
// next failure only then).
void World::NodeEvent(const Ev& e, Time t, bool work_left, std::vector<sched::Event>& batch) {
  switch (e.kind()) {
    case Kind::kNodeFail: {
      SimNode& node = nodes_[static_cast<size_t>(e.index)];
      if (node.state != SimNode::State::kUp && node.state != SimNode::State::kDraining) break;
      if (node.rented && e.epoch != node.epoch) break;  // a failure meant for an earlier life
      ++result_.node_failures;
      NodeLost(static_cast<size_t>(e.index), t, batch);
      break;
    }
    case Kind::kNodeRepair: {
      SimNode& node = nodes_[static_cast<size_t>(e.index)];
      batch.push_back(sched::NodeUp{NodeId(e.index), node.spec});
      node.state = SimNode::State::kUp;
      node.idle_since = t;
      Bill(static_cast<size_t>(e.index), true);
      if (o_.node_mtbf_hours > 0 && work_left) {
        Push(t + ExpGap(o_.node_mtbf_hours), Kind::kNodeFail, e.index);
      }
      ScheduleInterruption(static_cast<size_t>(e.index));
      break;
    }
    case Kind::kNodeBoot: {
      SimNode& node = nodes_[static_cast<size_t>(e.index)];
      if (node.state != SimNode::State::kBooting) break;  // released while booting
      node.state = SimNode::State::kUp;
      node.for_jobs.clear();
      node.idle_since = t;
      batch.push_back(sched::NodeUp{NodeId(e.index), node.spec});
      // Rented nodes fail like fixed ones, counted from when they come up.
      if (o_.node_mtbf_hours > 0) Push(t + ExpGap(o_.node_mtbf_hours), Kind::kNodeFail, e.index, node.epoch);
      ScheduleInterruption(static_cast<size_t>(e.index));
      break;
    }
    case Kind::kSpotNotice: {
      SimNode& node = nodes_[static_cast<size_t>(e.index)];
      if (e.epoch != node.epoch || node.state != SimNode::State::kUp) break;
      ++result_.spot_interruptions;
      node.state = SimNode::State::kDraining;
      batch.push_back(sched::NodeReclaimed{NodeId(e.index)});
      Push(t + cluster_.autoscale.spot_notice, Kind::kNodeGone, e.index, node.epoch);
      break;
    }
    case Kind::kNodeGone: {
      SimNode& node = nodes_[static_cast<size_t>(e.index)];
      if (e.epoch != node.epoch || node.state != SimNode::State::kDraining) break;
      NodeLost(static_cast<size_t>(e.index), t, batch);
      break;
    }
    default:
      break;
  }
}

// Node `n` goes away at `t` (a failure, or the end of a spot notice): the scheduler hears NodeDown
// and its bill stops. A rented node is gone for good (its instance is deleted, as the live pool
// does, and the autoscaler rents again for its jobs); a fixed one is repaired, or refilled by the
// cloud for a fixed spot fleet, after the repair time.
void World::NodeLost(size_t n, Time t, std::vector<sched::Event>& batch) {
  SimNode& node = nodes_[n];
  batch.push_back(sched::NodeDown{NodeId(static_cast<int64_t>(n))});
  ++node.epoch;
  Bill(n, false);
  if (node.rented) {
    node.state = SimNode::State::kGone;
  } else {
    node.state = SimNode::State::kDown;
    Push(t + o_.repair_time, Kind::kNodeRepair, static_cast<int64_t>(n));
  }
}

// Whether nothing that is left can change the outcome, so the run ends here.
bool World::Done(const sched::Scheduler& sched, int64_t remaining_arrivals) const {
  // Nothing left but failures, repairs or timers with no job in the system: done.
  if (remaining_arrivals == 0 && running_ == 0 && sched.pending_count() == 0 && sched.stopping_count() == 0) return true;
  // Only jobs held by budgets are left: nothing will let them start (budgets do not roll over
  // in a replay), so the run ends rather than bill idle nodes for nothing.
  if (remaining_arrivals == 0 && running_ == 0 && sched.running_count() == 0 && sched.stopping_count() == 0 &&
      AllPendingHeld(sched)) {
    return true;
  }
  if (remaining_arrivals == 0 && running_ == 0 && sched.running_count() == 0 && sched.stopping_count() == 0 &&
      !sched.NextWakeup()) {
    // Only pending jobs that can never start are left (infeasible, or no capacity returns).
    bool only_failures = true;
    queue_.ForEachKind([&](Kind k) {
      if (k != Kind::kSample && k != Kind::kNodeFail && k != Kind::kSpotNotice) only_failures = false;
    });
    if (only_failures) return true;
  }
  return false;
}

// The run's totals once its loop has ended: its span, rented nodes' idle tails, teams' money,
// node cost by market, the last sample, and why jobs that never started did not.
void World::Report(const sched::Scheduler& sched, const sched::ClusterView& view, Time first) {
  result_.start = first;
  result_.end = std::max(clock_.now, last_finish_);
  result_.scheduling_passes = sched.stats().passes;
  std::map<std::string, int64_t> tail_by_team;
  // Rented nodes still there at the end would be released after idle_duration (booting ones
  // after they boot): bill that tail too, so an autoscaled run is not cheaper for stopping early.
  for (size_t n = 0; n < nodes_.size(); ++n) {
    SimNode& node = nodes_[n];
    if (!node.rented || !node.billed) continue;
    // An idle node goes idle_duration after its last job; a busy one (a job cut off at the end)
    // idle_duration after the end.
    Time until = (node.jobs == 0 ? node.idle_since : clock_.now) + cluster_.autoscale.options.idle_duration;
    if (node.state == SimNode::State::kDraining) until = clock_.now;  // gone at its notice's end
    if (node.state == SimNode::State::kBooting) {
      until = node.booting_since + cluster_.autoscale.offers[static_cast<size_t>(node.offer)].boot_delay +
              cluster_.autoscale.options.idle_duration;
    }
    const int64_t tail_ms = std::max<int64_t>(0, (until - clock_.now).millis());
    node_cost_acc_[static_cast<int>(node.spec.market)] += static_cast<__int128>(node.spec.price_micros_per_hour) * tail_ms;
    if (!node.charged_team.empty()) {
      tail_by_team[node.charged_team] +=
          static_cast<int64_t>(static_cast<__int128>(node.spec.price_micros_per_hour) * tail_ms / 3'600'000);
    }
  }
  WatchBudgets(sched);
  // Teams' money: those with a budget, and those billed for rented nodes.
  std::set<std::string> money_teams;
  for (const auto& [team, m] : cluster_.team_money) money_teams.insert(team);
  for (const SimNode& node : nodes_) {
    if (!node.charged_team.empty()) money_teams.insert(node.charged_team);
  }
  for (const std::string& team : money_teams) {
    sched::TeamSpend spend = sched.SpendOf(team);
    TeamBudgetRecord& b = result_.budgets[team];
    b.spent_micros = spend.spent_micros + tail_by_team[team];
    b.rented_idle_micros = spend.rented_idle_micros + tail_by_team[team];
    if (auto it = cluster_.team_money.find(team); it != cluster_.team_money.end()) {
      b.soft_micros = it->second.soft_micros;
      b.hard_micros = it->second.hard_micros;
    }
    if (auto it = soft_reached_.find(team); it != soft_reached_.end()) b.soft_reached = it->second;
    if (auto it = hard_stopped_.find(team); it != hard_stopped_.end()) b.hard_stopped = it->second;
  }
  if (sched.pending_count() > 0) {
    for (JobId id : sched.QueueOrder()) {
      const std::string& team = trace_.shape(static_cast<size_t>(id.value())).team;
      auto it = result_.budgets.find(team);
      if (it != result_.budgets.end() && it->second.hard_stopped) ++it->second.held_jobs;
    }
  }
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
  // Jobs still waiting at the end count their wait so far; those that never started say why.
  // Every job has ended now, finished or not.
  std::vector<size_t> left;  // by index
  left.reserve(slots_.size() - free_slots_.size());
  for (size_t i = 0; i < slot_of_.size(); ++i) {
    if (slot_of_[i] != 0) left.push_back(i);
  }
  std::vector<std::string> never_ran(left.size());
  for (size_t k = 0; k < left.size(); ++k) {
    SimJob& j = Live(left[k]);
    JobRun& rec = j.rec;
    if (!rec.finish && !j.running) rec.queued += result_.end - j.pending_since;
    if (!rec.first_start) never_ran[k] = NeverRanReason(sched, view, left[k]);
  }
  for (size_t k = 0; k < left.size(); ++k) Retire(left[k], std::move(never_ran[k]));
}

void World::Retire(size_t i, std::string never_ran) {
  const SimJob taken = TakeLive(i);
  const JobRun& run = taken.rec;
  const model::JobSpec& shape = trace_.shape(i);
  JobRecord rec;
  rec.id = std::string(trace_.id(i));
  rec.team = shape.team;
  rec.gpus = shape.fractional() ? 1 : shape.total_gpus();
  rec.gpu_milli = shape.total_gpu_milli();
  rec.submit = run.submit;
  rec.first_start = run.first_start;
  rec.finish = run.finish;
  rec.work = trace_.work(i);
  rec.queued = run.queued;
  rec.preemptions = run.preemptions;
  rec.failures = run.failures;
  rec.reclaims = run.reclaims;
  rec.lost_gpu_ms = run.lost_gpu_ms;
  rec.overhead_gpu_ms = run.overhead_gpu_ms;
  rec.run_gpu_ms = run.run_gpu_ms;
  if (run.gpu_model >= 0) rec.gpu_model = gpu_models_[static_cast<size_t>(run.gpu_model)];
  rec.cost_micros = run.cost_micros;
  rec.never_ran = std::move(never_ran);
  if (o_.keep_jobs) {
    result_.jobs[i] = std::move(rec);
  } else {
    result_.tally.Add(i, rec);
  }
}

Result<SimResult> World::Run() {
  if (cluster_.nodes.empty() && !Autoscaling()) return Status::InvalidArgument("the cluster has no nodes");
  std::map<std::string, int> largest;
  BuildNodes(largest);
  auto opts = sched::MakePolicies(o_.policy, o_.policy_options);
  if (!opts.ok()) return opts.status();
  result_.policy = opts->policies.Name();
  result_.cluster_gpus = cluster_.total_gpus();
  sched::ClusterView view;
  auto quotas = opts->team_quota_gpus;
  if (!quotas.empty() && !Autoscaling()) {
    // As the cluster YAML's teams are checked: quotas are guarantees, and promising more GPUs
    // than exist is a mistake (quota.TEAM options override the YAML's quota of that team).
    std::map<std::string, int64_t> all = cluster_.team_quota_gpus;
    for (const auto& [team, gpus] : quotas) all[team] = gpus;
    int64_t sum = 0;
    for (const auto& [team, gpus] : all) sum += gpus;
    if (sum > cluster_.total_gpus()) {
      return Status::InvalidArgument("--policy-opt quota.TEAM: the teams' quotas add up to " + std::to_string(sum) +
                                     " GPUs but the cluster has only " + std::to_string(cluster_.total_gpus()));
    }
  }
  sched::Scheduler sched(clock_, view, std::move(opts->policies), *this);
  sched_ = &sched;
  Configure(sched, largest, quotas);
  if (trace_.empty()) return Status::InvalidArgument("the trace has no jobs");
  const Time first = trace_.submit(0);
  GF_ASSIGN_OR_RETURN(Duration step, Begin(sched, first));

  const int64_t total = static_cast<int64_t>(trace_.size());
  int64_t remaining_arrivals = total;
  std::optional<Time> timer_at;
  std::optional<Time> scale_at;
  std::vector<sched::Event> batch;
  int64_t progress_tick = 0;
  Time last_t = first;
  while (!queue_.empty()) {
    const Time t = queue_.NextTime();
    // Integrate busy and online GPU time exactly over the interval since the last event (none
    // at a second instant at the same time, as after a preemption's stop).
    const int64_t dt = (t - last_t).millis();
    if (dt != 0) {
      result_.busy_gpu_ms += busy_milli_ * dt / model::kMilliGpuPerGpu;
      result_.online_gpu_ms += view.OnlineMilli() * dt / model::kMilliGpuPerGpu;
      for (int m = 0; m < 3; ++m) {
        int64_t paid_dt = dt;
        if (m == static_cast<int>(model::Market::kReserved) && o_.reserved_billing_end) {
          paid_dt = std::clamp<int64_t>((*o_.reserved_billing_end - last_t).millis(), 0, dt);
        }
        node_cost_acc_[m] += static_cast<__int128>(node_rate_[m]) * paid_dt;
        if (paid_dt < dt) node_cost_acc_[m] += static_cast<__int128>(busy_reserved_rate_milli_) * (dt - paid_dt) / 1000;
        result_.busy_gpu_ms_by_market[m] += busy_market_milli_[m] * paid_dt / model::kMilliGpuPerGpu;
        result_.paid_gpu_ms_by_market[m] += paid_milli_[m] * paid_dt / model::kMilliGpuPerGpu;
      }
    }
    last_t = t;
    clock_.now = t;
    WatchBudgets(sched);
    batch.clear();
    bool sample = false;
    bool scale_due = false;
    while (queue_.HasEventAt(t)) {
      Ev e = queue_.top();
      queue_.pop();
      switch (e.kind()) {
        case Kind::kArrival:
          Arrive(static_cast<size_t>(e.index), t, batch);
          --remaining_arrivals;
          break;
        case Kind::kFinish:
          Finish(static_cast<size_t>(e.index), e.epoch, t, batch);
          break;
        case Kind::kStopped:
          batch.push_back(sched::JobStopped{JobId(e.index)});
          break;
        case Kind::kNodeFail:
        case Kind::kNodeRepair:
        case Kind::kNodeBoot:
        case Kind::kSpotNotice:
        case Kind::kNodeGone:
          NodeEvent(e, t, remaining_arrivals > 0 || running_ > 0 || sched.pending_count() > 0, batch);
          break;
        case Kind::kScale:
          if (scale_at && *scale_at == t) scale_at.reset();
          scale_due = true;
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
    queue_.EndInstant(t);
    if (!batch.empty()) {
      Status s = sched.HandleAll(batch);
      if (!s.ok() && s.code() != StatusCode::kNotFound) return s.WithContext("at " + FormatIso8601(t));
    }
    if (Autoscaling() && (!batch.empty() || scale_due)) {
      Status s = Autoscale(sched, scale_at);
      if (!s.ok()) return s.WithContext("autoscaling at " + FormatIso8601(t));
    }
    // Jobs that finished in this instant are done with: the scheduler has heard of it.
    for (size_t i : ended_) Retire(i);
    ended_.clear();
    if (std::optional<Time> wake = sched.NextWakeup()) {
      if (!timer_at || *wake < *timer_at) {
        timer_at = std::max(*wake, t);
        Push(*timer_at, Kind::kTimer, 0);
      }
    }
    if (sample) {
      result_.series.push_back(SeriesPoint{t, busy_milli_, view.OnlineMilli(),
                                           static_cast<int64_t>(sched.pending_count()), running_});
      if (o_.max_series_points > 1 && static_cast<int64_t>(result_.series.size()) > o_.max_series_points) {
        // Every other point, the first kept, and half as many from now on.
        std::vector<SeriesPoint>& series = result_.series;
        size_t kept = 0;
        for (size_t i = 0; i < series.size(); i += 2) series[kept++] = series[i];
        series.resize(kept);
        step = step * 2;
      }
      // Keep sampling while anything is left to happen.
      // (Jobs waiting while nothing runs, for a booting node, a repair or capacity, count too.)
      if (remaining_arrivals > 0 || running_ > 0 || sched.pending_count() > 0) Push(t + step, Kind::kSample, 0);
    }
    if (o_.progress && ++progress_tick % 4096 == 0) o_.progress(finished_, total);
    if (o_.max_wasted_runs > 0 && wasted_runs_ >= o_.max_wasted_runs) {
      return Status::FailedPrecondition(
          "the replay makes no progress: " + std::to_string(wasted_runs_) + " runs in a row were stopped before " +
          "their job finished or saved any work (at " + FormatIso8601(t) + ", " + std::to_string(finished_) + " of " +
          std::to_string(total) + " jobs finished). Jobs are preempted or fail faster than they checkpoint: give a " +
          "shorter --checkpoint-interval, keep checkpoint-on-preempt, set --policy-opt min_run=DURATION, or a larger " +
          "--node-mtbf");
    }
    if (o_.max_unused_rents > 0 && unused_rents_ >= o_.max_unused_rents) {
      return Status::FailedPrecondition(
          "the replay makes no progress: " + std::to_string(unused_rents_) + " rented nodes in a row were released " +
          "without running a job (at " + FormatIso8601(t) + ", " + std::to_string(finished_) + " of " +
          std::to_string(total) + " jobs finished). The autoscaler rents for jobs the scheduler does not place on " +
          "those nodes: look at the waiting jobs' markets and labels, the offers, and the policy's order");
    }
    if (Done(sched, remaining_arrivals)) break;
  }
  if (o_.progress) o_.progress(finished_, total);
  result_.stale_finishes_moved = queue_.moved_out();
  Report(sched, view, first);
  sched_ = nullptr;
  return std::move(result_);
}

}  // namespace

Result<SimResult> Simulate(const CompactTrace& jobs, const ClusterSpec& cluster, const SimOptions& options,
                           const model::GpuCatalog& catalog) {
  if (options.load_factor <= 0) return Status::InvalidArgument("load factor must be positive");
  World world(jobs, cluster, options, catalog);
  return world.Run();
}

Result<SimResult> Simulate(const std::vector<TraceJob>& jobs, const ClusterSpec& cluster,
                           const SimOptions& options, const model::GpuCatalog& catalog) {
  return Simulate(CompactTrace::Of(jobs), cluster, options, catalog);
}

}  // namespace gpufleet::sim
