// gpufleet-nvml-probe [LIBRARY]: asks NVML (libnvidia-ml.so.1, or LIBRARY) for this machine's
// GPUs and prints them, the NodeSpec the agent would report and one telemetry sample as JSON.
// A check of the NVML path on a real NVIDIA machine (scripts/nvml_check.sh); exits 1 with the
// error on stderr when NVML cannot be used.
#include <cstdio>
#include <string>

#include "agent/gpu_probe.h"

namespace {

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

template <typename T>
std::string List(const std::vector<T>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gpufleet;
  auto probe = agent::NvmlProbe::Open(argc > 1 ? argv[1] : agent::NvmlProbe::kDefaultLibrary);
  if (!probe.ok()) {
    std::fprintf(stderr, "gpufleet-nvml-probe: %s\n", probe.status().message().c_str());
    return 1;
  }
  auto devices = (*probe)->Devices();
  if (!devices.ok()) {
    std::fprintf(stderr, "gpufleet-nvml-probe: devices: %s\n", devices.status().message().c_str());
    return 1;
  }
  auto samples = (*probe)->Sample();
  if (!samples.ok()) {
    std::fprintf(stderr, "gpufleet-nvml-probe: sample: %s\n", samples.status().message().c_str());
    return 1;
  }
  auto node = agent::NodeSpecFromDevices("this-node", *devices, model::GpuCatalog::BuiltIn());

  std::string out = "{\n  \"devices\": [";
  for (size_t i = 0; i < devices->size(); ++i) {
    const auto& d = (*devices)[i];
    out += std::string(i ? "," : "") + "\n    {\"index\": " + std::to_string(d.index) +
           ", \"uuid\": " + Quote(d.uuid) + ", \"name\": " + Quote(d.name) +
           ", \"memory_mib\": " + std::to_string(d.memory_mib) +
           ", \"nvlink_peers\": " + List(d.nvlink_peers) + "}";
  }
  out += "\n  ],\n  \"sample\": [";
  for (size_t i = 0; i < samples->size(); ++i) {
    const auto& s = (*samples)[i];
    out += std::string(i ? "," : "") + "\n    {\"util_pct\": " + std::to_string(s.util_pct) +
           ", \"mem_used_mib\": " + std::to_string(s.mem_used_mib) +
           ", \"temperature_c\": " + std::to_string(s.temperature_c) +
           ", \"power_w\": " + std::to_string(s.power_w) + "}";
  }
  out += "\n  ],\n  \"node\": ";
  if (node.ok()) {
    out += "{\"gpu_model\": " + Quote(node->gpu_model) + ", \"gpus\": " +
           std::to_string(node->gpus) + ", \"nvlink_domain\": " + List(node->nvlink_domain) + "}";
  } else {
    out += "{\"error\": " + Quote(node.status().message()) + "}";
  }
  out += "\n}\n";
  std::fputs(out.c_str(), stdout);
  return node.ok() ? 0 : 1;
}
