#include "provider/provider.h"

#include "provider/exec_provider.h"
#include "provider/local_provider.h"

namespace gpufleet::provider {
namespace {

// A pool of hand-registered agents: nothing to rent, nothing to list.
class StaticProvider : public Provider {
 public:
  std::string Kind() const override { return "static"; }
  Result<Instance> Create(const InstanceRequest& request, Time now) override {
    return Status::FailedPrecondition("static provider: cannot rent '" + request.name +
                                      "': static pools are hand-registered (start `gpufleet agent` on the "
                                      "machine); use the local or exec provider to rent nodes");
  }
  Status Delete(const std::string& id, Time now) override { return Status::Ok(); }
  Result<std::vector<Instance>> List() override { return std::vector<Instance>{}; }
};

struct KindEntry {
  const char* name;
  const char* help;
  Result<std::unique_ptr<Provider>> (*make)(const ProviderConfig&);
};

const KindEntry kKinds[] = {
    {"static", "hand-registered agents; nothing is rented",
     [](const ProviderConfig&) -> Result<std::unique_ptr<Provider>> {
       return std::unique_ptr<Provider>(new StaticProvider());
     }},
    {"local", "an emulated cloud: agent processes on this machine, with spot interruptions",
     [](const ProviderConfig& c) { return OpenLocalProvider(c.local); }},
    {"exec", "create, delete and list scripts for a real cloud's CLI",
     [](const ProviderConfig& c) { return MakeExecProvider(c.exec); }},
};

}  // namespace

const char* ProviderEventKindName(ProviderEventKind kind) {
  switch (kind) {
    case ProviderEventKind::kStarted: return "started";
    case ProviderEventKind::kSpotNotice: return "spot-notice";
    case ProviderEventKind::kInterrupted: return "interrupted";
    case ProviderEventKind::kTerminated: return "terminated";
    case ProviderEventKind::kDied: return "died";
  }
  return "?";
}

std::vector<std::string> ProviderKinds() {
  std::vector<std::string> out;
  for (const KindEntry& k : kKinds) out.push_back(k.name);
  return out;
}

Result<std::unique_ptr<Provider>> MakeProvider(const ProviderConfig& config) {
  for (const KindEntry& k : kKinds) {
    if (config.kind == k.name) return k.make(config);
  }
  std::string known;
  for (const KindEntry& k : kKinds) known += (known.empty() ? "" : ", ") + std::string(k.name);
  return Status::InvalidArgument("unknown provider kind '" + config.kind + "' (known: " + known + ")");
}

}  // namespace gpufleet::provider
