// JobCostHints: what a job says about its cost beyond its shape (model::JobSpec): how long it
// runs and on which GPU, how its speed moves between GPU models, where it may run and what it
// may spend per hour. The job file carries them (api::JobRequest::cost); `select` prices a job
// from them (cost::CostJobFor); the controller keeps them with the job.
//
// Thread-safety: a plain value.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/time.h"
#include "model/gpu_catalog.h"

namespace gpufleet::model {

struct JobCostHints {
  Boundness profile = Boundness::kBalanced;  // which datasheet figure the speed follows
  // The GPU model JobSpec::duration_estimate was measured on ("10h on A100"); empty: the
  // reference model, A100, that the speed tables are relative to.
  std::string estimate_model;
  std::string workload;  // a class of data/gpu_speeds.csv ("training-vision"); empty: default
  // Measured seconds per step on each GPU model (canonical names): they override the tables.
  std::map<std::string, double> step_seconds;
  std::optional<Duration> deadline;  // finish within this long (expected wall time)
  int64_t max_hourly_cost_micros = 0;  // for the whole job; 0: no limit
  std::vector<std::string> regions;    // globs on region or zone ("europe-*"); empty: any
  std::vector<std::string> clouds;     // empty: any
  // Lost to each interruption beyond the work since the last checkpoint: boot, reload, warm-up.
  Duration restart_overhead = Duration::Minutes(5);

  friend bool operator==(const JobCostHints&, const JobCostHints&) = default;
};

}  // namespace gpufleet::model
