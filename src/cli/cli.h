// The gpufleet command line: one binary whose subcommands come from a table
// ({name, help, setup}) in cli.cc. Exit codes scripts can trust: 0 success, 1 the command ran
// and failed (bad input file, nothing written), 2 the command line itself was wrong.
#pragma once

namespace gpufleet::cli {

int Main(int argc, char** argv);

}  // namespace gpufleet::cli
