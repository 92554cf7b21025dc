#include "model/types.h"

#include <algorithm>

#include <set>

namespace gpufleet::model {

const char* MarketName(Market m) {
  switch (m) {
    case Market::kOnDemand: return "on-demand";
    case Market::kSpot: return "spot";
    case Market::kReserved: return "reserved";
  }
  return "?";
}

Result<Market> ParseMarket(const std::string& s) {
  if (s == "on-demand" || s == "ondemand") return Market::kOnDemand;
  if (s == "spot") return Market::kSpot;
  if (s == "reserved") return Market::kReserved;
  return Status::InvalidArgument("unknown market '" + s + "' (expected spot, on-demand or reserved)");
}

const char* MarketPreferenceName(MarketPreference m) {
  switch (m) {
    case MarketPreference::kAny: return "any";
    case MarketPreference::kSpot: return "spot";
    case MarketPreference::kOnDemand: return "on-demand";
  }
  return "?";
}

Result<MarketPreference> ParseMarketPreference(const std::string& s) {
  if (s == "any" || s.empty()) return MarketPreference::kAny;
  if (s == "spot") return MarketPreference::kSpot;
  if (s == "on-demand" || s == "ondemand") return MarketPreference::kOnDemand;
  return Status::InvalidArgument("unknown market '" + s + "' (expected any, spot or on-demand)");
}

Status NodeSpec::Validate() const {
  if (name.empty()) return Status::InvalidArgument("node name must not be empty");
  if (gpus < 0 || gpus > 64) {
    return Status::InvalidArgument("node " + name + ": gpus must be between 0 and 64, got " +
                                   std::to_string(gpus));
  }
  if (gpus > 0 && gpu_model.empty()) {
    return Status::InvalidArgument("node " + name + ": gpu model is required when gpus > 0");
  }
  if (!nvlink_domain.empty() && static_cast<int>(nvlink_domain.size()) != gpus) {
    return Status::InvalidArgument("node " + name + ": nvlink map has " +
                                   std::to_string(nvlink_domain.size()) + " entries for " +
                                   std::to_string(gpus) + " GPUs");
  }
  if (cpu_milli < 0 || mem_mib < 0) {
    return Status::InvalidArgument("node " + name + ": cpus and memory must not be negative");
  }
  if (price_micros_per_hour < 0 || price_micros_per_hour > 1'000'000'000'000) {
    return Status::InvalidArgument("node " + name + ": price per hour must be from $0 to $1,000,000");
  }
  return Status::Ok();
}

Status JobSpec::Validate() const {
  if (nodes < 1 || nodes > 4096) {
    return Status::InvalidArgument("nodes must be between 1 and 4096, got " + std::to_string(nodes));
  }
  // A single-node request may exceed any node: the scheduler splits it into a gang.
  if (gpus_per_node < 0 || gpus_per_node > 65536) {
    return Status::InvalidArgument("gpus must be between 0 and 65536, got " + std::to_string(gpus_per_node));
  }
  if (static_cast<int64_t>(gpus_per_node) * nodes > 65536) {
    return Status::InvalidArgument("a job may ask for at most 65536 GPUs in all, got " +
                                   std::to_string(static_cast<int64_t>(gpus_per_node) * nodes));
  }
  if (gpu_milli <= 0 || gpu_milli > kMilliGpuPerGpu) {
    return Status::InvalidArgument("gpu share must be in (0, 1000] milli-GPU, got " +
                                   std::to_string(gpu_milli));
  }
  if (fractional() && (gpus_per_node != 1 || nodes != 1)) {
    return Status::InvalidArgument("a GPU slice (gpu_milli < 1000) must ask for exactly one GPU on one node");
  }
  if (cpu_milli < 0 || mem_mib < 0) return Status::InvalidArgument("cpus and memory must not be negative");
  if (duration_estimate && *duration_estimate <= Duration::Zero()) {
    return Status::InvalidArgument("duration estimate must be positive");
  }
  if (checkpoint_interval < Duration::Zero()) {
    return Status::InvalidArgument("checkpoint interval must not be negative");
  }
  std::set<std::string> seen;
  for (const auto& m : gpu_models) {
    if (m.empty()) return Status::InvalidArgument("gpu model names must not be empty");
    if (!seen.insert(m).second) return Status::InvalidArgument("gpu model '" + m + "' listed twice");
  }
  return Status::Ok();
}

int64_t Placement::total_gpu_milli() const {
  int64_t total = 0;
  for (const auto& p : parts) total += static_cast<int64_t>(p.gpus.size()) * p.gpu_milli;
  return total;
}

int64_t PartCostRate(const NodeSpec& node, const NodeAssignment& part) {
  if (node.price_micros_per_hour == 0) return 0;
  if (node.gpus > 0) {
    int64_t milli = static_cast<int64_t>(part.gpus.size()) * part.gpu_milli;
    return node.price_micros_per_hour * milli / (static_cast<int64_t>(node.gpus) * kMilliGpuPerGpu);
  }
  if (node.cpu_milli > 0) return node.price_micros_per_hour * part.cpu_milli / node.cpu_milli;
  return 0;
}

void SplitToFit(JobSpec& spec, int largest_gpus_per_node) {
  if (spec.nodes != 1 || spec.fractional() || largest_gpus_per_node <= 0) return;
  const int g = spec.gpus_per_node;
  if (g <= largest_gpus_per_node) return;
  int n = (g + largest_gpus_per_node - 1) / largest_gpus_per_node;
  while (g % n != 0) ++n;
  spec.nodes = n;
  spec.gpus_per_node = g / n;
}

bool NodeSpec::Supports(const std::string& environment) const {
  return std::find(environments.begin(), environments.end(), environment) != environments.end();
}

bool NodeSpec::Warm(const std::string& environment) const {
  return std::find(warm_environments.begin(), warm_environments.end(), environment) != warm_environments.end();
}

}  // namespace gpufleet::model
