#include "testing/fake_provider.h"

namespace gpufleet::testing {

Result<provider::Instance> FakeProvider::Create(const provider::InstanceRequest& request, Time now) {
  if (fail_creates) return Status::Unavailable("fake: no capacity for " + request.offer);
  provider::Instance i;
  i.id = "f-" + std::to_string(next_id++);
  i.name = request.name;
  i.offer = request.offer;
  i.gpu_model = request.gpu_model;
  i.gpus = request.gpus;
  i.market = request.market;
  i.price_micros_per_hour = request.price_micros_per_hour;
  i.zone = request.zone;
  i.labels = request.labels;
  i.state = provider::kBooting;
  i.created = now;
  instances[i.id] = i;
  created.push_back(request.name);
  return i;
}

Status FakeProvider::Delete(const std::string& id, Time /*now*/) {
  deleted.push_back(id);
  instances.erase(id);
  return Status::Ok();
}

Result<std::vector<provider::Instance>> FakeProvider::List() {
  std::vector<provider::Instance> out;
  for (const auto& [id, i] : instances) out.push_back(i);
  return out;
}

std::vector<provider::ProviderEvent> FakeProvider::Poll(Time /*now*/) {
  std::vector<provider::ProviderEvent> out;
  out.swap(pending_events);
  return out;
}

void FakeProvider::AddForeign(const std::string& id, const std::string& name) {
  provider::Instance i;
  i.id = id;
  i.name = name;
  i.state = provider::kRunning;
  instances[id] = i;
}

}  // namespace gpufleet::testing
