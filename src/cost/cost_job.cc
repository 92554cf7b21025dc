#include "cost/cost_job.h"

namespace gpufleet::cost {

Result<CostJob> CostJobFor(const model::JobSpec& spec, const model::JobCostHints& hints,
                           const model::GpuCatalog& gpus) {
  if (!spec.duration_estimate || *spec.duration_estimate <= Duration::Zero()) {
    return Status::InvalidArgument("estimate: missing; say how long the job runs, e.g. estimate: 10h on A100");
  }
  if (spec.gpus_per_node < 1 || spec.total_gpu_milli() <= 0) {
    return Status::InvalidArgument("resources.gpus: a CPU-only job has no GPU offer to price; ask for gpus: 1 or more");
  }
  CostJob job;
  job.gpus_per_node = spec.gpus_per_node;
  job.nodes = spec.nodes;
  job.gpu_types = spec.gpu_models;
  const std::string reference = hints.estimate_model.empty() ? kReferenceGpu : hints.estimate_model;
  const model::GpuModel* ref = gpus.Find(reference);
  if (ref == nullptr) return Status::InvalidArgument("estimate: unknown GPU model '" + reference + "'");
  job.reference_gpu = ref->name;
  job.reference_runtime = *spec.duration_estimate;
  job.profile = hints.profile;
  if (!hints.workload.empty()) job.workload_class = hints.workload;
  job.speed_overrides.step_seconds = hints.step_seconds;
  job.checkpoint_interval = spec.checkpoint_interval;
  job.restart_overhead = hints.restart_overhead;
  job.market = spec.market;
  job.deadline = hints.deadline;
  if (hints.max_hourly_cost_micros > 0) job.max_hourly_cost = hints.max_hourly_cost_micros;
  job.regions = hints.regions;
  job.clouds = hints.clouds;
  job.constraints = spec.constraints;
  return job;
}

}  // namespace gpufleet::cost
