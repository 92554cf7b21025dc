// Value types shared by every part of gpufleet: what a job asks for, what a node offers, where a
// job was placed. No behaviour beyond validation and formatting; no I/O. Plain values, so they
// are safe to copy between threads.
//
// Resource amounts are integers: whole GPUs, milli-GPU for GPU slices (1000 = one GPU),
// milli-CPU and MiB. GPU models are named by their canonical catalog name ("H100", "A100-80GB").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/time.h"

namespace gpufleet::model {

inline constexpr int64_t kMilliGpuPerGpu = 1000;

using Labels = std::map<std::string, std::string>;

// How a node is rented. Reserved capacity is paid whether used or not; spot may vanish.
enum class Market { kOnDemand, kSpot, kReserved };
const char* MarketName(Market m);
Result<Market> ParseMarket(const std::string& s);

// What a job accepts. kAny lets the scheduler use spot capacity; kOnDemand (critical work)
// never lands on spot nodes.
enum class MarketPreference { kAny, kSpot, kOnDemand };
const char* MarketPreferenceName(MarketPreference m);
Result<MarketPreference> ParseMarketPreference(const std::string& s);

// Well-known label keys. Labels are free-form; these are the ones the scheduler reads.
inline constexpr const char* kLabelRegion = "region";
inline constexpr const char* kLabelZone = "zone";
inline constexpr const char* kLabelRack = "rack";

struct NodeSpec {
  std::string name;
  std::string gpu_model;  // canonical catalog name; empty for CPU-only nodes
  int gpus = 0;
  // nvlink_domain[i] is the NVLink domain of GPU i; GPUs with equal values share a fast link.
  // Empty means one domain holding every GPU.
  std::vector<int> nvlink_domain;
  int64_t cpu_milli = 0;
  int64_t mem_mib = 0;
  Labels labels;  // region, zone, rack, compliance tags (gdpr=true), ...
  Market market = Market::kOnDemand;
  // What the node costs per hour while it is up, in micro-dollars (reserved capacity amortised
  // over its term); 0 when unknown. Jobs are charged their share of it (see docs/cost.md).
  int64_t price_micros_per_hour = 0;
  // The environments (data/environments.yaml) this node can run — its driver and GPU
  // architecture support them — and those of them already prepared on it (warm starts). Set by
  // the controller from what the agent reports; a job naming an environment is placed only where
  // it is supported, preferring nodes where it is warm.
  std::vector<std::string> environments{};
  std::vector<std::string> warm_environments{};

  bool Supports(const std::string& environment) const;
  bool Warm(const std::string& environment) const;

  // Checks counts and the NVLink map; the message names the field.
  Status Validate() const;
};

struct JobSpec {
  std::string name;
  std::string team;
  int priority = 0;  // priority class: larger is more important
  Time submit;
  // Gang shape: `nodes` parts, each with `gpus_per_node` GPUs, all started together or not at all.
  int gpus_per_node = 1;
  int nodes = 1;
  // A slice of one GPU for shared-GPU work; only with gpus_per_node == 1 and nodes == 1.
  // kMilliGpuPerGpu means whole GPUs.
  int64_t gpu_milli = kMilliGpuPerGpu;
  std::vector<std::string> gpu_models;  // ordered any-of, first preferred; empty = any model
  int64_t cpu_milli = 0;                // per node
  int64_t mem_mib = 0;                  // per node
  std::optional<Duration> duration_estimate;  // on the reference GPU; used by backfill, sjf, srtf
  Duration checkpoint_interval;               // zero: the job does not checkpoint periodically
  Labels constraints;                         // node labels the job requires (key = value)
  MarketPreference market = MarketPreference::kAny;
  // Stop the job for good once its cost (its share of its nodes' prices, all runs) reaches
  // this many micro-dollars; 0: no limit.
  int64_t max_cost_micros = 0;
  // The software environment the job runs in (data/environments.yaml); empty: the node's own.
  std::string environment{};

  int total_gpus() const { return gpus_per_node * nodes; }
  bool fractional() const { return gpu_milli < kMilliGpuPerGpu; }
  // GPU demand in milli-GPU (a 4-GPU job is 4000, a half-GPU job 500).
  int64_t total_gpu_milli() const {
    return fractional() ? gpu_milli : static_cast<int64_t>(total_gpus()) * kMilliGpuPerGpu;
  }
  // Rejects impossible shapes: zero or negative GPUs, a slice spread over several GPUs, ...
  Status Validate() const;

  bool operator==(const JobSpec&) const = default;
};

// Where one part of a gang runs.
struct NodeAssignment {
  NodeId node;
  std::vector<int> gpus;  // GPU indices on that node
  int64_t gpu_milli = kMilliGpuPerGpu;  // per GPU; < 1000 only for a GPU slice
  int64_t cpu_milli = 0;
  int64_t mem_mib = 0;

  bool operator==(const NodeAssignment&) const = default;
};

// What one part of a placement pays per hour on `node`, in micro-dollars: the node's price times
// the part's share of the node — its GPUs over the node's (a slice pays its fraction), or on a
// CPU-only node its cores over the node's.
int64_t PartCostRate(const NodeSpec& node, const NodeAssignment& part);

// A one-part job asking for more whole GPUs than `largest_gpus_per_node` becomes a gang of the
// fewest equal parts that fit, so no GPU is asked for and left idle (16 GPUs on 8-GPU nodes: 2 x
// 8; 12 on 8: 2 x 6). Other jobs, and a `largest_gpus_per_node` of 0, are left alone.
void SplitToFit(JobSpec& spec, int largest_gpus_per_node);

struct Placement {
  std::string gpu_model;
  std::vector<NodeAssignment> parts;  // one per gang member, in rank order

  int64_t total_gpu_milli() const;

  bool operator==(const Placement&) const = default;
};

}  // namespace gpufleet::model
