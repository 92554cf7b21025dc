// JobSummary: what a listing shows of a job — GET /v1/jobs, GET /v1/queue and the top level of
// GET /v1/jobs/{id} — its identity, shape and state without its command, environment or
// policies (which another team may not see). The controller builds it from the record
// (SummaryOf) and encodes it with the codec (ToJson); the CLI decodes it (JobSummaryFromJson),
// so both sides read one typed shape instead of fields by name.
//
// Thread-safety: a plain value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/records.h"
#include "common/status.h"
#include "common/time.h"
#include "model/types.h"

namespace gpufleet::api {

struct JobSummary {
  JobId id;
  std::string name;
  std::string team;
  int priority = 0;
  JobState state = JobState::kPending;
  std::string reason;  // of the last transition
  // Per node: whole GPUs, or a slice of one GPU when gpu_milli < kMilliGpuPerGpu.
  int gpus_per_node = 1;
  int64_t gpu_milli = model::kMilliGpuPerGpu;
  int nodes = 1;
  std::vector<std::string> gpu_models;  // any-of; empty: any
  Time submitted;
  Time updated;
  int attempt = 0;
  std::optional<int> exit_code;
  std::optional<model::Placement> placement;
  std::optional<int64_t> position;  // its place in the queue: GET /v1/queue only (0: running)

  bool fractional() const { return gpu_milli < model::kMilliGpuPerGpu; }
};

JobSummary SummaryOf(const JobRecord& record);

// The wire shape (docs/api.md): "gpus" is the per-node count, or the slice as a fraction ("0.25");
// "gpu_type" the any-of list; "position" only when set. Decoding is strict as in codec.h.
nlohmann::json ToJson(const JobSummary& summary);
Result<JobSummary> JobSummaryFromJson(const nlohmann::json& j);

}  // namespace gpufleet::api
