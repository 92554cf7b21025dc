// The trace-driven simulator: replays a trace through the scheduler core that the live
// controller runs, on a simulated clock that jumps from event to event.
//
// Semantics:
//  - A placed job runs its remaining work scaled by the speed of the GPU model it got relative
//    to the reference model (the throughput model of model::GpuCatalog).
//  - A stop (preemption or node failure) loses the work since the job's last checkpoint; a job
//    checkpoints every `checkpoint_interval` of run time (its own, else the simulator default),
//    and with checkpoint_on_preempt a preempted job saves its progress as it stops (node
//    failures still lose work). Each restart costs `restart_overhead` of extra run time, booked
//    apart: a job's GPU time held = its work + work lost + restart overhead, exactly.
//  - Node failures, when enabled, arrive per node with exponential gaps (mean MTBF) from a
//    seeded generator, for fixed nodes from the start and for rented nodes from their boot; a
//    failed fixed node returns after `repair_time`, a failed rented node is gone (the autoscaler
//    rents again). Spot reclaims stop jobs too but are counted apart from preemptions.
//  - A job that never starts is reported with the reason (JobRecord::never_ran).
//  - Events at the same instant are handled in insertion order; the run is deterministic: the
//    same inputs give byte-identical reports.
//
// Thread-safety: Simulate is reentrant; distinct runs may go on in parallel threads.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/gpu_catalog.h"
#include "sim/cluster_spec.h"
#include "sim/result.h"
#include "sim/trace.h"

namespace gpufleet::sim {

enum class Estimates {
  kTrace,   // whatever the trace says (usually nothing)
  kOracle,  // the true duration: what sjf/srtf/EASY studies assume
};

struct SimOptions {
  std::string policy = "fifo";
  std::map<std::string, std::string> policy_options;
  std::string reference_gpu;  // trace runtimes are on this model; empty: the cluster's first model
  model::Boundness boundness = model::Boundness::kBalanced;
  Estimates estimates = Estimates::kTrace;
  Duration checkpoint_interval = Duration::Minutes(30);  // for jobs that give none; zero = never
  // gpufleet preempts with the job's checkpoint signal and a grace period, so a job that
  // handles it loses nothing; false models jobs that ignore the signal.
  bool checkpoint_on_preempt = true;
  Duration restart_overhead = Duration::Zero();
  double load_factor = 1.0;  // > 1 compresses arrivals: 2.0 = jobs arrive twice as fast
  double node_mtbf_hours = 0;  // 0 = no failures
  Duration repair_time = Duration::Hours(1);
  uint64_t seed = 1;
  Duration sample_step = Duration::Zero();  // zero: about 2,000 samples over the arrival span
  // Fixed nodes of market reserved are paid whole (and their paid and busy GPU-time counted) up to
  // this instant only; after it, only the reserved GPUs jobs still hold are paid, at their node's
  // price per GPU. A capacity plan pays its reservation over its window: the jobs that drain after
  // it take capacity of the next window (paid), the idle rest is the next window's to use. None:
  // paid whole to the end of the run.
  std::optional<Time> reserved_billing_end;
  // Called now and then with (jobs finished, jobs total); for progress bars.
  std::function<void(int64_t, int64_t)> progress;
  // Keep every job's record in SimResult::jobs (for per-job output and for callers that read
  // them). False: SimResult::jobs stays empty, each job's state is freed once it has finished,
  // and SimResult::tally keeps what Summarize needs (28 bytes a job), for the same summary.
  bool keep_jobs = true;
  // Stale finishes (of runs that were stopped) leave the event queue for a list of bare
  // instants once at least this many are in it and they are half of it or more. A tuning
  // knob: the result is the same for any value (a test replays with 1 and with no limit).
  int64_t stale_events_min = 1024;
  // The utilisation series holds at most this many points: when it would hold more, every other
  // point is dropped and the sampling step doubles, so a job that runs for years costs no more
  // memory than one that runs for days (about 2,000 points for most replays: never reached).
  int64_t max_series_points = 100000;
  // A replay that makes no progress is stopped with an error: when this many runs in a row were
  // stopped (preempted, failed, reclaimed) without the job finishing or saving any work since the
  // last job that did, jobs are stopped faster than they checkpoint and the replay would never
  // end. 0: never stop.
  int64_t max_wasted_runs = 1000000;
  // The same when this many rented nodes in a row were released without having held a job since
  // the last start: the autoscaler rents for jobs the scheduler does not place there, for ever.
  // 0: never stop.
  int64_t max_unused_rents = 100000;
};

// Memory: besides the trace, a run holds the jobs in the system (pending or running), the
// scheduler's state of them, and per job its record (keep_jobs) or its tally entry.
Result<SimResult> Simulate(const CompactTrace& jobs, const ClusterSpec& cluster, const SimOptions& options,
                           const model::GpuCatalog& catalog);
// The same for a trace held as TraceJobs (copied into a CompactTrace first).
Result<SimResult> Simulate(const std::vector<TraceJob>& jobs, const ClusterSpec& cluster,
                           const SimOptions& options, const model::GpuCatalog& catalog);

}  // namespace gpufleet::sim
