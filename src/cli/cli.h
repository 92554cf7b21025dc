// The gpufleet command line: one binary whose subcommands come from a table
// ({name, help, setup}) in cli.cc. Exit codes scripts can trust (cli/exit_codes.h): 0 success,
// 1 the command ran and failed, 2 bad input (the command line or a file or value given; nothing
// written), 3 the controller cannot be reached or refused the token.
#pragma once

namespace gpufleet::cli {

// The version `gpufleet version` prints and /metrics reports (gpufleet_build_info).
inline constexpr const char* kGpufleetVersion = "0.1.0";

int Main(int argc, char** argv);

}  // namespace gpufleet::cli
