// Environment presets: the PyTorch builds a job can ask for by name ("pytorch-2.5-cu124"), each
// with the CUDA toolkit it carries, the oldest NVIDIA driver that toolkit runs on, and the GPU
// architectures its wheels have kernels for; and the rule that says whether a node, as its agent
// reports it, can run one. The table ships as data/environments.yaml (environments.SOURCE.md
// there cites the figures).
//
// The rule, for a CUDA environment (a CPU-only one runs anywhere):
//   1. the node reports an NVIDIA driver, and it is >= the toolkit's minimum driver (NVIDIA's
//      "CUDA Toolkit and Corresponding Driver Versions"). CUDA's minor-version compatibility
//      (12.x on any R525+ driver, with limits) and the data-center forward-compatibility
//      packages are deliberately not assumed: they fail on some kernels (PTX JIT, new APIs) at
//      run time, which is worse than refusing at placement;
//   2. where the node also reports the highest CUDA its driver supports, it is >= the
//      environment's CUDA (an inconsistent report is refused, not trusted);
//   3. every GPU's compute capability has kernels in the build: a build for X.y serves X.z when
//      z >= y (NVIDIA's binary compatibility within a major version, so sm_80 kernels run on an
//      8.9 L4), never across majors. PTX in a build (JIT for newer GPUs) is not counted.
//
// Thread-safety: EnvironmentTable is immutable after Parse/Load; share freely across threads.
#pragma once

#include <compare>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace gpufleet::node {

// A dotted version "550.54.15" / "12.4", compared numerically part by part (missing parts are
// 0, so "550.54" == "550.54.0" and "12.10" > "12.9").
struct Version {
  std::vector<int> parts;

  // Digits separated by single dots, surrounding spaces ignored: "550.54.15", "12.4", "8".
  // InvalidArgument for anything else ("", "12.", "v12", "12.x", a part over 9 digits).
  static Result<Version> Parse(std::string_view text);
  std::string ToString() const;  // "550.54.15"

  friend std::strong_ordering operator<=>(const Version& a, const Version& b);
  friend bool operator==(const Version& a, const Version& b) { return (a <=> b) == 0; }
};

struct Environment {
  std::string name;                // "pytorch-2.5-cu124"
  std::string pytorch;             // "2.5.1"
  std::string cuda;                // "12.4"; empty: CPU-only build
  std::string min_driver;          // "550.54.14"; empty for CPU-only
  std::vector<std::string> archs;  // compute capabilities with kernels: "5.0", ..., "9.0"
  std::string python;              // ">=3.9, <=3.12"
  std::string image;               // "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"; may be empty
  std::string pip;                 // "pip install torch==2.5.1 --index-url .../whl/cu124"
  std::string notes;

  bool cpu_only() const { return cuda.empty(); }
};

// What an agent reports about its node.
struct NodeFacts {
  std::string driver_version;                     // "550.54.15"; empty: no NVIDIA driver
  std::string cuda_version;                       // highest CUDA the driver supports: "12.4"; may be empty
  std::vector<std::string> compute_capabilities;  // one per GPU, in GPU index order: "9.0"
};

class EnvironmentTable {
 public:
  // Reads the YAML table (a top-level `environments:` list; the shipped file's header describes
  // the fields). Errors name the source, line and column and the field:
  //   "environments.yaml:12:5: min_driver 'abc' is not a version"
  // A repeated name, an unknown key (the message lists the known ones), a missing required
  // field (name, pytorch, pip), a CUDA row without min_driver or archs, and a CPU row with
  // either are errors too.
  static Result<EnvironmentTable> Parse(const std::string& yaml_text, const std::string& source);
  // NotFound when the file cannot be read; otherwise Parse with `path` as the source.
  static Result<EnvironmentTable> Load(const std::string& path);
  // $GPUFLEET_ENVIRONMENTS when set, else ./data/environments.yaml when it exists, else
  // GPUFLEET_DATA_DIR "/environments.yaml" (the source tree's data/ at build time) - the same
  // search as model::GpuSpeeds::DefaultPath.
  static std::string DefaultPath();
  static Result<EnvironmentTable> LoadDefault();

  // The environment of exactly this name; nullptr when the table has none.
  const Environment* Find(std::string_view name) const;
  const std::vector<Environment>& all() const { return environments_; }

  // The environment of this name, or NotFound:
  //   "unknown environment 'pytorch-2.5-cu12'; known: pytorch-2.7-cu128, ... (closest: pytorch-2.5-cu124)"
  Result<const Environment*> Resolve(std::string_view name) const;

  // Empty when the node can run `env` (the rule in the header comment); otherwise one sentence
  // saying why not that names the fix:
  //   "driver 525.60.13 too old for CUDA 12.4 (pytorch-2.5-cu124); needs >= 550.54.14"
  //   "no NVIDIA driver reported; pytorch-2.5-cu124 needs driver >= 550.54.14"
  //   "GPU architecture 3.7 (compute capability of GPU 0) is not in pytorch-2.5-cu124's builds (5.0 6.0 7.0 7.5 8.0 8.6 9.0)"
  // The first failing check is reported (driver, then CUDA, then GPUs in index order).
  static std::string WhyNot(const Environment& env, const NodeFacts& node);

  // Names of the table's environments the node can run, in table order (the shipped table puts
  // the newest first).
  std::vector<std::string> Supported(const NodeFacts& node) const;

 private:
  std::vector<Environment> environments_;
};

}  // namespace gpufleet::node
