// `gpufleet environments`: lists the environment presets (data/environments.yaml, read by
// node::EnvironmentTable) a job can name with `environment:`, and, given a node's NVIDIA driver
// and GPU, says which of them that node can run and, for the others, why not - the same rule the
// scheduler applies, so a user can check a machine before it joins, or a job before it is sent.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace gpufleet::cli {

// Adds the subcommand to `app`; the returned function runs it after parsing and gives the exit
// code: 0 listed, 1 the table could not be read, 2 a bad flag (unknown GPU, a version that is not one).
std::function<int()> SetupEnvironmentsCommand(CLI::App& app);

}  // namespace gpufleet::cli
