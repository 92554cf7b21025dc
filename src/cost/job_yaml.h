// Reads the fields of a job YAML file that the cost layer needs, ignoring every other key (the
// full job schema lives in src/api/job_yaml.h). Shape:
//   resources: {gpus: 8, nodes: 1, gpu_type: [H100, A100-80GB]}   # gpus per node; gpu_type any-of
//   estimate: "10h on A100"            # runtime on a reference GPU
//   profile: compute                   # compute | memory | balanced (default)
//   checkpoint: {interval: 30m, restart_overhead: 5m}   # no interval: never checkpoints
//   market: any                        # spot | on-demand | any (default)
//   deadline: 24h                      # on the expected wall time
//   max_hourly_cost: 40                # USD per hour for the whole job
//   regions: ["europe-*", us-east-1]   # globs on region or zone
//   clouds: [gcp, aws]
//   constraints: {geo: eu}             # offer labels: cloud, region, zone, geo
// Errors name the file, the line and the field: "job.yaml:3: resources.gpus: must be a positive
// integer, got 'eight'".
//
// Thread-safety: free functions.
#pragma once

#include <string>

#include "common/status.h"
#include "cost/select.h"
#include "model/gpu_catalog.h"

namespace gpufleet::cost {

Result<CostJob> ParseCostJobYaml(const std::string& yaml, const std::string& source_name,
                                 const model::GpuCatalog& gpus);
Result<CostJob> LoadCostJobYaml(const std::string& path, const model::GpuCatalog& gpus);

}  // namespace gpufleet::cost
