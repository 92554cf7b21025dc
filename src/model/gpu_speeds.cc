#include "model/gpu_speeds.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "common/strings.h"
#include "model/csv.h"

#ifndef GPUFLEET_DATA_DIR
#define GPUFLEET_DATA_DIR "data"
#endif

namespace gpufleet::model {
namespace {

// Where a lookup's figure for one GPU came from.
struct Side {
  double ratio_vs_a100 = 1;
  std::string label;       // "burn-in", "mlperf:<class>", "mlperf:default"
  std::string confidence;  // empty for burn-in
  bool baseline = false;
};

int ConfidenceRank(const std::string& c) {
  if (c == "high") return 3;
  if (c == "medium") return 2;
  if (c == "low") return 1;
  return 0;
}

// The lower of two confidences, ignoring empty ones (burn-in, baseline-free).
std::string LowerConfidence(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return ConfidenceRank(a) <= ConfidenceRank(b) ? a : b;
}

// How much a source label rests on: datasheet < mlperf:default (for another class) < the class's
// own rows < burn-in alone. Used to name the weakest source among several.
int SourceRank(const std::string& label, const std::string& workload_class) {
  if (label.find("datasheet") != std::string::npos) return 0;
  if (workload_class != kDefaultWorkloadClass && label.find("mlperf:default") != std::string::npos) return 1;
  if (label.find("mlperf:") != std::string::npos) return 2;
  return 3;
}

}  // namespace

std::optional<double> ParseStepSeconds(std::string_view s) {
  s = Trim(s);
  double unit = 1;
  auto strip = [&](std::string_view suffix, double u) {
    if (s.size() > suffix.size() && s.substr(s.size() - suffix.size()) == suffix) {
      s.remove_suffix(suffix.size());
      unit = u;
      return true;
    }
    return false;
  };
  strip("ms", 1e-3) || strip("us", 1e-6) || strip("s", 1) || strip("m", 60) || strip("h", 3600);
  auto v = ParseDouble(Trim(s));
  if (!v || !std::isfinite(*v) || *v <= 0) return std::nullopt;
  return *v * unit;
}

Result<GpuSpeeds> GpuSpeeds::ParseCsv(const std::string& text, const std::string& source_name,
                                      const GpuCatalog& gpus) {
  GF_ASSIGN_OR_RETURN(std::vector<CsvRecord> records, model::ParseCsv(text, source_name));
  if (records.empty()) return Status::InvalidArgument(source_name + ":1: empty file (want a header line)");
  const CsvRecord& header = records.front();
  auto column = [&](const std::string& name) {
    for (size_t i = 0; i < header.fields.size(); ++i) {
      if (Trim(header.fields[i]) == name) return static_cast<int>(i);
    }
    return -1;
  };
  const int gpu = column("gpu"), cls = column("workload_class"), ratio = column("ratio_vs_a100");
  const int confidence = column("confidence"), benchmark = column("benchmark");
  for (const auto& [name, at] : {std::pair<const char*, int>{"gpu", gpu}, {"workload_class", cls}, {"ratio_vs_a100", ratio}}) {
    if (at < 0) {
      return Status::InvalidArgument(source_name + ":" + std::to_string(header.line) + ": the header has no '" + name +
                                     "' column");
    }
  }
  GpuSpeeds speeds;
  for (size_t r = 1; r < records.size(); ++r) {
    const CsvRecord& rec = records[r];
    auto error = [&](const std::string& msg) {
      return Status::InvalidArgument(source_name + ":" + std::to_string(rec.line) + ": " + msg);
    };
    if (rec.fields.size() != header.fields.size()) {
      return error("has " + std::to_string(rec.fields.size()) + " fields, the header " +
                   std::to_string(header.fields.size()));
    }
    SpeedRow row;
    row.line = rec.line;
    const std::string name(Trim(rec.fields[gpu]));
    const GpuModel* m = gpus.Find(name);
    if (m == nullptr) return error("unknown GPU model '" + name + "' (data/gpu_specs.csv names the known ones)");
    row.gpu = m->name;
    row.workload_class = std::string(Trim(rec.fields[cls]));
    if (row.workload_class.empty()) return error("workload_class is empty");
    auto v = ParseDouble(Trim(rec.fields[ratio]));
    if (!v || !std::isfinite(*v) || *v <= 0) {
      return error("ratio_vs_a100 must be a positive number, got '" + rec.fields[ratio] + "'");
    }
    row.ratio_vs_a100 = *v;
    if (confidence >= 0) row.confidence = std::string(Trim(rec.fields[confidence]));
    row.baseline = benchmark >= 0 && Trim(rec.fields[benchmark]) == "(baseline)";
    if (const SpeedRow* earlier = speeds.Row(row.gpu, row.workload_class)) {
      return error("a second row for " + row.gpu + " " + row.workload_class + " (the first is on line " +
                   std::to_string(earlier->line) + ")");
    }
    speeds.rows_.push_back(std::move(row));
  }
  return speeds;
}

Result<GpuSpeeds> GpuSpeeds::LoadCsv(const std::string& path, const GpuCatalog& gpus) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read the GPU speed table " + path);
  std::ostringstream buf;
  buf << in.rdbuf();
  return ParseCsv(buf.str(), path, gpus);
}

std::string GpuSpeeds::DefaultPath() {
  if (const char* env = std::getenv("GPUFLEET_SPEEDS"); env != nullptr && *env != '\0') return env;
  const std::string local = "data/gpu_speeds.csv";
  std::error_code ec;
  if (std::filesystem::exists(local, ec)) return local;
  return std::string(GPUFLEET_DATA_DIR) + "/gpu_speeds.csv";
}

const Result<GpuSpeeds>& GpuSpeeds::Shipped() {
  static const Result<GpuSpeeds> shipped = LoadCsv(DefaultPath(), GpuCatalog::BuiltIn());
  return shipped;
}

std::vector<std::string> GpuSpeeds::Classes() const {
  std::set<std::string> names = {kDefaultWorkloadClass};
  for (const SpeedRow& r : rows_) names.insert(r.workload_class);
  return {names.begin(), names.end()};
}

Status GpuSpeeds::CheckClass(const std::string& workload_class) const {
  const std::vector<std::string> known = Classes();
  if (std::find(known.begin(), known.end(), workload_class) != known.end()) return Status::Ok();
  return Status::InvalidArgument("unknown workload class '" + workload_class + "'; known: " + Join(known, ", "));
}

const SpeedRow* GpuSpeeds::Row(const std::string& gpu, const std::string& workload_class) const {
  for (const SpeedRow& r : rows_) {
    if (r.gpu == gpu && r.workload_class == workload_class) return &r;
  }
  return nullptr;
}

namespace {

// The table's (or a burn-in's) figure for one GPU and class, nullopt when it has none.
std::optional<Side> SideOf(const GpuSpeeds& speeds, const std::string& gpu, const std::string& cls,
                           const SpeedOverrides* overrides) {
  if (overrides != nullptr) {
    if (auto it = overrides->burn_in_vs_a100.find(gpu); it != overrides->burn_in_vs_a100.end() && it->second > 0) {
      return Side{it->second, "burn-in", "", false};
    }
  }
  if (const SpeedRow* r = speeds.Row(gpu, cls)) return Side{r->ratio_vs_a100, "mlperf:" + cls, r->confidence, r->baseline};
  if (const SpeedRow* d = speeds.Row(gpu, kDefaultWorkloadClass)) {
    // The baseline is 1.0 for every class; any other default row stands in for the class.
    return Side{d->ratio_vs_a100, "mlperf:" + (d->baseline ? cls : std::string(kDefaultWorkloadClass)), d->confidence,
                d->baseline};
  }
  return std::nullopt;
}

// The table (or datasheet) speed of `target` over `reference`, step times left out.
SpeedEstimate TableSpeed(const GpuSpeeds& speeds, const std::string& reference, const std::string& target,
                         const SpeedQuery& q, const GpuCatalog& gpus) {
  std::optional<Side> ref = SideOf(speeds, reference, q.workload_class, q.overrides);
  std::optional<Side> tgt = SideOf(speeds, target, q.workload_class, q.overrides);
  if (!ref || !tgt) return {gpus.RelativeSpeed(reference, target, q.profile), "datasheet", ""};
  SpeedEstimate e;
  e.ratio = tgt->ratio_vs_a100 / ref->ratio_vs_a100;
  e.confidence = LowerConfidence(ref->confidence, tgt->confidence);
  const std::string& a = ref->label;
  const std::string& b = tgt->label;
  if (a == b || ref->baseline) {
    e.source = b;
  } else if (tgt->baseline) {
    e.source = a;
  } else if (a == "burn-in" || b == "burn-in") {
    e.source = "burn-in+" + (a == "burn-in" ? b : a);
  } else {
    e.source = std::string("mlperf:") + kDefaultWorkloadClass;  // one side fell back to its default row
  }
  return e;
}

}  // namespace

SpeedEstimate GpuSpeeds::Lookup(const SpeedQuery& q, const GpuCatalog& gpus) const {
  auto canonical = [&](const std::string& name) {
    const GpuModel* m = gpus.Find(name);
    return m != nullptr ? m->name : name;
  };
  const std::string reference = canonical(q.reference);
  const std::string target = canonical(q.target);
  std::map<std::string, double> steps;
  if (q.overrides != nullptr) {
    for (const auto& [gpu, seconds] : q.overrides->step_seconds) {
      if (seconds > 0 && std::isfinite(seconds)) steps[canonical(gpu)] = seconds;
    }
  }
  auto target_step = steps.find(target);
  if (target_step == steps.end()) return TableSpeed(*this, reference, target, q, gpus);
  if (auto ref_step = steps.find(reference); ref_step != steps.end()) {
    return {ref_step->second / target_step->second, "measured", ""};
  }
  // The reference was not measured: estimate its step time from each measured GPU through the
  // table (t_G x speed(reference -> G)) and take the geometric mean, so that every target is
  // compared with the same estimate. The target alone adds nothing to the table's ratio.
  if (steps.size() == 1) return TableSpeed(*this, reference, target, q, gpus);
  double log_sum = 0;
  std::string weakest;
  std::string confidence;
  for (const auto& [gpu, seconds] : steps) {
    SpeedEstimate via = TableSpeed(*this, reference, gpu, q, gpus);
    log_sum += std::log(seconds * via.ratio);
    if (weakest.empty() || SourceRank(via.source, q.workload_class) < SourceRank(weakest, q.workload_class)) {
      weakest = via.source;
    }
    confidence = confidence.empty() ? via.confidence : LowerConfidence(confidence, via.confidence);
  }
  const double reference_step = std::exp(log_sum / static_cast<double>(steps.size()));
  return {reference_step / target_step->second, "measured+" + weakest, confidence};
}

}  // namespace gpufleet::model
