#include "cost/spot_capacity.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "common/strings.h"
#include "model/csv.h"

namespace gpufleet::cost {

namespace {

std::optional<double> Number(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

Result<std::vector<SpotCapacity>> ParseSpotCapacity(std::string_view text, const std::string& source) {
  // '#' lines are comments; errors still name the file's own lines.
  GF_ASSIGN_OR_RETURN(std::vector<model::CsvRecord> records,
                      model::ParseCsv(text, source, model::CsvOptions{.comments = model::CsvComments::kSkip}));
  std::map<std::string, size_t> col;
  std::vector<SpotCapacity> out;
  const char* kNeeded[] = {"gpu", "gpus_per_node", "zone", "unavailable_fraction", "markov_mean_outage_minutes",
                           "markov_mean_available_minutes"};
  for (const model::CsvRecord& r : records) {
    const std::vector<std::string>& f = r.fields;
    const std::string where = source + ":" + std::to_string(r.line);
    if (col.empty()) {
      for (size_t i = 0; i < f.size(); ++i) col[f[i]] = i;
      for (const char* k : kNeeded) {
        if (!col.count(k)) return Status::InvalidArgument(where + ": the header has no column '" + k + "'");
      }
      continue;
    }
    auto at = [&](const char* k) -> const std::string& {
      static const std::string kEmpty;
      size_t i = col[k];
      return i < f.size() ? f[i] : kEmpty;
    };
    if (at("gpu") != "all" || at("zone") != "all") continue;
    SpotCapacity c;
    if (at("gpus_per_node") != "all") {
      std::optional<double> g = Number(at("gpus_per_node"));
      if (!g || *g < 1 || *g > 64 || *g != std::floor(*g)) {
        return Status::InvalidArgument(where + ": gpus_per_node must be a whole number from 1 to 64 or 'all', got '" +
                                       at("gpus_per_node") + "'");
      }
      c.gpus_per_node = static_cast<int>(*g);
    }
    std::optional<double> outage = Number(at("markov_mean_outage_minutes"));
    std::optional<double> available = Number(at("markov_mean_available_minutes"));
    std::optional<double> fraction = Number(at("unavailable_fraction"));
    if (!outage || !available || *outage <= 0 || *available <= 0 || !fraction || *fraction < 0 || *fraction > 1) {
      return Status::InvalidArgument(where +
                                     ": markov_mean_outage_minutes and markov_mean_available_minutes must be "
                                     "positive and unavailable_fraction within 0..1");
    }
    c.mean_outage = Duration::Millis(std::llround(*outage * 60'000));
    c.mean_available = Duration::Millis(std::llround(*available * 60'000));
    c.unavailable_fraction = *fraction;
    out.push_back(c);
  }
  if (out.empty()) return Status::InvalidArgument(source + ": no pooled rows (gpu 'all', zone 'all')");
  return out;
}

Result<std::vector<SpotCapacity>> LoadSpotCapacity(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open the spot capacity table");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseSpotCapacity(ss.str(), path);
}

const SpotCapacity& SpotCapacityFor(const std::vector<SpotCapacity>& table, int gpus_per_node) {
  const SpotCapacity* best = nullptr;
  const SpotCapacity* all = nullptr;
  for (const SpotCapacity& c : table) {
    if (c.gpus_per_node == 0) {
      all = &c;
      continue;
    }
    if (!best || std::abs(c.gpus_per_node - gpus_per_node) < std::abs(best->gpus_per_node - gpus_per_node) ||
        (std::abs(c.gpus_per_node - gpus_per_node) == std::abs(best->gpus_per_node - gpus_per_node) &&
         c.gpus_per_node < best->gpus_per_node)) {
      best = &c;
    }
  }
  return best ? *best : (all ? *all : table.front());
}

}  // namespace gpufleet::cost
