#include "plan/demand.h"

#include <algorithm>
#include <cmath>

#include "common/time.h"

namespace gpufleet::plan {
namespace {

constexpr int64_t kMsPerHour = 3'600'000;

int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

}  // namespace

Time FloorToHour(Time t) { return Time::FromMillis(FloorDiv(t.millis(), kMsPerHour) * kMsPerHour); }

int HourOfWeek(Time t) {
  // Epoch hour 0 is Thursday 00:00, i.e. 72 hours after Monday 00:00.
  const int64_t hour = FloorDiv(t.millis(), kMsPerHour);
  return static_cast<int>(((hour + 72) % kHoursPerWeek + kHoursPerWeek) % kHoursPerWeek);
}

Result<DemandSeries> BuildDemand(const std::vector<sim::TraceJob>& jobs, const DemandOptions& options) {
  if (jobs.empty()) return Status::InvalidArgument("demand: the job history is empty");

  struct Run {
    std::string gpu;
    int64_t milli_gpus;
    Time begin;
    Time end;
  };
  std::vector<Run> runs;
  runs.reserve(jobs.size());
  for (const sim::TraceJob& job : jobs) {
    std::string gpu = job.spec.gpu_models.empty() ? options.default_gpu_model : job.spec.gpu_models.front();
    if (gpu.empty()) {
      return Status::InvalidArgument("demand: job '" + job.id +
                                     "' names no GPU model and no default model was given");
    }
    Duration run = job.work;
    if (options.catalog != nullptr) {
      if (const model::GpuModel* m = options.catalog->Find(gpu)) gpu = m->name;
      if (!options.reference_gpu_model.empty()) {
        const double speed = options.catalog->RelativeSpeed(options.reference_gpu_model, gpu, options.boundness);
        if (speed > 0) run = Duration::Millis(std::llround(static_cast<double>(job.work.millis()) / speed));
      }
    }
    if (run <= Duration::Zero()) continue;
    runs.push_back({std::move(gpu), job.spec.total_gpu_milli(), job.spec.submit, job.spec.submit + run});
  }

  Time start = options.start.value_or(Time::Max());
  Time end = options.end.value_or(Time::Epoch());
  if (!options.start || !options.end) {
    for (const sim::TraceJob& job : jobs) {
      if (!options.start) start = std::min(start, job.spec.submit);
      if (!options.end) end = std::max(end, job.spec.submit);
    }
    if (!options.end) {
      for (const Run& r : runs) end = std::max(end, r.end);
    }
  }
  start = FloorToHour(start);
  Time end_hour = FloorToHour(end);
  if (end_hour < end) end_hour += Duration::Hours(1);
  if (end_hour <= start) end_hour = start + Duration::Hours(1);
  const int64_t hours = (end_hour - start).millis() / kMsPerHour;
  if (hours > options.max_hours) {
    // Say what made it so long (the jobs' span, or --from/--to) and how to plan a shorter one.
    const bool from_jobs = !options.start || !options.end;
    return Status::InvalidArgument("demand: the window spans " + std::to_string(hours) + " hours (" +
                                   FormatIso8601(start) + " to " + FormatIso8601(end_hour) + "), more than the limit of " +
                                   std::to_string(options.max_hours) +
                                   (from_jobs ? "; the trace's jobs span it (a job far from the others?): give --from and "
                                                "--to to plan a window of it"
                                              : "; give a shorter --from/--to"));
  }

  // Integer milli-GPU x milliseconds per hour bucket: exact, and one hour of one GPU is 3.6e9,
  // so an int64 holds the hour of a 2.5-million-GPU fleet.
  std::map<std::string, std::vector<int64_t>> exact;
  for (const Run& r : runs) {
    std::vector<int64_t>& series = exact[r.gpu];
    if (series.empty()) series.assign(static_cast<size_t>(hours), 0);
    const Time begin = std::max(r.begin, start);
    const Time stop = std::min(r.end, end_hour);
    if (stop <= begin) continue;
    int64_t h = (FloorToHour(begin) - start).millis() / kMsPerHour;
    Time cursor = begin;
    while (cursor < stop) {
      const Time bucket_end = start + Duration::Hours(h + 1);
      const Time piece_end = std::min(bucket_end, stop);
      series[static_cast<size_t>(h)] += r.milli_gpus * (piece_end - cursor).millis();
      cursor = piece_end;
      ++h;
    }
  }

  DemandSeries out;
  out.start = start;
  out.hours = hours;
  constexpr double kPerGpuHour = 1000.0 * kMsPerHour;
  for (const auto& [gpu, series] : exact) {
    std::vector<double>& v = out.gpu_hours[gpu];
    v.reserve(series.size());
    for (int64_t x : series) v.push_back(static_cast<double>(x) / kPerGpuHour);
  }
  return out;
}

}  // namespace gpufleet::plan
