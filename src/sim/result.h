// What a simulation run produced, and the reports made from it: a summary with the usual
// scheduling metrics, a per-job CSV, a time series, JSON, a side-by-side comparison of policies,
// and an SVG plot of queue length and GPU utilisation over time.
//
// Thread-safety: plain values and free functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace gpufleet::sim {

struct JobRecord {
  std::string id;
  std::string team;
  int gpus = 0;               // whole GPUs, or 1 for a slice
  int64_t gpu_milli = 0;      // total demand in milli-GPU
  Time submit;
  std::optional<Time> first_start;
  std::optional<Time> finish;  // empty only if the run was cut off
  Duration work;               // uninterrupted runtime on the reference GPU
  Duration queued;             // total time spent waiting (before the first start and after preemptions)
  int preemptions = 0;         // by the scheduler
  int failures = 0;            // node failures that hit the job
  int reclaims = 0;            // runs stopped because their spot node was taken back
  // GPU time, in GPU-milliseconds: held in all (run), of which work thrown away since the last
  // checkpoint (lost) and restart overhead (overhead); the rest is the work itself, so
  // run = work on the GPUs it got + lost + overhead.
  int64_t lost_gpu_ms = 0;
  int64_t overhead_gpu_ms = 0;
  int64_t run_gpu_ms = 0;
  std::string gpu_model;       // model of the last placement
  int64_t cost_micros = 0;     // its share of its nodes' prices while it ran, lost work included
  // Why a job that never started did not (empty for jobs that ran): "can never run: ...",
  // "held: ..." or "waiting when the run ended: ...".
  std::string never_ran;
};

struct NeverRan {
  std::string id;
  std::string reason;
};

// What a summary needs of each job, gathered one job at a time as each ends: the simulator fills
// it as jobs finish when it keeps no per-job records (SimOptions::keep_jobs = false), and
// Summarize makes one from SimResult::jobs otherwise, so that both give the same figures to the
// last bit. Per job it holds 28 bytes (its wait, JCT, slowdown and team); sums are integers.
struct JobTally {
  static constexpr int64_t kNone = INT64_MIN;
  struct TeamSums {
    int64_t run_gpu_ms = 0;
    int64_t cost_micros = 0;
  };

  JobTally() = default;
  // For `jobs` jobs, indexed in trace order.
  explicit JobTally(size_t jobs);
  // Job `index` as it ended (finished, or cut off at the end of the run); each index once.
  void Add(size_t index, const JobRecord& job);

  std::vector<int64_t> queued_ms;  // by job; kNone: never started
  std::vector<int64_t> jct_ms;     // by job; kNone: not finished
  std::vector<uint32_t> team;      // by job: index in team_names
  std::vector<double> slowdown;    // of finished jobs, in the order they were added
  std::vector<std::string> team_names;
  std::vector<TeamSums> team_sums;  // by team index
  std::vector<std::pair<size_t, NeverRan>> never_ran;  // (job index, why), in the order added
  int64_t added = 0;
  int64_t run_gpu_ms = 0, lost_gpu_ms = 0, overhead_gpu_ms = 0, cost_micros = 0;
  int64_t preemptions = 0, failures = 0, reclaims = 0;

 private:
  std::unordered_map<std::string, uint32_t> team_index_;
};

struct SeriesPoint {
  Time t;
  int64_t busy_gpu_milli = 0;
  int64_t total_gpu_milli = 0;  // GPUs on nodes that are up
  int64_t pending_jobs = 0;
  int64_t running_jobs = 0;
};

// A team's money over a run: its spend (its jobs' share of node prices plus the idle part of
// rented nodes billed to it), its budgets, and when they were reached.
struct TeamBudgetRecord {
  int64_t spent_micros = 0;
  int64_t rented_idle_micros = 0;      // of spent: rented nodes billed to the team while idle
  int64_t soft_micros = 0;             // 0: none
  int64_t hard_micros = 0;             // 0: none
  std::optional<Time> soft_reached;    // when spend reached the soft budget
  std::optional<Time> hard_stopped;    // when the hard budget stopped the team (spend + stop lead)
  int64_t held_jobs = 0;               // jobs left waiting at the end because of the budget
};

struct SimResult {
  std::string policy;      // e.g. "las" or "fifo+easy"
  std::string trace;       // file name
  int64_t cluster_gpus = 0;
  std::vector<JobRecord> jobs;       // in trace order; empty when SimOptions::keep_jobs is false
  // Filled as jobs end when SimOptions::keep_jobs is false (then Summarize reads it), else empty.
  JobTally tally;
  std::vector<SeriesPoint> series;   // sampled at a fixed step
  Time start;                        // first submit
  Time end;                          // last finish
  int64_t scheduling_passes = 0;
  // Finishes of stopped runs taken out of the event queue as bare instants (SimOptions::
  // stale_events_min): a measure of the queue's work, not of the schedule.
  int64_t stale_finishes_moved = 0;
  // Exact integrals over the run, kept by the simulator between events (GPU-milliseconds):
  // GPUs held by jobs, and GPUs on nodes that were up. Summaries prefer these to the series.
  int64_t busy_gpu_ms = 0;
  int64_t online_gpu_ms = 0;
  // The same by market (index: model::Market), over the time each node was paid for (up or
  // booting): GPUs held by jobs on such nodes, and the nodes' GPUs.
  int64_t busy_gpu_ms_by_market[3] = {0, 0, 0};
  int64_t paid_gpu_ms_by_market[3] = {0, 0, 0};
  int64_t node_failures = 0;
  int64_t spot_interruptions = 0;  // spot nodes taken back (notice given)
  int64_t nodes_rented = 0;        // by the autoscaler
  int64_t nodes_released = 0;      // idle, or past the boot timeout
  int64_t boot_timeouts = 0;
  int64_t budget_releases = 0;     // rented nodes released because their team's hard budget was spent
  int64_t capacity_misses = 0;     // rents that found the offer out of capacity (the next offer was tried)
  // Teams with a budget or billed for rented nodes (key: team).
  std::map<std::string, TeamBudgetRecord> budgets;
  // What the nodes cost while they were up (micro-dollars; nodes without a price cost nothing),
  // in all and by market ("on-demand", "spot", "reserved").
  int64_t cost_micros = 0;
  std::map<std::string, int64_t> cost_by_market_micros;
};

struct Percentiles {
  double avg = 0, p50 = 0, p95 = 0, p99 = 0, max = 0;
  int64_t count = 0;  // values they were taken over; 0: none (shown as "-", null in JSON)
};

struct TeamShare {
  int64_t jobs = 0;
  double gpu_hours = 0;
  double share = 0;  // of all GPU-hours used
  double avg_jct_s = 0;  // over the team's finished jobs; 0 when none finished
  double cost_usd = 0;   // the team's jobs' share of node prices
  int64_t finished = 0;  // jobs that finished
};

struct Summary {
  std::string policy;
  int64_t jobs = 0;
  int64_t finished = 0;
  // Jobs that never started, with the reason, in trace order; they are left out of every
  // average and percentile (their wait would only measure the length of the run).
  std::vector<NeverRan> never_ran;
  Percentiles jct_s;       // job completion time: finish - submit, seconds
  Percentiles queue_s;     // queueing delay, seconds (jobs that started)
  Percentiles slowdown;    // jct / work
  double makespan_s = 0;   // last finish - first submit
  double utilisation = 0;  // busy GPU-time / available GPU-time over the makespan, 0..1
  // Busy GPU-time / paid GPU-time of the reserved nodes, 0..1; -1 without reserved nodes.
  double reserved_utilisation = -1;
  int64_t preemptions = 0;  // stops ordered by the scheduler
  int64_t failures = 0;     // runs cut by node failures
  int64_t reclaims = 0;     // runs cut by spot reclaims
  // used = work + lost + overhead, exactly (in GPU-milliseconds before the division).
  double gpu_hours_used = 0;
  double gpu_hours_lost = 0;
  double gpu_hours_overhead = 0;
  std::map<std::string, TeamShare> teams;
  // Money, when the cluster has prices: what the nodes cost while up, the part of it jobs used
  // (the rest paid for idle GPUs), by market, and per GPU-hour used.
  double cost_usd = 0;
  double job_cost_usd = 0;
  std::map<std::string, double> cost_by_market_usd;
  double cost_per_used_gpu_hour = 0;
  // Spot and autoscaling: nodes taken back, rented, released (idle or past the boot timeout).
  int64_t spot_interruptions = 0;
  int64_t nodes_rented = 0;
  int64_t nodes_released = 0;
  int64_t boot_timeouts = 0;
  int64_t budget_releases = 0;
  int64_t capacity_misses = 0;
  std::map<std::string, TeamBudgetRecord> budgets;
};

// Percentiles use the nearest-rank method: pN is the smallest value such that at least N % of
// the values are <= it, i.e. sorted[ceil(N/100 * n) - 1]; it is always one of the values.
// JCT and slowdown are taken over finished jobs; queueing delay over the jobs that started (for
// one cut off while waiting again it is the wait so far). Jobs that never started are listed in
// never_ran, not averaged. Slowdown divides by max(work, 1 s) so that near-zero jobs do not
// dominate.
// Utilisation is the step integral of the series (each point holds until the next one, the last
// until `end`) of busy over total GPU capacity; with no usable series it falls back to
// sum(run_gpu_ms) / (cluster_gpus * makespan).
// A run made with SimOptions::keep_jobs = false is summarised from its tally, to the same figures.
Summary Summarize(const SimResult& r);
// An aligned, human-readable report; teams sorted by GPU-hours, at most 15 of them listed.
std::string FormatSummaryText(const Summary& s);
// JSON with a fixed key order and numbers rounded to 3 decimals: byte-identical run to run.
std::string SummaryToJson(const Summary& s);            // one JSON object
std::string CompareToJson(const std::vector<Summary>& s);  // a JSON array
// Policies side by side: one column per policy, one row per metric; with two or more policies the
// best value of each row is marked '*' (lower is better, except GPU utilisation).
std::string FormatCompareTable(const std::vector<Summary>& s);
// CSV files (RFC 4180 quoting); times in ISO 8601, empty when unset; seconds with 3 decimals.
// An unwritable path gives Unavailable naming the path.
Status WriteJobsCsv(const std::string& path, const SimResult& r);
Status WriteSeriesCsv(const std::string& path, const SimResult& r);

// The plot draws at most this many points per run and panel; longer series are cut into that
// many consecutive buckets (mean utilisation, max pending jobs per bucket).
inline constexpr int kMaxPlotPointsPerRun = 1500;
// An SVG with two stacked panels sharing the time axis: GPU utilisation (%) and pending jobs.
// Several runs (one per policy) are drawn as separate lines with a legend. Self-contained
// (no external fonts or scripts) and deterministic byte for byte. `runs` must not hold nulls.
std::string RenderSvgPlot(const std::vector<const SimResult*>& runs);

}  // namespace gpufleet::sim
