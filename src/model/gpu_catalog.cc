#include "model/gpu_catalog.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <string_view>

#include "common/read_file.h"
#include "common/strings.h"
#include "model/csv.h"

namespace gpufleet::model {
namespace {

// Names that traces use for models the spec table knows under another name. Applied after the
// table is loaded; a target the table lacks is skipped.
struct TraceAlias {
  const char* alias;
  const char* name;
};
constexpr TraceAlias kTraceAliases[] = {
    {"V100M16", "V100"},  // Alibaba GPU traces (cluster-trace-gpu-v2020, v2023 openb)
    {"V100M32", "V100-32GB"},
};

// The index key of a name: lower case, spaces and underscores as '-', so that "A100 80GB",
// "a100_80gb" and "A100-80GB" are one name.
std::string NormalizeName(std::string_view name) {
  std::string out = ToLower(Trim(name));
  for (char& c : out) {
    if (c == ' ' || c == '_') c = '-';
  }
  return out;
}

// Column positions of the fields LoadCsv reads; -1 for an optional column that is absent.
struct Columns {
  int gpu = -1, variant = -1, catalog_names = -1, memory_gb = -1, memory_bw_gbs = -1,
      fp32_tflops = -1, fp16_tensor = -1, bf16_tensor = -1, interconnect = -1, interconnect_bw = -1,
      compute_capability = -1;
};

Result<Columns> FindColumns(const CsvRecord& header, const std::string& path) {
  Columns cols;
  struct Want {
    const char* name;
    int* slot;
    bool required;
  };
  const Want wants[] = {
      {"gpu", &cols.gpu, true},
      {"variant", &cols.variant, false},
      {"catalog_names", &cols.catalog_names, false},
      {"memory_gb", &cols.memory_gb, true},
      {"memory_bw_gbs", &cols.memory_bw_gbs, true},
      {"fp32_tflops", &cols.fp32_tflops, true},
      {"fp16_tensor_tflops_dense", &cols.fp16_tensor, true},
      {"bf16_tensor_tflops_dense", &cols.bf16_tensor, false},
      {"gpu_interconnect", &cols.interconnect, false},
      {"gpu_interconnect_bw_gbs", &cols.interconnect_bw, false},
      {"compute_capability", &cols.compute_capability, false},
  };
  for (const Want& w : wants) {
    for (size_t i = 0; i < header.fields.size(); ++i) {
      if (Trim(header.fields[i]) == w.name) {
        *w.slot = static_cast<int>(i);
        break;
      }
    }
    if (*w.slot < 0 && w.required) {
      return Status::InvalidArgument(path + ":" + std::to_string(header.line) +
                                     ": header lacks the column '" + w.name + "'");
    }
  }
  return cols;
}

// The aliases in a catalog_names cell: the text before '(' split on '/'.
// "H100 / H100-SXM (AWS p5, ...)" -> {"H100", "H100-SXM"}.
std::vector<std::string> AliasesFromCatalogNames(std::string_view cell) {
  std::vector<std::string> out;
  std::string_view names = cell.substr(0, cell.find('('));
  for (const std::string& part : Split(names, '/')) {
    std::string_view name = Trim(part);
    if (!name.empty()) out.emplace_back(name);
  }
  return out;
}

// "8.0", "10.3": digits, one dot, digits. The loader checks only the shape; node/environments
// compares capabilities numerically.
bool IsComputeCapability(std::string_view s) {
  const size_t dot = s.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == s.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i != dot && (s[i] < '0' || s[i] > '9')) return false;
  }
  return true;
}

// Turns one data row into a model. Empty numeric cells read as 0.
Result<GpuModel> RowToModel(const CsvRecord& row, const Columns& cols, const std::string& path) {
  auto where = [&]() { return path + ":" + std::to_string(row.line) + ": "; };
  auto cell = [&](int col) -> std::string {
    return col < 0 ? std::string() : std::string(Trim(row.fields[col]));
  };
  auto number = [&](int col, const char* column) -> Result<double> {
    std::string text = cell(col);
    if (text.empty()) return 0.0;
    std::optional<double> v = ParseDouble(text);
    if (!v || *v < 0) {
      return Status::InvalidArgument(where() + column + " must be a non-negative number, got '" +
                                     text + "'");
    }
    return *v;
  };

  GpuModel m;
  m.name = cell(cols.gpu);
  if (m.name.empty()) return Status::InvalidArgument(where() + "gpu must not be empty");
  m.variant = cell(cols.variant);
  if (cols.catalog_names >= 0) {
    for (std::string& alias : AliasesFromCatalogNames(row.fields[cols.catalog_names])) {
      if (NormalizeName(alias) != NormalizeName(m.name)) m.aliases.push_back(std::move(alias));
    }
  }
  GF_ASSIGN_OR_RETURN(double memory_gb, number(cols.memory_gb, "memory_gb"));
  m.mem_mib = std::llround(memory_gb * 1024);
  GF_ASSIGN_OR_RETURN(m.mem_bw_gbs, number(cols.memory_bw_gbs, "memory_bw_gbs"));
  GF_ASSIGN_OR_RETURN(m.fp32_tflops, number(cols.fp32_tflops, "fp32_tflops"));
  GF_ASSIGN_OR_RETURN(double fp16_tensor, number(cols.fp16_tensor, "fp16_tensor_tflops_dense"));
  m.fp16_tflops = fp16_tensor > 0 ? fp16_tensor : m.fp32_tflops;
  GF_ASSIGN_OR_RETURN(m.bf16_tflops, number(cols.bf16_tensor, "bf16_tensor_tflops_dense"));
  m.interconnect = cell(cols.interconnect);
  if (m.interconnect.empty()) m.interconnect = "none";
  GF_ASSIGN_OR_RETURN(m.interconnect_bw_gbs,
                      number(cols.interconnect_bw, "gpu_interconnect_bw_gbs"));
  m.compute_capability = cell(cols.compute_capability);
  if (!m.compute_capability.empty() && !IsComputeCapability(m.compute_capability)) {
    return Status::InvalidArgument(where() + "compute_capability must look like 8.0, got '" +
                                   m.compute_capability + "'");
  }
  return m;
}

void AddTraceAliases(GpuCatalog& catalog) {
  for (const TraceAlias& a : kTraceAliases) {
    // A table without the target model simply lacks the alias.
    (void)catalog.AddAlias(a.alias, a.name);
  }
}

// The figure kCompute scales with: dense fp16 tensor TFLOPS, or bf16 for chips (TPUs) that
// publish only that.
double ComputeTflops(const GpuModel& m) {
  return m.fp16_tflops > 0 ? m.fp16_tflops : m.bf16_tflops;
}

// to / from, or 1 where either figure is missing.
double Ratio(double from, double to) { return from > 0 && to > 0 ? to / from : 1.0; }

}  // namespace

Result<Boundness> ParseBoundness(const std::string& s) {
  std::string v = ToLower(Trim(s));
  if (v == "compute") return Boundness::kCompute;
  if (v == "memory") return Boundness::kMemory;
  if (v == "balanced") return Boundness::kBalanced;
  return Status::InvalidArgument("unknown boundness '" + s +
                                 "' (expected compute, memory or balanced)");
}

const char* BoundnessName(Boundness b) {
  switch (b) {
    case Boundness::kCompute: return "compute";
    case Boundness::kMemory: return "memory";
    case Boundness::kBalanced: return "balanced";
  }
  return "balanced";
}

Result<GpuCatalog> GpuCatalog::LoadCsv(const std::string& path) {
  // (ReadFileText says what is wrong with the path: missing, a folder, not readable.)
  GF_ASSIGN_OR_RETURN(std::string text, ReadFileText(path));
  GF_ASSIGN_OR_RETURN(std::vector<CsvRecord> records, ParseCsv(text, path));
  if (records.empty()) {
    return Status::InvalidArgument(path + ":1: empty file, expected a header row");
  }
  if (records.size() == 1) {
    return Status::InvalidArgument(path + ": a header and no GPU rows; the table needs a row per GPU model "
                                          "(data/gpu_specs.csv has them all)");
  }
  GF_ASSIGN_OR_RETURN(Columns cols, FindColumns(records[0], path));
  const size_t width = records[0].fields.size();

  GpuCatalog catalog;
  for (size_t r = 1; r < records.size(); ++r) {
    const CsvRecord& row = records[r];
    if (row.fields.size() != width) {
      return Status::InvalidArgument(path + ":" + std::to_string(row.line) + ": expected " +
                                     std::to_string(width) + " fields as in the header, got " +
                                     std::to_string(row.fields.size()));
    }
    GF_ASSIGN_OR_RETURN(GpuModel m, RowToModel(row, cols, path));
    catalog.Add(std::move(m));
  }
  AddTraceAliases(catalog);
  return catalog;
}

const GpuCatalog& GpuCatalog::BuiltIn() {
  static const GpuCatalog* const kCatalog = [] {
    auto* catalog = new GpuCatalog();
    for (GpuModel& m : BuiltInModels()) catalog->Add(std::move(m));
    AddTraceAliases(*catalog);
    return catalog;
  }();
  return *kCatalog;
}

void GpuCatalog::Add(GpuModel m) {
  auto existing = index_.find(NormalizeName(m.name));
  if (existing != index_.end() &&
      NormalizeName(models_[existing->second].name) == NormalizeName(m.name)) {
    // A second variant of a known model (H100 PCIe after H100 SXM5): the first stays canonical;
    // only its new aliases are kept.
    for (const std::string& alias : m.aliases) {
      (void)AddAlias(alias, models_[existing->second].name);
    }
    return;
  }
  const size_t pos = models_.size();
  // A canonical name always finds its model, even where an earlier model listed it as an alias.
  auto [slot, inserted] = index_.try_emplace(NormalizeName(m.name), pos);
  if (!inserted) {
    std::vector<std::string>& shadowed = models_[slot->second].aliases;
    const std::string& canonical = slot->first;  // a name, not the binding: clang before 16 cannot capture one
    std::erase_if(shadowed, [&](const std::string& a) { return NormalizeName(a) == canonical; });
    slot->second = pos;
  }
  std::vector<std::string> kept;
  for (const std::string& alias : m.aliases) {
    if (index_.try_emplace(NormalizeName(alias), pos).second) kept.push_back(alias);
  }
  m.aliases = std::move(kept);
  models_.push_back(std::move(m));
}

Status GpuCatalog::AddAlias(const std::string& alias, const std::string& name) {
  auto target = index_.find(NormalizeName(name));
  if (target == index_.end()) return Status::NotFound("unknown GPU model '" + name + "'");
  auto [slot, inserted] = index_.try_emplace(NormalizeName(alias), target->second);
  if (inserted) {
    models_[target->second].aliases.push_back(alias);
  } else if (slot->second != target->second) {
    return Status::AlreadyExists("'" + alias + "' already names " + models_[slot->second].name);
  }
  return Status::Ok();
}

const GpuModel* GpuCatalog::Find(const std::string& name) const {
  auto it = index_.find(NormalizeName(name));
  return it == index_.end() ? nullptr : &models_[it->second];
}

double GpuCatalog::RelativeSpeed(const std::string& from, const std::string& to,
                                 Boundness b) const {
  const GpuModel* f = Find(from);
  const GpuModel* t = Find(to);
  if (f == nullptr || t == nullptr) return 1.0;
  const double compute = Ratio(ComputeTflops(*f), ComputeTflops(*t));
  const double memory = Ratio(f->mem_bw_gbs, t->mem_bw_gbs);
  switch (b) {
    case Boundness::kCompute:
      return compute;
    case Boundness::kMemory:
      return memory;
    case Boundness::kBalanced:
      return std::sqrt(compute * memory);
  }
  return 1.0;
}

}  // namespace gpufleet::model
