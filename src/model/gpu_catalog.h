// GpuCatalog: the figures of each GPU model (memory, TFLOPS, bandwidth, interconnect), loaded from
// the spec table shipped in data/gpu_specs.csv, and the throughput model that scales a runtime
// measured on one model to another.
//
// Thread-safety: immutable after Load; share freely across threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace gpufleet::model {

struct GpuModel {
  std::string name;     // canonical: "H100", "A100-80GB", "T4"
  std::string variant;  // "SXM5 80GB"
  std::vector<std::string> aliases;  // other names Find accepts: "H100-SXM", "RTXA6000"
  int64_t mem_mib = 0;
  double mem_bw_gbs = 0;
  double fp32_tflops = 0;
  double fp16_tflops = 0;  // dense tensor-core figure; falls back to fp32 where there is none
  double bf16_tflops = 0;  // dense; 0 where the model has no bf16
  std::string interconnect;  // "NVLink4", "none"
  double interconnect_bw_gbs = 0;
  // NVIDIA compute capability, "major.minor" as NVIDIA's CUDA GPUs page writes it ("8.0" A100,
  // "7.5" T4): which kernel builds (sm_80, ...) the GPU can run. Empty for other vendors.
  std::string compute_capability;
};

// Which resource a job's speed follows when it moves between GPU models.
enum class Boundness {
  kCompute,   // scales with dense fp16/bf16 tensor TFLOPS
  kMemory,    // scales with memory bandwidth
  kBalanced,  // geometric mean of the two (the default: most training sits between)
};
Result<Boundness> ParseBoundness(const std::string& s);
// "compute", "memory", "balanced": what ParseBoundness reads.
const char* BoundnessName(Boundness b);

class GpuCatalog {
 public:
  // Reads the spec CSV (header: gpu,variant,catalog_names,...,memory_gb,memory_bw_gbs,fp32_tflops,
  // ...; data/gpu_specs.SOURCE.md describes it). Where a name has several variants, the first row
  // is the canonical one. Aliases are the catalog_names before '(' split on '/', plus the trace
  // names ("V100M32"). Errors name the file and line: "specs.csv:7: memory_gb must be ...".
  static Result<GpuCatalog> LoadCsv(const std::string& path);
  // The catalog compiled into the binary (a copy of data/gpu_specs.csv's main figures), so that
  // a binary run from anywhere knows the common models.
  static const GpuCatalog& BuiltIn();

  // Adds a model, indexed under its name and aliases. A model whose name is already a canonical
  // name is a further variant: the first one stays (first row wins) and only its new aliases are
  // kept. An alias already taken keeps pointing at the earlier model; a canonical name always
  // finds its own model.
  void Add(GpuModel m);
  // Makes `alias` find the model that `name` finds (for names traces use, Alibaba's "V100M32").
  // NotFound if `name` is unknown; AlreadyExists if `alias` names another model.
  Status AddAlias(const std::string& alias, const std::string& name);
  // Finds a model by canonical name or alias, ignoring case and treating ' ' and '_' as '-'
  // ("h100", "A100 80GB", "a100_80gb"); nullptr when unknown.
  const GpuModel* Find(const std::string& name) const;
  const std::vector<GpuModel>& models() const { return models_; }

  // How much faster `to` runs a job than `from` (2.0 = twice as fast): the ratio of dense fp16
  // tensor TFLOPS (bf16 where a chip has only that) for kCompute, of memory bandwidth for
  // kMemory, and the geometric mean of both for kBalanced. Where either model is unknown, or
  // lacks the figure a ratio needs, that ratio counts as 1.
  double RelativeSpeed(const std::string& from, const std::string& to, Boundness b) const;

 private:
  // The table compiled into the binary: gpu_catalog_builtin.cc, which
  // scripts/gen_gpu_builtin.py generates from data/gpu_specs.csv.
  static std::vector<GpuModel> BuiltInModels();

  std::vector<GpuModel> models_;
  std::unordered_map<std::string, size_t> index_;  // normalised name or alias -> models_ index
};

}  // namespace gpufleet::model
