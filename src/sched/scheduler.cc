#include "sched/scheduler.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <functional>
#include <limits>
#include <tuple>
#include <utility>

#include "common/check.h"
#include "common/strings.h"

namespace gpufleet::sched {

using model::JobSpec;
using model::Placement;

const char* PreemptReasonName(PreemptReason r) {
  switch (r) {
    case PreemptReason::kPriority: return "priority";
    case PreemptReason::kQuotaReclaim: return "quota-reclaim";
    case PreemptReason::kService: return "attained-service";
    case PreemptReason::kNodeFailure: return "node-failure";
    case PreemptReason::kReclaimed: return "reclaimed";
    case PreemptReason::kBudget: return "budget";
    case PreemptReason::kMaxCost: return "max-cost";
    case PreemptReason::kCancelled: return "cancelled";
  }
  return "?";
}

const char* JobPhaseName(JobPhase p) {
  switch (p) {
    case JobPhase::kPending: return "pending";
    case JobPhase::kRunning: return "running";
    case JobPhase::kStopping: return "stopping";
  }
  return "?";
}

const char* VictimOrderName(VictimOrder v) {
  switch (v) {
    case VictimOrder::kLeastWorkLost: return "least-work-lost";
    case VictimOrder::kWorstRank: return "worst-rank";
  }
  return "?";
}

const char* BackfillModeName(BackfillMode m) {
  switch (m) {
    case BackfillMode::kOff: return "off";
    case BackfillMode::kEasy: return "easy";
    case BackfillMode::kGreedy: return "greedy";
  }
  return "?";
}

std::string Policies::Name() const {
  return queue->Name() + "+" + BackfillModeName(options.backfill) + "/" + placement->Name();
}

namespace {

int64_t GpuMilliOf(const JobSpec& s) { return s.total_gpu_milli(); }

}  // namespace

// ---- JobView ---------------------------------------------------------------------------------

int64_t JobView::AttainedAt(Time now) const {
  if (phase == JobPhase::kPending) return attained_gpu_ms;
  return attained_gpu_ms + GpuMilliOf(*spec) * (now - started_at).millis() / model::kMilliGpuPerGpu;
}

int64_t JobView::LasServiceAt(Time now) const {
  if (phase == JobPhase::kPending) return las_service_gpu_ms;
  return las_service_gpu_ms + GpuMilliOf(*spec) * (now - started_at).millis() / model::kMilliGpuPerGpu;
}

Duration JobView::WorkAtRisk(Time now) const {
  if (phase == JobPhase::kPending) return Duration::Zero();
  Time safe = std::max(started_at, last_checkpoint);
  Duration interval = spec->checkpoint_interval;
  if (interval > Duration::Zero()) {
    int64_t done = (now - started_at).millis() / interval.millis();
    safe = std::max(safe, started_at + interval * done);
  }
  return now - safe;
}

std::optional<Duration> JobView::RemainingEstimate(Time now) const {
  if (!spec->duration_estimate) return std::nullopt;
  Duration ran = run_time;
  if (phase != JobPhase::kPending) ran += now - started_at;
  Duration left = *spec->duration_estimate - ran;
  return std::max(left, Duration::Zero());
}

// ---- Scheduler state -------------------------------------------------------------------------

// The victim index (described below, at VictimStream): filed running jobs.
struct Scheduler::VictimIndex {
  using Entry = std::tuple<int64_t, int64_t, int64_t, JobState*>;  // phase, -priority, seq, job
  using Filed = std::set<Entry>;
  struct Class {
    std::map<int64_t, Filed> by_interval;            // checkpoint interval (ms; 0: none) -> jobs
    std::set<std::pair<int64_t, JobState*>> aside;  // (seq, job)
  };
  std::map<int64_t, Class> by_class;
};

struct Scheduler::JobState {
  enum class Outcome { kNotReached, kWait, kInfeasible, kHeldByReservation, kAwaitingVictims, kBudget, kQuota };
  // (What the queues, the passes and the preemption searches read of every job comes first, so
  // that it shares a few cache lines: the view and the rank, then what a pass reads and writes of
  // each job it looks at, then what a search reads of each candidate; the spec, most of it read
  // only at submission, comes last.)
  JobView v;
  RankKey rank;
  int shape = 0;
  int victims_stopping = 0;        // preempted jobs that make room for this one
  int64_t preempt_failed_at = -1;  // running_version_ when a preemption attempt last failed
  bool in_queue = false;  // in by_shape_
  bool ranked = false;    // `rank` holds a computed rank (for LiveRank)
  bool moving = false;    // running, with a rank that moves with service (RefreshRunningRanks)
  Outcome outcome = Outcome::kNotReached;  // what the last pass concluded (for Explain)
  RankKey set_rank;       // the rank it is filed under in by_shape_
  std::optional<JobId> preempted_for;
  // While it holds GPUs: its milli-GPUs, its GPU model's index and the node positions of its
  // parts with GPUs (what a preemption search reads of each candidate).
  int64_t held_milli = 0;
  int model_index = -1;
  std::vector<int> part_pos;
  Placement placement;
  bool requeue_after_stop = true;
  bool count_as_preemption = true;
  std::optional<Time> timer;
  uint32_t timer_slot = 0;  // while `timer` is set: its slot (Scheduler::timer_job_)
  int spot_reclaims = 0;  // runs cut short because its spot node was reclaimed
  // The team (a key of books_) whose quota kept its last preemption search from a victim, when
  // that search failed (for Explain); null otherwise.
  const std::string* quota_kept_by = nullptr;
  // Nodes this job will start on once its victims have stopped; other jobs keep off them.
  std::vector<int> claim;
  mutable int64_t claimant_in_pass = -1;  // the pass (SchedulerStats::passes) that counted it a claimant
  // Its team's entries in books_ and teams_, once looked up (entries are never erased, and an
  // unordered_map keeps its entries in place).
  TeamBooks* books = nullptr;
  TeamUsage* usage = nullptr;
  // Where it is filed in running_ while running (an erase needs no search), and whether it waits
  // there to be filed again under its rank now (at running_unfiled_[running_unfiled_at]).
  std::set<std::tuple<RankKey, int64_t, JobState*>>::const_iterator running_at;
  bool running_unfiled = false;
  size_t running_unfiled_at = 0;
  // Where it is filed in victim_index_ while running: its class, its interval's set (unless
  // aside) and its entry, so that unfiling it searches nothing.
  bool victim_filed = false;
  bool victim_aside = false;
  std::map<int64_t, VictimIndex::Class>::iterator victim_class_at;
  std::map<int64_t, VictimIndex::Filed>::iterator victim_filed_at;
  VictimIndex::Filed::const_iterator victim_entry_at;
  std::set<std::pair<int64_t, JobState*>>::const_iterator victim_aside_at;
  int group = -1;         // its (team, shape) queue in by_group_, when filed there
  RankKey group_key;      // the StaticRank it is filed under
  bool group_filed = false;
  std::set<std::tuple<RankKey, int64_t, JobState*>>::const_iterator group_at;  // where, while filed
  std::set<std::tuple<RankKey, int64_t, JobState*>>::const_iterator shape_at;  // where, while in_queue
  int64_t cost_rate = 0;                 // micro-dollars per hour while it holds GPUs
  int64_t accrued_micros = 0;            // cost of its runs that have ended
  Duration stop_grace;                   // how long it may take to exit once asked to stop
  std::vector<std::pair<std::string, int64_t>> charged_parts;  // (charged node, part rate) while it holds GPUs
  // What else the last pass concluded for this pending job (for Explain).
  std::string budget_block;              // why its team's budget kept it waiting (for Explain)
  int64_t budget_rate = 0;               // the cost per hour it would have added then
  JobId outcome_job;
  Time outcome_time;
  int split_from_gpus = 0;               // GPUs it asked for on one node, when split to fit (else 0)
  JobSpec spec;
};

namespace {

// Asks the memory for every cache line of [begin, end).
void PrefetchRange(const void* begin, const void* end) {
  for (const char* at = static_cast<const char*>(begin); at < static_cast<const char*>(end); at += 64) {
    __builtin_prefetch(at);
  }
}

}  // namespace

// Asks the memory for what a pass reads of a queued job (its view, rank and pass fields, where
// it is filed, its spec) before the job's visit: the heads of a merge are known some visits
// ahead, and each job's state is otherwise a cache miss met at its visit.
void Scheduler::PrefetchForVisit(const JobState* j) {
  PrefetchRange(j, &j->held_milli);
  __builtin_prefetch(&j->shape_at);
  __builtin_prefetch(&j->spec);
}

// The same for a running job a preemption search may take as a victim: its view, rank and
// stopping state (may it be stopped), its GPUs and the nodes of its parts.
void Scheduler::PrefetchCandidate(const JobState* j) { PrefetchRange(j, &j->part_pos + 1); }

// The same for a job whose timer fires: its timer, its view and rank, where it is filed while
// running, and its spec (the policy ranks it).
void Scheduler::PrefetchForTimer(const JobState* j) {
  PrefetchRange(j, &j->held_milli);
  __builtin_prefetch(&j->timer);
  __builtin_prefetch(&j->running_at);
  __builtin_prefetch(&j->spec);
}

struct Scheduler::Reservation {
  JobId job;
  Time time = Time::Max();  // Max: the earliest start is unknown (running jobs lack estimates)
  NodeMask nodes;  // node positions held for the job
};

// ---- Victims in the order a search stops them -------------------------------------------------
//
// A least-work-lost search stops victims in the order (work at risk now, priority, newest first);
// sorting every candidate at each search costs O(running log running), and most searches need
// only the first few. This index keeps running jobs in that order instead:
//  - A job with a checkpoint interval I that has reported no checkpoint since it started has
//    (now - start) mod I at risk (JobView::WorkAtRisk). The jobs of one interval keep one cyclic
//    order, cut at now mod I: each is filed once, under its start's phase (start mod I), and read
//    in descending phase from now mod I down, then from the top down to just above it.
//  - A job without an interval has now minus its last checkpoint (or start) at risk: filed under
//    that instant, read latest first.
//  - A job with an interval that has reported a checkpoint of its own mixes both; such jobs are
//    kept aside and a search sorts them.
// Within one phase, filing by (-priority, seq) and reading backwards gives the lowest priority,
// then the newest, first. Each first rank component (the queue class) has its own index, so
// with static ranks a search for a waiting job reads only the classes behind the job's.
// (Scheduler::VictimIndex is defined before JobState, which keeps iterators into it.)

// The candidates of one search in the order the search stops them: several runs, each already in
// that order, merged by the order's key.
class Scheduler::VictimStream {
 public:
  using Key = std::tuple<Duration, int, int64_t>;
  static Key KeyOf(const JobState& j, Time now) { return {j.v.WorkAtRisk(now), j.spec.priority, -j.v.seq}; }

  // Buffers the scheduler keeps from search to search (a stream allocates nothing once warm).
  struct Buffers;
  VictimStream(Time now, Buffers& buffers);

  // The regular jobs of one interval, in order at `now_`.
  void AddFiled(const VictimIndex::Filed& filed, int64_t interval) {
    if (filed.empty()) return;
    Run run;
    run.interval = interval;
    if (interval <= 0) {
      run.parts[0] = {filed.rbegin(), filed.rend()};
      run.part_count = 1;
    } else {
      run.cut = ((now_.millis() % interval) + interval) % interval;
      constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
      auto above = filed.upper_bound({run.cut, kMax, kMax, nullptr});
      // Phases at or below the cut (least work at risk first), then the rest from the top.
      run.parts[0] = {It(above), filed.rend()};
      run.parts[1] = {filed.rbegin(), It(above)};
      run.part_count = 2;
    }
    Push(std::move(run));
  }
  // A job outside the filed runs (sorted by Finish).
  void AddJob(JobState* j) { extra_.emplace_back(KeyOf(*j, now_), j->v.seq, j); }
  // Call once after the Add calls.
  void Finish() {
    std::sort(extra_.begin(), extra_.end());
    if (!extra_.empty()) {
      heads_.push_back(Head{std::get<0>(extra_[0]), std::get<2>(extra_[0]), -1});
    }
  }

  // The next job in order; nullptr at the end.
  JobState* Next() {
    if (heads_.empty()) return nullptr;
    size_t best = 0;
    for (size_t i = 1; i < heads_.size(); ++i) {
      if (heads_[i].key < heads_[best].key) best = i;
    }
    Head& h = heads_[best];
    JobState* out = h.job;
    if (h.run < 0) {
      if (++extra_pos_ < extra_.size()) {
        h.key = std::get<0>(extra_[extra_pos_]);
        h.job = std::get<2>(extra_[extra_pos_]);
      } else {
        heads_.erase(heads_.begin() + static_cast<long>(best));
      }
    } else {
      Run& r = runs_[static_cast<size_t>(h.run)];
      ++r.parts[r.part].first;
      if (!Load(r, h)) {
        heads_.erase(heads_.begin() + static_cast<long>(best));
      }
    }
    return out;
  }

 private:
  using It = VictimIndex::Filed::const_reverse_iterator;
  struct Run {
    std::array<std::pair<It, It>, 2> parts;
    size_t part_count = 0;
    size_t part = 0;
    int64_t interval = 0;
    int64_t cut = 0;  // now mod interval
  };
  struct Head {
    Key key;
    JobState* job = nullptr;
    int run = -1;  // index into runs_; -1: extra_
  };
  void Push(Run run) {
    Head h;
    if (!Load(run, h)) return;
    h.run = static_cast<int>(runs_.size());
    runs_.push_back(std::move(run));
    heads_.push_back(h);
  }
  // Points `h` at the run's current job, moving past finished parts; false at the run's end.
  // The key comes from where the job is filed: what WorkAtRisk gives for a job filed there.
  bool Load(Run& r, Head& h) const {
    while (r.part < r.part_count && r.parts[r.part].first == r.parts[r.part].second) ++r.part;
    if (r.part == r.part_count) return false;
    const auto& [phase, neg_priority, seq, job] = *r.parts[r.part].first;
    int64_t risk = now_.millis() - phase;
    if (r.interval > 0) risk = phase <= r.cut ? r.cut - phase : r.cut - phase + r.interval;
    h.job = job;
    h.key = Key{Duration::Millis(risk), static_cast<int>(-neg_priority), -seq};
    PrefetchCandidate(job);  // read by the search once the stream hands it out
    return true;
  }

  Time now_;
  std::vector<Run>& runs_;
  std::vector<Head>& heads_;
  std::vector<std::tuple<Key, int64_t, JobState*>>& extra_;
  size_t extra_pos_ = 0;

 public:
  struct Buffers {
    std::vector<Run> runs;
    std::vector<Head> heads;
    std::vector<std::tuple<Key, int64_t, JobState*>> extra;
  };
};

struct Scheduler::VictimBuffers {
  VictimStream::Buffers buffers;
};

Scheduler::VictimStream::VictimStream(Time now, Buffers& buffers)
    : now_(now), runs_(buffers.runs), heads_(buffers.heads), extra_(buffers.extra) {
  runs_.clear();
  heads_.clear();
  extra_.clear();
}

Scheduler::Scheduler(const Clock& clock, ClusterView& view, Policies policies, ActionSink& sink)
    : clock_(clock), view_(view), policies_(std::move(policies)), sink_(sink) {
  CHECK(policies_.queue != nullptr && policies_.placement != nullptr) << "policies incomplete";
  if (policies_.options.preemption && policies_.queue->Preempts() &&
      policies_.options.victims == VictimOrder::kLeastWorkLost) {
    victim_index_ = std::make_unique<VictimIndex>();
  }
}

Scheduler::TeamBooks& Scheduler::BooksOf(JobState& j) {
  if (!j.books) j.books = &books_[j.spec.team];
  return *j.books;
}

TeamUsage& Scheduler::UsageOf(JobState& j) {
  if (!j.usage) j.usage = &teams_[j.spec.team];
  return *j.usage;
}

void Scheduler::AddRunning(JobState& j) {
  j.running_at = running_.emplace(j.rank, j.v.seq, &j).first;
  ++running_edits_;
  CountRunningClass(j.rank.k[0], +1);
  if (j.spec.max_cost_micros > 0) ++running_with_max_cost_;
  IndexVictim(j);
}

void Scheduler::RemoveRunning(JobState& j) {
  running_.erase(j.running_at);
  ++running_edits_;
  CountRunningClass(j.rank.k[0], -1);
  if (j.running_unfiled) {
    JobState* last = running_unfiled_.back();
    running_unfiled_[j.running_unfiled_at] = last;
    last->running_unfiled_at = j.running_unfiled_at;
    running_unfiled_.pop_back();
    j.running_unfiled = false;
  }
  if (j.spec.max_cost_micros > 0) --running_with_max_cost_;
  UnindexVictim(j);
}

void Scheduler::ChangeRunningRank(JobState& j, const RankKey& rank) {
  const bool new_class = rank.k[0] != j.rank.k[0];
  if (new_class) {
    CountRunningClass(j.rank.k[0], -1);
    CountRunningClass(rank.k[0], +1);
  }
  j.rank = rank;
  if (!j.running_unfiled) {  // filed again in running_ when its order is next read
    j.running_unfiled = true;
    j.running_unfiled_at = running_unfiled_.size();
    running_unfiled_.push_back(&j);
  }
  ++running_edits_;
  if (new_class && j.victim_filed) MoveVictimClass(j);
}

void Scheduler::SyncRunning() const {
  for (JobState* j : running_unfiled_) {
    // Moves the set's node (no allocation, no search to find it).
    auto node = running_.extract(j->running_at);
    std::get<0>(node.value()) = j->rank;
    j->running_at = running_.insert(std::move(node)).position;
    j->running_unfiled = false;
  }
  if (!running_unfiled_.empty()) ++running_edits_;
  running_unfiled_.clear();
}

void Scheduler::CountRunningClass(int64_t cls, int delta) {
  auto it = running_classes_.try_emplace(cls, 0).first;
  it->second += delta;
  if (it->second == 0) running_classes_.erase(it);
}

void Scheduler::IndexVictim(JobState& j) {
  if (!victim_index_) return;
  j.victim_class_at = victim_index_->by_class.try_emplace(j.rank.k[0]).first;
  VictimIndex::Class& c = j.victim_class_at->second;
  const int64_t interval = std::max<int64_t>(0, j.spec.checkpoint_interval.millis());
  const int64_t start = j.v.started_at.millis();
  const int64_t checkpoint = j.v.last_checkpoint.millis();
  j.victim_aside = interval > 0 && checkpoint > start;
  if (j.victim_aside) {
    j.victim_aside_at = c.aside.emplace(j.v.seq, &j).first;
  } else {
    const int64_t phase = interval > 0 ? ((start % interval) + interval) % interval : std::max(start, checkpoint);
    j.victim_filed_at = c.by_interval.try_emplace(interval).first;
    j.victim_entry_at =
        j.victim_filed_at->second.emplace(phase, -static_cast<int64_t>(j.spec.priority), j.v.seq, &j).first;
  }
  j.victim_filed = true;
}

void Scheduler::UnindexVictim(JobState& j) {
  if (!j.victim_filed) return;
  j.victim_filed = false;
  VictimIndex::Class& c = j.victim_class_at->second;
  if (j.victim_aside) {
    c.aside.erase(j.victim_aside_at);
  } else {
    j.victim_filed_at->second.erase(j.victim_entry_at);
    if (j.victim_filed_at->second.empty()) c.by_interval.erase(j.victim_filed_at);
  }
  if (c.by_interval.empty() && c.aside.empty()) victim_index_->by_class.erase(j.victim_class_at);
}

void Scheduler::MoveVictimClass(JobState& j) {
  // The entry keeps its key (phase, priority, seq; or seq aside): its tree node moves to the
  // same place in the new class's index.
  auto from = j.victim_class_at;
  auto to = victim_index_->by_class.try_emplace(j.rank.k[0]).first;
  if (j.victim_aside) {
    auto node = from->second.aside.extract(j.victim_aside_at);
    j.victim_aside_at = to->second.aside.insert(std::move(node)).position;
  } else {
    const int64_t interval = j.victim_filed_at->first;
    auto node = j.victim_filed_at->second.extract(j.victim_entry_at);
    if (j.victim_filed_at->second.empty()) from->second.by_interval.erase(j.victim_filed_at);
    j.victim_filed_at = to->second.by_interval.try_emplace(interval).first;
    j.victim_entry_at = j.victim_filed_at->second.insert(std::move(node)).position;
  }
  j.victim_class_at = to;
  if (from->second.by_interval.empty() && from->second.aside.empty()) victim_index_->by_class.erase(from);
}

Scheduler::~Scheduler() = default;

Scheduler::JobState* Scheduler::FindJob(JobId id) {
  auto it = jobs_.find(id.value());
  return it == jobs_.end() ? nullptr : it->second.get();
}

const Scheduler::JobState* Scheduler::FindJob(JobId id) const {
  auto it = jobs_.find(id.value());
  return it == jobs_.end() ? nullptr : it->second.get();
}

bool Scheduler::RanksCurrent(Time now) const {
  return timers_.empty() || timers_.top().at > now;
}

bool Scheduler::StaticRanks() const {
  if (!policies_.queue->RanksDependOnUsage()) return true;
  // Usage-dependent ranks (fair-share) do not move while no team has a quota.
  for (const auto& [team, u] : teams_) {
    if (u.quota_milli > 0) return false;
  }
  return true;
}

void Scheduler::SetTeamQuota(const std::string& team, int64_t gpus) {
  TeamQuota q = QuotaOf(team);
  q.gpus = gpus;
  SetTeamQuota(team, q);
}

void Scheduler::SetTeamQuota(const std::string& team, const TeamQuota& quota) {
  int64_t total = quota.gpus;
  for (const auto& [m, g] : quota.model_gpus) total += g;
  teams_[team].quota_milli = total * model::kMilliGpuPerGpu;
  books_[team].quota = quota;
  RecountLimits();
  full_pass_ = true;
  ++search_epoch_;
  ++running_version_;  // a search that failed under the old quotas may succeed now
}

bool Scheduler::MayPreempt(const JobState& waiting, const JobState& running, const QueueContext& ctx) const {
  return policies_.queue->MayPreempt(waiting.v, running.v, ctx) && QuotaKeeps(waiting, running);
}

bool Scheduler::QuotaKeeps(const JobState& waiting, const JobState& victim) const {
  if (!guard_quotas_ || waiting.spec.team == victim.spec.team) return true;
  auto it = books_.find(victim.spec.team);
  if (it == books_.end()) return true;
  const TeamQuota& q = it->second.quota;
  const TeamLoad& l = it->second.load;
  if (q.gpus == 0 && q.model_gpus.empty()) return true;
  // GPUs the team holds on `model` ("" for all models) that it keeps: running, not told to stop,
  // not taken by this search.
  auto held = [&](const std::string* model) {
    int64_t h = model ? 0 : l.used_milli - l.stopping_milli;
    if (model) {
      if (auto u = l.model_used_milli.find(*model); u != l.model_used_milli.end()) h += u->second;
      if (auto s = l.model_stopping_milli.find(*model); s != l.model_stopping_milli.end()) h -= s->second;
    }
    for (const JobState* t : search_taken_) {
      if (t->spec.team == victim.spec.team && (!model || t->placement.gpu_model == *model)) h -= GpuMilliOf(t->spec);
    }
    return h;
  };
  const int64_t v = GpuMilliOf(victim.spec);
  const std::string& model = victim.placement.gpu_model;
  bool keeps;
  if (auto mq = q.model_gpus.find(model); mq != q.model_gpus.end()) {
    keeps = held(&model) - v >= mq->second * model::kMilliGpuPerGpu;
  } else if (q.gpus <= 0) {
    return true;  // nothing guaranteed on this model
  } else {
    int64_t any = held(nullptr);
    for (const auto& [m, g] : q.model_gpus) any -= held(&m);
    keeps = any - v >= q.gpus * model::kMilliGpuPerGpu;
  }
  if (!keeps) quota_refused_team_ = &it->first;
  return keeps;
}

void Scheduler::CountStopping(const JobState& j, int sign) {
  const int64_t milli = sign * GpuMilliOf(j.spec);
  teams_[j.spec.team].stopping_milli += milli;
  TeamLoad& load = books_[j.spec.team].load;
  load.stopping_milli += milli;
  if ((load.model_stopping_milli[j.placement.gpu_model] += milli) == 0) {
    load.model_stopping_milli.erase(j.placement.gpu_model);
  }
}

void Scheduler::RecountLimits() {
  // GPUs of stopping jobs are counted only while some team has a quota (only quota checks read
  // them): from the jobs stopping now when that begins.
  bool quotas = false;
  for (const auto& [team, u] : teams_) quotas = quotas || u.quota_milli > 0;
  if (quotas != track_stopping_) {
    for (auto& [team, u] : teams_) u.stopping_milli = 0;
    for (auto& [team, b] : books_) {
      b.load.stopping_milli = 0;
      b.load.model_stopping_milli.clear();
    }
    track_stopping_ = quotas;
    if (quotas) {
      for (const JobState* s : stopping_) CountStopping(*s, +1);
    }
  }
  guard_quotas_ = false;
  if (!policies_.queue->KeepsQuotas() && policies_.queue->Preempts()) {
    for (const auto& [team, u] : teams_) guard_quotas_ = guard_quotas_ || u.quota_milli > 0;
  }
  any_limits_ = false;
  for (const auto& [team, b] : books_) {
    const TeamQuota& q = b.quota;
    any_limits_ = any_limits_ || q.max_running_jobs > 0 || (!q.borrow && (q.gpus > 0 || !q.model_gpus.empty()));
  }
}

TeamQuota Scheduler::QuotaOf(const std::string& team) const {
  auto it = books_.find(team);
  return it == books_.end() ? TeamQuota{} : it->second.quota;
}

TeamLoad Scheduler::LoadOf(const std::string& team) const {
  auto it = books_.find(team);
  return it == books_.end() ? TeamLoad{} : it->second.load;
}

std::vector<std::string> Scheduler::Teams() const {
  std::vector<std::string> out;
  for (const auto& [team, b] : books_) out.push_back(team);
  std::sort(out.begin(), out.end());
  return out;
}

std::string Scheduler::AdmissionBlock(const std::string& team, int64_t jobs) const {
  auto it = books_.find(team);
  if (it == books_.end() || it->second.quota.max_pending_jobs <= 0) return "";
  const int64_t limit = it->second.quota.max_pending_jobs, pending = it->second.load.pending_jobs;
  if (pending + jobs <= limit) return "";
  return "team " + team + " has " + std::to_string(pending) + " job(s) waiting and may have at most " +
         std::to_string(limit) + (jobs > 1 ? " (this submit adds " + std::to_string(jobs) + ")" : std::string()) +
         "; wait for some to start or cancel some (an admin raises the limit with gpufleet quota " + team +
         " --max-pending N)";
}

std::string Scheduler::QuotaBlock(const JobState& j, const Placement* placement) const {
  auto it = books_.find(j.spec.team);
  if (it == books_.end()) return "";
  const TeamQuota& q = it->second.quota;
  const TeamLoad& l = it->second.load;
  const std::string& team = j.spec.team;
  if (q.max_running_jobs > 0 && l.running_jobs >= q.max_running_jobs) {
    return "team " + team + " runs " + std::to_string(l.running_jobs) + " job(s), its limit (max running jobs " +
           std::to_string(q.max_running_jobs) + ")";
  }
  if (q.borrow || (q.gpus == 0 && q.model_gpus.empty())) return "";
  const int64_t need = GpuMilliOf(j.spec);
  auto gpus = [](int64_t milli) {
    return milli % model::kMilliGpuPerGpu == 0 ? std::to_string(milli / model::kMilliGpuPerGpu)
                                               : std::to_string(milli / 1000.0).substr(0, 5);
  };
  auto over = [&](const std::string& what, int64_t used, int64_t limit_gpus) {
    return "team " + team + " is over its " + what + "quota, borrowing not allowed: " + gpus(used) + " of " +
           std::to_string(limit_gpus) + " GPU(s) in use, this job needs " + gpus(need);
  };
  // Room under a model's own quota, else under the any-model quota.
  auto room = [&](const std::string& model, std::string* why) {
    if (auto m = q.model_gpus.find(model); m != q.model_gpus.end()) {
      int64_t used = 0;
      if (auto u = l.model_used_milli.find(model); u != l.model_used_milli.end()) used = u->second;
      if (used + need <= m->second * model::kMilliGpuPerGpu) return true;
      if (why) *why = over(model + " ", used, m->second);
      return false;
    }
    int64_t used = l.used_milli;
    for (const auto& [m, g] : q.model_gpus) {
      if (auto u = l.model_used_milli.find(m); u != l.model_used_milli.end()) used -= u->second;
    }
    if (q.gpus > 0 && used + need <= q.gpus * model::kMilliGpuPerGpu) return true;
    if (why) {
      *why = q.gpus > 0 ? over("", used, q.gpus)
                        : "team " + team + " has no quota for " + model + " GPUs, borrowing not allowed";
    }
    return false;
  };
  std::string why;
  if (placement != nullptr) return room(placement->gpu_model, &why) ? "" : why;
  // Before placement: held only if no model the job may use has room: under the any-model quota,
  // or under a model's own.
  std::vector<std::string> models = j.spec.gpu_models;
  if (models.empty()) {
    if (q.gpus > 0 && room("", &why)) return "";  // any model
    for (const auto& [m, g] : q.model_gpus) models.push_back(m);
    if (models.empty()) return why;
  }
  for (const std::string& m : models) {
    if (room(m, models.size() == 1 ? &why : nullptr)) return "";
  }
  if (why.empty()) why = "team " + team + " is over its quota for every GPU model this job may use, borrowing not allowed";
  return why;
}

bool Scheduler::QuotaNeverFits(const JobState& j) const {
  auto it = books_.find(j.spec.team);
  if (it == books_.end()) return false;
  const TeamQuota& q = it->second.quota;
  if (q.borrow || (q.gpus == 0 && q.model_gpus.empty())) return false;
  const int64_t need = GpuMilliOf(j.spec);
  auto fits = [&](const std::string& model) {
    if (auto m = q.model_gpus.find(model); m != q.model_gpus.end()) return need <= m->second * model::kMilliGpuPerGpu;
    return q.gpus > 0 && need <= q.gpus * model::kMilliGpuPerGpu;
  };
  std::vector<std::string> models = j.spec.gpu_models;
  if (models.empty()) {
    if (q.gpus > 0) models.push_back("");  // any model
    for (const auto& [m, g] : q.model_gpus) models.push_back(m);
  }
  return std::none_of(models.begin(), models.end(), fits);
}

QueueContext Scheduler::Context() const {
  QueueContext ctx;
  ctx.now = clock_.Now();
  ctx.teams = &teams_;
  ctx.cluster_milli = view_.SchedulableMilli();
  return ctx;
}

RankKey Scheduler::RankOf(const JobState& j, const QueueContext& ctx) const {
  return policies_.queue->Rank(j.v, ctx);
}

// The job's rank now, noting when its queue class (the rank's first component) changed since
// the rank last computed: policies that order a queue by entry into it read that instant.
RankKey Scheduler::LiveRank(JobState& j, const QueueContext& ctx) const {
  RankKey r = RankOf(j, ctx);
  if (j.ranked && r.k[0] != j.rank.k[0]) {
    j.v.rank_class_since = ctx.now;
    r = RankOf(j, ctx);
  }
  j.ranked = true;
  return r;
}

size_t Scheduler::PlainShapeHash::operator()(const PlainShape& k) const {
  // Each field in turn, multiplied in (the fields are small integers).
  uint64_t h = 0;
  for (int64_t v : {k.gpus_per_node, k.nodes, k.gpu_milli, k.cpu_milli, k.mem_mib, k.market}) {
    h = (h ^ static_cast<uint64_t>(v)) * 0x9E3779B97F4A7C15ULL;
  }
  return static_cast<size_t>(h ^ (h >> 29));
}

int Scheduler::ShapeId(const JobSpec& s) {
  // Jobs of one shape succeed or fail together within a pass; the id lets a pass skip the
  // placement of a shape that already failed. Every submitted job asks (a bulk submission, a
  // long replay), so a job of numbers only is looked up by them; any other key is built in a
  // reused buffer and copied only for a new shape.
  if (s.gpu_models.empty() && s.constraints.empty() && s.environment.empty()) {
    const PlainShape plain{s.gpus_per_node, s.nodes, s.gpu_milli, s.cpu_milli, s.mem_mib, static_cast<int64_t>(s.market)};
    auto [it, added] = plain_shapes_.try_emplace(plain, shape_count_);
    if (added) ++shape_count_;
    return it->second;
  }
  std::string& key = shape_key_;
  key.clear();
  auto number = [&key](int64_t v) {
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    key.append(buf, end);
  };
  number(s.gpus_per_node);
  key += 'x';
  number(s.nodes);
  key += '/';
  number(s.gpu_milli);
  key += '/';
  number(s.cpu_milli);
  key += '/';
  number(s.mem_mib);
  key += '/';
  key += model::MarketPreferenceName(s.market);
  key += '/';
  // Names are written with their length first, so that no two different lists read alike
  // (models "A100,H100" and "A100", "H100"; a label value holding '=' or ',').
  auto text = [&](const std::string& t) {
    number(static_cast<int64_t>(t.size()));
    key += ':';
    key += t;
  };
  for (const auto& m : s.gpu_models) text(m);
  key += '/';
  for (const auto& [k, v] : s.constraints) {
    text(k);
    text(v);
  }
  key += '/';
  text(s.environment);
  if (auto it = shapes_.find(key); it != shapes_.end()) return it->second;
  const int id = shape_count_++;
  shapes_.emplace(key, id);
  return id;
}

void Scheduler::CountShape(const JobState& j, int sign) {
  if (static_cast<size_t>(j.shape) >= shape_pending_.size()) {
    shape_pending_.resize(j.shape + 1, 0);
    shape_pending_est_.resize(j.shape + 1, 0);
  }
  int64_t& n = shape_pending_[j.shape];
  if (sign > 0 && n == 0) ++live_shapes_;
  n += sign;
  if (sign < 0 && n == 0) --live_shapes_;
  if (j.spec.duration_estimate) shape_pending_est_[j.shape] += sign;
  if (j.spec.total_gpu_milli() == 0) pending_without_gpus_ += sign;
}

void Scheduler::Enqueue(JobState& j) {
  j.v.phase = JobPhase::kPending;
  j.outcome = JobState::Outcome::kNotReached;
  ++pending_count_;
  if (j.preempt_failed_at == failed_version_) ++failed_count_;
  ++BooksOf(j).load.pending_jobs;
  CountShape(j, +1);
  QueueContext ctx = Context();
  j.rank = LiveRank(j, ctx);
  // Filed in the sorted queues even when ranks depend on usage: they are used whenever no team
  // has a quota (then such ranks do not change) and for removal otherwise.
  j.set_rank = j.rank;
  if (by_shape_.size() <= static_cast<size_t>(j.shape)) by_shape_.resize(j.shape + 1);
  j.shape_at = by_shape_[j.shape].emplace(j.set_rank, j.v.seq, &j).first;
  j.in_queue = true;
  File(j);
  ScheduleTimer(j, ctx);
}

void Scheduler::File(JobState& j) {
  std::optional<RankKey> key = policies_.queue->StaticRank(j.v);
  if (!key) return;
  if (j.group < 0) {
    auto [it, added] = group_ids_.try_emplace({j.spec.team, j.shape}, static_cast<int>(by_group_.size()));
    if (added) by_group_.emplace_back();
    j.group = it->second;
  }
  j.group_key = *key;
  j.group_at = by_group_[j.group].emplace(j.group_key, j.v.seq, &j).first;
  j.group_filed = true;
  ++grouped_pending_;
}

void Scheduler::Unfile(JobState& j) {
  if (j.group < 0 || !j.group_filed) return;
  by_group_[j.group].erase(j.group_at);
  j.group_filed = false;
  --grouped_pending_;
}

void Scheduler::Dequeue(JobState& j) {
  CHECK(j.v.phase == JobPhase::kPending);
  if (j.in_queue) {
    by_shape_[j.shape].erase(j.shape_at);
    Unfile(j);
    j.in_queue = false;
  }
  --pending_count_;
  if (j.preempt_failed_at == failed_version_) --failed_count_;
  --BooksOf(j).load.pending_jobs;
  CountShape(j, -1);
}

void Scheduler::ScheduleTimer(const JobState& cj, const QueueContext& ctx) {
  JobState& j = const_cast<JobState&>(cj);
  std::optional<Time> t = policies_.queue->NextRankChange(j.v, ctx);
  std::optional<Time> at;
  // A policy must answer a future instant; a past one is moved just after now so that time
  // always advances between two timer events of a job.
  if (t && j.v.phase != JobPhase::kStopping) at = std::max(*t, ctx.now + Duration::Millis(1));
  if (at == j.timer) return;  // the entry in the heap stands
  DropTimer(j);
  if (at) SetTimer(j, *at);
}

void Scheduler::SetTimer(JobState& j, Time at) {
  CHECK(!j.timer) << "a job's timer set twice";
  j.timer = at;
  if (free_timer_slots_.empty()) {
    free_timer_slots_.push_back(static_cast<uint32_t>(timer_job_.size()));
    timer_job_.push_back(nullptr);
  }
  j.timer_slot = free_timer_slots_.back();
  free_timer_slots_.pop_back();
  timer_job_[j.timer_slot] = &j;
  timers_.Push(j.timer_slot, at, j.v.seq);
}

void Scheduler::ReleaseTimer(JobState& j) {
  j.timer.reset();
  timers_.Remove(j.timer_slot);
  timer_job_[j.timer_slot] = nullptr;
  free_timer_slots_.push_back(j.timer_slot);
}

void Scheduler::DropTimer(JobState& j) {
  if (j.timer) ReleaseTimer(j);
}

void Scheduler::Rerank(JobState& j, const QueueContext& ctx) {
  if (j.v.phase == JobPhase::kPending && j.in_queue) {
    // Moves the set's node (no allocation).
    auto node = by_shape_[j.shape].extract(j.shape_at);
    j.rank = LiveRank(j, ctx);
    j.set_rank = j.rank;
    std::get<0>(node.value()) = j.set_rank;
    j.shape_at = by_shape_[j.shape].insert(std::move(node)).position;
    Unfile(j);
    File(j);
  } else if (j.v.phase == JobPhase::kRunning) {
    const int64_t from = j.rank.k[0];
    ChangeRunningRank(j, LiveRank(j, ctx));
    NoteClassMove(from, j.rank.k[0]);
    ++running_version_;
    // A node is filed under the ranks of its holders whose ranks do not move (RefileNode).
    if (!j.moving) {
      for (int pos : j.part_pos) RefileNode(pos, &j);
    }
  } else {
    j.rank = LiveRank(j, ctx);
  }
  ScheduleTimer(j, ctx);
}

void Scheduler::StartJob(JobState& j, Placement placement) {
  QueueContext ctx = Context();
  j.quota_kept_by = nullptr;
  Dequeue(j);
  if (policies_.queue->ResetsServiceOnStart(j.v, ctx)) j.v.las_service_gpu_ms = 0;
  BecomeRunning(j, std::move(placement), clock_.Now(), ctx);
  ++stats_.starts;
  sink_.Start(j.v.id, j.placement);
}

// The books of a job that starts running (a decision, or a run learned at recovery).
void Scheduler::BecomeRunning(JobState& j, Placement placement, Time started, const QueueContext& ctx) {
  view_.Allocate(placement);
  j.placement = std::move(placement);
  j.v.phase = JobPhase::kRunning;
  j.v.started_at = started;
  j.v.last_checkpoint = started;
  UsageOf(j).used_milli += GpuMilliOf(j.spec);
  {
    TeamLoad& load = BooksOf(j).load;
    ++load.running_jobs;
    load.used_milli += GpuMilliOf(j.spec);
    load.model_used_milli[j.placement.gpu_model] += GpuMilliOf(j.spec);
  }
  j.rank = LiveRank(j, ctx);
  AddRunning(j);
  ++running_version_;
  ++search_epoch_;
  if (j.spec.duration_estimate) ++running_with_estimate_;
  j.moving = policies_.queue->RankMovesWithService(j.v);
  if (j.moving) ++running_moving_;
  j.model_index = view_.ModelIndex(j.placement.gpu_model);
  j.held_milli = j.placement.total_gpu_milli();
  j.part_pos.clear();
  for (const auto& part : j.placement.parts) {
    if (!part.gpus.empty()) j.part_pos.push_back(view_.IndexOf(part.node));
  }
  AddHolder(j);
  ScheduleTimer(j, ctx);
  j.cost_rate = CostRate(j.placement);
  if (j.cost_rate > 0) {
    money_[j.spec.team].rate += j.cost_rate;
    ++priced_running_;
  }
  if (j.stop_grace > Duration::Zero()) ++graced_running_;
  ChargeParts(j, +1, clock_.Now());
}

// ---- Holders: which jobs hold GPUs on each node ----------------------------------------------

void Scheduler::AddHolder(JobState& j) {
  size_t k = 0;  // j.part_pos[k] is the node of the k-th part with GPUs
  for (const auto& part : j.placement.parts) {
    if (part.gpus.empty()) continue;
    const int pos = j.part_pos[k++];
    if (holders_.size() <= static_cast<size_t>(pos)) {
      holders_.resize(pos + 1);
      holder_key_.resize(pos + 1);
      holder_filed_.resize(pos + 1, 0);
      holder_slot_.resize(pos + 1, 0);
      holder_counts_.resize(pos + 1);
    }
    // A running holder whose rank moves with service leaves a filed node's key as it was.
    const bool keyed = !j.moving || !holder_filed_[pos] || holders_[pos].empty();
    const bool whole = part.gpu_milli == model::kMilliGpuPerGpu;
    holders_[pos].push_back({&j, HolderKey(j), j.v.started_at, static_cast<int>(part.gpus.size()),
                             j.v.phase == JobPhase::kRunning, whole});
    CountHolder(pos, holders_[pos].back(), +1);
    if (keyed) RefileNode(pos);
  }
}

void Scheduler::RemoveHolder(JobState& j, bool keyed) {
  for (int pos : j.part_pos) {
    auto& list = holders_[pos];
    auto h = std::find_if(list.begin(), list.end(), [&](const Holder& h) { return h.job == &j; });
    CountHolder(pos, *h, -1);
    list.erase(h);
    if (keyed || list.empty()) RefileNode(pos);
  }
  j.part_pos.clear();
}

void Scheduler::CountHolder(int pos, const Holder& h, int sign) {
  HolderCounts& c = holder_counts_[pos];
  c.gpus += sign * h.gpus;
  c.slices += h.whole ? 0 : sign;
  const int64_t cls = h.key.k[0];
  if (cls >= 0 && cls < kCountedClasses) {
    c.class_gpus[cls] += sign * h.gpus;
  } else {
    c.uncounted += sign;
  }
}

RankKey Scheduler::HolderKey(const JobState& h) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  if (h.v.phase != JobPhase::kRunning) return RankKey{{kMin, kMin, kMin}};
  if (h.moving) return RankKey{{kMax, kMax, kMax}};
  return h.rank;
}

// Files node `pos` under the best (lowest) rank of its holders. A stopping holder gives up its
// GPUs to nobody, so it counts as the best rank; a holder whose rank moves with service is left
// out (its rank is not kept current here; the search checks every holder's live rank anyway).
void Scheduler::RefileNode(int pos, const JobState* changed) {
  // The changed holder's record first, whatever the node (its key and phase are read by the
  // searches' node checks: MayStopHolder).
  if (changed && static_cast<size_t>(pos) < holders_.size()) {
    for (Holder& h : holders_[pos]) {
      if (h.job != changed) continue;
      CountHolder(pos, h, -1);
      h.key = HolderKey(*changed);
      h.running = changed->v.phase == JobPhase::kRunning;
      CountHolder(pos, h, +1);
    }
  }
  const int model = view_.nodes()[pos].model;
  if (model < 0) return;
  if (holders_by_model_.size() <= static_cast<size_t>(model)) holders_by_model_.resize(model + 1);
  auto& filed = holders_by_model_[model];
  if (holders_[pos].empty()) {
    if (holder_filed_[pos]) UnfileNode(filed, pos);
    holder_filed_[pos] = 0;
    return;
  }
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  RankKey best{{kMax, kMax, kMax}};
  for (const Holder& h : holders_[pos]) best = std::min(best, h.key);
  if (holder_filed_[pos]) {
    if (holder_key_[pos].k[0] == best.k[0]) {  // filed in the class it belongs to
      holder_key_[pos] = best;
      return;
    }
    UnfileNode(filed, pos);
  }
  std::vector<int>& bucket = filed[best.k[0]];
  holder_slot_[pos] = static_cast<int>(bucket.size());
  bucket.push_back(pos);
  holder_key_[pos] = best;
  holder_filed_[pos] = 1;
}

void Scheduler::UnfileNode(HolderFile& filed, int pos) {
  auto cls = filed.find(holder_key_[pos].k[0]);
  std::vector<int>& bucket = cls->second;
  const int slot = holder_slot_[pos];
  bucket[slot] = bucket.back();
  holder_slot_[bucket[slot]] = slot;
  bucket.pop_back();
  // A class left without nodes stays while there are few classes (LAS has a handful, and nodes
  // move in and out of them at every start and stop: its list keeps its room), and goes
  // otherwise: with ranks whose class is the job's own (priority with aging), the classes ever
  // filed would grow with the jobs, and the walks read every one.
  constexpr size_t kKeptClasses = 64;
  if (bucket.empty() && filed.size() > kKeptClasses) filed.erase(cls);
}

bool Scheduler::MayStopHolder(const JobState& w, const Holder& holder, bool by_class, const QueueContext& ctx) const {
  const Duration min_run = policies_.options.min_run_before_preempt;
  if (by_class && running_moving_ == 0) {
    // From the holder's record: a running holder is keyed by its rank (no running rank moves
    // with service), and a running job has no preempted_for (it is set as the job is stopped).
    return holder.running && w.rank.k[0] < holder.key.k[0] && ctx.now - holder.started >= min_run;
  }
  const JobState& h = *holder.job;
  return h.v.phase == JobPhase::kRunning && w.rank < h.rank && !h.preempted_for && ctx.now - h.v.started_at >= min_run &&
         MayPreempt(w, h, ctx);
}

int64_t Scheduler::NodesWithRoomNow(const JobState& w, const std::vector<int>& models) const {
  int64_t ready = 0;
  for (int m : models) ready += view_.NodesWithFreeWhole(m, w.spec.gpus_per_node);
  return ready;
}

bool Scheduler::NodesMayBeFreed(const JobState& w, const std::vector<int>& models, const QueueContext& ctx) const {
  int64_t ready = NodesWithRoomNow(w, models);
  if (ready >= w.spec.nodes) return true;
  // With preemption by class and current ranks, a node filed in the waiting job's class or an
  // earlier one has a holder it may not stop: the walk ends at the first such node.
  const bool by_class = PreemptsByClass() && RanksCurrent(ctx.now);
  for (int m : models) {
    if (holders_by_model_.size() <= static_cast<size_t>(m)) continue;
    const HolderFile& filed = holders_by_model_[m];
    // Classes from the worst down to the waiting job's (a node filed in an earlier class has a
    // holder ranked before it); in its own class, only nodes filed under a later rank.
    for (auto cls = filed.rbegin(); cls != filed.rend() && cls->first >= w.rank.k[0]; ++cls) {
      if (by_class && cls->first == w.rank.k[0]) break;
      for (const int pos : cls->second) {
        if (!(w.rank < holder_key_[pos]) || !view_.nodes()[pos].schedulable()) continue;
        bool all = true;
        for (const Holder& h : holders_[pos]) {
          all = MayStopHolder(w, h, by_class, ctx);
          if (!all) break;
        }
        if (all && ++ready >= w.spec.nodes) return true;
      }
    }
  }
  return false;
}

bool Scheduler::NodesMayHaveRoom(const JobState& w, const std::vector<int>& models, const QueueContext& ctx) const {
  const int g = w.spec.gpus_per_node;
  int64_t ready = NodesWithRoomNow(w, models);
  if (ready >= w.spec.nodes) return true;
  // Every node with holders is looked at (a holder `w` may not stop leaves the rest of its node
  // to count), the likeliest first: those filed under the worst-ranked best holder.
  const bool by_class = PreemptsByClass() && RanksCurrent(ctx.now);
  // With preemption by class and no minimum run time, `w` may stop at most the holders of the
  // classes after its own (MayStopHolder: all of them, save one restored with a start ahead of
  // the clock; a stopping holder's key is of no class counted): a node whose holders are all of
  // counted classes has at most the room its counts say, which is what this check may count.
  const bool counted = by_class && running_moving_ == 0 && policies_.options.min_run_before_preempt == Duration::Zero();
  const int64_t own = w.rank.k[0];
  const int64_t first_class = own < 0 ? 0 : own >= kCountedClasses ? kCountedClasses : own + 1;  // the first `w` may stop
  for (int m : models) {
    // A node never has more room than GPUs.
    if (holders_by_model_.size() <= static_cast<size_t>(m) || view_.MaxGpusPerNode(m) < g) continue;
    for (auto cls = holders_by_model_[m].rbegin(); cls != holders_by_model_[m].rend(); ++cls) {
      for (const int pos : cls->second) {
        const ClusterView::Node& n = view_.nodes()[pos];
        if (!n.schedulable() || n.free_whole >= g || n.spec.gpus < g) continue;  // (the second kind counted above)
        const HolderCounts& counts = holder_counts_[pos];
        if (counted && counts.uncounted == 0) {
          int room = n.free_whole;
          for (int64_t k = first_class; k < kCountedClasses; ++k) room += counts.class_gpus[k];
          if (room >= g && ++ready >= w.spec.nodes) return true;
          continue;
        }
        int room = n.free_whole;
        for (const Holder& h : holders_[pos]) {
          if (room >= g) break;
          if (MayStopHolder(w, h, by_class, ctx)) room += h.gpus;
        }
        if (room >= g && ++ready >= w.spec.nodes) return true;
      }
    }
  }
  return false;
}

// Stops every running job with a part on `node` (a gang cannot run with a part missing).
void Scheduler::StopJobsOnNode(NodeId node, PreemptReason reason) {
  SyncRunning();
  std::vector<JobState*> hit;
  for (const auto& [rank, seq, j] : running_) {
    for (const auto& part : j->placement.parts) {
      if (part.node == node) {
        hit.push_back(j);
        break;
      }
    }
  }
  for (JobState* j : hit) StopRunning(*j, reason);
}

// ---- Money -----------------------------------------------------------------------------------

// What starting `j` on `p` adds to its team's cost per hour: its parts on nodes charged to its
// own team move from the charge to the job and add nothing.
int64_t Scheduler::AddedRate(const JobState& j, const Placement& p) const {
  int64_t rate = 0;
  for (const auto& part : p.parts) {
    const ClusterView::Node* n = view_.Find(part.node);
    if (!n) continue;
    int64_t r = model::PartCostRate(n->spec, part);
    if (!charges_.empty()) {
      if (auto it = charges_.find(n->spec.name); it != charges_.end() && it->second.team == j.spec.team) {
        r = std::max<int64_t>(0, r - it->second.rate);
      }
    }
    rate += r;
  }
  return rate;
}

int64_t Scheduler::CostRate(const Placement& p) const {
  int64_t rate = 0;
  for (const auto& part : p.parts) {
    if (const ClusterView::Node* n = view_.Find(part.node)) rate += model::PartCostRate(n->spec, part);
  }
  return rate;
}

namespace {
constexpr int64_t kMsPerHour = 3'600'000;
int64_t MicrosOf(__int128 micro_ms) { return static_cast<int64_t>(micro_ms / kMsPerHour); }
}  // namespace

// Books the cost of the run that ends now.
void Scheduler::Accrue(JobState& j, Time now) {
  if (j.cost_rate == 0) return;
  j.accrued_micros += MicrosOf(static_cast<__int128>(j.cost_rate) * (now - j.v.started_at).millis());
  TeamMoney& m = money_[j.spec.team];
  Time from = std::max(j.v.started_at, m.budget.since);
  if (now > from) m.spent_closed += static_cast<__int128>(j.cost_rate) * (now - from).millis();
  m.rate -= j.cost_rate;
  --priced_running_;
  j.cost_rate = 0;
}

void Scheduler::SetTeamBudget(const std::string& team, const TeamBudget& budget) {
  TeamMoney& m = money_[team];
  Time now = clock_.Now();
  // Spend is counted from the new period's start: recount what finished runs cannot tell apart,
  // as the part of the current runs since `since`; finished runs before a new period drop out.
  if (budget.since != m.budget.since || !m.has_budget) {
    // Rented-idle spend is in no job record (the caller carries the jobs' over): what was counted
    // stays when all of it lies inside the new period (a period set after the nodes idled).
    const __int128 kept_idle = m.idle_closed > 0 && budget.since <= m.idle_from ? m.idle_closed : 0;
    m.spent_closed = static_cast<__int128>(std::max<int64_t>(0, budget.carried_micros)) * kMsPerHour + kept_idle;
    m.idle_closed = kept_idle;
  }
  // A team the hard budget stopped stays stopped under the same budget (re-set with another soft
  // limit, or by a restarted controller); a new period, a new start or a larger limit lets it go.
  if (budget.since != m.budget.since || budget.period != m.budget.period || budget.hard_micros > m.budget.hard_micros ||
      budget.hard_micros == 0) {
    m.hard_stopped = false;
  }
  if (budget.hard_stopped && budget.hard_micros > 0) m.hard_stopped = true;  // restored
  hard_budgets_ += (budget.hard_micros > 0 ? 1 : 0) - (m.budget.hard_micros > 0 ? 1 : 0);
  periodic_budgets_ += (budget.period != CalendarPeriod::kNone ? 1 : 0) - (m.budget.period != CalendarPeriod::kNone ? 1 : 0);
  m.budget = budget;
  m.has_budget = budget.hard_micros > 0 || budget.soft_micros > 0 || budget.max_rate_micros > 0;
  (void)now;
  full_pass_ = true;
  ++search_epoch_;
}

void Scheduler::RollBudgetPeriods(Time now) {
  if (periodic_budgets_ == 0) return;
  for (auto& [team, m] : money_) {
    if (m.budget.period == CalendarPeriod::kNone) continue;
    const Time start = PeriodStart(now, m.budget.period);
    if (start <= m.budget.since) continue;
    // Runs still going count from the new start (SpentExact); finished ones drop out.
    m.budget.since = start;
    m.spent_closed = 0;
    m.idle_closed = 0;
    m.hard_stopped = false;
    full_pass_ = true;
    ++search_epoch_;
  }
}

void Scheduler::SetNodeSizeHint(const std::string& gpu_model, int gpus) {
  int& h = node_size_hints_[gpu_model];
  h = std::max(h, gpus);
  ++search_epoch_;
}

std::string Scheduler::BudgetHold(JobId id) const {
  const JobState* j = FindJob(id);
  if (!j || j->v.phase != JobPhase::kPending) return "";
  if (any_limits_) {
    if (std::string q = QuotaBlock(*j, nullptr); !q.empty()) return q;
  }
  // Judged afresh, with the cost per hour its placement had at the last pass (the stop lead needs
  // it): a reason kept from that pass may be stale (a new period, a larger budget).
  return BudgetBlock(*j, j->outcome == JobState::Outcome::kBudget ? j->budget_rate : 0, clock_.Now());
}

std::string Scheduler::HeldBy(JobId id) const {
  const JobState* j = FindJob(id);
  if (!j || j->v.phase != JobPhase::kPending) return "";
  switch (j->outcome) {
    case JobState::Outcome::kHeldByReservation: {
      const JobState* head = FindJob(j->outcome_job);
      if (!head || head->v.phase != JobPhase::kPending) return "";  // started since: stale
      return "held by a reservation for job " + std::to_string(j->outcome_job.value()) +
             (j->outcome_time == Time::Max() ? std::string() : " until " + FormatIso8601(j->outcome_time));
    }
    case JobState::Outcome::kAwaitingVictims:
      if (j->victims_stopping <= 0) return "";
      return "preempting " + std::to_string(j->victims_stopping) + " job(s) to make room";
    default:
      return "";
  }
}

bool Scheduler::NeverPlaceable(JobId id) const {
  const JobState* j = FindJob(id);
  if (!j || j->v.phase != JobPhase::kPending) return false;
  return policies_.placement->Place(j->spec, view_, PlaceOptions{}).kind == PlaceResult::Kind::kInfeasible;
}

std::vector<PendingJob> Scheduler::ScalingQueue(Duration restart_overhead) const {
  std::vector<PendingJob> out;
  ScalingQueueInto(restart_overhead, out);
  return out;
}

void Scheduler::ScalingQueueInto(Duration restart_overhead, std::vector<PendingJob>& out) const {
  static const Duration kDefaultInterval = PendingJob{}.checkpoint_interval;
  size_t n = 0;
  const bool holds = any_limits_ || !money_.empty();
  for (JobId id : QueueOrder()) {
    const JobState* j = FindJob(id);
    if (j == nullptr || (holds && !BudgetHold(id).empty())) continue;
    const JobSpec& spec = j->spec;
    if (n == out.size()) out.emplace_back();
    PendingJob& p = out[n++];
    p.id = id;
    p.team = spec.team;
    p.gpus_per_node = spec.fractional() ? 1 : spec.gpus_per_node;
    p.nodes = spec.nodes;
    p.cpu_milli = spec.cpu_milli;
    p.mem_mib = spec.mem_mib;
    p.gpu_models = spec.gpu_models;
    p.market = spec.market;
    p.queued_since = j->v.queued_since;
    p.spot_preemptions = j->spot_reclaims;
    p.checkpoint_interval = spec.checkpoint_interval > Duration::Zero() ? spec.checkpoint_interval : kDefaultInterval;
    p.restart_overhead = restart_overhead;
    p.constraints = spec.constraints;
    p.environment = spec.environment;
    p.max_added_rate_micros = -1;
    if (!money_.empty()) {
      if (auto m = money_.find(spec.team); m != money_.end() && m->second.budget.max_rate_micros > 0) {
        p.max_added_rate_micros = std::max<int64_t>(0, m->second.budget.max_rate_micros - m->second.rate);
      }
    }
  }
  out.resize(n);
}

TeamSpend Scheduler::SpendOf(const std::string& team) const {
  TeamSpend s;
  auto it = money_.find(team);
  if (it == money_.end()) return s;
  const TeamMoney& m = it->second;
  __int128 spent = SpentExact(team);
  s.spent_exact = spent;
  s.spent_micros = MicrosOf(spent);
  s.rate_micros = m.rate;
  __int128 idle = m.idle_closed;
  const Time now = clock_.Now();
  for (const auto& [name, c] : charges_) {
    if (c.team != team) continue;
    const Time from = std::max(c.from, m.budget.since);
    if (now > from) idle += static_cast<__int128>(c.rate) * (now - from).millis();
  }
  s.rented_idle_micros = MicrosOf(idle);
  s.rented_idle_rate_micros = m.idle_rate;
  s.over_soft = m.budget.soft_micros > 0 && s.spent_micros >= m.budget.soft_micros;
  s.over_hard = m.budget.hard_micros > 0 && s.spent_micros >= m.budget.hard_micros;
  s.hard_stop = HardStopReached(team);
  return s;
}

// Spend in micro-dollar-milliseconds per hour: exact, so deadlines land on the millisecond.
__int128 Scheduler::SpentExact(const std::string& team) const {
  auto it = money_.find(team);
  if (it == money_.end()) return 0;
  const TeamMoney& m = it->second;
  Time now = clock_.Now();
  __int128 spent = m.spent_closed;
  auto add = [&](const JobState* j) {
    if (j->cost_rate == 0 || j->spec.team != team) return;
    Time from = std::max(j->v.started_at, m.budget.since);
    if (now > from) spent += static_cast<__int128>(j->cost_rate) * (now - from).millis();
  };
  SyncRunning();  // (in rank order)
  for (const auto& [rank, seq, j] : running_) add(j);
  for (const JobState* j : stopping_) add(j);
  if (m.charges > 0) {
    for (const auto& [name, c] : charges_) {
      if (c.team != team || c.rate == 0) continue;
      const Time from = std::max(c.from, m.budget.since);
      if (now > from) spent += static_cast<__int128>(c.rate) * (now - from).millis();
    }
  }
  return spent;
}

// ---- Rented nodes charged whole to a team ------------------------------------------------------

void Scheduler::Recharge(Charge& c, int64_t jobs_delta, Time now) {
  TeamMoney& m = money_[c.team];
  const Time from = std::max(c.from, m.budget.since);
  if (now > from && c.rate > 0) {
    const __int128 add = static_cast<__int128>(c.rate) * (now - from).millis();
    if (m.idle_closed == 0 || from < m.idle_from) m.idle_from = from;
    m.spent_closed += add;
    m.idle_closed += add;
  }
  c.from = std::max(c.from, now);
  m.rate -= c.rate;
  m.idle_rate -= c.rate;
  c.jobs_rate += jobs_delta;
  c.rate = std::max<int64_t>(0, c.price - c.jobs_rate);
  m.rate += c.rate;
  m.idle_rate += c.rate;
}

void Scheduler::ChargeParts(JobState& j, int sign, Time now) {
  if (sign < 0) {
    for (const auto& [name, rate] : j.charged_parts) {
      if (auto it = charges_.find(name); it != charges_.end()) Recharge(it->second, -rate, now);
    }
    j.charged_parts.clear();
    return;
  }
  if (charges_.empty()) return;
  std::vector<std::pair<std::string, int64_t>> moves;  // nodes of stopped teams this job now uses
  for (const auto& part : j.placement.parts) {
    const ClusterView::Node* n = view_.Find(part.node);
    if (!n) continue;
    auto it = charges_.find(n->spec.name);
    if (it == charges_.end()) continue;
    const int64_t rate = model::PartCostRate(n->spec, part);
    j.charged_parts.emplace_back(n->spec.name, rate);
    Recharge(it->second, rate, now);
    if (it->second.team != j.spec.team && money_[it->second.team].hard_stopped) {
      moves.emplace_back(n->spec.name, it->second.price);
    }
  }
  // A stopped team does not pay for a node another team's job has started on (see
  // MoveChargesOfStoppedTeams).
  for (const auto& [name, price] : moves) ChargeNode(name, j.spec.team, price, now);
}

void Scheduler::ChargeNode(const std::string& node_name, const std::string& team, int64_t price_micros_per_hour,
                           Time since) {
  const Time now = clock_.Now();
  RollBudgetPeriods(now);
  if (charges_.count(node_name)) EndNodeCharge(node_name);
  Charge c;
  c.team = team;
  c.price = std::max<int64_t>(0, price_micros_per_hour);
  c.from = since;
  // Jobs already on the node (a controller that restarts finds them running) pay their share.
  auto scan = [&](JobState* j) {
    bool listed = false;
    for (const auto& [name, rate] : j->charged_parts) listed = listed || name == node_name;
    for (const auto& part : j->placement.parts) {
      const ClusterView::Node* n = view_.Find(part.node);
      if (!n || n->spec.name != node_name) continue;
      const int64_t rate = model::PartCostRate(n->spec, part);
      c.jobs_rate += rate;
      if (!listed) j->charged_parts.emplace_back(node_name, rate);
    }
  };
  SyncRunning();  // (in rank order)
  for (const auto& [rank, seq, j] : running_) scan(j);
  for (JobState* j : stopping_) scan(j);
  c.rate = std::max<int64_t>(0, c.price - c.jobs_rate);
  TeamMoney& m = money_[team];
  m.rate += c.rate;
  m.idle_rate += c.rate;
  ++m.charges;
  charges_.emplace(node_name, std::move(c));
  (void)now;
  full_pass_ = true;
  ++search_epoch_;
}

void Scheduler::EndNodeCharge(const std::string& node_name) {
  auto it = charges_.find(node_name);
  if (it == charges_.end()) return;
  RollBudgetPeriods(clock_.Now());
  Charge& c = it->second;
  Recharge(c, 0, clock_.Now());
  // A node released because its team reached its stop point keeps the team stopped: without the
  // node its stop lead shrinks, and the team must not look under budget and rent again.
  if (HardStopReached(c.team)) money_[c.team].hard_stopped = true;
  TeamMoney& m = money_[c.team];
  m.rate -= c.rate;
  m.idle_rate -= c.rate;
  --m.charges;
  charges_.erase(it);
}

// A node billed to a team its hard budget stopped, that jobs of other teams still use, is billed to
// the team of one of those jobs from now on: the stopped team's nodes go when idle, and this one
// cannot while others work there.
void Scheduler::MoveChargesOfStoppedTeams() {
  std::vector<std::pair<std::string, std::string>> moves;  // node, new team
  for (const auto& [name, c] : charges_) {
    if (c.jobs_rate <= 0) continue;
    auto m = money_.find(c.team);
    if (m == money_.end() || !m->second.hard_stopped) continue;
    SyncRunning();  // (in rank order)
    for (const auto& [rank, seq, j] : running_) {
      // Not to a team stopped too (the charge would go back and forth between them).
      if (j->spec.team == c.team || TeamHardStopped(j->spec.team)) continue;
      bool here = false;
      for (const auto& [node, rate] : j->charged_parts) here = here || node == name;
      if (here) {
        moves.emplace_back(name, j->spec.team);
        break;
      }
    }
  }
  const Time now = clock_.Now();
  for (const auto& [name, team] : moves) {
    const int64_t price = charges_.at(name).price;
    ChargeNode(name, team, price, now);
  }
}

bool Scheduler::TeamHardStopped(const std::string& team) const {
  auto m = money_.find(team);
  return m != money_.end() && m->second.hard_stopped;
}

bool Scheduler::ChargeMovableFrom(const std::string& team) const {
  for (const auto& [name, c] : charges_) {
    if (c.team != team || c.jobs_rate <= 0) continue;
    SyncRunning();  // (in rank order)
    for (const auto& [rank, seq, j] : running_) {
      if (j->spec.team == team || TeamHardStopped(j->spec.team)) continue;
      for (const auto& [node, rate] : j->charged_parts) {
        if (node == name) return true;
      }
    }
  }
  return false;
}

std::map<std::string, std::string> Scheduler::ChargedTeams() const {
  std::map<std::string, std::string> out;
  for (const auto& [name, c] : charges_) out[name] = c.team;
  return out;
}

std::string Scheduler::ChargedTeam(const std::string& node_name) const {
  auto it = charges_.find(node_name);
  return it == charges_.end() ? std::string() : it->second.team;
}

// What the team spends between a stop decision and the end of its cost: its cost per hour over
// the longest stop grace of its running jobs (and of a job about to start), plus the release
// lead when rented nodes are charged to it (they bill until released).
__int128 Scheduler::StopLeadSpend(const std::string& team, int64_t extra_rate, Duration extra_grace) const {
  auto it = money_.find(team);
  if (it == money_.end()) return 0;
  const TeamMoney& m = it->second;
  Duration lead = extra_grace;
  if (graced_running_ > 0) {
    SyncRunning();  // (in rank order)
    for (const auto& [rank, seq, j] : running_) {
      if (j->spec.team == team) lead = std::max(lead, j->stop_grace);
    }
  }
  if (m.charges > 0) lead = lead + policies_.options.budget_release_lead;
  if (lead <= Duration::Zero()) return 0;
  return static_cast<__int128>(std::max<int64_t>(0, m.rate + extra_rate)) * lead.millis();
}

std::optional<Time> Scheduler::HardStoppedIn(const std::string& team) const {
  auto it = money_.find(team);
  if (it == money_.end() || !it->second.hard_stopped) return std::nullopt;
  return it->second.budget.since;
}

bool Scheduler::HardStopReached(const std::string& team) const {
  auto it = money_.find(team);
  if (it == money_.end() || it->second.budget.hard_micros <= 0) return false;
  if (it->second.hard_stopped) return true;
  return SpentExact(team) + StopLeadSpend(team, 0, Duration::Zero()) >=
         static_cast<__int128>(it->second.budget.hard_micros) * kMsPerHour;
}

int64_t Scheduler::CostOf(JobId id) const {
  const JobState* j = FindJob(id);
  if (!j) return 0;
  int64_t c = j->accrued_micros;
  if (j->cost_rate > 0) c += MicrosOf(static_cast<__int128>(j->cost_rate) * (clock_.Now() - j->v.started_at).millis());
  return c;
}

std::string Scheduler::BudgetBlock(const JobState& j, int64_t rate, Time now) const {
  auto it = money_.find(j.spec.team);
  if (it == money_.end() || !it->second.has_budget) return "";
  const TeamMoney& m = it->second;
  auto usd = [](int64_t micros) {
    return "$" + std::to_string(micros / 1'000'000) + "." + std::to_string(micros % 1'000'000 / 100'000) +
           std::to_string(micros % 100'000 / 10'000);
  };
  if (m.budget.hard_micros > 0) {
    const __int128 spent = SpentExact(j.spec.team);
    const int64_t spent_micros = MicrosOf(spent);
    if (spent_micros >= m.budget.hard_micros) {
      return "team " + j.spec.team + " has reached its hard budget: spent " + usd(spent_micros) + " of " +
             usd(m.budget.hard_micros) + " since " + FormatIso8601(m.budget.since);
    }
    if (m.hard_stopped) {
      return "team " + j.spec.team + " was stopped by its hard budget (spent " + usd(spent_micros) + " of " +
             usd(m.budget.hard_micros) + ", the rest kept for stopping and releasing nodes); a new budget or "
             "period lets it run";
    }
    const __int128 lead = StopLeadSpend(j.spec.team, rate, j.stop_grace);
    if (lead > 0 && spent + lead >= static_cast<__int128>(m.budget.hard_micros) * kMsPerHour) {
      return "team " + j.spec.team + " is within its stop lead of its hard budget: spent " + usd(spent_micros) +
             " of " + usd(m.budget.hard_micros) + ", and stopping (grace and node release) could add " +
             usd(MicrosOf(lead));
    }
  }
  if (m.budget.max_rate_micros > 0 && rate > 0 && m.rate + rate > m.budget.max_rate_micros) {
    return "team " + j.spec.team + " may spend at most " + usd(m.budget.max_rate_micros) + "/h; its jobs cost " +
           usd(m.rate) + "/h and this one would add " + usd(rate) + "/h";
  }
  (void)now;
  return "";
}

// The earliest instant a team's spend reaches its hard limit, or a job's cost its max_cost.
std::optional<Time> Scheduler::NextBudgetDeadline(Time now) const {
  if (priced_running_ == 0 && charges_.empty()) return std::nullopt;
  std::optional<Time> t;
  auto consider = [&](Time at) {
    if (!t || at < *t) t = at;
  };
  // Only teams with running priced jobs have a deadline: jobs already stopping cannot be
  // stopped again (their cost still counts until their GPUs are free). Teams without a hard
  // budget have none (a replay that charges rented nodes to teams but sets no budgets).
  const bool any_hard = hard_budgets_ > 0;
  std::map<std::string, int64_t> running_rate;
  if (any_hard) {
    SyncRunning();  // (in rank order)
    for (const auto& [rank, seq, j] : running_) {
      if (j->cost_rate > 0) running_rate[j->spec.team] += j->cost_rate;
    }
  }
  for (const auto& [team, m] : money_) {
    if (!any_hard) break;
    const bool runs = running_rate.count(team) > 0;
    if (m.budget.hard_micros <= 0 || m.rate <= 0 || (!runs && m.charges == 0)) continue;
    if (!m.budget.stop_running && m.charges == 0) continue;
    if (m.hard_stopped) {
      // Its running jobs are stopped, and a node billed to it that another team's job uses is
      // billed to that team (MoveChargesOfStoppedTeams): a charge that came back to it (a
      // controller's restart charges a pool's node to the team that rented it) moves at once.
      if ((runs && m.budget.stop_running) || ChargeMovableFrom(team)) consider(now);
      continue;
    }
    // Stop early by the stop lead, so that spend ends at the budget (docs/cost.md).
    __int128 left = static_cast<__int128>(m.budget.hard_micros) * kMsPerHour - SpentExact(team) -
                    StopLeadSpend(team, 0, Duration::Zero());
    if (left <= 0) {
      // Running jobs are stopped now; a team with only charged nodes has its nodes released by
      // the autoscaler (TeamSpend::hard_stop), which needs no further wake-up.
      if ((runs && m.budget.stop_running) || ChargeMovableFrom(team)) consider(now);
      continue;
    }
    // ceil(left / rate) ms from now.
    __int128 ms = (left + m.rate - 1) / m.rate;
    consider(now + Duration::Millis(static_cast<int64_t>(std::min<__int128>(ms, Duration::Max().millis()))));
  }
  // Jobs with a max cost of their own (few; none in most replays, where this ran at every event).
  if (running_with_max_cost_ > 0) {
    SyncRunning();  // (in rank order)
    for (const auto& [rank, seq, j] : running_) {
      if (j->spec.max_cost_micros <= 0 || j->cost_rate <= 0) continue;
      int64_t left = j->spec.max_cost_micros - CostOf(j->v.id);
      __int128 ms = left <= 0 ? 0 : (static_cast<__int128>(left) * kMsPerHour + j->cost_rate - 1) / j->cost_rate;
      consider(now + Duration::Millis(static_cast<int64_t>(std::min<__int128>(ms, Duration::Max().millis()))));
    }
  }
  return t;
}

void Scheduler::EnforceBudgets(Time now) {
  if (priced_running_ == 0 && charges_.empty()) return;
  std::vector<std::pair<JobState*, PreemptReason>> stop;
  std::set<std::string> over;
  for (auto& [team, m] : money_) {
    if (m.budget.hard_micros <= 0 || !HardStopReached(team)) continue;
    m.hard_stopped = true;  // until a new budget or period
    if (m.budget.stop_running) over.insert(team);
  }
  // (Before the return below: NextBudgetDeadline asks for this instant whenever a charge can move.)
  MoveChargesOfStoppedTeams();
  if (priced_running_ == 0) return;
  // Only a job with a cost cap or of a team over its budget is stopped here.
  if (over.empty() && running_with_max_cost_ == 0) return;
  SyncRunning();  // (in rank order)
  for (const auto& [rank, seq, j] : running_) {
    if (j->cost_rate <= 0) continue;
    if (j->spec.max_cost_micros > 0 && CostOf(j->v.id) >= j->spec.max_cost_micros) {
      stop.emplace_back(j, PreemptReason::kMaxCost);
    } else if (over.count(j->spec.team)) {
      stop.emplace_back(j, PreemptReason::kBudget);
    }
  }
  for (auto& [j, reason] : stop) StopRunning(*j, reason);
  (void)now;
}

void Scheduler::StopRunning(JobState& j, PreemptReason reason, bool tell) {
  CHECK(j.v.phase == JobPhase::kRunning);
  RemoveRunning(j);
  ++running_version_;
  ++search_epoch_;
  if (j.spec.duration_estimate) --running_with_estimate_;
  if (j.moving) --running_moving_;
  j.moving = false;
  stopping_.insert(&j);
  j.v.phase = JobPhase::kStopping;
  if (track_stopping_) CountStopping(j, +1);
  for (int pos : j.part_pos) RefileNode(pos, &j);
  j.requeue_after_stop = reason != PreemptReason::kCancelled && reason != PreemptReason::kMaxCost;
  if (reason == PreemptReason::kReclaimed) ++j.spot_reclaims;
  const bool by_policy = reason == PreemptReason::kPriority || reason == PreemptReason::kQuotaReclaim ||
                         reason == PreemptReason::kService;
  j.count_as_preemption = by_policy;
  DropTimer(j);
  if (!tell) return;  // asked before a restart: the world is stopping it already
  if (by_policy) ++stats_.preemptions;
  sink_.Preempt(j.v.id, reason);
}

// The job's processes are gone: free its GPUs, book its service, then requeue or forget it.
void Scheduler::ReleaseAndRequeue(JobState& j, bool requeue) {
  CHECK(j.v.phase != JobPhase::kPending);
  Time now = clock_.Now();
  ++search_epoch_;  // GPUs freed, and claims may end
  // Whether the job counts in its nodes' keys (RefileNode): a stopping one, or one whose rank
  // does not move with service.
  const bool keyed = j.v.phase != JobPhase::kRunning || !j.moving;
  if (j.v.phase == JobPhase::kRunning) {
    RemoveRunning(j);
    ++running_version_;
    if (j.spec.duration_estimate) --running_with_estimate_;
    if (j.moving) --running_moving_;
    j.moving = false;
  } else {
    stopping_.erase(&j);
    if (track_stopping_) CountStopping(j, -1);
  }
  view_.Release(j.placement);
  RemoveHolder(j, keyed);
  UsageOf(j).used_milli -= GpuMilliOf(j.spec);
  {
    TeamLoad& load = BooksOf(j).load;
    --load.running_jobs;
    load.used_milli -= GpuMilliOf(j.spec);
    if ((load.model_used_milli[j.placement.gpu_model] -= GpuMilliOf(j.spec)) == 0) {
      load.model_used_milli.erase(j.placement.gpu_model);
    }
  }
  Accrue(j, now);
  ChargeParts(j, -1, now);
  if (j.stop_grace > Duration::Zero()) --graced_running_;
  Duration run = now - j.v.started_at;
  j.v.attained_gpu_ms = j.v.AttainedAt(now);
  j.v.las_service_gpu_ms = j.v.LasServiceAt(now);
  j.v.run_time += run;
  j.v.last_run = run;
  j.placement = Placement();
  if (j.preempted_for) {
    if (JobState* w = FindJob(*j.preempted_for)) w->victims_stopping = std::max(0, w->victims_stopping - 1);
    j.preempted_for.reset();
  }
  if (!requeue) {
    Erase(j);
    return;
  }
  if (j.count_as_preemption) ++j.v.preemptions;
  j.v.queued_since = now;
  Enqueue(j);
}

void Scheduler::Erase(JobState& j) {
  DropTimer(j);
  if (j.v.phase == JobPhase::kPending) Dequeue(j);
  jobs_.erase(j.v.id.value());
}

// ---- Memory across restarts ------------------------------------------------------------------

// Takes back what an earlier scheduler learned (JobSubmitted/JobRestored::memory), before the job
// is queued or runs. The rank class it had then counts as this job's last rank, so that a class
// that changed while no scheduler looked (a demotion or promotion due during a restart) moves
// rank_class_since to now, as the next look of a live scheduler would have.
void Scheduler::Remember(JobState& j, const model::JobMemory& m) {
  j.v.attained_gpu_ms = m.attained_gpu_ms;
  j.v.las_service_gpu_ms = m.las_service_gpu_ms;
  j.v.run_time = m.run_time;
  j.v.last_run = m.last_run;
  j.v.preemptions = static_cast<int>(m.preemptions);
  j.v.queued_since = m.queued_since;
  j.v.rank_class_since = m.rank_class_since;
  j.spot_reclaims = static_cast<int>(m.spot_reclaims);
  j.rank = RankKey{{m.rank_class, 0, 0}};
  j.ranked = true;
}

std::optional<model::JobMemory> Scheduler::MemoryOf(JobId id) const {
  const JobState* j = FindJob(id);
  if (!j) return std::nullopt;
  model::JobMemory m;
  m.attained_gpu_ms = j->v.attained_gpu_ms;
  m.las_service_gpu_ms = j->v.las_service_gpu_ms;
  m.run_time = j->v.run_time;
  m.last_run = j->v.last_run;
  m.preemptions = j->v.preemptions;
  m.spot_reclaims = j->spot_reclaims;
  m.queued_since = j->v.queued_since;
  m.rank_class_since = j->v.rank_class_since;
  m.rank_class = j->ranked ? j->rank.k[0] : 0;
  if (j->v.phase != JobPhase::kPending) {
    m.run_started_at = j->v.started_at;
    m.last_checkpoint = j->v.last_checkpoint;
  }
  m.accrued_micros = j->accrued_micros;
  return m;
}

std::vector<JobId> Scheduler::RerankedAt(Time now) const {
  std::vector<JobId> out;
  for (const TimerHeap::Entry& e : timers_.DueBy(now)) out.push_back(timer_job_[e.slot]->v.id);
  return out;
}

// ---- Events ----------------------------------------------------------------------------------

Status Scheduler::Handle(const Event& event) {
  RollBudgetPeriods(clock_.Now());
  Status s = Apply(event);
  Pass();
  return s;
}

Status Scheduler::HandleAll(const std::vector<Event>& events) {
  RollBudgetPeriods(clock_.Now());
  Status first;
  for (const Event& e : events) {
    Status s = Apply(e);
    if (first.ok() && !s.ok()) first = s;
  }
  Pass();
  return first;
}

Status Scheduler::Apply(const Event& e) {
  Time now = clock_.Now();
  // Anything but an arrival, a checkpoint or telemetry may let a waiting job start: the next
  // pass starts from the top of the queue.
  if (!std::holds_alternative<JobSubmitted>(e) && !std::holds_alternative<JobCheckpointed>(e) &&
      !std::holds_alternative<GpuTelemetry>(e)) {
    full_pass_ = true;
  }
  // A timer moves ranks only (NoteClassMove keeps what failed searches need of that); an arrival
  // adds a waiting job, which gives no search room. Anything else may.
  if (!std::holds_alternative<JobSubmitted>(e) && !std::holds_alternative<Timer>(e)) ++search_epoch_;
  if (const auto* ev = std::get_if<JobSubmitted>(&e)) {
    if (FindJob(ev->job)) {
      return Status::AlreadyExists("job " + std::to_string(ev->job.value()) + " was already submitted");
    }
    GF_RETURN_IF_ERROR(ev->spec.Validate());
    auto j = std::make_unique<JobState>();
    j->spec = ev->spec;
    if (policies_.options.split_large_jobs && j->spec.nodes == 1 && !j->spec.fractional()) {
      int largest = 0;
      for (size_t m = 0; m < view_.models().size(); ++m) {
        bool allowed = j->spec.gpu_models.empty() ||
                       std::find(j->spec.gpu_models.begin(), j->spec.gpu_models.end(), view_.models()[m]) !=
                           j->spec.gpu_models.end();
        if (allowed) largest = std::max(largest, view_.MaxGpusPerNode(static_cast<int>(m)));
      }
      for (const auto& [name, gpus] : node_size_hints_) {
        if (j->spec.gpu_models.empty() ||
            std::find(j->spec.gpu_models.begin(), j->spec.gpu_models.end(), name) != j->spec.gpu_models.end()) {
          largest = std::max(largest, gpus);
        }
      }
      model::SplitToFit(j->spec, largest);
      if (j->spec.nodes > 1) j->split_from_gpus = ev->spec.gpus_per_node;
    }
    j->v.id = ev->job;
    j->v.spec = &j->spec;
    j->v.seq = next_seq_++;
    j->v.queued_since = now;
    j->v.rank_class_since = now;
    j->accrued_micros = ev->accrued_micros;
    j->stop_grace = std::max(Duration::Zero(), ev->stop_grace);
    j->shape = ShapeId(j->spec);
    if (ev->memory) Remember(*j, *ev->memory);
    teams_.try_emplace(j->spec.team);
    JobState& ref = *j;
    jobs_.emplace(ev->job.value(), std::move(j));
    Enqueue(ref);
    arrivals_.push_back(ev->job);
    return Status::Ok();
  }
  if (const auto* ev = std::get_if<JobRestored>(&e)) {
    if (FindJob(ev->job)) {
      return Status::AlreadyExists("job " + std::to_string(ev->job.value()) + " is already known");
    }
    GF_RETURN_IF_ERROR(ev->spec.Validate());
    if (!view_.CanAllocate(ev->placement)) {
      return Status::FailedPrecondition("restored job " + std::to_string(ev->job.value()) +
                                        " does not fit its nodes (unknown node or GPUs taken)");
    }
    auto j = std::make_unique<JobState>();
    j->spec = ev->spec;
    j->v.id = ev->job;
    j->v.spec = &j->spec;
    j->v.seq = next_seq_++;
    j->v.queued_since = ev->started_at;
    j->v.rank_class_since = ev->started_at;
    j->shape = ShapeId(j->spec);
    j->accrued_micros = ev->accrued_micros;
    j->stop_grace = std::max(Duration::Zero(), ev->stop_grace);
    if (ev->memory) Remember(*j, *ev->memory);
    JobState& ref = *j;
    jobs_.emplace(ev->job.value(), std::move(j));
    teams_.try_emplace(ref.spec.team);
    BecomeRunning(ref, ev->placement, ev->started_at, Context());
    if (ev->memory && ev->memory->last_checkpoint > ref.v.last_checkpoint) {
      // Filed again under the checkpoint it had, as JobCheckpointed does.
      UnindexVictim(ref);
      ref.v.last_checkpoint = ev->memory->last_checkpoint;
      if (ref.v.phase == JobPhase::kRunning) IndexVictim(ref);
    }
    if (ev->stopping) StopRunning(ref, *ev->stopping, /*tell=*/false);
    return Status::Ok();
  }
  if (const auto* ev = std::get_if<JobFinished>(&e)) {
    JobState* j = FindJob(ev->job);
    if (!j) return Status::NotFound("finished job " + std::to_string(ev->job.value()) + " is unknown");
    if (j->v.phase == JobPhase::kPending) {
      Erase(*j);
    } else {
      ReleaseAndRequeue(*j, false);
    }
    return Status::Ok();
  }
  if (const auto* ev = std::get_if<JobFailed>(&e)) {
    JobState* j = FindJob(ev->job);
    if (!j) return Status::NotFound("failed job " + std::to_string(ev->job.value()) + " is unknown");
    if (j->v.phase == JobPhase::kPending) {
      if (!ev->requeue) Erase(*j);
      return Status::Ok();
    }
    j->count_as_preemption = false;
    ReleaseAndRequeue(*j, ev->requeue && (j->v.phase == JobPhase::kRunning || j->requeue_after_stop));
    return Status::Ok();
  }
  if (const auto* ev = std::get_if<JobCancelled>(&e)) {
    JobState* j = FindJob(ev->job);
    if (!j) return Status::NotFound("cancelled job " + std::to_string(ev->job.value()) + " is unknown");
    switch (j->v.phase) {
      case JobPhase::kPending: Erase(*j); break;
      case JobPhase::kRunning: StopRunning(*j, PreemptReason::kCancelled); break;
      case JobPhase::kStopping: j->requeue_after_stop = false; break;
    }
    return Status::Ok();
  }
  if (const auto* ev = std::get_if<JobStopped>(&e)) {
    JobState* j = FindJob(ev->job);
    if (!j) return Status::NotFound("stopped job " + std::to_string(ev->job.value()) + " is unknown");
    if (j->v.phase == JobPhase::kPending) return Status::Ok();
    if (j->v.phase == JobPhase::kRunning) j->count_as_preemption = false;  // died on its own
    ReleaseAndRequeue(*j, j->v.phase == JobPhase::kRunning || j->requeue_after_stop);
    return Status::Ok();
  }
  if (const auto* ev = std::get_if<JobCheckpointed>(&e)) {
    JobState* j = FindJob(ev->job);
    if (!j) return Status::NotFound("checkpointed job " + std::to_string(ev->job.value()) + " is unknown");
    if (j->v.phase != JobPhase::kPending) {
      // Filed under the checkpoint it had (running jobs only; a stopping one is no victim).
      UnindexVictim(*j);
      j->v.last_checkpoint = now;
      if (j->v.phase == JobPhase::kRunning) IndexVictim(*j);
    }
    return Status::Ok();
  }
  if (const auto* ev = std::get_if<NodeUp>(&e)) {
    GF_RETURN_IF_ERROR(view_.UpsertNode(ev->node, ev->spec));
    const ClusterView::Node* n = view_.Find(ev->node);
    if (n->health == NodeHealth::kDown) GF_RETURN_IF_ERROR(view_.SetHealth(ev->node, NodeHealth::kUp));
    return Status::Ok();
  }
  if (const auto* ev = std::get_if<NodeDown>(&e)) {
    GF_RETURN_IF_ERROR(view_.SetHealth(ev->node, NodeHealth::kDown));
    // Every job with a part on the node stops everywhere (a gang cannot run with a part missing).
    StopJobsOnNode(ev->node, PreemptReason::kNodeFailure);
    return Status::Ok();
  }
  if (const auto* ev = std::get_if<NodeReclaimed>(&e)) {
    const ClusterView::Node* n = view_.Find(ev->node);
    if (!n) return Status::NotFound("unknown node " + std::to_string(ev->node.value()));
    if (n->health == NodeHealth::kDown) return Status::Ok();
    GF_RETURN_IF_ERROR(view_.SetHealth(ev->node, NodeHealth::kDraining));
    StopJobsOnNode(ev->node, PreemptReason::kReclaimed);
    return Status::Ok();
  }
  if (const auto* ev = std::get_if<NodeDrained>(&e)) {
    const ClusterView::Node* n = view_.Find(ev->node);
    if (!n) return Status::NotFound("unknown node " + std::to_string(ev->node.value()));
    if (n->health == NodeHealth::kDown) return Status::Ok();
    return view_.SetHealth(ev->node, ev->drained ? NodeHealth::kDraining : NodeHealth::kUp);
  }
  if (const auto* ev = std::get_if<GpuTelemetry>(&e)) {
    // A GPU that cooled below the thermal resume temperature takes work again.
    const int64_t free_before = view_.FreeMilliAll();
    Status st = view_.SetTemperatures(ev->node, ev->temperature_c);
    if (view_.FreeMilliAll() > free_before) full_pass_ = true;
    return st;
  }
  if (std::holds_alternative<Timer>(e)) {
    QueueContext ctx = Context();
    // Take the due timers first: a re-rank may ask for a new timer, and one that a policy sets
    // at or before now must wait for the next Timer event rather than loop here.
    std::vector<JobState*>& due = due_buffer_;
    due.clear();
    while (!timers_.empty() && timers_.top().at <= now) {
      JobState* j = timer_job_[timers_.top().slot];
      ReleaseTimer(*j);
      due.push_back(j);
    }
    // (A re-rank changes no other job: every job taken above is still there.)
    for (JobState* j : due) Rerank(*j, ctx);
    EnforceBudgets(now);
    return Status::Ok();
  }
  return Status::Internal("unhandled event");
}

std::optional<Time> Scheduler::NextWakeup() const {
  std::optional<Time> t;
  if (!timers_.empty()) {
    t = timers_.top().at;
    // The job whose timer is due first is re-ranked when it fires (often the next event); asked
    // for once per timer (most calls find the same one first).
    const TimerHeap::Entry& first = timers_.top();
    if (first.slot != prefetched_timer_slot_ || first.at != prefetched_timer_at_) {
      prefetched_timer_slot_ = first.slot;
      prefetched_timer_at_ = first.at;
      PrefetchForTimer(timer_job_[first.slot]);
    }
  }
  if (auto b = NextBudgetDeadline(clock_.Now()); b && (!t || *b < *t)) t = *b;
  // A budget that rolls over may let held jobs start at the next period's start.
  for (const auto& [team, m] : money_) {
    if (periodic_budgets_ == 0) break;
    if (!m.has_budget || m.budget.period == CalendarPeriod::kNone) continue;
    // From `since`, not from now: once the boundary has passed, the wake-up is due at once.
    Time next = NextPeriodStart(m.budget.since, m.budget.period);
    if (!t || next < *t) t = next;
  }
  return t;
}

// ---- The pass --------------------------------------------------------------------------------

std::vector<Scheduler::JobState*> Scheduler::OrderedPending(const QueueContext& ctx) const {
  std::vector<JobState*> out;
  out.reserve(pending_count_);
  if (StaticRanks()) {
    std::vector<std::tuple<RankKey, int64_t, JobState*>> keyed;
    keyed.reserve(pending_count_);
    for (const auto& queue : by_shape_) keyed.insert(keyed.end(), queue.begin(), queue.end());
    std::sort(keyed.begin(), keyed.end());
    for (const auto& [rank, seq, j] : keyed) out.push_back(j);
    return out;
  }
  std::vector<std::tuple<RankKey, int64_t, JobState*>> keyed;
  keyed.reserve(pending_count_);
  for (const auto& [id, j] : jobs_) {
    if (j->v.phase == JobPhase::kPending) keyed.emplace_back(LiveRank(*j, ctx), j->v.seq, j.get());
  }
  std::sort(keyed.begin(), keyed.end());
  for (auto& [rank, seq, j] : keyed) {
    j->rank = rank;
    out.push_back(j);
  }
  return out;
}

// Re-ranks at `ctx.now` the running jobs whose ranks move with service. Ranks that only improve
// (srtf's remaining time shrinks) cannot give a job that found no victims new ones, so only a
// rank that got worse counts as a change of the running set for the "try again" rule.
void Scheduler::RefreshRunningRanks(const QueueContext& ctx) {
  SyncRunning();
  std::vector<JobState*> moving;
  moving.reserve(static_cast<size_t>(running_moving_));
  for (const auto& [rank, seq, j] : running_) {
    if (j->moving) moving.push_back(j);
  }
  bool worse = false;
  for (JobState* j : moving) {
    RankKey r = LiveRank(*j, ctx);
    if (j->rank < r) worse = true;
    ChangeRunningRank(*j, r);
  }
  if (worse) {
    ++running_version_;
    ++search_epoch_;
  }
  running_ranks_at_ = ctx.now;
}

std::vector<JobId> Scheduler::QueueOrder() const {
  std::vector<JobId> ids;
  for (JobState* j : OrderedPending(Context())) ids.push_back(j->v.id);
  return ids;
}

namespace {

// Allowed model indices of a job in a view (all models when the job names none), into `out`.
void AllowedModelsInto(const JobSpec& s, const ClusterView& view, std::vector<int>& out) {
  out.clear();
  if (s.gpu_models.empty()) {
    for (size_t m = 0; m < view.models().size(); ++m) out.push_back(static_cast<int>(m));
    return;
  }
  for (const auto& name : s.gpu_models) {
    int m = view.ModelIndex(name);
    if (m >= 0) out.push_back(m);
  }
}

// std::priority_queue with std::greater, on a buffer the scheduler keeps from pass to pass.
template <typename T>
class MinHeap {
 public:
  explicit MinHeap(std::vector<T>& buffer) : c_(buffer) { c_.clear(); }
  bool empty() const { return c_.empty(); }
  const T& top() const { return c_.front(); }
  template <typename... Args>
  void emplace(Args&&... args) {
    c_.emplace_back(std::forward<Args>(args)...);
    std::push_heap(c_.begin(), c_.end(), std::greater<T>());
  }
  void pop() {
    std::pop_heap(c_.begin(), c_.end(), std::greater<T>());
    c_.pop_back();
  }
  // Adds without keeping the order; Heapify restores it (one O(n) step instead of n pushes).
  template <typename... Args>
  void emplace_unordered(Args&&... args) {
    c_.emplace_back(std::forward<Args>(args)...);
  }
  void Heapify() { std::make_heap(c_.begin(), c_.end(), std::greater<T>()); }
  // pop() then emplace(value), in one pass down the heap.
  void replace_top(T value) {
    const size_t n = c_.size();
    size_t i = 0;
    for (;;) {
      size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && c_[child + 1] < c_[child]) ++child;
      if (!(c_[child] < value)) break;
      c_[i] = std::move(c_[child]);
      i = child;
    }
    c_[i] = std::move(value);
  }

 private:
  std::vector<T>& c_;
};

std::vector<int> AllowedModels(const JobSpec& s, const ClusterView& view) {
  std::vector<int> out;
  AllowedModelsInto(s, view, out);
  return out;
}

int64_t FreeMilliFor(const std::vector<int>& models, const ClusterView& view) {
  int64_t f = 0;
  for (int m : models) f += view.FreeMilli(m);
  return f;
}

}  // namespace

std::optional<Time> Scheduler::EarliestStart(const JobState& j, NodeMask* nodes_out) const {
  Time now = clock_.Now();
  std::vector<std::pair<Time, const JobState*>> releases;
  for (const JobState* r : stopping_) releases.emplace_back(now, r);
  if (running_with_estimate_ > 0) {
    SyncRunning();  // (in rank order)
    for (const auto& [rank, seq, r] : running_) {
      std::optional<Duration> left = r->v.RemainingEstimate(now);
      if (left) releases.emplace_back(now + *left, r);
    }
  }
  if (releases.empty()) return std::nullopt;
  std::sort(releases.begin(), releases.end(), [](const auto& a, const auto& b) {
    return std::tie(a.first, a.second->v.seq) < std::tie(b.first, b.second->v.seq);
  });
  std::vector<int> models = AllowedModels(j.spec, view_);
  // A trial on the view itself, undone before returning (so this stays const to callers).
  ClusterView& whatif = view_;
  whatif.StartTrial();
  std::optional<Time> start;
  int64_t need = j.spec.total_gpu_milli();
  for (size_t i = 0; i < releases.size(); ++i) {
    whatif.Release(releases[i].second->placement);
    // Release everything that ends at the same instant before asking.
    if (i + 1 < releases.size() && releases[i + 1].first == releases[i].first) continue;
    if (FreeMilliFor(models, whatif) < need) continue;
    PlaceResult r = policies_.placement->Place(j.spec, whatif, {});
    if (r.kind == PlaceResult::Kind::kPlaced) {
      if (nodes_out) {
        nodes_out->Assign(view_.nodes().size());
        for (const auto& part : r.placement.parts) nodes_out->Set(view_.IndexOf(part.node));
      }
      start = std::max(releases[i].first, now);
      break;
    }
    if (r.kind == PlaceResult::Kind::kInfeasible) break;
  }
  whatif.EndTrial();
  return start;
}

std::optional<Scheduler::Reservation> Scheduler::MakeReservation(const JobState& head) const {
  Reservation res;
  res.job = head.v.id;
  if (std::optional<Time> t = EarliestStart(head, &res.nodes)) {
    res.time = *t;
    return res;
  }
  // Unknown: hold every node of the head's models, so nothing of unknown length lands where the
  // head may need it.
  res.time = Time::Max();
  res.nodes.Assign(view_.nodes().size());
  for (int m : AllowedModels(head.spec, view_)) res.nodes |= view_.NodeMaskOfModel(m);
  return res;
}

// With worst-rank victims, static ranks kept current and preemption by class, a search for a
// job that needs whole nodes (its GPUs per node are the most a node of its models has) releases
// running jobs worst first until enough nodes are ready: free with their released parts. Such a
// node is ready once every holder of its GPUs is released, so it becomes ready when its
// best-ranked holder is, and the first `nodes` nodes to become ready are those whose best holders
// rank worst. Read from the nodes' holders, that is the search's outcome without the walk: the
// victims it keeps are the holders of those nodes (each is needed: without any of them its node
// has too few GPUs), and every other victim it releases is dropped again, as long as the free
// GPUs with the kept victims' cover the job (checked here; TryPreempt asks the placement).
// Whatever this cannot tell the same way (a slice, a hot GPU, a node ready already, mostly one
// release that readies more nodes than the job needs) leaves the choice to the walk.
bool Scheduler::WholeNodeVictims(const JobState& w, const std::vector<char>& model_ok, const QueueContext& ctx,
                                 std::vector<JobState*>& chosen) {
  const std::vector<int>& models = search_models_;
  const int g = w.spec.gpus_per_node;
  const size_t n = static_cast<size_t>(w.spec.nodes);
  const int64_t cls = w.rank.k[0];
  const bool check_age = policies_.options.min_run_before_preempt > Duration::Zero();
  auto& found = search_node_keys_;
  found.clear();
  // Classes from the worst down to the one after the waiting job's (a node filed in its class or
  // an earlier one has a holder it may not stop), until enough nodes are found: a node filed in
  // an earlier class has a best holder ranked before any node's of a later class.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t below = kMax;  // classes looked at so far: those >= below (kMax: none yet)
  bool first = true;
  while (found.size() < n) {
    std::optional<int64_t> level;
    for (int m : models) {
      if (holders_by_model_.size() <= static_cast<size_t>(m)) continue;
      const HolderFile& filed = holders_by_model_[m];
      for (auto it = first ? filed.end() : filed.lower_bound(below); it != filed.begin();) {
        --it;
        if (it->first <= cls) break;
        if (it->second.empty()) continue;
        if (!level || *level < it->first) level = it->first;
        break;
      }
    }
    if (!level) return false;
    for (int m : models) {
      if (holders_by_model_.size() <= static_cast<size_t>(m)) continue;
      auto bucket = holders_by_model_[m].find(*level);
      if (bucket == holders_by_model_[m].end()) continue;
      for (const int pos : bucket->second) {
        // Filed in a class after the waiting job's, every holder ranks after it and runs (a
        // stopping one files its node first of all). Whether each has run long enough to be
        // stopped is asked here when a minimum run time applies, and of the nodes taken below
        // (a job restored with a start ahead of the clock has not).
        const ClusterView::Node& node = view_.nodes()[pos];
        if (!node.schedulable() || node.spec.gpus != g) continue;  // never ready
        if (check_age) {
          bool stoppable = true;
          for (const Holder& h : holders_[pos]) stoppable = stoppable && MayStopHolder(w, h, /*by_class=*/true, ctx);
          if (!stoppable) continue;  // never ready
        }
        const HolderCounts& counts = holder_counts_[pos];
        if (counts.slices > 0 || node.hot_count > 0) return false;
        if (node.free_whole + counts.gpus == g) found.emplace_back(holder_key_[pos], pos);
      }
    }
    below = *level;
    first = false;
  }
  // The `n` nodes whose best holders rank worst. If the next node's best holder ranks as the last
  // of them (a gang that is the best holder of two nodes, or jobs submitted at one instant, which
  // the walk tells apart by sequence), one release readies more nodes than the job needs; the
  // walk decides then, save for one case: more nodes than the job needs share the worst best
  // holder, a job G that alone holds each of them. The walk releases G, places the job on some
  // of them and keeps G only (without it none is ready), whichever the placement takes; the
  // claim is then read on the view with all of them emptied, as the walk leaves it.
  const size_t take = std::min(found.size(), n + 1);
  std::partial_sort(found.begin(), found.begin() + static_cast<long>(take), found.end(),
                    [](const auto& a, const auto& b) { return b.first < a.first; });
  std::vector<int>& nodes = search_nodes_;
  nodes.clear();
  if (found.size() > n && found[n].first == found[n - 1].first) {
    if (!(found[n].first == found[0].first)) return false;
    const JobState* only = nullptr;
    for (const auto& [key, pos] : found) {
      if (!(key == found[0].first)) continue;
      if (holders_[pos].size() != 1 || (only && holders_[pos].front().job != only)) return false;
      only = holders_[pos].front().job;
      nodes.push_back(pos);
    }
  } else {
    for (size_t i = 0; i < n; ++i) nodes.push_back(found[i].second);
  }
  chosen.clear();
  for (const int pos : nodes) {
    for (const Holder& h : holders_[pos]) {
      JobState* j = h.job;
      // The walk passes over a job too young to stop or of a model the waiting one may not use.
      if (!MayStopHolder(w, h, /*by_class=*/true, ctx) || j->model_index < 0 || !model_ok[j->model_index]) {
        return false;
      }
      chosen.push_back(j);
    }
  }
  // Worst first, each once (a gang may hold several of the nodes).
  std::sort(chosen.begin(), chosen.end(), [](const JobState* a, const JobState* b) {
    return std::tie(b->rank, b->v.seq) < std::tie(a->rank, a->v.seq);
  });
  chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
  int64_t kept_milli = 0;
  for (const JobState* j : chosen) kept_milli += j->held_milli;
  return FreeMilliFor(models, view_) + kept_milli >= w.spec.total_gpu_milli();
}

bool Scheduler::TryPreempt(JobState& w, const QueueContext& ctx, const NodeMask* claimed) {
  search_taken_.clear();
  quota_refused_team_ = nullptr;
  search_lacked_room_ = false;
  // (Members reused from search to search, so that a search that fails early allocates nothing.)
  std::vector<int>& models = search_models_;
  AllowedModelsInto(w.spec, view_, models);
  if (models.empty()) {
    search_lacked_room_ = true;
    return false;
  }
  if (!policies_.queue->MayPreemptSomeone(w.v, ctx)) return false;
  const int64_t need = w.spec.total_gpu_milli();
  int64_t free = FreeMilliFor(models, view_);
  std::vector<JobState*>& candidates = search_candidates_;
  candidates.clear();
  int64_t candidate_milli = 0;
  const bool static_ranks = StaticRanks();
  const bool whole = !w.spec.fractional();
  std::vector<char>& model_ok = search_model_ok_;
  model_ok.assign(view_.models().size(), 0);
  for (int m : models) model_ok[m] = 1;
  bool whole_nodes = whole;
  for (int m : models) whole_nodes = whole_nodes && w.spec.gpus_per_node == view_.MaxGpusPerNode(m);
  if (static_ranks && whole) {
    // If too few nodes can be emptied for a job that needs whole nodes, or given room for a
    // part of one that needs less, the search below would release every candidate and still
    // find too few nodes with enough free GPUs.
    if (whole_nodes ? !NodesMayBeFreed(w, models, ctx) : !NodesMayHaveRoom(w, models, ctx)) {
      search_lacked_room_ = true;
      return false;
    }
  }
  // With preemption by class and current ranks, MayPreempt is a comparison of the ranks' classes
  // (QueuePolicy::PreemptsByClass): read it from the ranks kept instead of asking the policy.
  const bool by_class =
      static_ranks && PreemptsByClass() && running_moving_ == 0 && RanksCurrent(ctx.now);
  // Worst-rank victims of a job that needs whole nodes, from the nodes' holders when they tell
  // (WholeNodeVictims); the placement confirms that the job fits on the view with those nodes
  // emptied. Where the walk would ask, its view differs only by more room (parts of other
  // victims on nodes too small for a part of the job, parts without GPUs on the emptied nodes),
  // so it would fit there too, and give those victims back. If not, the walk decides.
  if (by_class && whole_nodes && !victim_index_ && policies_.options.victims == VictimOrder::kWorstRank &&
      NodesWithRoomNow(w, models) == 0 && WholeNodeVictims(w, model_ok, ctx, search_chosen_)) {
    std::vector<char>& taken = search_mark_;  // (all 0 between searches)
    if (taken.size() < view_.nodes().size()) taken.resize(view_.nodes().size(), 0);
    for (int pos : search_nodes_) taken[pos] = 1;
    view_.StartTrial();
    for (const JobState* c : search_chosen_) {
      size_t k = 0;  // c->part_pos[k] is the node of the k-th part with GPUs
      for (const auto& part : c->placement.parts) {
        if (part.gpus.empty()) continue;
        if (taken[c->part_pos[k++]]) view_.ReleasePart(part);
      }
    }
    for (int pos : search_nodes_) taken[pos] = 0;
    PlaceOptions po;
    po.excluded = claimed;
    ++stats_.placement_calls;
    PlaceResult target = policies_.placement->Place(w.spec, view_, po);
    view_.EndTrial();
    if (target.kind == PlaceResult::Kind::kPlaced) {
      StopForClaim(w, target.placement, search_chosen_);
      return true;
    }
  }
  auto may_stop = [&](const JobState* r) {
    return !r->preempted_for && ctx.now - r->v.started_at >= policies_.options.min_run_before_preempt &&
           r->model_index >= 0 && model_ok[r->model_index] &&
           (by_class ? w.rank.k[0] < r->rank.k[0] : MayPreempt(w, *r, ctx));
  };
  // With least-work-lost victims, the candidates come from the victim index in the order they
  // are stopped, as far as the search needs them. With static ranks only jobs ranked behind the
  // waiting one are candidates: the classes behind its own, plus the jobs of its own class ranked
  // behind it (and the index's aside jobs); otherwise every running job is.
  std::optional<VictimStream> stream;
  if (victim_index_) {
    if (!victim_buffers_) victim_buffers_ = std::make_unique<VictimBuffers>();
    stream.emplace(ctx.now, victim_buffers_->buffers);
    auto first_class = victim_index_->by_class.begin();
    if (static_ranks) {
      const int64_t cls = w.rank.k[0];
      constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
      // With preemption by class and current ranks, no job of the waiting job's own class may
      // be stopped (may_stop would pass over each of them).
      const bool own_class_stays = by_class;
      if (!own_class_stays) {
        SyncRunning();
        auto own = running_.lower_bound({w.rank, kMax, nullptr});  // the first job ranked behind w
        auto own_end =
            cls == kMax ? running_.end() : running_.lower_bound({RankKey{{cls + 1, kMin, kMin}}, kMin, nullptr});
        for (; own != own_end; ++own) stream->AddJob(std::get<2>(*own));
      }
      first_class = victim_index_->by_class.upper_bound(cls);
    }
    for (auto c = first_class; c != victim_index_->by_class.end(); ++c) {
      for (const auto& [interval, filed] : c->second.by_interval) stream->AddFiled(filed, interval);
      for (const auto& [seq, j] : c->second.aside) stream->AddJob(j);
    }
    stream->Finish();
  }
  // Worst-rank victims are the running set read back to front, when every rank kept there is
  // the live one: static ranks, no rank change due (RanksCurrent) and the ranks that move with
  // service refreshed at this instant. Then they are read only as far as the search needs them,
  // as the victim index is read for least-work-lost victims.
  const bool walk_running = !stream && policies_.options.victims == VictimOrder::kWorstRank && static_ranks &&
                            RanksCurrent(ctx.now) && (running_moving_ == 0 || running_ranks_at_ == ctx.now);
  if (!stream) SyncRunning();  // read below, back to front
  auto walk = running_.rbegin();
  auto next_candidate = [&]() -> JobState* {
    if (stream) {
      while (JobState* r = stream->Next()) {
        if (may_stop(r)) return r;
      }
      return nullptr;
    }
    while (walk != running_.rend()) {
      JobState* r = std::get<2>(*walk);
      if (!(w.rank < r->rank)) {  // sorted: nobody further can be displaced
        walk = running_.rend();
        break;
      }
      ++walk;
      if (walk != running_.rend()) PrefetchCandidate(std::get<2>(*walk));  // the next one looked at
      if (may_stop(r)) return r;
    }
    return nullptr;
  };
  if (stream || walk_running) {
    // Enough candidates to cover the need, or the search fails as the full list would.
    while (candidates.empty() || free + candidate_milli < need) {
      JobState* r = next_candidate();
      if (!r) {
        search_lacked_room_ = true;
        return false;
      }
      candidates.push_back(r);
      candidate_milli += r->held_milli;
    }
  } else {
    for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
      JobState* r = std::get<2>(*it);
      if (static_ranks && !(w.rank < r->rank)) break;  // sorted: nobody further can be displaced
      if (!may_stop(r)) continue;
      candidates.push_back(r);
      candidate_milli += r->held_milli;
    }
  }
  if (candidates.empty() || free + candidate_milli < need) {
    search_lacked_room_ = true;
    return false;
  }
  if (stream || walk_running) {
    // Already in order.
  } else if (policies_.options.victims == VictimOrder::kWorstRank) {
    // The back of the queue first (its live rank), then the newest: what Tiresias stops.
    // The candidates come from the running set back to front, by the ranks kept there; where
    // those are the live ranks the list is already in this order and the sort is skipped.
    // (Each seq is unique, so either way gives the one order.)
    std::vector<std::tuple<RankKey, int64_t, JobState*>>& keyed = search_keyed_;
    keyed.clear();
    keyed.reserve(candidates.size());
    for (JobState* c : candidates) keyed.emplace_back(RankOf(*c, ctx), c->v.seq, c);
    auto worse_first = [](const auto& a, const auto& b) {
      return std::tie(std::get<0>(b), std::get<1>(b)) < std::tie(std::get<0>(a), std::get<1>(a));
    };
    if (!std::is_sorted(keyed.begin(), keyed.end(), worse_first)) {
      std::sort(keyed.begin(), keyed.end(), worse_first);
      for (size_t i = 0; i < keyed.size(); ++i) candidates[i] = std::get<2>(keyed[i]);
    }
  } else {
    // Least work lost first, then the least important, then the newest.
    std::vector<std::tuple<Duration, int, int64_t, JobState*>> keyed;
    keyed.reserve(candidates.size());
    for (JobState* c : candidates) keyed.emplace_back(c->v.WorkAtRisk(ctx.now), c->spec.priority, -c->v.seq, c);
    std::sort(keyed.begin(), keyed.end());
    for (size_t i = 0; i < keyed.size(); ++i) candidates[i] = std::get<3>(keyed[i]);
  }
  // A trial on the view itself; every path below ends it before anything else changes the view.
  ClusterView& whatif = view_;
  whatif.StartTrial();
  std::vector<JobState*>& chosen = search_chosen_;
  chosen.clear();
  bool fits = false;
  // Usage as it will be once the chosen victims are gone, so that a policy whose answer depends
  // on usage (fair-share: only borrowed GPUs) judges each further victim after the earlier ones.
  TeamUsageMap teams_after;
  if (!static_ranks) teams_after = teams_;
  QueueContext ctx_after = ctx;
  ctx_after.teams = &teams_after;
  PlaceOptions po;
  po.excluded = claimed;  // nodes promised to other jobs whose victims are stopping
  PlaceOptions ask = po;  // "is it placed?" only; the placement is built once, at the end
  ask.answer_only = true;
  // Deferred releases (a whole-GPU job). Whether a whole-GPU job is placed depends only on the
  // nodes with room for one of its parts (PlacementPolicy::Place), so a victim's part on a node
  // that stays too small is not released on the view: the node only counts the whole GPUs the
  // part would free (`extra`). Once the node has room, its deferred parts are released on the view
  // (in any order: releases add up). A part on a GPU that turned hot, or a slice, is released at
  // once (what it frees cannot be told from the part alone: held for heat, or a whole GPU only
  // with the GPU's other slices gone). So every node with room is on the view as a full release
  // would leave it, and the answers of the placement, and the claim (PlacementPolicy::Place
  // reads only nodes with room for a part, for both), are the same.
  std::vector<int>& extra = search_extra_;
  std::vector<char>& mark = search_mark_;
  std::vector<char>& usable = search_usable_;
  std::vector<int>& touched = search_touched_;
  // Deferred parts, a list per node: first_deferred[pos] and each entry's next (-1 ends it).
  std::vector<std::pair<const model::NodeAssignment*, int>>& deferred = search_deferred_;
  std::vector<int>& first_deferred = search_first_deferred_;
  const size_t node_count = view_.nodes().size();
  if (extra.size() < node_count) {
    extra.resize(node_count, 0);
    mark.resize(node_count, 0);
    usable.resize(node_count, 0);
    first_deferred.resize(node_count, -1);
  }
  touched.clear();
  deferred.clear();
  // A cheap necessary condition before asking the placement policy: enough nodes of the job's
  // models with enough whole GPUs free (kept up to date as victims are released).
  // Whether a node of the job's models that takes jobs is asked once per node (a trial changes
  // neither); every node asked is one the search releases a part on (so `touched` resets it).
  const int gpus_per_node = w.spec.gpus_per_node;
  auto ready_at = [&](int pos) {
    const ClusterView::Node& n = view_.nodes()[pos];
    if (usable[pos] == 0) usable[pos] = n.model >= 0 && model_ok[n.model] && n.schedulable() ? 2 : 1;
    return usable[pos] == 2 && n.free_whole + extra[pos] >= gpus_per_node;
  };
  auto apply_deferred = [&](int pos) {
    if (mark[pos] == 2) return;
    mark[pos] = 2;
    extra[pos] = 0;
    for (int k = first_deferred[pos]; k >= 0; k = deferred[k].second) whatif.ReleasePart(*deferred[k].first);
    first_deferred[pos] = -1;
  };
  // Returns whether the node is ready (ready_at) afterwards.
  auto release_part = [&](int pos, const model::NodeAssignment& part) {
    if (mark[pos] == 0) {
      mark[pos] = 1;
      touched.push_back(pos);
    }
    bool defer = mark[pos] == 1 && (part.gpus.empty() || part.gpu_milli == model::kMilliGpuPerGpu);
    if (defer) {
      const ClusterView::Node& n = view_.nodes()[pos];
      if (n.hot_count > 0) {
        for (int g : part.gpus) defer = defer && !n.hot[g];
      }
    }
    if (!defer) {
      apply_deferred(pos);
      whatif.ReleasePart(part);
      return ready_at(pos);
    }
    extra[pos] += static_cast<int>(part.gpus.size());
    deferred.emplace_back(&part, first_deferred[pos]);
    first_deferred[pos] = static_cast<int>(deferred.size()) - 1;
    if (!ready_at(pos)) return false;
    apply_deferred(pos);
    return ready_at(pos);
  };
  // The give-back steps below only take GPUs back from what a release gave, so a node whose
  // parts are deferred never gets room again: its count moves, the view stays.
  auto reacquire_part = [&](int pos, const model::NodeAssignment& part) {
    if (mark[pos] == 2) {
      whatif.ReacquirePart(part);
    } else {
      extra[pos] -= static_cast<int>(part.gpus.size());
    }
  };
  auto rerelease_part = [&](int pos, const model::NodeAssignment& part) {
    if (mark[pos] == 2) {
      whatif.ReleasePart(part);
    } else {
      extra[pos] += static_cast<int>(part.gpus.size());
    }
  };
  auto end_trial = [&]() {
    whatif.EndTrial();
    for (int pos : touched) {
      extra[pos] = 0;
      mark[pos] = 0;
      usable[pos] = 0;
      first_deferred[pos] = -1;
    }
  };
  // Node positions of a victim's parts (the parts of one job are on distinct nodes).
  // (A running job keeps them when every part has GPUs: JobState::part_pos.)
  std::vector<int>& own_pos = search_part_pos_;
  auto positions = [&](const JobState& c) -> const std::vector<int>& {
    if (c.part_pos.size() == c.placement.parts.size()) return c.part_pos;
    own_pos.clear();
    for (const auto& part : c.placement.parts) {
      own_pos.push_back(view_.IndexOf(part.node));
      CHECK(own_pos.back() >= 0) << "a running job holds an unknown node " << part.node;
    }
    return own_pos;
  };
  int64_t ready = whole ? NodesWithRoomNow(w, models) : 0;
  for (size_t next = 0;; ++next) {
    JobState* c = next < candidates.size() ? candidates[next] : stream || walk_running ? next_candidate() : nullptr;
    if (!c) break;
    if (!static_ranks) {
      if (!MayPreempt(w, *c, ctx_after)) continue;
      teams_after[c->spec.team].used_milli -= c->placement.total_gpu_milli();
    } else if (guard_quotas_ && !QuotaKeeps(w, *c)) {
      continue;
    }
    if (guard_quotas_) search_taken_.push_back(c);
    if (whole) {
      // (The parts of one job are on distinct nodes: each node changes once.)
      const std::vector<int>& part_pos = positions(*c);
      for (size_t k = 0; k < part_pos.size(); ++k) {
        const bool before = ready_at(part_pos[k]);
        ready += static_cast<int>(release_part(part_pos[k], c->placement.parts[k])) - static_cast<int>(before);
      }
    } else {
      whatif.Release(c->placement);
    }
    chosen.push_back(c);
    free += c->held_milli;
    if (free < need) continue;
    if (whole && ready < w.spec.nodes) continue;
    ++stats_.placement_calls;
    if (policies_.placement->Place(w.spec, whatif, ask).kind == PlaceResult::Kind::kPlaced) {
      fits = true;
      break;
    }
  }
  if (!fits) {
    end_trial();
    search_lacked_room_ = true;
    return false;
  }
  // Drop victims that turn out not to be needed, most costly first. The placement policy is
  // asked only when the necessary conditions above hold without the victim (`free` and `ready`
  // move with each victim given back, as they moved with each one released); otherwise the job
  // cannot fit and the victim stays.
  // The job fits before each step (it did after the last release, and each step keeps a victim
  // only if it still fits). A victim of a whole-GPU job whose parts are all on nodes without room
  // for one of the job's parts gives back nothing the placement reads (PlacementPolicy::Place),
  // so the job still fits without asking.
  // Neither kind of step needs the view when its answer is known without the placement: a victim
  // the job cannot do without (too little free without it, or too few nodes with room) stays, and
  // giving it back and taking it again would leave the view as it was; a victim off the nodes with
  // room is dropped without being given back, and its nodes keep more free GPUs (or a larger
  // count) than they would, yet still too few for a part (from here on nodes only lose free
  // GPUs), so every later answer of the placement, and the claim, are the same.
  for (size_t i = chosen.size(); i-- > 0;) {
    const Placement& p = chosen[i]->placement;
    const int64_t held = chosen[i]->held_milli;
    bool off_ready_nodes = whole;
    static const std::vector<int> kNoPositions;
    const std::vector<int>& part_pos = whole ? positions(*chosen[i]) : kNoPositions;
    for (int pos : part_pos) off_ready_nodes = off_ready_nodes && !ready_at(pos);
    if (free - held < need || (off_ready_nodes && ready < w.spec.nodes)) continue;  // it stays
    if (off_ready_nodes) {
      free -= held;
      chosen.erase(chosen.begin() + static_cast<long>(i));
      continue;
    }
    if (whole) {
      for (int pos : part_pos) ready -= ready_at(pos) ? 1 : 0;
      // Not Allocate: a part on a GPU that turned hot went to what is held.
      for (size_t k = 0; k < part_pos.size(); ++k) reacquire_part(part_pos[k], p.parts[k]);
      for (int pos : part_pos) ready += ready_at(pos) ? 1 : 0;
    } else {
      whatif.Reacquire(p);
    }
    free -= held;
    bool placed = false;
    if (free >= need && (!whole || ready >= w.spec.nodes)) {
      ++stats_.placement_calls;
      placed = policies_.placement->Place(w.spec, whatif, ask).kind == PlaceResult::Kind::kPlaced;
    }
    if (placed) {
      chosen.erase(chosen.begin() + static_cast<long>(i));
      continue;
    }
    if (whole) {
      for (int pos : part_pos) ready -= ready_at(pos) ? 1 : 0;
      for (size_t k = 0; k < part_pos.size(); ++k) rerelease_part(part_pos[k], p.parts[k]);
      for (int pos : part_pos) ready += ready_at(pos) ? 1 : 0;
    } else {
      whatif.Release(p);
    }
    free += held;
  }
  if (chosen.empty()) {
    end_trial();
    return false;
  }
  // Claim the nodes the job will start on, so that jobs after it in the queue do not take the
  // GPUs its victims give up (they would be preempted in turn, and so on).
  PlaceResult target = policies_.placement->Place(w.spec, whatif, po);
  end_trial();
  CHECK(target.kind == PlaceResult::Kind::kPlaced) << "victims chosen but the job does not fit";
  StopForClaim(w, target.placement, chosen);
  return true;
}

void Scheduler::StopForClaim(JobState& w, const model::Placement& target, const std::vector<JobState*>& chosen) {
  w.claim.clear();
  for (const auto& part : target.parts) w.claim.push_back(view_.IndexOf(part.node));
  PreemptReason reason = policies_.queue->PreemptionReason();
  for (JobState* c : chosen) {
    c->preempted_for = w.v.id;
    ++w.victims_stopping;
    StopRunning(*c, reason);
  }
}

// ---- Searches that lacked room ---------------------------------------------------------------

bool Scheduler::SearchKnownToFail(int shape, int64_t cls, Time now) const {
  if (static_cast<size_t>(shape) >= failed_searches_.size()) return false;
  const FailedSearch& f = failed_searches_[shape];
  if (f.epoch != search_epoch_ || f.view_changes != view_.changes() || cls < f.cls) return false;
  // Candidates that were too young to stop may have come of age since.
  if (policies_.options.min_run_before_preempt > Duration::Zero() && f.now != now) return false;
  if (f.demotions != demotions_) {
    auto gained = class_gained_at_.find(cls);
    if (gained != class_gained_at_.end() && gained->second > f.demotions) return false;
  }
  return true;
}

void Scheduler::RememberFailedSearch(int shape, int64_t cls, Time now) {
  if (failed_searches_.size() <= static_cast<size_t>(shape)) failed_searches_.resize(shape + 1);
  failed_searches_[shape] = FailedSearch{search_epoch_, view_.changes(), demotions_, cls, now};
}

// A running job moved from class `from` to `to`. With preemption by class it is a new candidate
// for the waiting jobs of classes from .. to - 1, and for no others; a move to an earlier class
// only takes a candidate away.
void Scheduler::NoteClassMove(int64_t from, int64_t to) {
  if (to <= from || !PreemptsByClass()) return;
  constexpr uint64_t kMaxClasses = 64;
  if (static_cast<uint64_t>(to) - static_cast<uint64_t>(from) > kMaxClasses) {
    ++search_epoch_;
    return;
  }
  ++demotions_;
  for (int64_t c = from; c < to; ++c) class_gained_at_[c] = demotions_;
}

void Scheduler::Pass() {
  ++stats_.passes;
  if (pending_count_ == 0) {
    arrivals_.clear();
    full_pass_ = false;
    blocked_head_.reset();
    return;
  }
  const QueueContext ctx = Context();
  const bool static_ranks = StaticRanks();
  const SchedulerOptions& opt = policies_.options;

  // What the last full pass left blocked, if it is still waiting.
  JobState* blocked_head = nullptr;
  if (blocked_head_) {
    JobState* b = FindJob(*blocked_head_);
    if (b && b->v.phase == JobPhase::kPending) blocked_head = b;
  }

  // A partial pass looks only at jobs that arrived since the last pass. It is exact when nothing
  // was freed or re-ranked since then (those events ask for a full pass): every job that waited
  // then would wait again, and the blocked head keeps its place unless a newcomer outranks it.
  // (Not while no GPU is free and a job that needs none waits: a pass then ended at its first job
  // without noting it as the blocked head, so a newcomer needing no GPU is looked at from the top.)
  if (!full_pass_ && pending_without_gpus_ > 0 && view_.FreeMilliAll() == 0) full_pass_ = true;
  std::vector<JobState*> order;
  if (!full_pass_) {
    for (JobId id : arrivals_) {
      JobState* j = FindJob(id);
      if (j && j->v.phase == JobPhase::kPending) {
        if (!static_ranks) j->rank = LiveRank(*j, ctx);
        order.push_back(j);
      }
    }
    std::sort(order.begin(), order.end(),
              [](const JobState* a, const JobState* b) { return std::tie(a->rank, a->v.seq) < std::tie(b->rank, b->v.seq); });
    if (blocked_head && opt.backfill != BackfillMode::kGreedy) {
      if (!order.empty() && std::tie(order.front()->rank, order.front()->v.seq) <
                                std::tie(blocked_head->rank, blocked_head->v.seq)) {
        full_pass_ = true;  // a newcomer outranks the head: recompute from the top
      }
    }
  }
  arrivals_.clear();
  const bool full = full_pass_;
  full_pass_ = false;
  // Usage-dependent ranks with a static part: merge the (team, shape) queues by live rank (the
  // usage at the start of the pass, as a full re-sort would rank them) instead of re-sorting.
  const bool group_merge = full && !static_ranks && grouped_pending_ == pending_count_;
  if (full) {
    order.clear();
    blocked_head = nullptr;
    if (!static_ranks && !group_merge) order = OrderedPending(ctx);
  } else if (order.empty()) {
    return;
  }
  ++(full ? stats_.full_passes : stats_.partial_passes);

  // Jobs of one shape succeed or fail together within a pass (resources only shrink during it),
  // so a shape that failed is not placed again. A shape is dead when no job of it can start in
  // this pass any more; when every shape still in the queue is dead, the pass ends.
  // Per shape: kFailedFree (could not be placed at all), kFailedExcl (could not be placed outside
  // the reservation), kDead, kNoPreempt (a job of it could not preempt: later ones cannot). The
  // flags of a shape count only when stamped with this pass (PassFlags), so a pass clears nothing.
  const int64_t pass_number = stats_.passes;
  if (pass_flags_.size() < static_cast<size_t>(shape_count_)) pass_flags_.resize(shape_count_);
  auto flagged = [&](int shape, uint8_t flag) {
    const PassFlags& f = pass_flags_[shape];
    return f.pass == pass_number && (f.bits & flag) != 0;
  };
  auto set_flag = [&](int shape, uint8_t flag) {
    PassFlags& f = pass_flags_[shape];
    if (f.pass != pass_number) f = PassFlags{pass_number, 0};
    f.bits |= flag;
  };
  int64_t dead_live = 0;
  auto mark_dead = [&](int shape) {
    if (flagged(shape, kDead)) return;
    set_flag(shape, kDead);
    if (shape_pending_[shape] > 0) ++dead_live;
  };
  std::optional<Reservation> res;
  int attempts = 0;
  const bool preemptive = opt.preemption && policies_.queue->Preempts();
  const bool preempts_by_class = PreemptsByClass();
  // A search that lacked room is not run again for a job of its shape ranked after it while the
  // running set stays as it was, when the policy preempts by class and every rank is current
  // (no rank change is due: ranks move only at the timers' instants).
  const bool repeat_failures = preemptive && static_ranks && running_moving_ == 0 && preempts_by_class &&
                               RanksCurrent(ctx.now);
  if (preemptive && running_moving_ > 0) RefreshRunningRanks(ctx);

  // Static ranks in a full pass: merge the per-shape queues by rank. A shape that died drops out
  // of the merge, so a pass visits the jobs that start plus about one job per shape, not the
  // whole queue. (Dead shapes stay in while the policy may still look for preemption victims.)
  const bool merge = full && static_ranks;
  using Head = std::tuple<RankKey, int64_t, int, JobState*>;  // rank, seq, shape, job
  MinHeap<Head> heads(pass_heads_);
  if (merge) {
    for (size_t sh = 0; sh < by_shape_.size(); ++sh) {
      if (!by_shape_[sh].empty()) {
        const auto& [rank, seq, j] = *by_shape_[sh].begin();
        heads.emplace_unordered(rank, seq, static_cast<int>(sh), j);
        PrefetchForVisit(j);
      }
    }
    heads.Heapify();
  }
  using GroupHead = std::tuple<RankKey, int64_t, JobState*>;
  MinHeap<GroupHead> group_heads(pass_group_heads_);
  TeamUsageMap& usage_at_start = pass_usage_;
  QueueContext rank_ctx = ctx;
  const bool alike_in_queue = group_merge && policies_.queue->RanksAlikeInQueue();
  // `pred`: the job just taken from h's queue, ranked in this pass with rank_ctx.
  auto push_group_head = [&](JobState* h, const JobState* pred) {
    if (pred && alike_in_queue) {
      // What LiveRank would give (QueuePolicy::RanksAlikeInQueue), without asking the policy.
      RankKey r{{pred->rank.k[0], pred->rank.k[1], h->group_key.k[2]}};
      if (h->ranked && r.k[0] != h->rank.k[0]) {
        h->v.rank_class_since = rank_ctx.now;
        r = RankOf(*h, rank_ctx);
      }
      h->ranked = true;
      h->rank = r;
    } else {
      h->rank = LiveRank(*h, rank_ctx);
    }
    group_heads.emplace(h->rank, h->v.seq, h);
  };
  if (group_merge) {
    usage_at_start = teams_;
    rank_ctx.teams = &usage_at_start;
    for (const auto& queue : by_group_) {
      if (!queue.empty()) push_group_head(std::get<2>(*queue.begin()), nullptr);
    }
  }
  size_t order_pos = 0;
  auto next = [&]() -> JobState* {
    if (group_merge) {
      // Only the job being looked at leaves its queue during a pass, so a head pushed earlier
      // is still there when it comes out.
      while (!group_heads.empty()) {
        JobState* j = std::get<2>(group_heads.top());
        group_heads.pop();
        // A job of a dead shape behind the blocked head (or in greedy mode) that may not
        // preempt would only note that it waits: once no job may preempt any more, its whole
        // queue drops out; a job that already failed a search at this running set is passed.
        const bool idle = flagged(j->shape, kDead) && (blocked_head != nullptr || opt.backfill == BackfillMode::kGreedy);
        if (idle && (!preemptive || attempts >= opt.max_preemption_attempts)) continue;
        CHECK(j->group_filed) << "a queue head left its queue during a pass";
        if (auto succ = std::next(j->group_at); succ != by_group_[j->group].end()) push_group_head(std::get<2>(*succ), j);
        if (idle && j->preempt_failed_at == running_version_) continue;
        return j;
      }
      return nullptr;
    }
    if (!merge) return order_pos < order.size() ? order[order_pos++] : nullptr;
    while (!heads.empty()) {
      const Head& top = heads.top();
      const int sh = std::get<2>(top);
      JobState* const j = std::get<3>(top);
      bool may_preempt = preemptive && attempts < opt.max_preemption_attempts && !flagged(sh, kNoPreempt);
      if (flagged(sh, kDead) && !may_preempt) {
        heads.pop();
        continue;
      }
      // Only the job being looked at leaves its queue during a pass; a head no longer filed
      // where it was pushed drops its shape from the merge.
      if (!j->in_queue || j->set_rank != std::get<0>(top)) {
        heads.pop();
        continue;
      }
      auto& set = by_shape_[sh];
      if (auto succ = std::next(j->shape_at); succ != set.end()) {
        heads.replace_top({std::get<0>(*succ), std::get<1>(*succ), sh, std::get<2>(*succ)});
        PrefetchForVisit(std::get<2>(*succ));
      } else {
        heads.pop();
      }
      return j;
    }
    return nullptr;
  };

  // Nodes claimed by jobs whose preemption victims are still stopping: only claimants use them.
  // (Empty while nobody claims; the buffer is reused from pass to pass.)
  NodeMask& claimed = pass_claimed_;
  claimed.clear();
  auto add_claim = [&](const JobState& c) {
    if (claimed.empty()) claimed.Assign(view_.nodes().size());
    c.claimant_in_pass = pass_number;
    for (int pos : c.claim) claimed.Set(pos);
  };
  for (const JobState* stopping : stopping_) {
    if (!stopping->preempted_for) continue;
    const JobState* c = FindJob(*stopping->preempted_for);
    if (c && c->v.phase == JobPhase::kPending && c->victims_stopping > 0) add_claim(*c);
  }
  // Claims keep nodes from searches: failed searches hold only under the claims they saw. (A
  // claimant that started in the last pass left its nodes claimed to the end of that pass.)
  if (claimed != claims_at_end_) ++search_epoch_;
  NodeMask mask;  // reservation and/or claims, for one job
  auto exclusions = [&](const JobState* j, bool with_reservation) -> const NodeMask* {
    bool claims = !claimed.empty() && j->claimant_in_pass != pass_number;
    if (!claims && !with_reservation) return nullptr;
    if (!claims) return &res->nodes;
    if (!with_reservation) return &claimed;
    mask = res->nodes;
    mask |= claimed;
    return &mask;
  };

  // Jobs not looked at yet that may still look for victims: those whose last search did not
  // fail at the running set's current version (all of them once it has changed in this pass).
  const int64_t version_at_start = running_version_;
  const int64_t failed_at_start = failed_version_ == running_version_ ? failed_count_ : 0;
  const int64_t pending_at_start = static_cast<int64_t>(pending_count_);
  int64_t visited = 0, failed_visited = 0;
  auto may_search_later = [&]() {
    const int64_t unvisited = pending_at_start - visited;
    return unvisited - (running_version_ == version_at_start ? failed_at_start - failed_visited : 0) > 0;
  };

  // Free GPUs of every model: within a pass only a start changes them (a search's trial puts the
  // view back, and a stop frees nothing until the job is gone).
  int64_t free_all = view_.FreeMilliAll();
  PlaceResult r;
  // Asks the placement policy into `r`: its kind, and its placement when placed (the only parts
  // a pass reads, so a failed placement moves nothing into `r`).
  auto place = [&](const JobState& j, const PlaceOptions& po) {
    ++stats_.placement_calls;
    PlaceResult got = policies_.placement->Place(j.spec, view_, po);
    r.kind = got.kind;
    if (got.kind == PlaceResult::Kind::kPlaced) r.placement = std::move(got.placement);
  };
  // The worst-ranked running job, looked up again only after running_ changed (a start or a stop
  // in this pass).
  const std::tuple<RankKey, int64_t, JobState*>* worst = nullptr;
  uint64_t worst_edits = running_edits_ - 1;
  while (JobState* j = next()) {
    ++visited;
    if (j->preempt_failed_at == version_at_start && running_version_ == version_at_start) ++failed_visited;
    if (opt.backfill == BackfillMode::kOff && blocked_head) break;  // strict order: all wait behind it
    if (hard_budgets_ > 0) {
      // A team whose hard budget is spent starts nothing, whatever the capacity: its jobs are held,
      // not heads that other teams' jobs wait behind (nor a reservation that keeps them off nodes).
      // What the budget says without a placement (rate 0) holds for every placement too.
      j->budget_block = BudgetBlock(*j, 0, ctx.now);
      if (!j->budget_block.empty()) {
        j->budget_rate = 0;
        j->outcome = JobState::Outcome::kBudget;
        continue;
      }
    }
    // No GPU free, and this job needs one (a job that asks for none may start all the same).
    const bool free_none = free_all == 0 && (pending_without_gpus_ == 0 || j->spec.total_gpu_milli() > 0);
    // Static ranks: if the job may not displace the worst-ranked running job, it may displace
    // nobody (MayPreempt implies a better rank, and the worst job is the easiest victim).
    // With preemption by class and current ranks, the worst class is what decides (a job of an
    // earlier class ranks before every job of it); otherwise the worst job, read from running_.
    auto may_displace_worst = [&]() {
      if (!static_ranks) return true;
      if (preempts_by_class && running_moving_ == 0 && RanksCurrent(ctx.now)) {
        return j->rank.k[0] < running_classes_.rbegin()->first;
      }
      SyncRunning();
      if (worst_edits != running_edits_) {
        worst_edits = running_edits_;
        worst = &*running_.rbegin();
      }
      return j->rank < std::get<0>(*worst) && policies_.queue->MayPreempt(j->v, std::get<2>(*worst)->v, ctx);
    };
    const bool can_preempt = preemptive && attempts < opt.max_preemption_attempts && !running_.empty() &&
                             j->preempt_failed_at != running_version_ && may_displace_worst();
    // (With the quota rule, when this job's own search failed on another team's quota, a later
    // job of that team may stop what this one may not: the shape stays in, and the pass goes on.)
    const bool quota_may_differ = guard_quotas_ && j->quota_kept_by && j->preempt_failed_at == running_version_;
    if (!can_preempt && !quota_may_differ) set_flag(j->shape, kNoPreempt);
    if (!can_preempt && (free_none || dead_live >= live_shapes_)) {
      if (free_none && pending_without_gpus_ > 0 && dead_live < live_shapes_) {
        // Only jobs that need no GPU can still start: this job's shape drops out of the pass,
        // and the first job that waits blocks the rest as any waiting head does (strict order
        // stops the pass, EASY reserves its nodes).
        mark_dead(j->shape);
        if (opt.backfill != BackfillMode::kGreedy && !blocked_head) {
          blocked_head = j;
          res.reset();
        }
        continue;
      }
      // Nothing more can start; with static ranks nobody further may preempt either (unless the
      // quota rule applies: a later job of the victims' own team may stop them).
      if ((static_ranks && !quota_may_differ) || attempts >= opt.max_preemption_attempts) break;
      // With usage-dependent ranks a later job may still preempt, unless none can search (no
      // preemption, nothing running, or every one left failed at this running set): then the
      // rest of the walk would do nothing.
      if (!preemptive || running_.empty() || !may_search_later()) break;
      continue;
    }

    if (any_limits_) {
      // The team's limits hold it whatever the capacity: it neither starts nor preempts.
      j->budget_block = QuotaBlock(*j, nullptr);
      if (!j->budget_block.empty()) {
        j->outcome = JobState::Outcome::kQuota;
        continue;
      }
    }
    r.kind = PlaceResult::Kind::kWait;  // (declared before the loop: most visits never place)
    bool placed = false;
    bool held = false;
    const int shape = j->shape;
    if (!free_none && !flagged(shape, kDead)) {
      bool use_reservation = false;
      if (blocked_head) {
        // EASY: the job may start only if it cannot delay the blocked head's reservation: it
        // ends before the head starts, or it stays off the nodes held for the head.
        if (!res) res = MakeReservation(*blocked_head);
        std::optional<Duration> est = j->v.RemainingEstimate(ctx.now);
        use_reservation = !(est && res->time != Time::Max() && ctx.now + *est <= res->time);
      }
      if (!use_reservation) {
        if (!flagged(shape, kFailedFree)) {
          PlaceOptions po;
          po.excluded = exclusions(j, false);
          // A shape that could not be placed on the view as it is now (nothing excluded then or
          // now) cannot be placed now either: the placement reads only the job's shape and the view.
          const bool unchanged = po.excluded == nullptr && static_cast<size_t>(shape) < failed_place_.size() &&
                                 failed_place_[shape].first == view_.changes();
          if (unchanged) {
            r.kind = failed_place_[shape].second;
          } else {
            place(*j, po);
            if (r.kind != PlaceResult::Kind::kPlaced && po.excluded == nullptr) {
              if (failed_place_.size() <= static_cast<size_t>(shape)) {
                failed_place_.resize(shape + 1, {std::numeric_limits<uint64_t>::max(), PlaceResult::Kind::kWait});
              }
              failed_place_[shape] = {view_.changes(), r.kind};
            }
          }
          placed = r.kind == PlaceResult::Kind::kPlaced;
          if (!placed) {
            set_flag(shape, kFailedFree | kFailedExcl);
            mark_dead(shape);
          }
        }
      } else if (!flagged(shape, kFailedExcl)) {
        PlaceOptions po;
        po.excluded = exclusions(j, true);
        place(*j, po);
        placed = r.kind == PlaceResult::Kind::kPlaced;
        if (!placed) {
          set_flag(shape, kFailedExcl);
          held = r.kind == PlaceResult::Kind::kWait;
          // Jobs of this shape with estimates may still fit in before the reservation.
          if (shape_pending_est_[shape] == 0 || r.kind == PlaceResult::Kind::kInfeasible) mark_dead(shape);
        }
      } else {
        held = true;
      }
    }
    if (placed && any_limits_) {
      j->budget_block = QuotaBlock(*j, &r.placement);
      if (!j->budget_block.empty()) {
        j->outcome = JobState::Outcome::kQuota;
        continue;
      }
    }
    if (placed && !money_.empty()) {
      j->budget_rate = AddedRate(*j, r.placement);
      j->budget_block = BudgetBlock(*j, j->budget_rate, ctx.now);
      if (!j->budget_block.empty()) {
        j->outcome = JobState::Outcome::kBudget;
        continue;
      }
    }
    if (placed) {
      j->claim.clear();
      StartJob(*j, std::move(r.placement));
      free_all = view_.FreeMilliAll();
      continue;
    }
    if (r.kind == PlaceResult::Kind::kInfeasible) {
      j->outcome = JobState::Outcome::kInfeasible;
      continue;
    }
    if (held) {
      j->outcome = JobState::Outcome::kHeldByReservation;
      j->outcome_job = res->job;
      j->outcome_time = res->time;
      continue;
    }
    j->outcome = JobState::Outcome::kWait;
    if (j->victims_stopping > 0) {
      j->outcome = JobState::Outcome::kAwaitingVictims;
      continue;
    }
    // A job that found no victims tries again only once the running set has changed.
    if (can_preempt) {
      ++attempts;
      j->preempt_failed_at = running_version_;
      if (failed_version_ != running_version_) {
        failed_version_ = running_version_;
        failed_count_ = 0;
      }
      ++failed_count_;
      bool found = false;
      if (repeat_failures && SearchKnownToFail(shape, j->rank.k[0], ctx.now)) {
        // A job of this shape and of this class or an earlier one found no room, and nothing
        // has changed since that could give this one any: it would find none either.
      } else {
        found = TryPreempt(*j, ctx, claimed.empty() ? nullptr : &claimed);
        if (!found && repeat_failures && search_lacked_room_) RememberFailedSearch(shape, j->rank.k[0], ctx.now);
        if (guard_quotas_) j->quota_kept_by = found ? nullptr : quota_refused_team_;
      }
      if (found) {
        add_claim(*j);
        j->outcome = JobState::Outcome::kAwaitingVictims;
        continue;
      }
      // Jobs of this shape further back have no more victims (unless the quota rule kept one from
      // this job: one of the victim's own team may stop it).
      if (!(guard_quotas_ && j->quota_kept_by)) set_flag(j->shape, kNoPreempt);
    }
    if (opt.backfill != BackfillMode::kGreedy && !blocked_head) {
      blocked_head = j;
      res.reset();
    }
  }
  if (blocked_head) {
    blocked_head_ = blocked_head->v.id;
  } else if (full) {
    blocked_head_.reset();
  }
  claims_at_end_.swap(claimed);
}

// ---- Read access -----------------------------------------------------------------------------

std::optional<JobPhase> Scheduler::PhaseOf(JobId job) const {
  const JobState* j = FindJob(job);
  if (!j) return std::nullopt;
  return j->v.phase;
}

const Placement* Scheduler::PlacementOf(JobId job) const {
  const JobState* j = FindJob(job);
  if (!j || j->v.phase == JobPhase::kPending) return nullptr;
  return &j->placement;
}

const JobView* Scheduler::ViewOf(JobId job) const {
  const JobState* j = FindJob(job);
  return j ? &j->v : nullptr;
}

Explanation Scheduler::Explain(JobId id) const {
  Explanation e;
  e.job = id;
  const JobState* j = FindJob(id);
  if (!j) {
    e.ever = false;
    e.reasons.push_back("job " + std::to_string(id.value()) + " is not known to the scheduler (finished or never submitted)");
    return e;
  }
  const QueueContext ctx = Context();
  e.phase = j->v.phase;
  if (j->v.phase == JobPhase::kRunning) {
    e.placement = PlaceResult::Kind::kPlaced;
    std::string nodes;
    for (const auto& part : j->placement.parts) {
      const ClusterView::Node* n = view_.Find(part.node);
      if (!nodes.empty()) nodes += ", ";
      nodes += (n ? n->spec.name : std::to_string(part.node.value())) + " (" +
               std::to_string(part.gpus.size()) + " GPU)";
    }
    e.reasons.push_back("running since " + FormatIso8601(j->v.started_at) + " on " + nodes);
    return e;
  }
  if (j->v.phase == JobPhase::kStopping) {
    e.reasons.push_back("stopping: waiting for its processes to exit");
    return e;
  }
  std::vector<JobId> order = QueueOrder();
  e.queue_length = static_cast<int>(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] == id) e.position = static_cast<int>(i) + 1;
  }
  e.reasons.push_back("position " + std::to_string(e.position) + " of " + std::to_string(e.queue_length) +
                      " in the " + policies_.queue->Name() + " queue");
  std::string rank_words = policies_.queue->DescribeRank(j->v, ctx);
  if (!rank_words.empty()) e.reasons.push_back(rank_words);

  PlaceOptions po;
  po.explain = true;
  PlaceResult r = policies_.placement->Place(j->spec, view_, po);
  e.placement = r.kind;
  if (r.kind == PlaceResult::Kind::kInfeasible) {
    e.ever = false;
    // A job split to fit (split_large_jobs) is judged as the gang it became: say so, or the
    // nodes and GPUs the reason names are not what was asked for.
    const std::string split =
        j->split_from_gpus > 0
            ? "asked for " + std::to_string(j->split_from_gpus) +
                  " GPUs on one node, more than any node has, so it runs as " + std::to_string(j->spec.nodes) +
                  " nodes of " + std::to_string(j->spec.gpus_per_node) + " GPU(s) (split_large_jobs), which " 
            : "";
    e.reasons.push_back("infeasible: " + split + r.reason);
    return e;
  }
  bool held_back = false;  // strict order, a reservation or its victims: it may not start at once
  if (policies_.options.backfill == BackfillMode::kOff && blocked_head_ && *blocked_head_ != id) {
    const JobState* head = FindJob(*blocked_head_);
    if (head && head->v.phase == JobPhase::kPending &&
        std::tie(head->rank, head->v.seq) < std::tie(j->rank, j->v.seq)) {
      e.reasons.push_back("strict order: waits behind job " + std::to_string(blocked_head_->value()) +
                          ", which cannot start yet");
      e.placement = PlaceResult::Kind::kWait;  // it fits, but may not start before the head
      held_back = true;
    }
  }
  // (What the last pass that reached the job concluded; a pass that ended early, with no GPU
  // free, did not look again: a reservation whose job has started since, or victims gone, is
  // not said.)
  const JobState* reserved_for =
      j->outcome == JobState::Outcome::kHeldByReservation ? FindJob(j->outcome_job) : nullptr;
  bool stale = false;  // an outcome from an older pass that no longer holds
  switch (j->outcome) {
    case JobState::Outcome::kHeldByReservation:
      if (!reserved_for || reserved_for->v.phase != JobPhase::kPending) {
        stale = true;
        break;
      }
      held_back = true;
      e.placement = PlaceResult::Kind::kWait;  // it may fit, but the reservation keeps those GPUs
      e.reasons.push_back("held by a reservation for job " + std::to_string(j->outcome_job.value()) +
                          (j->outcome_time == Time::Max()
                               ? std::string(" (its start time is unknown: running jobs have no estimates)")
                               : " until " + FormatIso8601(j->outcome_time)));
      break;
    case JobState::Outcome::kAwaitingVictims:
      if (j->victims_stopping <= 0) {
        stale = true;
        break;
      }
      held_back = true;
      e.placement = PlaceResult::Kind::kWait;
      e.reasons.push_back("preempting " + std::to_string(j->victims_stopping) +
                          " job(s) to make room; starts when they have stopped");
      break;
    case JobState::Outcome::kBudget:
      e.reasons.push_back("budget: " + j->budget_block);
      e.placement = PlaceResult::Kind::kWait;  // it fits, but may not start
      held_back = true;
      break;
    case JobState::Outcome::kQuota:
      e.reasons.push_back("quota: " + j->budget_block);
      e.placement = PlaceResult::Kind::kWait;  // it may fit, but may not start
      held_back = true;
      break;
    default:
      break;
  }
  if (j->quota_kept_by && guard_quotas_) {
    e.reasons.push_back("may not preempt team " + *j->quota_kept_by + "'s jobs: of what the team holds, only GPUs " +
                        "it borrows beyond its guaranteed quota are taken back, and they are too few for this job");
  }
  // Whatever the last pass got to (one that ended early, with no GPU free, never looked at
  // quotas): a job larger than its team's quota without borrowing never starts.
  if (QuotaNeverFits(*j)) {
    e.ever = false;
    e.placement = PlaceResult::Kind::kWait;
    e.reasons.push_back("it can never start under team " + j->spec.team +
                        "'s quota as it is (larger than the quota on every GPU model it may use, borrowing "
                        "not allowed); an admin raises it: gpufleet quota " + j->spec.team + " --gpus N" +
                        (QuotaOf(j->spec.team).model_gpus.empty() ? "" : " [--model M]"));
  }
  if (r.kind == PlaceResult::Kind::kWait) {
    e.reasons.push_back(r.reason);
    if (view_.thermal_limit() > 0) {
      std::vector<std::string> hot;
      int count = 0;
      for (const auto& n : view_.nodes()) {
        for (size_t g = 0; g < n.hot.size(); ++g) {
          if (!n.hot[g]) continue;
          if (++count <= 4) hot.push_back(n.spec.name + " GPU " + std::to_string(g) + " (" + std::to_string(n.temp_c[g]) + " °C)");
        }
      }
      if (count > 0) {
        e.reasons.push_back(std::to_string(count) + " GPU(s) at or over the " + std::to_string(view_.thermal_limit()) +
                            " °C limit take no new work until they cool to " + std::to_string(view_.thermal_resume()) +
                            " °C: " + Join(hot, ", ") + (count > 4 ? ", ..." : ""));
      }
    }
  } else if (!held_back && (stale || j->outcome == JobState::Outcome::kNotReached ||
                            j->outcome == JobState::Outcome::kWait)) {
    e.reasons.push_back("fits now: starts at the next scheduling pass");
  }
  // An estimate from the running jobs alone (each ending at its estimate, stopping jobs' GPUs
  // counted as free now), for a job that waits for GPUs and nothing else: jobs ahead in the queue
  // may take those GPUs first, and a job that ends early or a node that joins makes it sooner.
  e.earliest_start = e.ever && !held_back && r.kind == PlaceResult::Kind::kWait ? EarliestStart(*j, nullptr)
                                                                                 : std::nullopt;
  if (e.earliest_start && *e.earliest_start <= clock_.Now()) e.earliest_start.reset();
  if (e.earliest_start) {
    e.reasons.push_back("estimated start " + FormatIso8601(*e.earliest_start) +
                        ", if running jobs end as estimated (jobs ahead of it may take those GPUs first)");
  }
  return e;
}

}  // namespace gpufleet::sched
