// Fuzzes the cluster file reader (sim/cluster_spec.h ParseClusterSpec), which `gpufleet sim` and
// `gpufleet plan` read: node types, teams and the autoscaled pool. It may refuse any input with
// a Status, never crash or throw; a cluster it accepts has one interruption rate per node (or
// none) and nodes that hold GPUs of a known model.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/check.h"
#include "model/gpu_catalog.h"
#include "sim/cluster_spec.h"

namespace gpufleet::fuzz {
namespace {

void CheckOneInput(const std::string& yaml) {
  const model::GpuCatalog& catalog = model::GpuCatalog::BuiltIn();
  Result<sim::ClusterSpec> spec = sim::ParseClusterSpec(yaml, "cluster.yaml", catalog);
  if (!spec.ok()) {
    CHECK(!spec.status().message().empty()) << spec.status().ToString();
    return;
  }
  CHECK(spec->interruptions_per_hour.empty() || spec->interruptions_per_hour.size() == spec->nodes.size())
      << spec->interruptions_per_hour.size() << " rates for " << spec->nodes.size() << " nodes";
  CHECK(spec->total_gpus() >= 0) << spec->total_gpus();
  for (const model::NodeSpec& node : spec->nodes) {
    if (node.gpus > 0) CHECK(catalog.Find(node.gpu_model) != nullptr) << node.name << ": " << node.gpu_model;
  }
}

}  // namespace
}  // namespace gpufleet::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gpufleet::fuzz::CheckOneInput(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
