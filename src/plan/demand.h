// Demand: a job history turned into GPU-hours per hour and GPU model, the series the forecast and
// the capacity planner work on. Each job is counted as if it had started at its submit time and
// run uninterrupted: the demand that arrived, not what a particular cluster managed to serve
// (a cluster that queued work would otherwise teach the planner its own queueing).
//
// Thread-safety: free functions over values; no shared state.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "model/gpu_catalog.h"
#include "sim/trace.h"

namespace gpufleet::plan {

inline constexpr int kHoursPerWeek = 168;

// Hour of the week in UTC, 0..167, Monday 00:00 = 0 (1970-01-01 was a Thursday: hour 72).
int HourOfWeek(Time t);
// The start of the UTC hour holding `t` (floor, also before 1970).
Time FloorToHour(Time t);

struct DemandOptions {
  // The model of jobs whose trace names none (gpu_models empty). Required when any job does so.
  std::string default_gpu_model;
  // Where given: job model names are mapped to their canonical name ("V100M32" -> the catalog's
  // name), and `work` (measured on `reference_gpu_model`) is scaled to the run time on the job's
  // model with RelativeSpeed(reference, model, boundness). Without a catalog, names are kept as
  // written and run time = work.
  const model::GpuCatalog* catalog = nullptr;
  std::string reference_gpu_model;
  model::Boundness boundness = model::Boundness::kBalanced;
  // The window [start, end), rounded out to whole hours; by default from the first submit to the
  // last job's end. Jobs are clipped to it.
  std::optional<Time> start;
  std::optional<Time> end;
  int64_t max_hours = 24 * 366 * 5;  // a longer window is an error, not an allocation of gigabytes
};

// GPU-hours per hour (= mean busy GPUs in that hour) for each GPU model, all series of the same
// length, hour i covering [start + i h, start + (i+1) h). Summed exactly in integer milli-GPU
// milliseconds, converted once.
struct DemandSeries {
  Time start;
  int64_t hours = 0;
  std::map<std::string, std::vector<double>> gpu_hours;  // by GPU model; each `hours` long
};

// A job asks for the first (preferred) model of its any-of list, spec.total_gpu_milli() GPUs,
// for its run time. Zero-work jobs add nothing. InvalidArgument for an empty job list, a job that
// names no model without a default, or a window over max_hours.
Result<DemandSeries> BuildDemand(const std::vector<sim::TraceJob>& jobs, const DemandOptions& options);

}  // namespace gpufleet::plan
