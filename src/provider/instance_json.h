// JSON forms of InstanceRequest and Instance: what exec scripts read and print (docs/providers.md
// states the contract). Times are ISO-8601 UTC strings. Plain functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "provider/provider.h"

namespace gpufleet::provider {

// {"name":..., "offer":..., "gpu_model":..., "gpus":8, "market":"spot",
//  "price_per_hour":"2.1", "price_micros_per_hour":2100000, "zone":..., "labels":{...}}
std::string RequestToJson(const InstanceRequest& request);

// The object printed by a create script or listed by a list script. Only "id" is required;
// "state" defaults to booting, and the request's fields (when given) fill what is missing.
Result<Instance> InstanceFromJson(const std::string& text, const InstanceRequest* request);
Result<std::vector<Instance>> InstancesFromJson(const std::string& text);
std::string InstanceToJson(const Instance& instance);

// Dollars per hour, exact and short: 2100000 -> "2.1", 3000000 -> "3".
std::string FormatPricePerHour(int64_t micros);

}  // namespace gpufleet::provider
