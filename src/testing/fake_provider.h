// FakeProvider: an in-memory cloud for unit tests of the autoscaling loop. Instances exist as
// records only; tests inspect what was created and deleted, make creates fail, and queue the
// events the next Poll returns.
//
// Thread-safety: none, like every Provider.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "provider/provider.h"

namespace gpufleet::testing {

class FakeProvider : public provider::Provider {
 public:
  std::string Kind() const override { return "fake"; }
  Result<provider::Instance> Create(const provider::InstanceRequest& request, Time now) override;
  Status Delete(const std::string& id, Time now) override;
  Result<std::vector<provider::Instance>> List() override;
  std::vector<provider::ProviderEvent> Poll(Time now) override;

  // Adds an instance the pool did not create (a leak, or another pool's), as running.
  void AddForeign(const std::string& id, const std::string& name);

  std::map<std::string, provider::Instance> instances;  // by id
  std::vector<std::string> created;                     // names, in order
  std::vector<std::string> deleted;                     // ids, in order
  std::vector<provider::ProviderEvent> pending_events;  // returned by the next Poll
  bool fail_creates = false;
  int next_id = 1;
};

}  // namespace gpufleet::testing
