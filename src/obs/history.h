// TelemetryHistory: recent GPU samples per (node, GPU), so that a job's page can chart its GPUs
// over its run and not only from the moment someone opened it.
//
// Each GPU keeps a ring of points at least `spacing` apart (samples closer than that to the last
// kept point are dropped), holding `capacity` points: with the defaults, one point per 15 s for
// the last 3 hours, about 24 bytes a point (100 nodes x 8 GPUs: about 17 MB at most).
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/time.h"

namespace gpufleet::obs {

struct GpuPoint {
  Time at;
  int16_t util_pct = 0;
  int16_t temperature_c = 0;
  int32_t power_w = 0;
  int64_t mem_used_mib = 0;
};

class TelemetryHistory {
 public:
  explicit TelemetryHistory(Duration spacing = Duration::Seconds(15), size_t capacity = 720)
      : spacing_(spacing), capacity_(capacity) {}

  void Record(const std::string& node, int gpu, const GpuPoint& p);
  // The points of one GPU in [from, to], oldest first.
  std::vector<GpuPoint> Range(const std::string& node, int gpu, Time from, Time to) const;
  // Forgets a node's GPUs (it left the cluster).
  void Forget(const std::string& node);
  Duration spacing() const { return spacing_; }
  Duration span() const { return spacing_ * static_cast<int64_t>(capacity_); }

 private:
  Duration spacing_;
  size_t capacity_;
  mutable Mutex mu_;
  std::map<std::pair<std::string, int>, std::deque<GpuPoint>> rings_ GF_GUARDED_BY(mu_);
};

}  // namespace gpufleet::obs
