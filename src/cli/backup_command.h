// `gpufleet backup`: a consistent copy of a controller's store while it runs (store/backup.h).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace gpufleet::cli {

// Adds the subcommand to `app`; the returned function runs it and gives the exit code: 0 the copy
// is written and checked, 1 it could not be made (the store unreachable, pg_dump failed), 2 bad
// usage (no store named, the destination exists).
std::function<int()> SetupBackupCommand(CLI::App& app);
// `gpufleet restore`: a SQLite backup put in place of a stopped controller's store.
std::function<int()> SetupRestoreCommand(CLI::App& app);

}  // namespace gpufleet::cli
