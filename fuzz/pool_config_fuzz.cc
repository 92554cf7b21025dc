// Fuzzes the pool file reader (controller/pool.h ParsePoolConfig), which `gpufleet server --pool`
// reads before it rents machines: provider, offers (also from the shipped price catalog, as the
// server passes it when the file says `catalog:`), limits and durations. It may refuse any input
// with a Status, never crash or throw.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "common/check.h"
#include "controller/pool.h"
#include "cost/offer.h"
#include "model/gpu_catalog.h"

namespace gpufleet::fuzz {
namespace {

// The server's substitutions (cli/cluster_commands.cc), with fixed values.
const std::map<std::string, std::string>& Substitutions() {
  static const auto* subs = new std::map<std::string, std::string>{
      {"server", "http://127.0.0.1:7001"},
      {"join_token_file", "/var/lib/gpufleet/join.token"},
      {"gpufleet", "/usr/bin/gpufleet"},
      {"data_dir", "/var/lib/gpufleet"},
  };
  return *subs;
}

// The shipped offer catalog, read once; null where the source tree is not at hand.
const cost::OfferTable* Offers() {
  static const std::optional<cost::OfferTable>* offers = [] {
    auto table = cost::LoadOffersCsv(std::string(GPUFLEET_SOURCE_DIR) + "/data/catalog/offers.csv",
                                     model::GpuCatalog::BuiltIn());
    return new std::optional<cost::OfferTable>(table.ok() ? std::optional(std::move(table).value()) : std::nullopt);
  }();
  return offers->has_value() ? &offers->value() : nullptr;
}

void CheckOneInput(const std::string& yaml) {
  Result<controller::PoolConfig> config =
      controller::ParsePoolConfig(yaml, "pool.yaml", model::GpuCatalog::BuiltIn(), Substitutions(), Offers());
  if (!config.ok()) {
    CHECK(!config.status().message().empty()) << config.status().ToString();
    return;
  }
  CHECK(config->offer_labels.size() == config->offers.size())
      << config->offer_labels.size() << " label sets for " << config->offers.size() << " offers";
}

}  // namespace
}  // namespace gpufleet::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)gpufleet::fuzz::Offers();  // outside the timed executions
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gpufleet::fuzz::CheckOneInput(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
