// `gpufleet plan`: from a job history, the offer catalog and a queueing SLO, the cheapest
// reserved / on-demand / spot mix (plan/planner.h), checked by replaying the history on it, as a
// report, JSON and SVG charts.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace gpufleet::cli {

// Adds the subcommand to `app`; the returned function runs it (after parsing) and gives the
// exit code: 0 done, 1 the planning failed (unreadable trace, no plan meets the SLO), 2 a flag's
// value is wrong.
std::function<int()> SetupPlanCommand(CLI::App& app);

}  // namespace gpufleet::cli
