// ClusterSpec: the nodes (and team quotas) a simulation runs on, read from YAML or built for a
// homogeneous `--cluster-gpus N` sweep.
//
// YAML shape (docs/simulator.md has the full reference):
//   node_types:
//     - name: dgx-h100          # node names become dgx-h100-0, dgx-h100-1, ...
//       gpu: H100               # catalog name or alias
//       gpus: 8
//       count: 16
//       cpus: 96                # optional, cores
//       memory_gib: 1024        # optional
//       nvlink: [4, 4]          # optional: sizes of NVLink domains, in GPU order
//       racks: 2                # optional: spread the nodes over this many racks (label rack=<name>-r<i>)
//       market: on-demand       # optional: on-demand | spot | reserved
//       price_per_hour: 98.32   # optional: dollars per node-hour (reserved: amortised)
//       labels: {region: us-east-1, zone: us-east-1a, gdpr: "true"}
//       interruptions_per_hour: 0.1  # optional, spot: taken back at this rate, back after repair
//   teams:                      # optional: guaranteed GPU quotas for fair-share, money limits
//     vision: {quota_gpus: 64, budget: 5000, soft_budget: 4000, max_hourly_cost: 300}
//   autoscale:                  # optional: rent and release nodes with the queue
//     offers:                   # node types the pool may rent (node_types may then be empty)
//       - {name: h100-spot, gpu: H100, gpus: 8, market: spot, price_per_hour: 30,
//          boot_delay: 3m, interruptions_per_hour: 0.05, zone: us-east-1a}
//     min_nodes: 0              # rented nodes kept even when idle
//     max_nodes: 64
//     max_gpus: 512
//     idle_duration: 10m
//     boot_timeout: 15m
//     max_rents_per_minute: 0   # nodes; 0: no limit
//     max_releases_per_minute: 0
//     spot_fallback_after_preemptions: 2
//     spot_fallback_after_wait: 30m
//     spot_notice: 2m           # warning before a spot node is taken back
//
// Thread-safety: plain values and free functions.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/gpu_catalog.h"
#include "model/types.h"
#include "sched/autoscaler.h"

namespace gpufleet::sim {

inline constexpr const char* kDefaultGpuModel = "A100";
inline constexpr int kDefaultGpusPerNode = 8;

// A team's money limits for a simulated run (micro-dollars; 0: none), counted from the first
// arrival: `budget` is hard (no new starts; running jobs stopped when reached), `soft_budget`
// only reported, `max_hourly_cost` caps the team's running cost per hour.
struct TeamMoneyLimits {
  int64_t hard_micros = 0;
  int64_t soft_micros = 0;
  int64_t max_hourly_micros = 0;
};

// A node type the simulated pool may rent: its nodes are named <name>-<k> in rent order.
struct AutoscaleOffer {
  std::string name;
  model::NodeSpec node;            // template: GPUs, market, price, labels (zone)
  Duration boot_delay = Duration::Minutes(3);  // rent to up (billed from the rent)
  double interruptions_per_hour = 0;           // spot: expected interruptions per node-hour
  // Capacity: the offer alternates between having capacity and not (a seeded two-state process
  // with exponential periods of these means; data/catalog/spot_availability.csv has measured
  // ones). A rent while it has none fails, and the autoscaler tries the next offer. Zero
  // capacity_outage: always available.
  Duration capacity_available = Duration::Zero();
  Duration capacity_outage = Duration::Zero();
};

struct AutoscaleSpec {
  std::vector<AutoscaleOffer> offers;  // empty: a fixed cluster
  sched::PoolLimits limits;            // counts rented nodes only
  sched::AutoscalerOptions options;
  Duration spot_notice = Duration::Minutes(2);
};

struct ClusterSpec {
  std::vector<model::NodeSpec> nodes;
  // Spot interruption rate per node of `nodes` (index-aligned; empty or 0: never). An
  // interrupted node is back after the simulator's repair time, as a cloud refills spot capacity.
  std::vector<double> interruptions_per_hour;
  AutoscaleSpec autoscale;
  std::map<std::string, int64_t> team_quota_gpus;  // team -> guaranteed whole GPUs
  std::map<std::string, TeamMoneyLimits> team_money;

  int64_t total_gpus() const;
};

// Reads and validates a cluster YAML. Errors name the file, line and field:
// "cluster.yaml:7: node_types[1].gpus: must be a positive integer, got 'eight'".
// GPU names are resolved through `catalog` to canonical names; unknown names are errors that
// list the known ones.
Result<ClusterSpec> LoadClusterSpec(const std::string& path, const model::GpuCatalog& catalog);
// Same, from a YAML string (`source_name` is used in messages).
Result<ClusterSpec> ParseClusterSpec(const std::string& yaml, const std::string& source_name,
                                     const model::GpuCatalog& catalog);

// ceil(total_gpus / gpus_per_node) nodes of `gpu_model`, one domain each, in racks of 16 nodes.
// `price_micros_per_hour` is each node's price (0: unpriced).
ClusterSpec HomogeneousCluster(int64_t total_gpus, const std::string& gpu_model,
                               int gpus_per_node = kDefaultGpusPerNode, int64_t price_micros_per_hour = 0);

}  // namespace gpufleet::sim
