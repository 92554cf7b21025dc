#include "cli/trace_flags.h"

namespace gpufleet::cli {

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

Result<const model::GpuCatalog*> GpuCatalogFromFlag(const std::string& path,
                                                    std::unique_ptr<model::GpuCatalog>& holder) {
  if (path.empty()) return &model::GpuCatalog::BuiltIn();
  auto c = model::GpuCatalog::LoadCsv(path);
  if (!c.ok()) return c.status();
  holder = std::make_unique<model::GpuCatalog>(std::move(*c));
  return static_cast<const model::GpuCatalog*>(holder.get());
}

}  // namespace gpufleet::cli
