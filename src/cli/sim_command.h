// `gpufleet sim`: replay a trace through the scheduler core and report.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace gpufleet::cli {

// Adds the subcommand to `app`; the returned function runs it (after parsing) and gives the
// exit code.
std::function<int()> SetupSimCommand(CLI::App& app);

}  // namespace gpufleet::cli
