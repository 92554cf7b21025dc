// `gpufleet offers` (list cloud GPU offers from the price catalog) and `gpufleet select JOB.yaml`
// (rank offers by expected cost to complete). docs/cost.md describes both.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

#include "common/status.h"
#include "cost/offer.h"

namespace gpufleet::cli {

// Each adds its subcommand to `app`; the returned function runs it after parsing and gives the
// exit code.
std::function<int()> SetupOffersCommand(CLI::App& app);
std::function<int()> SetupSelectCommand(CLI::App& app);

// The offer catalog: `flag` if given, else $GPUFLEET_CATALOG, else ./data/catalog/offers.csv,
// else the source tree's. `path` is set to the file read.
Result<cost::OfferTable> LoadOfferCatalog(const std::string& flag, std::string& path);

}  // namespace gpufleet::cli
