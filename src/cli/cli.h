// The gpufleet command line: one binary whose subcommands come from a table
// ({name, help, setup}) in cli.cc. Exit codes scripts can trust: 0 success, 1 the command ran
// and failed (bad input file, nothing written), 2 the command line itself was wrong.
#pragma once

namespace gpufleet::cli {

// The version `gpufleet version` prints and /metrics reports (gpufleet_build_info).
inline constexpr const char* kGpufleetVersion = "0.1.0";

int Main(int argc, char** argv);

}  // namespace gpufleet::cli
