// Engine: the live controller's state machine. It owns the scheduler core (the same Scheduler the
// simulator runs, with the system clock) and turns API calls and agent reports into scheduler
// events, and the scheduler's decisions into durable job transitions and agent commands.
//
// One thread (Run, or a test calling Step) does all the work. API threads hand it requests
// through an inbox and wait for the answer; each step takes everything in the inbox, so
// concurrent submissions share one store transaction (group commit). Order within a step:
//   1. submissions are committed to the store (a 2xx answer is durable);
//   2. the other requests and the agents' reports are applied, node heartbeats are checked;
//   3. the scheduler handles the resulting events and makes its decisions;
//   4. the resulting transitions are committed in one transaction;
//   5. only then are commands published to the agents and the callers answered.
// So an agent never runs a job whose start is not on disk, and a restarted controller finds
// every job it ever answered for. When step 4 fails (after retries), the step stops there: its
// commands are held with its transitions, a cancel asked in it is answered Unavailable (503),
// and every later step first commits what is held, publishing the held commands only once it is
// on disk.
//
// Reads (job records, history, lists) go to the store; queue order, explanations and node state
// come from memory under a lock.
#pragma once

#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "api/agent_protocol.h"
#include "api/records.h"
#include "common/mutex.h"
#include "common/status.h"
#include "model/gpu_catalog.h"
#include "node/burn_in.h"
#include "node/environments.h"
#include "obs/exposition.h"
#include "sched/autoscaler.h"
#include "sched/clock.h"
#include "sched/cluster_view.h"
#include "sched/policy/registry.h"
#include "sched/scheduler.h"
#include "store/state_store.h"

namespace gpufleet::controller {

struct EngineOptions {
  std::string policy = "backfill";
  std::map<std::string, std::string> policy_options;
  Duration heartbeat_interval = Duration::Seconds(5);
  Duration lost_after = Duration::Seconds(30);  // no heartbeat this long: the node is lost
  std::string checkpoint_root;                   // default checkpoint dir: <root>/job-<id>
  int master_port_base = 29500;                  // MASTER_PORT for gangs: base .. base+span-1
  int master_port_span = 1000;
  std::string epoch;                             // boot id; empty: made from the clock
  // A GPU at or over thermal_limit_c takes no new work until it cools to thermal_resume_c
  // (ClusterView::SetThermalLimits); 0: off.
  int thermal_limit_c = 85;
  int thermal_resume_c = 75;
  // How long the pool takes to release a rented node once its jobs stopped: hard budgets stop a
  // team this much earlier when nodes are billed to it (sched::SchedulerOptions).
  Duration budget_release_lead = Duration::Seconds(30);
  // Acceptance burn-in (docs/nodes.md): with burn_in_required every node that registers runs the
  // suite and takes no work until it passes; otherwise only nodes a pool asks for
  // (Engine::RequireBurnIn) and nodes an operator re-checks. A test passes at burn_in_threshold
  // of its reference.
  bool burn_in_required = false;
  double burn_in_threshold = node::kDefaultThreshold;
  // The environment presets jobs may name (data/environments.yaml); null: none, and a job that
  // names one is refused.
  std::shared_ptr<const node::EnvironmentTable> environments;
  // A clock that runs on while the controller's process is stopped or its machine suspended
  // (null: CLOCK_BOOTTIME), to tell such a stall from silent nodes (Engine::Run, CreditStall).
  std::function<Duration()> monotonic;
};

// What `gpufleet nodes` shows.
struct NodeStatus {
  api::NodeRecord record;
  int gpus_used = 0;       // whole GPUs allocated (slices round up)
  std::vector<api::GpuSampleReport> telemetry;
  std::vector<JobId> jobs;
  std::optional<api::SpotNotice> notice;  // the provider is reclaiming the node
  // Its last heartbeat, or this controller's start when that is later: a restarted controller
  // has not heard from any node yet, and counts their silence from its start (as lost_after does).
  Time last_seen;
  bool heard_since_start = false;  // false: last_seen is the controller's start
  // Why its agent cannot keep its own files (a full data directory); empty when it can. It takes
  // no work meanwhile.
  std::string storage_fault;
  std::vector<api::DiskReport> disks;  // the room its agent last reported (api::Heartbeat::disks)
  std::string containment;             // as its agent registered (api::RegisterRequest::containment)
  std::optional<api::EnforcedLimits> limits;
};

struct QueueEntry {
  api::JobRecord job;
  int position = 0;  // 1-based; 0 for running jobs
};

struct SubmitReply {
  std::vector<JobId> ids;
  std::vector<std::string> names;
  bool created = true;
};

// What Engine::CancelMany did, or why it did nothing.
struct CancelManyReply {
  std::vector<JobId> cancelled;  // were waiting (pending, preempted): cancelled now
  std::vector<JobId> stopping;   // were starting, running or stopping: being stopped, they end cancelled
  std::vector<std::pair<JobId, api::JobState>> ended;  // had ended before: left as they were
  // Left alone as asked (CancelManyOptions): "team T" (not the caller's to cancel) or the state
  // the job was in when not one of those asked for.
  std::vector<std::pair<JobId, std::string>> skipped;
  // The refusals. When either is non-empty nothing was changed (and the lists above are empty).
  std::vector<JobId> missing;                            // no such job
  std::vector<std::pair<JobId, std::string>> forbidden;  // (job, its team): not the caller's to cancel
  bool refused() const { return !missing.empty() || !forbidden.empty(); }
};

// How Engine::CancelMany chooses. `ended`: jobs the caller found ended in the store
// (GetJobBriefs) with their states, so that the step reads the store only for a job that ended
// since (a request of 100,000 ended or unknown ids would otherwise hold every other request while
// the store is read). `only`: cancel only the jobs in these states at the step (empty: any),
// leaving the others (skipped); `skip_forbidden`: leave the jobs the caller may not cancel
// (skipped) instead of refusing the request.
struct CancelManyOptions {
  std::map<int64_t, api::JobState> ended;
  std::vector<api::JobState> only;
  bool skip_forbidden = false;
};

class Engine {
 public:
  Engine(const sched::Clock& clock, store::StateStore& store, EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Node shapes an autoscaled pool may rent (GPU model -> GPUs per node): jobs larger than any
  // node are split to fit them. Call before Recover.
  void SetNodeSizeHints(const std::map<std::string, int>& gpus_by_model);

  // Loads nodes and unfinished jobs from the store and rebuilds the scheduler's state: pending
  // jobs queue again in submission order, running ones keep their GPUs. Call once, first.
  Status Recover();

  // --- API (any thread). Each returns a future the engine thread fulfils. ---
  // A job no known node could ever hold (its GPU model, market, labels, CPUs or memory per node)
  // is refused with the reason (InvalidArgument) and nothing of the request is stored; a node
  // count alone does not refuse one (more nodes may join). Without nodes, or with a pool that may
  // rent them (SetNodeSizeHints), every job is taken.
  // Changes made for an API request take its audit record (`audit`, outcome "allowed"): it is
  // written in the transaction that makes the change durable, or not at all. A submit's record
  // gets the ids of the jobs it made and is not written for a repeated request id.
  std::future<Result<SubmitReply>> Submit(std::string request_id, std::vector<api::JobRequest> jobs,
                                          std::optional<api::AuditRecord> audit = std::nullopt);
  std::future<Status> Cancel(JobId job, std::string by, std::optional<api::AuditRecord> audit = std::nullopt);
  // Cancels many jobs in one step, so in one transaction (an array of 100,000 tasks at once).
  // `may_cancel(team)` says whether the caller may cancel a job of that team (null: any). Every id
  // is checked before anything changes: when one names no job or a job the caller may not cancel,
  // nothing changes and the reply lists them. Each id counts once, in ascending order; jobs that
  // had ended are listed and left alone. The audit record is written only when something changed.
  std::future<Result<CancelManyReply>> CancelMany(std::vector<JobId> jobs, std::string by,
                                                  std::function<bool(const std::string& team)> may_cancel,
                                                  std::optional<api::AuditRecord> audit = std::nullopt,
                                                  CancelManyOptions options = {});
  // The team of each of `jobs` that is unfinished (held by the engine); nullopt for the others.
  std::vector<std::optional<std::string>> UnfinishedTeams(const std::vector<JobId>& jobs) const;
  std::future<Status> Drain(const std::string& node, bool drain, std::optional<api::AuditRecord> audit = std::nullopt);
  // The node's agent is going away (it stops its jobs): nothing new lands there until the agent
  // registers again. Held in memory only, as every node recovered at a restart is held.
  std::future<Status> HoldUntilRegistered(const std::string& node);
  // Runs the acceptance burn-in on a registered node again: it takes no work until the new
  // result is judged (its agent is told in its next heartbeat). FailedPrecondition while jobs
  // run there (drain it first) or when the node is not up.
  std::future<Status> CheckNode(const std::string& node, std::optional<api::AuditRecord> audit = std::nullopt);
  // The node of this name must pass a burn-in when it registers (a pool with burn_in: true
  // calls this when it rents the machine). Any thread.
  void RequireBurnIn(const std::string& node);
  // Registers (or re-registers) a node. `token_hash` is the hash of the new agent token the
  // reply carries; every older agent token of the node is revoked. With `by_join_token`, a name
  // that belongs to a live node (up or draining, heard from within lost_after) is refused: a join
  // token cannot take over a node; the node's own agent re-registers with its agent token.
  std::future<Result<api::RegisterReply>> Register(api::RegisterRequest request, std::string token_hash,
                                                   bool by_join_token, std::optional<api::AuditRecord> audit);
  std::future<Result<api::RegisterReply>> Register(api::RegisterRequest request, std::string token_hash,
                                                   bool by_join_token = false);
  std::future<Result<api::HeartbeatReply>> Heartbeat(NodeId node, api::Heartbeat heartbeat);

  // Takes a node out of the cluster for good (its machine is being released): it is marked gone
  // and the scheduler forgets it. With only_if_idle, refuses (FailedPrecondition) while any job
  // holds GPUs there, so that a release decided a moment ago cannot kill a job started since.
  std::future<Status> Release(std::string node, bool only_if_idle, std::string reason);
  // Bills a rented node whole to `team` from `since` (sched::Scheduler::ChargeNode), until
  // EndNodeCharge: the pool calls these when it rents and when the instance is gone.
  void ChargeNode(std::string node, std::string team, int64_t price_micros_per_hour, Time since);
  void EndNodeCharge(std::string node);

  // Stops a running job and requeues it (from its checkpoint), saying why: the stalled-job
  // watchdog's restart. FailedPrecondition when the job is not running or already stopping;
  // ResourceExhausted once it was restarted kMaxStallRestarts times (a job that hangs every time
  // is flagged, not restarted forever).
  static constexpr int kMaxStallRestarts = 3;
  std::future<Status> Restart(JobId job, std::string reason);

  // Sets a team's budget (persisted; replaces any earlier one). A budget with every limit 0
  // removes it.
  std::future<Status> SetBudget(std::string team, sched::TeamBudget budget,
                                std::optional<api::AuditRecord> audit = std::nullopt);
  // Sets a team's quota and limits (persisted; replaces any earlier ones; an empty quota removes
  // them). Enforced by the scheduler at once; the pending-job limit by Submit (ResourceExhausted).
  std::future<Status> SetQuota(std::string team, sched::TeamQuota quota,
                               std::optional<api::AuditRecord> audit = std::nullopt);

  // --- Reads (any thread). ---
  struct TeamQuotaView {
    std::string team;
    sched::TeamQuota quota;
    sched::TeamLoad load;
  };
  // Every team with a quota or jobs waiting or running.
  std::vector<TeamQuotaView> Quotas() const;
  struct TeamCost {
    std::string team;
    sched::TeamSpend spend;
    std::optional<sched::TeamBudget> budget;
  };
  // Every team with a budget or spend; the live cost of unfinished jobs (id -> micro-dollars).
  std::vector<TeamCost> TeamCosts() const;
  std::map<int64_t, int64_t> LiveJobCosts() const;
  Result<sched::Explanation> Explain(JobId job) const;
  // The pending jobs the autoscaler may rent for, in queue order: those a budget does not hold.
  std::vector<sched::PendingJob> PendingForScaling() const;
  // Both at one instant, so that a job placed in between is not seen pending beside the node it
  // runs on.
  struct ScalingView {
    std::vector<sched::PendingJob> pending;
    std::vector<NodeStatus> nodes;
    std::set<std::string> hard_stopped_teams;  // teams a hard budget has stopped (TeamSpend::hard_stop)
    std::map<std::string, std::string> charged_to;  // node name -> the team billed for it now
  };
  ScalingView ScalingSnapshot() const;
  // Why the pool's last round rented nothing for these pending jobs (the autoscaler's holds, by
  // job id): `explain` says so instead of "the pool rents one for it". Replaces the last call's.
  void NotePoolHolds(std::map<int64_t, std::string> holds);
  std::vector<QueueEntry> Queue() const;  // running first, then pending in queue order
  // One page of Queue(): entries [from, from + limit), copied alone, and the queue's length.
  std::pair<std::vector<QueueEntry>, size_t> QueuePage(size_t from, size_t limit) const;
  // What metrics and alerts need of the unfinished jobs, counted without copying any: jobs by
  // (state, team), and the pending job that has waited longest (since it last became pending;
  // jobs a team's hard budget holds wait for money, not the cluster, and are left out of it).
  struct QueueCounts {
    std::map<std::pair<std::string, std::string>, int64_t> by_state_team;
    int64_t pending = 0;
    std::optional<JobId> oldest_pending;
    Time oldest_pending_since;
  };
  QueueCounts CountQueue() const;
  // Running (and starting) jobs with what the watchdog and the metrics need.
  struct JobWatch {
    JobId id;
    std::string name;
    std::string team;
    Time started;  // this attempt's start (or the controller's start, for a recovered job)
    api::WatchdogPolicy watchdog;
    std::optional<Time> last_output;
    std::optional<Time> progress_at;
    std::optional<int64_t> step;
    std::optional<double> loss;
    std::vector<model::NodeAssignment> parts;
  };
  std::vector<JobWatch> RunningJobs() const;
  // One job's activity, if it is starting or running: a lookup, not a walk of every job.
  std::optional<JobWatch> WatchOf(JobId job) const;
  // Counts since this controller started, for /metrics.
  struct Stats {
    std::map<std::string, int64_t> preemptions;  // by reason (cancels are not preemptions)
    int64_t requeues = 0;                        // a run that ended and went back to the queue
    int64_t spot_interruptions = 0;
    std::map<std::pair<std::string, std::string>, int64_t> finished;  // (state, team) -> jobs
  };
  Stats stats() const;
  // Scheduling passes and store commits, in seconds.
  const obs::Histogram& pass_seconds() const { return pass_seconds_; }
  const obs::Histogram& commit_seconds() const { return commit_seconds_; }
  // Per started part that names an environment: how long preparing it took on its node (0: it
  // was ready, a warm start).
  const obs::Histogram& environment_seconds() const { return environment_seconds_; }
  std::vector<NodeStatus> Nodes() const;
  std::optional<NodeId> NodeByName(const std::string& name) const;
  // How long until the node named `name`, up or draining, is declared lost without a heartbeat
  // (a join token may register its name then); nullopt when a join token may register it now.
  std::optional<Duration> LostIn(const std::string& name) const;
  // Whether `token_hash` is the node's current agent token: a token replaced by a later
  // registration is refused even before its revocation reaches every cache. True when this
  // controller has not seen the node register since it started (the store's revocation rules).
  bool IsCurrentAgentToken(NodeId node, const std::string& token_hash) const;
  // Whether the part (any attempt of an unfinished job) was placed on `node`: an agent may upload
  // logs only for its own parts.
  bool PartOnNode(NodeId node, const api::PartKey& key) const;
  std::string epoch() const { return options_.epoch; }
  const EngineOptions& options() const { return options_; }

  // Waits (up to `wait`) for commands for `node` after `after`; returns at once when there are
  // some. Commands stay until a later call acknowledges them with a larger `after`.
  // `epoch`: the controller epoch the agent's `after` counts in (empty: this one's, as agents
  // that send none mean). An `after` of another epoch (a poll sent to the controller before it
  // restarted, or before the agent heard of the restart) acknowledges nothing here: the batch
  // carries every waiting command and the new epoch, and the agent polls again from 0.
  api::CommandBatch PollCommands(NodeId node, int64_t after, Duration wait, const std::string& epoch = "")
      GF_EXCLUDES(out_mu_, inbox_mu_);

  // --- The engine thread. ---
  // Processes everything in the inbox and everything due at the clock's now. Returns whether it
  // did anything.
  bool Step() GF_EXCLUDES(mu_, inbox_mu_, out_mu_);
  // When the next step is due without new input (a scheduler timer, a heartbeat deadline).
  std::optional<Time> NextDeadline() const GF_EXCLUDES(mu_);
  // Steps until Stop(); waits on the inbox and deadlines in between.
  void Run() GF_EXCLUDES(mu_, inbox_mu_, out_mu_);
  // The controller did not run for `stalled` (Run measures it: its wait for work overran by that
  // much, because the process was stopped or the machine suspended). The nodes' heartbeats waited
  // unread meanwhile, so that time is taken off each node's silence at the next check: a node is
  // lost only after lost_after of silence while the controller ran.
  void CreditStall(Duration stalled) GF_EXCLUDES(mu_);
  void Stop() GF_EXCLUDES(inbox_mu_, out_mu_);
  // Long polls (PollCommands) answer at once from now on: call before stopping the HTTP server,
  // which waits for the requests in flight.
  void ReleasePollers() GF_EXCLUDES(inbox_mu_, out_mu_);

  // Called after every step with the number of jobs in each state (for metrics and tests).
  struct Counters {
    int64_t steps = 0;
    int64_t submits = 0;
    int64_t starts = 0;
    int64_t store_errors = 0;
    bool store_ok = true;  // the last commit succeeded (health turns ok again when the store recovers)
  };
  Counters counters() const;

 public:
  // What the engine knows of one part of the current attempt.
  struct PartInfo {
    bool started = false;
    bool exited = false;
    bool stopped = false;  // exited after a stop the engine asked for
    bool node_fault = false;  // did not start: its node could not keep its files (not the job's failure)
    int exit_code = 0;     // -1: lost with its node or agent
    int signal = 0;
    std::string message;
    // The part's environment: how long preparing it took on its node, and whether it was ready.
    std::optional<Duration> environment_took;
    bool environment_warm = false;
    int64_t checkpoint_seq = 0;  // the agent's sequence number of the last checkpoint report applied
  };

 private:
  using Part = PartInfo;
  struct Job {
    api::JobRecord rec;
    std::vector<Part> parts;  // of the current attempt
    bool stop_requested = false;
    bool cancel_requested = false;
    sched::PreemptReason stop_reason = sched::PreemptReason::kPriority;
    bool failing = false;  // a part failed; the others are being stopped
    int master_port = 0;
    std::string stop_text;  // why it stopped, when its agent stopped it (not the scheduler)
    bool restart_requested = false;  // Restart: requeue once its parts have stopped
    bool rerun_not_stall = false;    // ... because its node had run the part before (not a stall)
    std::string restart_text;
    int stall_restarts = 0;  // by the watchdog, since this controller started
    // restart.recover_on_exit_codes exits in a row, each within kQuickRecover of its start (a
    // crash loop: from kQuickRecoverLimit on they count as failures).
    int quick_recovers = 0;
    Time attempt_started;
    // Reported by its agents (the watchdog): the latest over its parts.
    std::optional<Time> last_output;
    std::optional<Time> progress_at;
    std::optional<int64_t> step;
    std::optional<double> loss;
  };
  struct NodeState {
    api::NodeRecord rec;
    std::vector<api::GpuSampleReport> telemetry;
    Time last_seen;
    bool heard = false;  // registered or beat since this controller started (else last_seen is its start)
    std::string token_hash;
    std::optional<api::SpotNotice> notice;  // a spot interruption notice, acted on
    // Takes no new work until its agent registers: recovered at a restart (its agent may be
    // gone), or its agent is shutting down. Its running jobs go on.
    bool awaiting_agent = false;
    Time registered_at;  // its agent's last registration, by this controller's clock
    // The burn-in the node owes (0: none): asked in every heartbeat reply until a report that
    // answers it arrives, so a lost reply cannot leave the node checking for ever.
    int64_t burn_in_request = 0;
    // Its agent cannot keep its own files (api::Heartbeat::storage_fault): takes no work until
    // its agent says it can again.
    std::string storage_fault;
    std::vector<api::DiskReport> disks;  // its last heartbeat's
    std::string containment;             // its agent's registration's
    std::optional<api::EnforcedLimits> limits;
  };
  // Takes in what the agent says of its storage (a registration or heartbeat, or a part that
  // could not start for it): holds the node or gives it work again.
  void SetStorageFault(NodeId id, NodeState& n, const std::string& fault) GF_REQUIRES(mu_);
  // Whether a node may take new work: up (not draining), its agent there, and accepted (no
  // burn-in pending or failed).
  static bool TakesWork(const NodeState& n);
  // Applies a finished burn-in: judges it against the datasheet and the fleet, stores it, and
  // passes or quarantines the node.
  void ApplyBurnIn(NodeId id, NodeState& n, model::BurnInReport report) GF_REQUIRES(mu_);
  // The node's spec with the environments its driver and GPUs support and those prepared on it.
  void SetEnvironments(model::NodeSpec& spec, const api::NodeRecord& rec) const;
  node::NodeFacts FactsOf(const api::NodeRecord& rec) const;
  struct Outbox {
    std::deque<api::Command> commands;
    int64_t next_seq = 1;
  };

  struct SubmitReq {
    std::string request_id;
    std::vector<api::JobRequest> jobs;
    std::optional<api::AuditRecord> audit;
    std::promise<Result<SubmitReply>> done;
    std::optional<Result<SubmitReply>> result;
  };
  struct CancelReq {
    JobId job;
    std::string by;
    std::optional<api::AuditRecord> audit;
    std::promise<Status> done;
    std::optional<Status> result;
  };
  struct CancelManyReq {
    std::vector<JobId> jobs;  // ascending, each once
    std::string by;
    std::function<bool(const std::string& team)> may_cancel;
    std::optional<api::AuditRecord> audit;
    CancelManyOptions options;
    std::promise<Result<CancelManyReply>> done;
    std::optional<Result<CancelManyReply>> result;
  };
  struct DrainReq {
    std::string node;
    bool drain;
    bool until_registered = false;  // HoldUntilRegistered: in memory, until the agent registers
    std::optional<api::AuditRecord> audit;
    std::promise<Status> done;
    std::optional<Status> result;
    bool check = false;  // CheckNode: run the burn-in again
  };
  struct RegisterReq {
    api::RegisterRequest req;
    std::string token_hash;
    bool by_join_token = false;
    std::optional<api::AuditRecord> audit;
    std::promise<Result<api::RegisterReply>> done;
    std::optional<Result<api::RegisterReply>> result;
  };
  struct HeartbeatReq {
    NodeId node;
    api::Heartbeat hb;
    std::promise<Result<api::HeartbeatReply>> done;
    std::optional<Result<api::HeartbeatReply>> result;
  };
  struct ReleaseReq {
    std::string node;
    bool only_if_idle = true;
    std::string reason;
    std::promise<Status> done;
    std::optional<Status> result;
  };
  struct BudgetReq {
    std::string team;
    sched::TeamBudget budget;
    std::optional<api::AuditRecord> audit;
    std::promise<Status> done;
    std::optional<Status> result;
  };
  struct QuotaReq {
    std::string team;
    sched::TeamQuota quota;
    std::optional<api::AuditRecord> audit;
    std::promise<Status> done;
    std::optional<Status> result;
  };
  struct RestartReq {
    JobId job;
    std::string reason;
    std::promise<Status> done;
    std::optional<Status> result;
  };
  struct ChargeReq {
    std::string node;
    std::string team;
    int64_t price_micros_per_hour = 0;
    Time since;
    bool end = false;
  };
  using Request = std::variant<SubmitReq, CancelReq, CancelManyReq, DrainReq, RegisterReq, HeartbeatReq, BudgetReq, ReleaseReq,
                               QuotaReq, RestartReq, ChargeReq>;

  class Sink;
  friend class Sink;

  void Enqueue(Request r) GF_EXCLUDES(inbox_mu_);
  // Wakes the long polls (PollCommands) to see stopping_ or pollers_released_.
  void WakePollers() GF_EXCLUDES(out_mu_);
  // Why no known node could ever hold a part of `job`; empty when one could (or none is known).
  std::string NeverFitsLocked(const api::JobRequest& job) const GF_REQUIRES(mu_);
  // Whether NeverFitsLocked answers the same for both (save the job's name in its message).
  static bool SameNeeds(const model::JobSpec& a, const model::JobSpec& b);
  // Step helpers; all run on the engine thread with mu_ held.
  void ApplyCancel(CancelReq& r) GF_REQUIRES(mu_);
  void ApplyCancelMany(CancelManyReq& r) GF_REQUIRES(mu_);
  // Cancels an unfinished job (`by`: " by SUBJECT" or empty). True when it ended at once (it was
  // waiting); false when it is being stopped and ends cancelled once stopped.
  bool CancelUnfinished(std::map<int64_t, Job>::iterator it, const std::string& by) GF_REQUIRES(mu_);
  void ApplyDrain(DrainReq& r) GF_REQUIRES(mu_);
  void ApplyRelease(ReleaseReq& r) GF_REQUIRES(mu_);
  void ApplyRegister(RegisterReq& r) GF_REQUIRES(mu_);
  void ApplyHeartbeat(HeartbeatReq& r) GF_REQUIRES(mu_);
  void ApplyBudget(BudgetReq& r) GF_REQUIRES(mu_);
  void ApplyQuota(QuotaReq& r) GF_REQUIRES(mu_);
  void ApplyRestart(RestartReq& r) GF_REQUIRES(mu_);
  Status SaveQuotas() GF_REQUIRES(mu_);
  Status SaveBudgets() GF_REQUIRES(mu_);
  // Saves the budgets again when the hard limit stopped a team (or let it go) since the last save.
  void NoteHardStops() GF_REQUIRES(mu_);
  int64_t FinishedSpend(const std::string& team, Time since);
  void ApplyNotice(NodeId node, NodeState& n, const api::SpotNotice& notice) GF_REQUIRES(mu_);
  static bool IsCurrentPart(const Job& job, const api::PartKey& key, NodeId node);
  void ApplyPartEvent(NodeId node, const api::PartEvent& e) GF_REQUIRES(mu_);
  void CheckHeartbeats() GF_REQUIRES(mu_);
  Duration Monotonic() const;
  Duration stall_credit_ GF_GUARDED_BY(mu_);  // CreditStall's time, not yet taken off nodes' silence
  void LosePartsOn(NodeId node, const std::string& why) GF_REQUIRES(mu_);
  std::vector<NodeStatus> NodesLocked() const GF_REQUIRES(mu_);
  JobWatch WatchLocked(const Job& job) const GF_REQUIRES(mu_);
  std::vector<sched::PendingJob> PendingLocked() const GF_REQUIRES(mu_);
  // The scheduler's decisions: it calls them (through sink_) only from HandleAll, which the
  // engine runs with mu_ held.
  void OnStart(JobId id, const model::Placement& placement) GF_REQUIRES(mu_);
  void OnPreempt(JobId id, sched::PreemptReason reason) GF_REQUIRES(mu_);
  void MaybeFinishAttempt(Job& job) GF_REQUIRES(mu_);
  void Transition(Job& job, api::JobState to, std::string reason) GF_REQUIRES(mu_);
  void SendStop(Job& job, const std::string& reason) GF_REQUIRES(mu_);
  // What a stop is for (api::JobRecord::stop_intent), from the job's flags; and the flags back
  // from a recovered record's intent.
  static std::string StopIntent(const Job& job);
  static void RestoreStopIntent(Job& job);
  void SendCommand(NodeId node, api::Command cmd) GF_REQUIRES(mu_);
  void KillStray(NodeId node, const api::PartKey& key, const std::string& reason) GF_REQUIRES(mu_);
  std::string PlacementText(const model::Placement& p) const GF_REQUIRES(mu_);
  int NextMasterPort() GF_REQUIRES(mu_);
  // The folder that holds the checkpoint folders of jobs that name none (options.checkpoint_root,
  // else /tmp/gpufleet-checkpoints).
  std::string CheckpointRoot() const {
    return options_.checkpoint_root.empty() ? "/tmp/gpufleet-checkpoints" : options_.checkpoint_root;
  }
  void RunScheduler() GF_REQUIRES(mu_);
  // Gives each update the scheduler's memory of its job as it is now, so that the store keeps
  // it in the transaction of the transition that moved it.
  void AttachMemory(std::vector<store::JobUpdate>& updates) const GF_REQUIRES(mu_);
  // The memory of the jobs in memory_changed_ that `updates` does not carry; clears the set.
  std::vector<store::JobMemoryRecord> TakeChangedMemory(const std::vector<store::JobUpdate>& updates)
      GF_REQUIRES(mu_);

  const sched::Clock& clock_;
  store::StateStore& store_;
  EngineOptions options_;  // set in the constructor and not changed after: read without a lock
  const model::GpuCatalog& catalog_;

  // Lock order: out_mu_, then inbox_mu_ (PollCommands); mu_, then burn_in_mu_ (ApplyRegister).
  // Each is held only for short work on memory, except mu_, which the engine thread holds over
  // a step's scheduling and the store writes of its Apply* helpers.

  // Engine state, guarded by mu_ (written only by the engine thread).
  mutable Mutex mu_;
  sched::ClusterView view_ GF_GUARDED_BY(mu_);
  std::unique_ptr<Sink> sink_;  // set in the constructor; the scheduler calls it under mu_
  std::unique_ptr<sched::Scheduler> scheduler_ GF_PT_GUARDED_BY(mu_);  // set in the constructor
  std::map<int64_t, Job> jobs_ GF_GUARDED_BY(mu_);  // unfinished jobs
  std::map<int64_t, NodeState> nodes_ GF_GUARDED_BY(mu_);
  std::map<std::string, int64_t> node_by_name_ GF_GUARDED_BY(mu_);
  std::map<api::PartKey, int64_t> part_nodes_ GF_GUARDED_BY(mu_);  // parts of unfinished jobs -> node id
  std::vector<sched::Event> events_ GF_GUARDED_BY(mu_);             // for the scheduler, this step
  std::vector<store::JobUpdate> updates_ GF_GUARDED_BY(mu_);        // for the store, this step
  // Jobs whose scheduler memory changed this step without a transition (a checkpoint, a re-rank
  // on a timer): saved after the step's transitions (store::StateStore::SaveJobMemory).
  std::set<int64_t> memory_changed_ GF_GUARDED_BY(mu_);
  std::vector<std::pair<NodeId, api::Command>> commands_ GF_GUARDED_BY(mu_);  // to publish after the commit
  std::set<int> ports_in_use_ GF_GUARDED_BY(mu_);
  std::map<std::string, sched::TeamBudget> budgets_ GF_GUARDED_BY(mu_);
  // Teams saved as stopped by their hard limit, with the start of the period they were stopped in.
  std::map<std::string, Time> hard_stopped_ GF_GUARDED_BY(mu_);
  std::map<std::string, sched::TeamQuota> quotas_ GF_GUARDED_BY(mu_);  // set through the API (persisted)
  // What each team's ended jobs cost: summed by the store at Recover, then added to as jobs end,
  // so that TeamCosts (each metrics scrape, each alert round) reads no job records.
  std::map<std::string, int64_t> ended_cost_ GF_GUARDED_BY(mu_);
  std::vector<api::AuditRecord> step_audit_ GF_GUARDED_BY(mu_);  // of this step's cancels: written with its transitions
  std::map<std::string, int> node_size_hints_ GF_GUARDED_BY(mu_);
  std::map<int64_t, std::string> pool_holds_ GF_GUARDED_BY(mu_);  // NotePoolHolds
  int next_port_ GF_GUARDED_BY(mu_) = 0;
  int64_t next_burn_in_request_ GF_GUARDED_BY(mu_) = 0;
  Counters counters_ GF_GUARDED_BY(mu_);
  Stats stats_ GF_GUARDED_BY(mu_);
  // Transitions a failed commit left, and the commands that wait for them. The engine thread's
  // alone (Step, outside mu_): no other thread reads them, so no lock guards them.
  std::vector<store::JobUpdate> unsaved_updates_;
  std::vector<std::pair<NodeId, api::Command>> held_commands_;
  // Thread-safe themselves (obs::Histogram has its own lock).
  obs::Histogram pass_seconds_{obs::Histogram::LatencyBuckets()};
  obs::Histogram commit_seconds_{obs::Histogram::LatencyBuckets()};
  obs::Histogram environment_seconds_{{0, 1, 5, 15, 30, 60, 120, 300, 600, 1800}};

  // Nodes that must pass a burn-in (RequireBurnIn, from the pool's thread).
  mutable Mutex burn_in_mu_ GF_ACQUIRED_AFTER(mu_);
  std::set<std::string> burn_in_names_ GF_GUARDED_BY(burn_in_mu_);

  // Inbox.
  Mutex inbox_mu_ GF_ACQUIRED_AFTER(out_mu_);
  CondVar inbox_cv_;
  std::vector<Request> inbox_ GF_GUARDED_BY(inbox_mu_);
  bool stopping_ GF_GUARDED_BY(inbox_mu_) = false;
  bool pollers_released_ GF_GUARDED_BY(inbox_mu_) = false;

  // Agent command queues.
  mutable Mutex out_mu_;
  CondVar out_cv_;
  std::map<int64_t, Outbox> outboxes_ GF_GUARDED_BY(out_mu_);
};

}  // namespace gpufleet::controller
