#include "testing/fakes.h"

#include "common/strings.h"

namespace gpufleet::testing {

std::vector<int64_t> RecordingSink::Started() const {
  std::vector<int64_t> out;
  for (const auto& a : actions) {
    if (a.kind == Action::Kind::kStart) out.push_back(a.job.value());
  }
  return out;
}

std::vector<int64_t> RecordingSink::Preempted() const {
  std::vector<int64_t> out;
  for (const auto& a : actions) {
    if (a.kind == Action::Kind::kPreempt) out.push_back(a.job.value());
  }
  return out;
}

model::NodeSpec MakeNode(const std::string& name, const std::string& gpu_model, int gpus,
                         std::vector<std::string> labels) {
  model::NodeSpec n;
  n.name = name;
  n.gpu_model = gpu_model;
  n.gpus = gpus;
  n.cpu_milli = 96'000;
  n.mem_mib = 1024 * 1024;
  for (const auto& kv : labels) {
    auto parts = Split(kv, '=');
    n.labels[parts[0]] = parts.size() > 1 ? parts[1] : "";
  }
  return n;
}

model::JobSpec MakeJob(int gpus, int64_t submit_s, const std::string& team) {
  model::JobSpec j;
  j.gpus_per_node = gpus;
  j.nodes = 1;
  j.submit = Time::FromSeconds(submit_s);
  j.team = team;
  return j;
}

}  // namespace gpufleet::testing
