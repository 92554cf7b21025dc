// gpufleet: one binary; the subcommands come from the table in cli/cli.cc.
#include "cli/cli.h"

int main(int argc, char** argv) { return gpufleet::cli::Main(argc, argv); }
