// The acceptance burn-in's judge: reads what the suite (scripts/burnin.py) printed and decides
// whether a node may take work.
//
// A test passes when it reaches `threshold` (default 85 %) of its reference. The reference is,
// in order:
//   1. the datasheet: the GPU model's peak figure (data/gpu_specs.csv) times the share of it a
//      healthy card reaches in practice (kAchievable below; docs/nodes.md gives the sources), for
//      the CUDA path only;
//   2. the fleet: the median of the same test on nodes of the same GPU model and path that passed
//      before (what the CPU path in CI, and GPUs without datasheet figures, are judged by);
//   3. none: the test is recorded and passes (the first node of its kind sets the fleet's mark).
// Health findings fail a node whatever its speed: uncorrected ECC errors, a pending page
// retirement or row remap, a critical XID during the check, a PCIe link trained narrower than
// the slot, an NVLink down, and hardware or thermal throttling under load. Power-cap throttling
// is normal at full load and only noted.
//
// Pure functions; thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/burn_in.h"
#include "model/gpu_catalog.h"

namespace gpufleet::node {

inline constexpr double kDefaultThreshold = 0.85;

// Reads the suite's JSON document (`burnin.py suite` stdout) into a report's path, torch,
// backend, timed_out and tests. Errors name what is wrong: "burn-in output: tests[2].value is
// not a number".
Result<model::BurnInReport> ParseSuiteOutput(const std::string& json_text);

// The datasheet reference of one test for one GPU model on the CUDA path, with its basis
// ("datasheet bf16 989 TFLOPS x 0.60"); 0 and no basis when the datasheet does not cover it.
// `pcie_gen`/`pcie_width` (the slot's maximum, from NVML; <= 0 unknown) give the host-link
// reference.
struct Reference {
  double value = 0;
  std::string basis;
};
Reference DatasheetReference(const model::GpuModel& gpu, const std::string& test, int pcie_gen = -1,
                             int pcie_width = -1);

// What the fleet reaches: for each test, the median over `passed` (reports of nodes that passed,
// of the same GPU model and path) of each node's own median over its GPUs.
struct FleetReference {
  std::map<std::string, double> by_test;
  int nodes = 0;
};
FleetReference FleetMedians(const std::vector<const model::BurnInReport*>& passed);

struct JudgeOptions {
  double threshold = kDefaultThreshold;  // share of the reference each test must reach (0..1]
  const model::GpuModel* gpu = nullptr;  // the node's GPU model; nullptr: no datasheet references
  FleetReference fleet;                  // nodes of the same model and path that passed
};

// Fills the report's references, ok flags, problems, passed and speed_ratio.
void Judge(model::BurnInReport& report, const JudgeOptions& options);

// One line for lists: "passed (bf16 0.97x reference)" or "failed: GPU 1: 3 uncorrected ECC
// errors; matmul_bf16 on GPU 0 at 41% of reference ...".
std::string Summary(const model::BurnInReport& report);

}  // namespace gpufleet::node
