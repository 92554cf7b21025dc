// The trace-reading flags that `gpufleet sim` and `gpufleet plan` share, turned into the
// simulator's options. Errors name the flag ("--columns: unknown field 'subm'").
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "common/status.h"
#include "model/gpu_catalog.h"
#include "sim/trace.h"

namespace gpufleet::cli {

// A CLI11 check for a flag whose value names something (a file, a format): an empty value (a
// script's unset variable) is refused, not read as the flag left out.
std::string NotEmpty(const std::string& value);

// Adds --format, --columns, --skip-bad-rows and --max-jobs to `sub`, bound to the arguments.
void AddTraceFlags(CLI::App* sub, std::string& format, std::string& columns, bool& skip_bad_rows,
                   size_t& max_jobs);

// --format, --columns (a map selects csv when the format is auto), --skip-bad-rows, --max-jobs.
Result<sim::TraceOptions> TraceOptionsFromFlags(const std::string& format, const std::string& columns,
                                                bool skip_bad_rows, size_t max_jobs);

// --gavel-throughputs FILE.json and --gavel-worker TYPE: what turns a Gavel trace's steps into
// run time (sim::TraceOptions::gavel_throughputs, gavel_worker).
void AddGavelFlags(CLI::App* sub, std::string& throughputs, std::string& worker);
Status ApplyGavelFlags(const std::string& throughputs, const std::string& worker, sim::TraceOptions& options);

// --gpu-specs: the built-in GPU table when `path` is empty, else the one read from it (kept
// alive in `holder`).
Result<const model::GpuCatalog*> GpuCatalogFromFlag(const std::string& path,
                                                    std::unique_ptr<model::GpuCatalog>& holder);

}  // namespace gpufleet::cli
