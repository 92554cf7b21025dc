// NodeSummary: what GET /v1/nodes shows of a node — its identity, state, GPUs in use, the last
// heartbeat's telemetry, its jobs, its software and its acceptance (with the last burn-in) —
// without what only the controller needs (GPU UUIDs, registration time). The controller builds
// it from the node's record (SummaryOf) and adds what it knows live; the codec encodes it
// (ToJson) and the CLI decodes it (NodeSummaryFromJson), so both sides read one typed shape
// instead of fields by name.
//
// Thread-safety: a plain value.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/agent_protocol.h"
#include "api/records.h"
#include "common/status.h"
#include "common/time.h"
#include "model/burn_in.h"
#include "model/types.h"

namespace gpufleet::api {

struct NodeSummary {
  NodeId id;
  std::string name;
  NodeState state = NodeState::kUp;
  std::string gpu_model;
  int gpus = 0;
  int gpus_used = 0;  // whole GPUs allocated (slices round up)
  std::string address;
  model::Market market = model::Market::kOnDemand;
  std::map<std::string, std::string> labels;
  Time last_heartbeat;
  // False after a controller restart until the node reports again: heartbeats are not stored,
  // so last_heartbeat is then its registration's time, older than its last report.
  bool heard_since_start = true;
  std::vector<GpuSampleReport> telemetry;  // per GPU, from the last heartbeat
  std::vector<JobId> jobs;                 // running there
  std::string acceptance;                  // "", checking, passed, quarantined
  std::string acceptance_reason;
  std::string driver_version;
  std::string cuda_version;
  std::vector<std::string> environments;        // presets its driver can run
  std::vector<std::string> environments_ready;  // prepared on it
  std::optional<model::BurnInReport> burn_in;   // the last check's report, judged
  std::optional<SpotNotice> notice;             // the provider is reclaiming it
  // Why its agent cannot keep its own files (a full data directory): it takes no work meanwhile.
  std::string storage_fault;
  // The room left where its agent keeps files, from its last heartbeat (empty: not reported).
  std::vector<DiskReport> disks;
  // How its agent holds parts, and whether jobs' memory and CPU limits are enforced there (null:
  // not said, an agent or controller from before).
  std::string containment;
  std::optional<EnforcedLimits> limits;
};

// The record's part; gpus_used, telemetry, jobs and notice are the caller's to fill.
NodeSummary SummaryOf(const NodeRecord& record);

// The wire shape (docs/api.md): "state" and "market" by name, "last_heartbeat_ms", "burn_in"
// null when never run, "notice" and "storage_fault" only when set, "disks" always (maybe empty). Decoding is strict as in codec.h.
nlohmann::json ToJson(const NodeSummary& node);
Result<NodeSummary> NodeSummaryFromJson(const nlohmann::json& j);

}  // namespace gpufleet::api
