#include "cli/trace_flags.h"

namespace gpufleet::cli {

std::string NotEmpty(const std::string& value) {
  return value.empty() ? "an empty value; give one, or leave the flag out" : "";
}

void AddTraceFlags(CLI::App* sub, std::string& format, std::string& columns, bool& skip_bad_rows,
                   size_t& max_jobs) {
  sub->add_option("--format", format, "Trace format: auto, philly, alibaba2023, csv, tiresias, jsonl, gavel")
      ->capture_default_str()
      ->check(NotEmpty);
  sub->add_option("--columns", columns,
                  "Column map for --format csv: id=COL,submit=COL,duration=COL,gpus=COL[,team=,name=,priority=,"
                  "gpu_milli=,gpu_type=,nodes=,cpus=,memory=,end=]")
      ->check(NotEmpty);
  sub->add_flag("--skip-bad-rows", skip_bad_rows, "Skip and count malformed rows instead of stopping at the first");
  sub->add_option("--max-jobs", max_jobs, "Use only the first N jobs by submit time (N >= 1; default: all)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 40));
}

Result<sim::TraceOptions> TraceOptionsFromFlags(const std::string& format, const std::string& columns,
                                                bool skip_bad_rows, size_t max_jobs) {
  sim::TraceOptions o;
  auto fmt = sim::ParseTraceFormat(format);
  if (!fmt.ok()) return Status::InvalidArgument("--format: " + fmt.status().message());
  o.format = *fmt;
  if (!columns.empty()) {
    auto cols = sim::ParseColumnMap(columns);
    if (!cols.ok()) return Status::InvalidArgument("--columns: " + cols.status().message());
    o.columns = *cols;
    if (o.format == sim::TraceFormat::kAuto) o.format = sim::TraceFormat::kCsv;
  }
  o.skip_bad_rows = skip_bad_rows;
  o.max_jobs = max_jobs;
  return o;
}

void AddGavelFlags(CLI::App* sub, std::string& throughputs, std::string& worker) {
  sub->add_option("--gavel-throughputs", throughputs,
                  "Gavel throughputs JSON for --format gavel: steps per second per worker and job type");
  sub->add_option("--gavel-worker", worker, "Worker type of the Gavel throughputs that gives run times")
      ->capture_default_str();
}

Status ApplyGavelFlags(const std::string& throughputs, const std::string& worker, sim::TraceOptions& options) {
  if (worker.empty()) return Status::InvalidArgument("--gavel-worker must name a worker type such as v100");
  options.gavel_throughputs = throughputs;
  options.gavel_worker = worker;
  return Status::Ok();
}

Result<const model::GpuCatalog*> GpuCatalogFromFlag(const std::string& path,
                                                    std::unique_ptr<model::GpuCatalog>& holder) {
  if (path.empty()) return &model::GpuCatalog::BuiltIn();
  auto c = model::GpuCatalog::LoadCsv(path);
  if (!c.ok()) return c.status();
  holder = std::make_unique<model::GpuCatalog>(std::move(*c));
  return static_cast<const model::GpuCatalog*>(holder.get());
}

}  // namespace gpufleet::cli
