// CostJobFor: the cost layer's view of a job (CostJob, select.h), derived from the job's spec and
// cost hints — the fields the one job schema (api/job_yaml.h) parsed. `select`, and anything
// else that prices a job, starts here, so a job file means the same to `submit` and `select`.
//
// Thread-safety: a pure function.
#pragma once

#include "common/status.h"
#include "cost/select.h"
#include "model/gpu_catalog.h"
#include "model/job_cost_hints.h"
#include "model/types.h"

namespace gpufleet::cost {

// The reference GPU of an estimate that names none ("estimate: 10h"): the speed tables are
// relative to it.
inline constexpr const char* kReferenceGpu = "A100";

// InvalidArgument, naming the field, when the job cannot be priced: no estimate, or no GPU
// (a CPU-only job has no GPU offer). A GPU slice is priced as one whole GPU: an instance comes
// with whole GPUs.
Result<CostJob> CostJobFor(const model::JobSpec& spec, const model::JobCostHints& hints,
                           const model::GpuCatalog& gpus);

}  // namespace gpufleet::cost
