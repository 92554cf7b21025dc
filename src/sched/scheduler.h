// Scheduler: the deterministic core. Events in, decisions out.
//
//   Scheduler s(clock, view, policies, sink);
//   s.Handle(JobSubmitted{...});          // applies the event, then runs one scheduling pass
//   s.HandleAll({e1, e2, e3});            // several events that happened at the same time: one pass
//   if (auto t = s.NextWakeup()) ...      // deliver Timer{} at *t
//
// The same object runs in the live controller (system clock, store-backed sink) and in the
// simulator (simulated clock, event-queue sink); it reads time only from the Clock and the world
// only from events, so a replayed history gives the same decisions.
//
// A pass: rank the pending jobs with the queue policy; walk them in order and start each one the
// placement policy can place now; when one cannot start, either stop (backfill off), give it a
// reservation at its earliest start and let later jobs start only if they do not delay it (EASY),
// or skip it (greedy). A job that may preempt (the policy says whom) gets the smallest set of
// victims that makes room, chosen to lose the least work since their last checkpoint (or, with
// SchedulerOptions::victims = kWorstRank, the worst-ranked first). Running jobs are kept sorted by
// rank; a policy whose running ranks move with service (srtf) has them re-ranked at each pass.
//
// Thread-safety: none; one thread owns a Scheduler.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sched/action_sink.h"
#include "sched/autoscaler.h"
#include "sched/clock.h"
#include "sched/cluster_view.h"
#include "sched/event.h"
#include "sched/policy.h"
#include "sched/timer_heap.h"

namespace gpufleet::sched {

// A team's share of the cluster and its admission limits. Guaranteed GPUs (any model, and per
// model) order fair-share and are what a reclaim gives back; with `borrow` off the team never holds
// more than them. Zero means none, for each limit.
struct TeamQuota {
  int64_t gpus = 0;                            // guaranteed GPUs of any model
  std::map<std::string, int64_t> model_gpus;   // guaranteed GPUs per GPU model (catalog names)
  bool borrow = true;                          // may use GPUs beyond its quota that others leave idle
  int64_t max_running_jobs = 0;                // jobs of the team running at once
  int64_t max_pending_jobs = 0;                // jobs waiting at once (enforced at submit)
  bool empty() const {
    return gpus == 0 && model_gpus.empty() && borrow && max_running_jobs == 0 && max_pending_jobs == 0;
  }
};

// What a team holds and has waiting now.
struct TeamLoad {
  int64_t running_jobs = 0;
  int64_t pending_jobs = 0;
  int64_t used_milli = 0;                          // GPUs held by its running jobs (milli-GPUs)
  std::map<std::string, int64_t> model_used_milli;  // ... per GPU model
  // Of those, GPUs of jobs told to stop (preempted, their processes not yet gone): a quota check
  // counts them as given up already, or several searches would each take them.
  int64_t stopping_milli = 0;
  std::map<std::string, int64_t> model_stopping_milli;
};

// Money limits of a team (micro-dollars). Spend is what the team's jobs cost since `since`: each
// running job pays its share of its nodes' prices (model::NodeSpec::price_micros_per_hour: its
// GPUs over the node's) until its GPUs are released; a team also pays the rest of each rented
// node charged to it (Scheduler::ChargeNode), so its spend is what the cloud bills for it.
struct TeamBudget {
  Time since;                    // the budget period's start; spend before it does not count
  int64_t hard_micros = 0;       // 0: none. No new starts once reached; running jobs are stopped
                                 // (and requeued) when stop_running, early by the stop lead:
                                 // when spend plus the team's cost per hour over the lead (the
                                 // longest stop grace of its running jobs, plus
                                 // SchedulerOptions::budget_release_lead if nodes are charged
                                 // to it) reaches the budget. Jobs that exit within their grace
                                 // and nodes released within the release lead end at the budget.
  int64_t soft_micros = 0;       // 0: none. Only reported (an alert), never enforced
  int64_t max_rate_micros = 0;   // 0: none. A job starts only if the team's running cost per hour,
                                 // its own included, stays within this
  bool stop_running = true;
  // kNone: one period from `since` on. Otherwise the budget rolls over at each UTC calendar
  // period's start (common/time.h): `since` moves there and spend counts from zero again.
  CalendarPeriod period = CalendarPeriod::kNone;
  // Spend since `since` of runs the core no longer knows (they ended before this budget was
  // set, or before a controller restart): the caller counts it from its records. Counts until
  // the next rollover.
  int64_t carried_micros = 0;
  // The hard limit had stopped the team under this budget (a restarted controller restores it,
  // so that a restart does not let a stopped team start or rent again).
  bool hard_stopped = false;
};
struct TeamSpend {
  int64_t spent_micros = 0;      // since the budget's `since` (all time without a budget)
  __int128 spent_exact = 0;      // spent_micros before rounding down: micro-dollar-milliseconds per hour
  int64_t rate_micros = 0;       // per hour, of the team's jobs holding GPUs and its charged nodes now
  // Of spent_micros: rented nodes charged to the team while GPUs there held no job (booting,
  // idle GPUs, the idle tail before release).
  int64_t rented_idle_micros = 0;
  int64_t rented_idle_rate_micros = 0;  // ... per hour now
  bool over_soft = false;
  bool over_hard = false;
  // The hard budget has stopped the team (spend plus the stop lead reached it): its jobs do not
  // start and nodes charged to it should be released as soon as they are idle.
  bool hard_stop = false;
};

// The answer to "why is my job not running?".
struct Explanation {
  JobId job;
  JobPhase phase = JobPhase::kPending;
  int position = 0;       // 1-based place in the queue (pending only)
  int queue_length = 0;
  PlaceResult::Kind placement = PlaceResult::Kind::kWait;  // can it run now?
  bool ever = true;                                          // could it ever run here?
  std::optional<Time> earliest_start;                        // from running jobs' estimates
  std::vector<std::string> reasons;                          // sentences for people
};

struct SchedulerStats {
  int64_t passes = 0;
  int64_t full_passes = 0;
  int64_t partial_passes = 0;
  int64_t starts = 0;
  int64_t preemptions = 0;
  int64_t placement_calls = 0;
};

class Scheduler {
 public:
  Scheduler(const Clock& clock, ClusterView& view, Policies policies, ActionSink& sink);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Applies the event and runs a pass. Events about unknown jobs or nodes are ignored with a
  // Status (the world may race: a job cancelled as it finished).
  Status Handle(const Event& event);
  // Applies all events, then runs one pass. Returns the first error; applies the rest anyway.
  Status HandleAll(const std::vector<Event>& events);

  // When the scheduler wants a Timer event; never a sentinel.
  std::optional<Time> NextWakeup() const;

  Explanation Explain(JobId job) const;
  // Why a pending job may not start whatever the capacity (its team's hard budget is spent, or
  // its quota or running-job limit is reached); empty when nothing but capacity holds it. The autoscaler does not rent for held jobs.
  std::string BudgetHold(JobId job) const;
  // Whether the placement policy says the pending job can never run on the nodes there are (as
  // Explain's "can ever run: no", without its reasons): one placement, no walk of the queue.
  bool NeverPlaceable(JobId job) const;
  // What the last pass that reached the pending job held it by, when that still holds and is
  // neither budget nor capacity: a reservation for an earlier job ("held by a reservation for job
  // 3"), or victims still stopping for it. Empty otherwise. O(1): for a queue listing's rows.
  std::string HeldBy(JobId job) const;
  // The queue as the autoscaler sees it, for both worlds (the live pool and the simulator build
  // ScaleInput::pending from this and nothing else): pending jobs in queue order, in the shape
  // this scheduler will place them (split to fit, as admitted), without the jobs a budget or quota
  // holds (they rent nothing). `restart_overhead` is the world's estimate of what each
  // interruption costs on top of the lost work; a job that gives no checkpoint interval is
  // assumed to lose half of PendingJob's default on each.
  std::vector<PendingJob> ScalingQueue(Duration restart_overhead) const;
  // The same into `out`, reusing its elements' storage (a caller that asks at every event).
  void ScalingQueueInto(Duration restart_overhead, std::vector<PendingJob>& out) const;

  // Team quotas for fair-share (whole GPUs of any model); the other limits stay.
  void SetTeamQuota(const std::string& team, int64_t gpus);
  // A team's quota and limits, replacing earlier ones (an empty quota removes them).
  void SetTeamQuota(const std::string& team, const TeamQuota& quota);
  TeamQuota QuotaOf(const std::string& team) const;
  TeamLoad LoadOf(const std::string& team) const;
  // Teams that have a quota or have had jobs, by name.
  std::vector<std::string> Teams() const;
  // Why `team` may not queue `jobs` more jobs now (its pending-job limit), or empty.
  std::string AdmissionBlock(const std::string& team, int64_t jobs) const;
  // Money: a team's budget (replacing any earlier one), its spend now, and a job's cost so far
  // (all its runs, the current one up to now). A job's own max_cost_micros (JobSpec) stops it
  // for good when reached.
  void SetTeamBudget(const std::string& team, const TeamBudget& budget);
  // Nodes of `gpu_model` with `gpus` GPUs may appear later (an autoscaled pool can rent them):
  // jobs larger than any node are split to fit them even before one exists.
  void SetNodeSizeHint(const std::string& gpu_model, int gpus);
  TeamSpend SpendOf(const std::string& team) const;
  // SpendOf(team).hard_stop without the rest: whether the team's hard budget (less its stop lead)
  // is spent. False at once for a team without a hard budget (most teams, and every team of a
  // replay without budgets), where SpendOf sums every running job.
  bool HardStopReached(const std::string& team) const;
  // When the hard limit has stopped the team (until a new budget or period): the start of the
  // budget period it was stopped in; nullopt when it is not stopped. A flag, no sum.
  std::optional<Time> HardStoppedIn(const std::string& team) const;
  int64_t CostOf(JobId job) const;
  // Whole-node billing of a rented node (docs/cost.md#rented-nodes). The cloud bills an instance
  // from its rent to its release, whatever runs on it. From `since` until EndNodeCharge, `team`
  // pays the node's price per hour less what the jobs running there pay for their GPUs (their
  // own teams pay that share): its boot, its idle GPUs and its idle tail. So teams' spend adds
  // up to the bill and a hard budget caps it. The node is named as in NodeSpec::name and need
  // not have joined yet. A second charge of the same node replaces the first.
  void ChargeNode(const std::string& node_name, const std::string& team, int64_t price_micros_per_hour,
                  Time since);
  void EndNodeCharge(const std::string& node_name);  // now
  // The team a node is charged to, or empty.
  std::string ChargedTeam(const std::string& node_name) const;
  // Every charged node's team, by node name.
  std::map<std::string, std::string> ChargedTeams() const;

  // Read access for reports, the API and tests.
  std::optional<JobPhase> PhaseOf(JobId job) const;
  const model::Placement* PlacementOf(JobId job) const;
  const JobView* ViewOf(JobId job) const;
  size_t pending_count() const { return pending_count_; }
  size_t running_count() const { return running_.size(); }
  size_t stopping_count() const { return stopping_.size(); }
  const ClusterView& view() const { return view_; }
  const SchedulerStats& stats() const { return stats_; }
  const Policies& policies() const { return policies_; }
  // Pending jobs in queue order (ids), as the next pass would see them.
  std::vector<JobId> QueueOrder() const;
  // What the scheduler has learned about a job (model::JobMemory), to hand back in
  // JobSubmitted/JobRestored after a restart; nullopt for an unknown job. It changes when the job
  // starts, stops, is requeued or checkpoints, and when a Timer re-ranks it (RerankedAt).
  std::optional<model::JobMemory> MemoryOf(JobId job) const;
  // The jobs a Timer delivered at `now` would re-rank (their rank class may change silently).
  std::vector<JobId> RerankedAt(Time now) const;

 private:
  struct JobState;
  struct Reservation;

  Status Apply(const Event& e);
  void Pass();
  void Enqueue(JobState& j);
  void Dequeue(JobState& j);
  void StartJob(JobState& j, model::Placement placement);
  void BecomeRunning(JobState& j, model::Placement placement, Time started, const QueueContext& ctx);
  int64_t CostRate(const model::Placement& p) const;
  int64_t AddedRate(const JobState& j, const model::Placement& p) const;
  __int128 SpentExact(const std::string& team) const;
  void Accrue(JobState& j, Time now);
  // Why the team's budget keeps `j` from starting now with `rate` per hour; empty if it may.
  std::string BudgetBlock(const JobState& j, int64_t rate, Time now) const;
  void EnforceBudgets(Time now);
  void RollBudgetPeriods(Time now);
  std::optional<Time> NextBudgetDeadline(Time now) const;
  void StopRunning(JobState& j, PreemptReason reason, bool tell = true);
  void StopJobsOnNode(NodeId node, PreemptReason reason);
  void ReleaseAndRequeue(JobState& j, bool requeue);
  void Erase(JobState& j);
  void Remember(JobState& j, const model::JobMemory& m);
  bool TryPreempt(JobState& waiting, const QueueContext& ctx, const NodeMask* claimed);
  // Set by a TryPreempt that returned false: it found too few candidates, or none of them, or
  // all of them released, made room (not some other reason). A job of the same shape ranked
  // after the waiting one would fail so too (QueuePolicy::PreemptsByClass).
  bool search_lacked_room_ = false;
  // Searches that lacked room, remembered across passes when the policy preempts by class
  // (QueuePolicy::PreemptsByClass) and ranks are current: per shape, the last one and what it
  // read. A search of that shape by a job of the same class or a later one has a subset of its
  // candidates, so it fails too while the view, the claims and the running set are unchanged,
  // save running jobs moved to later classes (demotions), which are new candidates only for the
  // classes they crossed.
  struct FailedSearch {
    int64_t epoch = -1;         // search_epoch_ then
    uint64_t view_changes = 0;  // view_.changes() then
    int64_t demotions = 0;      // demotions_ then
    int64_t cls = 0;            // the waiting job's class (RankKey::k[0])
    Time now;                   // read only with SchedulerOptions::min_run_before_preempt
  };
  std::vector<FailedSearch> failed_searches_;
  // Bumped by whatever may give a failed search room, save demotions: a start, a stop, a
  // requeue, an event other than an arrival or a timer, a change of quotas, budgets or claims.
  int64_t search_epoch_ = 0;
  int64_t demotions_ = 0;                      // running jobs moved to a later class
  std::map<int64_t, int64_t> class_gained_at_;  // class -> demotions_ when it last got a candidate
  // Whether a search of shape `shape` by a job of class `cls` is known to lack room now.
  bool SearchKnownToFail(int shape, int64_t cls, Time now) const;
  void RememberFailedSearch(int shape, int64_t cls, Time now);
  // A running job moved from class `from` to class `to` (a timer re-ranked it).
  void NoteClassMove(int64_t from, int64_t to);
  // The claims the last pass ended with: a pass that starts with others forgets failed searches.
  NodeMask claims_at_end_;
  // Per shape: the view (ClusterView::changes) on which its placement, with nothing excluded,
  // last failed, and how (wait or never); a pass does not ask again while the view is the same.
  std::vector<std::pair<uint64_t, PlaceResult::Kind>> failed_place_;
  NodeMask pass_claimed_;  // the claims during a pass (a buffer swapped with claims_at_end_)
  // What a pass learned of each shape (Pass), stamped with the pass's number (SchedulerStats::passes).
  struct PassFlags {
    int64_t pass = -1;
    uint8_t bits = 0;
  };
  static constexpr uint8_t kFailedFree = 1, kFailedExcl = 2, kDead = 4, kNoPreempt = 8;
  std::vector<PassFlags> pass_flags_;
  // Buffers a pass and a search reuse instead of allocating each time.
  std::vector<int> search_models_;
  std::vector<char> search_model_ok_;
  std::vector<JobState*> search_candidates_;
  std::vector<std::tuple<RankKey, int64_t, JobState*>> search_keyed_;  // worst-rank candidates, keyed
  std::vector<JobState*> search_chosen_;
  std::vector<const JobState*> search_taken_;  // victims chosen so far in this search (QuotaKeeps)
  mutable const std::string* quota_refused_team_ = nullptr;  // a team QuotaKeeps kept a victim of, this search
  // A search for a whole-GPU job defers the release of a victim's part on a node that stays too
  // small for one of the job's parts (TryPreempt): per node position, the whole GPUs its deferred
  // parts free and whether its parts are on the view (1: deferred only; 2: on the view).
  std::vector<int> search_extra_;
  std::vector<char> search_mark_;
  std::vector<char> search_usable_;  // per node in a search: 0 not asked yet, 1 no, 2 yes
  std::vector<int> search_touched_;
  std::vector<int> search_part_pos_;
  std::vector<std::pair<const model::NodeAssignment*, int>> search_deferred_;  // (part, next on its node)
  std::vector<int> search_first_deferred_;
  std::vector<std::tuple<RankKey, int64_t, int, JobState*>> pass_heads_;           // the shape queues' heads
  std::vector<std::tuple<RankKey, int64_t, JobState*>> pass_group_heads_;  // the (team, shape) queues' heads
  TeamUsageMap pass_usage_;                            // team usage at the pass's start
  std::optional<Reservation> MakeReservation(const JobState& head) const;
  std::optional<Time> EarliestStart(const JobState& j, NodeMask* nodes_out) const;
  QueueContext Context() const;
  RankKey RankOf(const JobState& j, const QueueContext& ctx) const;
  RankKey LiveRank(JobState& j, const QueueContext& ctx) const;
  void RefreshRunningRanks(const QueueContext& ctx);
  Time running_ranks_at_ = Time::Max();  // when RefreshRunningRanks last ran
  void Rerank(JobState& j, const QueueContext& ctx);
  void ScheduleTimer(const JobState& j, const QueueContext& ctx);
  std::vector<JobState*> OrderedPending(const QueueContext& ctx) const;
  bool StaticRanks() const;
  // The policy's MayPreempt, plus the quota rule while it applies (guard_quotas_): a job never
  // stops another team's job whose team would then hold less than its guaranteed quota.
  bool MayPreempt(const JobState& waiting, const JobState& running, const QueueContext& ctx) const;
  // The quota rule alone: whether stopping `victim` leaves its team (another than the waiting
  // job's) at least its guaranteed GPUs, on the victim's GPU model where the team has a quota for
  // that model, else of its any-model quota. Jobs told to stop, and the victims this search has
  // taken so far (search_taken_), count as given up.
  bool QuotaKeeps(const JobState& waiting, const JobState& victim) const;
  // The policy's PreemptsByClass, false while the quota rule applies (MayPreempt is then more
  // than a comparison of classes).
  bool PreemptsByClass() const { return !guard_quotas_ && policies_.queue->PreemptsByClass(); }
  // No timer is due at `now`: every rank that moves with time alone (a LAS class) is current.
  bool RanksCurrent(Time now) const;
  int ShapeId(const model::JobSpec& spec);
  void CountShape(const JobState& j, int sign);
  JobState* FindJob(JobId id);
  const JobState* FindJob(JobId id) const;

  const Clock& clock_;
  ClusterView& view_;
  Policies policies_;
  ActionSink& sink_;

  // Jobs holding GPUs per node position, and per GPU model the nodes with holders filed under
  // the best rank among them (a stopping holder counts as the best): a preemption search for a
  // whole-node job looks only at nodes whose every holder it may outrank.
  // Each holder with what it puts in its nodes' keys (HolderKey), kept so that a refile reads
  // the list instead of every holder.
  // A holder also keeps what a search's node checks ask of it (NodesMayHaveRoom,
  // NodesMayBeFreed), so that they read the list rather than each holder's job. (A job's parts
  // are on distinct nodes, as placements make them; a restored job with two parts on one node
  // has two records there, each counting its own part's GPUs.)
  struct Holder {
    JobState* job;
    RankKey key;
    Time started;          // its run's start
    int gpus = 0;          // GPUs its part holds on the node
    bool running = false;  // running, not stopping
    bool whole = true;     // its part holds whole GPUs (not a slice)
  };
  std::vector<std::vector<Holder>> holders_;
  std::vector<RankKey> holder_key_;  // per node position: the key it is filed under
  std::vector<char> holder_filed_;
  // Per GPU model, the nodes with holders by the class (RankKey::k[0]) of their key, each class
  // in no particular order (what reads it asks only whether enough nodes qualify).
  using HolderFile = std::map<int64_t, std::vector<int>>;
  std::vector<HolderFile> holders_by_model_;
  std::vector<int> holder_slot_;  // per node position: its index in its class's list
  // Per node position, counts kept with its holders: the GPUs they hold, how many hold a slice,
  // and their GPUs by class (RankKey::k[0]) for the first few classes, with how many holders are
  // of another class (a stopping holder's key is of none of them).
  static constexpr int kCountedClasses = 8;
  struct HolderCounts {
    int gpus = 0;
    int slices = 0;
    int uncounted = 0;
    std::array<int, kCountedClasses> class_gpus{};
  };
  std::vector<HolderCounts> holder_counts_;
  void CountHolder(int pos, const Holder& h, int sign);
  void UnfileNode(HolderFile& filed, int pos);
  static void PrefetchForVisit(const JobState* j);
  static void PrefetchCandidate(const JobState* j);
  static void PrefetchForTimer(const JobState* j);
  mutable uint32_t prefetched_timer_slot_ = UINT32_MAX;  // the timer NextWakeup last prefetched for
  mutable Time prefetched_timer_at_;
  void AddHolder(JobState& j);
  // `keyed`: whether `j` counted in its nodes' keys (else only a node left empty is refiled).
  void RemoveHolder(JobState& j, bool keyed);
  // `changed`: a holder of the node whose phase or rank changed since it was last filed.
  void RefileNode(int pos, const JobState* changed = nullptr);
  // A holder's part of its nodes' keys: the best rank for a stopping one, none (the worst) for a
  // running one whose rank moves with service, else its rank.
  static RankKey HolderKey(const JobState& h);
  // False when no node could give a whole-node job `w` enough GPUs, even with every job it may
  // preempt stopped: the preemption search would fail.
  bool NodesMayBeFreed(const JobState& w, const std::vector<int>& models, const QueueContext& ctx) const;
  // The same for a whole-GPU job that needs part of a node: false when fewer than its node count
  // could have its GPUs per node free, each node counting its free GPUs plus those of the
  // holders `w` may stop (all that a search could release there).
  bool NodesMayHaveRoom(const JobState& w, const std::vector<int>& models, const QueueContext& ctx) const;
  // Whether a search for `w` may stop holder `h` (what both checks above count as stoppable).
  // `by_class`: preemption by class with current ranks.
  bool MayStopHolder(const JobState& w, const Holder& h, bool by_class, const QueueContext& ctx) const;
  // Schedulable nodes of `models` with `w`'s GPUs per node free now.
  int64_t NodesWithRoomNow(const JobState& w, const std::vector<int>& models) const;
  // Worst-rank victims of a job that needs whole nodes, read from the nodes' holders instead of
  // walking the running set (TryPreempt says when the two agree): the nodes in `search_nodes_`,
  // their holders in `chosen`, worst first. False when it cannot tell; the walk decides then.
  bool WholeNodeVictims(const JobState& w, const std::vector<char>& model_ok, const QueueContext& ctx,
                        std::vector<JobState*>& chosen);
  std::vector<std::pair<RankKey, int>> search_node_keys_;  // (node key, node position)
  std::vector<int> search_nodes_;
  // Claims the nodes of `target` for `w` and stops `chosen` for it (a search that succeeded).
  void StopForClaim(JobState& w, const model::Placement& target, const std::vector<JobState*>& chosen);
  std::unordered_map<int64_t, std::unique_ptr<JobState>> jobs_;
  // Pending jobs sorted by (rank, seq), one queue per shape (for policies whose ranks do not depend
  // on usage, a pass merges them; the whole queue in order is their merge).
  std::vector<std::set<std::tuple<RankKey, int64_t, JobState*>>> by_shape_;
  size_t pending_count_ = 0;
  // Pending jobs per (team, shape) in StaticRank order, when the queue policy gives one: a full
  // pass merges these queues' heads by live rank (QueuePolicy::StaticRank).
  std::vector<std::set<std::tuple<RankKey, int64_t, JobState*>>> by_group_;
  std::map<std::pair<std::string, int>, int> group_ids_;
  size_t grouped_pending_ = 0;
  // Pending jobs whose preemption search failed while the running set was at failed_version_
  // (they may not search again until it changes): lets a pass stop once only they are left.
  int64_t failed_version_ = -1;
  int64_t failed_count_ = 0;
  void File(JobState& j);
  void Unfile(JobState& j);
  // Running jobs by rank. A job whose rank changes while it runs is filed again only when
  // something reads the order (SyncRunning): LAS demotes running jobs at each service threshold,
  // and with preemption by class what most passes and searches read is the worst class
  // (running_classes_), not the order. Until then it stays filed under its old rank, which keeps
  // the tree consistent (every key is still unique and compared as filed).
  mutable std::set<std::tuple<RankKey, int64_t, JobState*>> running_;
  mutable std::vector<JobState*> running_unfiled_;  // running jobs filed under an old rank
  std::map<int64_t, int64_t> running_classes_;      // running jobs per class of their rank now
  // Every insertion or removal in running_, rank change of a running job, or re-filing by
  // SyncRunning (a pass reads the worst job again after one).
  mutable uint64_t running_edits_ = 0;
  // Files every job of running_unfiled_ under its rank now (before running_'s order is read).
  void SyncRunning() const;
  void CountRunningClass(int64_t cls, int delta);
  void AddRunning(JobState& j);
  void RemoveRunning(JobState& j);
  // Running jobs in the order a least-work-lost preemption search stops them, per first rank
  // component (VictimIndex in scheduler.cc); null unless the policy preempts with that order.
  struct VictimIndex;
  std::unique_ptr<VictimIndex> victim_index_;
  void IndexVictim(JobState& j);
  void UnindexVictim(JobState& j);
  // A running job's rank becomes `rank`: moved in running_, and to its new class's victim index.
  void ChangeRunningRank(JobState& j, const RankKey& rank);
  void MoveVictimClass(JobState& j);  // j.rank's class is not the one it is filed under
  class VictimStream;
  struct VictimBuffers;  // what a VictimStream reuses from search to search
  std::unique_ptr<VictimBuffers> victim_buffers_;
  std::unordered_set<JobState*> stopping_;                       // asked to stop, not yet gone
  int64_t running_with_estimate_ = 0;
  int64_t running_with_max_cost_ = 0;  // running jobs with a max_cost_micros of their own
  int64_t running_moving_ = 0;   // running jobs whose rank moves with service (re-ranked per pass)
  int64_t running_version_ = 0;  // bumped whenever the running set or a running rank changes
  TeamUsageMap teams_;
  struct TeamMoney {
    TeamBudget budget;
    bool has_budget = false;
    __int128 spent_closed = 0;  // micro-dollar-milliseconds per hour of finished runs (since budget.since)
    __int128 idle_closed = 0;   // ... of which charged nodes' idle part
    Time idle_from;             // the earliest instant idle_closed counts (when it is not 0)
    int64_t rate = 0;           // micro-dollars per hour of the team's jobs holding GPUs and charges
    int64_t idle_rate = 0;      // ... of which charges
    int charges = 0;            // nodes charged to the team
    bool hard_stopped = false;  // the hard budget stopped the team (until a new budget or period)
  };
  std::map<std::string, TeamMoney> money_;
  int64_t hard_budgets_ = 0;      // teams in money_ whose budget has a hard limit
  int64_t periodic_budgets_ = 0;  // ... whose budget renews each calendar period
  struct Charge {
    std::string team;
    int64_t price = 0;      // the node's whole price per hour
    int64_t jobs_rate = 0;  // what jobs running there pay for their GPUs now
    int64_t rate = 0;       // what the team pays now: price - jobs_rate, at least 0
    Time from;              // when `rate` took effect
  };
  std::map<std::string, Charge> charges_;  // by node name
  // Books a charge's cost up to now and moves its rate by `jobs_delta` (a run starting there
  // adds its part's cost, one ending takes it away).
  void Recharge(Charge& c, int64_t jobs_delta, Time now);
  // Runs' parts on charged nodes: (node name, part rate), kept per job while it holds GPUs.
  void ChargeParts(JobState& j, int sign, Time now);
  // The spend the team will add between a stop decision and its end (docs/cost.md).
  __int128 StopLeadSpend(const std::string& team, int64_t extra_rate, Duration extra_grace) const;
  void MoveChargesOfStoppedTeams();
  // Whether a node billed to `team` runs a job of a team its hard budget has not stopped, which
  // MoveChargesOfStoppedTeams would bill instead.
  bool ChargeMovableFrom(const std::string& team) const;
  bool TeamHardStopped(const std::string& team) const;
  struct TeamBooks {
    TeamQuota quota;
    TeamLoad load;
  };
  // Per team: quota, limits and load (looked up at every enqueue, start and stop; Teams() sorts).
  std::unordered_map<std::string, TeamBooks, TeamNameHash> books_;
  TeamBooks& BooksOf(JobState& j);  // books_[j's team], looked up once per job
  TeamUsage& UsageOf(JobState& j);  // teams_[j's team], the same
  bool guard_quotas_ = false;
  bool track_stopping_ = false;  // some team has a quota: stopping jobs' GPUs are counted per team
  void CountStopping(const JobState& j, int sign);  // some team has a quota and the policy's MayPreempt does not keep it
  bool any_limits_ = false;                 // some team has a limit that holds jobs (not only borrow)
  // Why the team's quota or limits keep `j` waiting; with a placement, judged on its GPU model.
  std::string QuotaBlock(const JobState& j, const model::Placement* placement) const;
  // Whether the team's quota, without borrowing, is smaller than the job on every GPU model it
  // may use: it never starts while the quota stays as it is.
  bool QuotaNeverFits(const JobState& j) const;
  void RecountLimits();
  std::map<std::string, int> node_size_hints_;  // model -> GPUs per node of nodes that may come
  int64_t priced_running_ = 0;  // running or stopping jobs that cost something
  int64_t graced_running_ = 0;  // ... that have a stop grace
  // Shape ids: a job with no model list, labels or environment (most of a trace) is keyed by
  // its numbers alone; any other by a text key. Ids count up over both (shape_count_).
  struct PlainShape {
    int64_t gpus_per_node, nodes, gpu_milli, cpu_milli, mem_mib, market;
    bool operator==(const PlainShape&) const = default;
  };
  struct PlainShapeHash {
    size_t operator()(const PlainShape& k) const;
  };
  std::unordered_map<PlainShape, int, PlainShapeHash> plain_shapes_;
  std::unordered_map<std::string, int> shapes_;
  int shape_count_ = 0;
  std::string shape_key_;  // ShapeId's buffer
  std::vector<int64_t> shape_pending_;      // pending jobs per shape
  std::vector<int64_t> shape_pending_est_;  // ... of which have a duration estimate
  int64_t live_shapes_ = 0;                 // shapes with at least one pending job
  int64_t pending_without_gpus_ = 0;        // pending jobs that ask for no GPU (CPU only)
  // Rank changes to re-evaluate (TimerHeap): a job with a timer holds a slot, its heap key.
  TimerHeap timers_;
  std::vector<JobState*> timer_job_;        // per slot: the job holding it, or null
  std::vector<uint32_t> free_timer_slots_;
  std::vector<JobState*> due_buffer_;       // the jobs whose timers are due (a Timer event)
  void SetTimer(JobState& j, Time at);
  void ReleaseTimer(JobState& j);           // j's timer is gone (due or dropped)
  void DropTimer(JobState& j);
  int64_t next_seq_ = 0;
  // Pass bookkeeping: which jobs arrived since the last pass, whether anything else changed
  // (then the next pass starts from the top of the queue), and the job the last pass left
  // blocked at the head.
  std::vector<JobId> arrivals_;
  bool full_pass_ = true;
  std::optional<JobId> blocked_head_;
  SchedulerStats stats_;
};

}  // namespace gpufleet::sched
