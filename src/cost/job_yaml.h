// Reads the fields of a job YAML file that the cost layer needs, ignoring every other key (the
// full job schema lives in src/api/job_yaml.h). Shape:
//   resources: {gpus: 8, nodes: 1, gpu_type: [H100, A100-80GB]}   # gpus per node; gpu_type any-of
//   estimate: "10h on A100"            # runtime on a reference GPU
//   profile: compute                   # compute | memory | balanced (default); datasheet speeds only
//   workload: training-vision          # a class of data/gpu_speeds.csv; default: default
//   step_time: {A100: 0.42s, H100: 0.23s}   # measured time per step on each GPU model
//   checkpoint: {interval: 30m, restart_overhead: 5m}   # no interval: never checkpoints
//   market: any                        # spot | on-demand | any (default)
//   deadline: 24h                      # on the expected wall time
//   max_hourly_cost: 40                # USD per hour for the whole job
//   regions: ["europe-*", us-east-1]   # globs on region or zone
//   clouds: [gcp, aws]
//   constraints: {geo: eu}             # offer labels: cloud, region, zone, geo
// `environment:` (a PyTorch preset) is ignored like the other keys: it narrows the nodes a job
// may run on by driver and GPU architecture, which the scheduler checks; an offer costs the same
// whatever software runs on it.
// Errors name the file, the line and the field: "job.yaml:3: resources.gpus: must be a positive
// integer, got 'eight'".
//
// Thread-safety: free functions.
#pragma once

#include <string>

#include "common/status.h"
#include "cost/select.h"
#include "model/gpu_catalog.h"
#include "model/gpu_speeds.h"

namespace gpufleet::cost {

// `speeds`, when given, checks `workload:` against its classes here, so that the error has a line.
Result<CostJob> ParseCostJobYaml(const std::string& yaml, const std::string& source_name,
                                 const model::GpuCatalog& gpus, const model::GpuSpeeds* speeds = nullptr);
Result<CostJob> LoadCostJobYaml(const std::string& path, const model::GpuCatalog& gpus,
                                const model::GpuSpeeds* speeds = nullptr);

}  // namespace gpufleet::cost
