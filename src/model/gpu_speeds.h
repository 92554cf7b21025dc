// GpuSpeeds: measured throughput of one GPU of each model relative to one A100, per workload
// class, loaded from data/gpu_speeds.csv (ratios computed from MLPerf results;
// data/gpu_speeds.SOURCE.md cites each one), and the speed lookup that `gpufleet select` and the
// pool's offers use. For (reference GPU, target GPU, workload class) the lookup answers, first
// that applies:
//   measured         the job's own step times on both GPUs: t_reference / t_target;
//   measured+<table> the job's step times on the target and other GPUs but not the reference:
//                    the reference's step time is estimated from the measured GPUs through the
//                    table (below), and <table> says which table source that used;
//   mlperf:<class>   both GPUs' rows for the class (a GPU without one uses its `default` row,
//                    and the source becomes mlperf:default): target ratio / reference ratio;
//   datasheet        GpuCatalog::RelativeSpeed with the job's profile, where either GPU has no
//                    row at all.
// The baseline rows (benchmark "(baseline)": A100 and A100-80GB, 1.0 by definition) hold for
// every class, so A100 -> H100 for training-vision is mlperf:training-vision.
//
// Thread-safety: immutable after Load; share freely across threads.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/gpu_catalog.h"

namespace gpufleet::model {

inline constexpr const char* kDefaultWorkloadClass = "default";

// One row of the table.
struct SpeedRow {
  std::string gpu;             // canonical name (GpuCatalog::Find)
  std::string workload_class;  // "training-vision", ..., "default"
  double ratio_vs_a100 = 1;    // > 0; how many A100s' worth of work one GPU does
  std::string confidence;      // high | medium | low (as the table says; may be empty)
  bool baseline = false;       // the A100 reference rows: valid for every class
  int line = 0;                // in the file, for messages
};

// What was measured for this job, overriding the table. Names are canonical GPU model names.
struct SpeedOverrides {
  // Seconds per step of the job on each GPU model (job YAML `step_time:`, `select --step-time`).
  std::map<std::string, double> step_seconds;
  // Hook for node burn-in, unused so far (the pool scales its offers by the burn-in's speed_ratio
  // instead, docs/nodes.md): a measured speed vs one A100 for a GPU model, e.g. a
  // burn-in benchmark's result for the node a caller is about to price. An entry takes the place
  // of every table row of that model, and the source names it ("burn-in", or
  // "burn-in+mlperf:<class>" when the other GPU comes from the table).
  std::map<std::string, double> burn_in_vs_a100;
};

struct SpeedQuery {
  std::string reference;  // the GPU the job's estimate was measured on
  std::string target;     // the GPU it would run on
  std::string workload_class = kDefaultWorkloadClass;
  Boundness profile = Boundness::kBalanced;  // used by the datasheet fallback only
  const SpeedOverrides* overrides = nullptr;  // nullable
};

struct SpeedEstimate {
  double ratio = 1;        // target over reference: 2.0 = the target does the work in half the time
  std::string source;      // "measured", "measured+mlperf:default", "mlperf:training-vision", "datasheet"
  std::string confidence;  // the lower table confidence of the rows used; empty when none was used
};

// Seconds per step: "0.42s", "420ms", "0.42" (seconds), "1.5m"; nullopt unless positive and finite.
std::optional<double> ParseStepSeconds(std::string_view s);

class GpuSpeeds {
 public:
  // An empty table: every lookup without step times is `datasheet`.
  GpuSpeeds() = default;

  // Reads the CSV (header with at least gpu, workload_class, ratio_vs_a100; confidence and
  // benchmark are read when present; other columns are ignored). Errors name the file and line:
  // "gpu_speeds.csv:4: unknown GPU model 'Z80'", a ratio that is not a positive number, a
  // repeated (gpu, workload_class).
  static Result<GpuSpeeds> ParseCsv(const std::string& text, const std::string& source_name, const GpuCatalog& gpus);
  static Result<GpuSpeeds> LoadCsv(const std::string& path, const GpuCatalog& gpus);

  // Where the table is found, as the offer catalog is: $GPUFLEET_SPEEDS when set, else
  // ./data/gpu_speeds.csv when it exists, else the one in the source tree's data/ that the
  // binary was built from (GPUFLEET_DATA_DIR at build time), so an installed binary finds it.
  static std::string DefaultPath();
  // The table at DefaultPath(), read once per process; the error when it could not be read.
  static const Result<GpuSpeeds>& Shipped();

  // The workload classes the table knows, sorted; always includes "default".
  std::vector<std::string> Classes() const;
  // InvalidArgument "unknown workload class 'x'; known: default, inference-vision, ..." unless known.
  Status CheckClass(const std::string& workload_class) const;

  // The row of exactly (gpu, class), nullptr when none; `gpu` is a canonical name.
  const SpeedRow* Row(const std::string& gpu, const std::string& workload_class) const;
  const std::vector<SpeedRow>& rows() const { return rows_; }

  // The speed of q.target relative to q.reference (header comment). Unknown GPU names fall to
  // the datasheet model, which counts them as 1.0; step times of other models than the two are
  // used only as the header says.
  SpeedEstimate Lookup(const SpeedQuery& q, const GpuCatalog& gpus) const;

 private:
  std::vector<SpeedRow> rows_;
};

}  // namespace gpufleet::model
