// Spot capacity: how long a spot offer has capacity for a new instance and how long it does not,
// measured (data/catalog/spot_availability.csv, its SOURCE note says how). The simulator and the
// planner's replay model an offer as alternating periods with and without capacity, with these
// means (sim::AutoscaleOffer::capacity_available / capacity_outage).
//
//   GF_ASSIGN_OR_RETURN(auto table, LoadSpotCapacity("data/catalog/spot_availability.csv"));
//   const SpotCapacity& c = SpotCapacityFor(table, 8);  // the pooled row nearest 8 GPUs per node
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace gpufleet::cost {

struct SpotCapacity {
  int gpus_per_node = 0;          // 0: every node size pooled
  Duration mean_available;        // a period with capacity, on average
  Duration mean_outage;           // a period without
  double unavailable_fraction = 0;
};

// The pooled rows (gpu "all", zone "all") of the table, by GPUs per node; errors name file:line.
Result<std::vector<SpotCapacity>> ParseSpotCapacity(std::string_view text, const std::string& source);
Result<std::vector<SpotCapacity>> LoadSpotCapacity(const std::string& path);
// The row for the node size nearest `gpus_per_node` (ties: the smaller), else the all-sizes row.
// The table must not be empty.
const SpotCapacity& SpotCapacityFor(const std::vector<SpotCapacity>& table, int gpus_per_node);

}  // namespace gpufleet::cost
