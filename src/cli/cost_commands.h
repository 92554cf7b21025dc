// `gpufleet offers` (list cloud GPU offers from the price catalog) and `gpufleet select JOB.yaml`
// (rank offers by expected cost to complete). docs/cost.md describes both.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace gpufleet::cli {

// Each adds its subcommand to `app`; the returned function runs it after parsing and gives the
// exit code.
std::function<int()> SetupOffersCommand(CLI::App& app);
std::function<int()> SetupSelectCommand(CLI::App& app);

}  // namespace gpufleet::cli
