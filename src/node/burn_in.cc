#include "node/burn_in.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "common/strings.h"

namespace gpufleet::node {
namespace {

using json = nlohmann::json;
using model::BurnInMeasurement;
using model::BurnInReport;

// The share of a datasheet peak a healthy card reaches in a long, large run of the suite's
// kernels. docs/nodes.md gives the measurements behind each (cuBLAS GEMMs reach 60-90 % of the
// dense tensor peak depending on the part; a device-to-device copy 80-90 % of HBM bandwidth;
// pinned host copies about 80 % of the PCIe link; NCCL's all-reduce bus bandwidth 70-100 % of one
// direction of NVLink).
constexpr double kMatmulTensor = 0.60;
constexpr double kMatmulFp32 = 0.80;
constexpr double kMemory = 0.80;
constexpr double kHostLink = 0.75;
constexpr double kAllReduce = 0.70;

// One direction of a PCIe x16 link per generation, GB/s (PCI-SIG: 8, 16, 32 GT/s per lane with
// 128b/130b encoding from gen 3).
double PcieGbs(int gen, int width) {
  double per_lane = 0;
  switch (gen) {
    case 1: per_lane = 0.25; break;
    case 2: per_lane = 0.5; break;
    case 3: per_lane = 0.985; break;
    case 4: per_lane = 1.969; break;
    case 5: per_lane = 3.938; break;
    case 6: per_lane = 7.563; break;
    default: return 0;
  }
  return per_lane * width;
}

std::string Num(double v) {
  char buf[32];
  if (v > 0 && v < 0.0995) {  // (from there on, two decimals are two significant digits)
    // Two significant digits, without an exponent: a CPU's 0.004 TFLOPS must not read as 0.00.
    const int decimals = std::min(12, static_cast<int>(std::ceil(-std::log10(v))) + 1);
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return buf;
  }
  std::snprintf(buf, sizeof buf, v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : "%.2f", v);
  return buf;
}

std::string Pct(double ratio) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.0f%%", ratio * 100);
  return buf;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// A node's own figure for a test: the median over its GPUs (or the one node-wide value).
std::map<std::string, double> NodeMedians(const BurnInReport& r) {
  std::map<std::string, std::vector<double>> values;
  for (const auto& m : r.tests) {
    if (m.skipped.empty() && m.error.empty() && m.value > 0) values[m.name].push_back(m.value);
  }
  std::map<std::string, double> out;
  for (auto& [name, v] : values) out[name] = Median(std::move(v));
  return out;
}

std::string Where(const BurnInMeasurement& m) {
  return m.gpu >= 0 ? m.name + " on GPU " + std::to_string(m.gpu) : m.name;
}

bool IsThrottleFault(const std::string& reason) {
  return reason == "hw_slowdown" || reason == "hw_thermal" || reason == "sw_thermal" || reason == "hw_power_brake";
}

}  // namespace

Result<BurnInReport> ParseSuiteOutput(const std::string& json_text) {
  json j = json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::InvalidArgument("burn-in output is not a JSON object (the suite printed: " +
                                   json_text.substr(0, 200) + ")");
  }
  BurnInReport r;
  auto str = [&](const char* key) -> std::string {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  r.path = str("path");
  if (r.path != "cuda" && r.path != "cpu") {
    return Status::InvalidArgument("burn-in output: path must be \"cuda\" or \"cpu\", got '" + r.path + "'");
  }
  r.torch = str("torch");
  r.backend = str("backend");
  if (auto it = j.find("timed_out"); it != j.end() && it->is_boolean()) r.timed_out = it->get<bool>();
  auto tests = j.find("tests");
  if (tests == j.end() || !tests->is_array()) return Status::InvalidArgument("burn-in output: tests must be a list");
  for (size_t i = 0; i < tests->size(); ++i) {
    const json& t = (*tests)[i];
    const std::string where = "burn-in output: tests[" + std::to_string(i) + "]";
    if (!t.is_object()) return Status::InvalidArgument(where + " is not an object");
    BurnInMeasurement m;
    auto name = t.find("name");
    if (name == t.end() || !name->is_string() || name->get<std::string>().empty()) {
      return Status::InvalidArgument(where + ".name is missing");
    }
    m.name = name->get<std::string>();
    if (auto g = t.find("gpu"); g != t.end() && g->is_number_integer()) m.gpu = g->get<int>();
    if (auto s = t.find("skipped"); s != t.end() && s->is_string()) m.skipped = s->get<std::string>();
    if (auto e = t.find("error"); e != t.end() && e->is_string()) m.error = e->get<std::string>();
    if (auto u = t.find("unit"); u != t.end() && u->is_string()) m.unit = u->get<std::string>();
    if (m.skipped.empty() && m.error.empty()) {
      auto v = t.find("value");
      if (v == t.end() || !v->is_number()) return Status::InvalidArgument(where + ".value is not a number");
      m.value = v->get<double>();
      if (!std::isfinite(m.value) || m.value < 0) {
        return Status::InvalidArgument(where + ".value must be a finite number >= 0");
      }
    }
    r.tests.push_back(std::move(m));
  }
  return r;
}

Reference DatasheetReference(const model::GpuModel& gpu, const std::string& test, int pcie_gen, int pcie_width) {
  auto make = [](double peak, double share, const std::string& what, const char* unit) {
    Reference r;
    if (peak <= 0) return r;
    r.value = peak * share;
    r.basis = "datasheet " + what + " " + Num(peak) + " " + unit + " x " + Num(share);
    return r;
  };
  if (test == "matmul_fp16") return make(gpu.fp16_tflops, kMatmulTensor, "fp16", "TFLOPS");
  if (test == "matmul_bf16") return make(gpu.bf16_tflops, kMatmulTensor, "bf16", "TFLOPS");
  // TF32 tensor throughput is half the 16-bit figure on every part that has it (A100 156 of 312,
  // H100 495 of 989, L4 60 of 121); parts without bf16 have no TF32.
  if (test == "matmul_tf32") return make(gpu.bf16_tflops / 2, kMatmulTensor, "tf32 (bf16/2)", "TFLOPS");
  if (test == "matmul_fp32") return make(gpu.fp32_tflops, kMatmulFp32, "fp32", "TFLOPS");
  if (test == "memory_bandwidth") return make(gpu.mem_bw_gbs, kMemory, "memory", "GB/s");
  if (test == "h2d_bandwidth" || test == "d2h_bandwidth") {
    const double link = PcieGbs(pcie_gen, pcie_width);
    return make(link, kHostLink, "PCIe gen" + std::to_string(pcie_gen) + " x" + std::to_string(pcie_width), "GB/s");
  }
  if (test == "allreduce_busbw" && gpu.interconnect_bw_gbs > 0) {
    // The table gives NVLink's total bidirectional bandwidth per GPU; bus bandwidth counts one way.
    return make(gpu.interconnect_bw_gbs / 2, kAllReduce, gpu.interconnect + " one-way", "GB/s");
  }
  return {};
}

FleetReference FleetMedians(const std::vector<const BurnInReport*>& passed) {
  std::map<std::string, std::vector<double>> per_test;
  FleetReference out;
  for (const BurnInReport* r : passed) {
    if (!r) continue;
    ++out.nodes;
    for (const auto& [name, v] : NodeMedians(*r)) per_test[name].push_back(v);
  }
  for (auto& [name, v] : per_test) out.by_test[name] = Median(std::move(v));
  return out;
}

void Judge(BurnInReport& r, const JudgeOptions& o) {
  r.problems.clear();
  r.threshold = o.threshold;
  // Health first: these fail a node whatever its speed.
  for (const auto& h : r.health) {
    const std::string gpu = "GPU " + std::to_string(h.index) + ": ";
    if (h.ecc_uncorrected > 0) {
      r.problems.push_back(gpu + std::to_string(h.ecc_uncorrected) + " uncorrected ECC error" +
                           (h.ecc_uncorrected == 1 ? "" : "s"));
    }
    if (h.retirement_pending) r.problems.push_back(gpu + "a page retirement or row remap is pending (needs a GPU reset)");
    if (!h.xid_errors.empty()) {
      std::vector<std::string> ids;
      for (int x : h.xid_errors) ids.push_back(std::to_string(x));
      r.problems.push_back(gpu + "XID error" + (ids.size() == 1 ? " " : "s ") + Join(ids, ", ") + " during the check");
    }
    if (h.pcie_width > 0 && h.pcie_max_width > 0 && h.pcie_width < h.pcie_max_width) {
      r.problems.push_back(gpu + "PCIe link trained at x" + std::to_string(h.pcie_width) + " of x" +
                           std::to_string(h.pcie_max_width) + " (reseat the card or check the riser)");
    }
    if (h.nvlink_total > 0 && h.nvlink_active >= 0 && h.nvlink_active < h.nvlink_total) {
      r.problems.push_back(gpu + std::to_string(h.nvlink_total - h.nvlink_active) + " of " +
                           std::to_string(h.nvlink_total) + " NVLinks down");
    }
    std::vector<std::string> faults;
    for (const auto& t : h.throttle_reasons) {
      if (IsThrottleFault(t)) faults.push_back(t);
    }
    if (!faults.empty()) {
      r.problems.push_back(gpu + "throttled under load (" + Join(faults, ", ") + ")" +
                           (h.max_temperature_c > 0 ? ", up to " + std::to_string(h.max_temperature_c) + " C" : ""));
    }
  }
  // Then speed.
  std::vector<double> matmul_ratios_bf16, matmul_ratios_fp16;
  for (auto& m : r.tests) {
    m.reference = 0;
    m.basis.clear();
    m.ok = true;
    if (!m.error.empty()) {
      m.ok = false;
      r.problems.push_back(Where(m) + " failed to run: " + m.error);
      continue;
    }
    if (!m.skipped.empty()) continue;
    Reference ref;
    if (r.path == "cuda" && o.gpu) {
      int gen = -1, width = -1;
      for (const auto& h : r.health) {
        if (h.index == m.gpu) {
          gen = h.pcie_max_gen;
          width = h.pcie_max_width;
        }
      }
      ref = DatasheetReference(*o.gpu, m.name, gen, width);
    }
    if (ref.value <= 0) {
      auto it = o.fleet.by_test.find(m.name);
      if (it != o.fleet.by_test.end() && it->second > 0) {
        ref.value = it->second;
        ref.basis = "fleet median (" + std::to_string(o.fleet.nodes) + " node" + (o.fleet.nodes == 1 ? "" : "s") + ")";
      }
    }
    if (ref.value <= 0) continue;
    m.reference = ref.value;
    m.basis = ref.basis;
    const double ratio = m.value / ref.value;
    if (m.name == "matmul_bf16") matmul_ratios_bf16.push_back(ratio);
    if (m.name == "matmul_fp16") matmul_ratios_fp16.push_back(ratio);
    if (ratio < o.threshold) {
      m.ok = false;
      r.problems.push_back(Where(m) + " at " + Num(m.value) + " " + m.unit + ", " + Pct(ratio) + " of the " +
                           Num(ref.value) + " " + m.unit + " reference (" + ref.basis + "); needs " + Pct(o.threshold));
    }
  }
  // When nothing was judged at all (no reference of any kind), the report still records figures.
  const auto& ratios = !matmul_ratios_bf16.empty() ? matmul_ratios_bf16 : matmul_ratios_fp16;
  r.speed_ratio = Median(ratios);
  if (r.tests.empty()) r.problems.push_back("the suite measured nothing");
  r.passed = r.problems.empty();
}

std::string Summary(const BurnInReport& r) {
  if (r.passed) {
    if (r.speed_ratio > 0) return "passed (matmul " + Num(r.speed_ratio) + "x reference)";
    return "passed";
  }
  std::string s = "failed: ";
  for (size_t i = 0; i < r.problems.size(); ++i) s += (i ? "; " : "") + r.problems[i];
  return s;
}

}  // namespace gpufleet::node
