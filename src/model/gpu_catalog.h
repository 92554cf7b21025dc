// GpuCatalog: the figures of each GPU model (memory, TFLOPS, bandwidth, interconnect), loaded from
// the spec table shipped in data/gpu_specs.csv, and the throughput model that scales a runtime
// measured on one model to another.
//
// Thread-safety: immutable after Load; share freely across threads.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace gpufleet::model {

struct GpuModel {
  std::string name;     // canonical: "H100", "A100-80GB", "T4"
  std::string variant;  // "SXM5 80GB"
  int64_t mem_mib = 0;
  double mem_bw_gbs = 0;
  double fp32_tflops = 0;
  double fp16_tflops = 0;  // dense tensor-core figure; falls back to fp32 where there is none
  double bf16_tflops = 0;  // dense; 0 where the model has no bf16
  std::string interconnect;  // "NVLink4", "none"
  double interconnect_bw_gbs = 0;
};

// Which resource a job's speed follows when it moves between GPU models.
enum class Boundness {
  kCompute,   // scales with dense fp16/bf16 tensor TFLOPS
  kMemory,    // scales with memory bandwidth
  kBalanced,  // geometric mean of the two (the default: most training sits between)
};
Result<Boundness> ParseBoundness(const std::string& s);

class GpuCatalog {
 public:
  // Reads the spec CSV (header: gpu,variant,catalog_names,...,memory_gb,memory_bw_gbs,fp32_tflops,
  // ...). Where a name has several variants, the first row is the canonical one.
  static Result<GpuCatalog> LoadCsv(const std::string& path);
  // The catalog compiled into the binary (a copy of data/gpu_specs.csv's main figures), so that
  // a binary run from anywhere knows the common models.
  static const GpuCatalog& BuiltIn();

  void Add(GpuModel m);
  // Finds a model by canonical name or alias, case-insensitively ("h100", "A100 80GB", "a100-80gb").
  const GpuModel* Find(const std::string& name) const;
  const std::vector<GpuModel>& models() const { return models_; }

  // How much faster `to` runs a job than `from` (2.0 = twice as fast). Unknown models count as 1.
  double RelativeSpeed(const std::string& from, const std::string& to, Boundness b) const;

 private:
  std::vector<GpuModel> models_;
  std::unordered_map<std::string, size_t> index_;  // lower-cased name or alias -> models_ index
};

}  // namespace gpufleet::model
