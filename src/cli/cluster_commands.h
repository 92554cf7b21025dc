// `gpufleet server`, `gpufleet agent` and `gpufleet dev`: the long-running parts of a cluster.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace gpufleet::cli {

std::function<int()> SetupServerCommand(CLI::App& app);
std::function<int()> SetupAgentCommand(CLI::App& app);
std::function<int()> SetupDevCommand(CLI::App& app);

}  // namespace gpufleet::cli
