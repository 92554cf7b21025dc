// Names a user gives to narrow the offer catalog (clouds, regions and region globs, offer labels),
// checked against what the catalog holds.
//
// A filter value the catalog does not know ('awz', 'AWS', geo 'EU', region 'mars-1') is a typo,
// not a filter that happens to match nothing: without these checks `select` answered "no offer
// holds the job" and `offers` "no offers match", and the user looked for the cause elsewhere. Each
// check returns InvalidArgument naming the value, the nearest names the catalog has (case and
// small typos, common/strings.h NearMatches) and what it holds. Messages carry no prefix: callers
// add the flag or field ("--cloud: ", "job.yaml: clouds: ").
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <string_view>

#include "common/status.h"
#include "cost/offer.h"

namespace gpufleet::cost {

// OK when some offer is on `cloud` (exact, as the filters compare it).
Status CheckCloud(const OfferTable& table, std::string_view cloud);

// OK when `pattern` (a glob with '*' and '?', or a plain name) matches some offer's region or
// zone, as `offers --region` and a job's `regions:` filter.
Status CheckRegionPattern(const OfferTable& table, std::string_view pattern);

// OK when `region` is some offer's region (exact; `plan --region` takes regions, not zones).
Status CheckRegion(const OfferTable& table, std::string_view region);

// OK when some offer has the label `key` (Offer::labels: cloud, region, zone, geo) with a value
// `pattern` (a glob) matches, as a job's `constraints:` filter.
Status CheckLabel(const OfferTable& table, std::string_view key, std::string_view pattern);

}  // namespace gpufleet::cost
