#include "obs/history.h"

#include <algorithm>
#include <climits>

namespace gpufleet::obs {

void TelemetryHistory::Record(const std::string& node, int gpu, const GpuPoint& p) {
  MutexLock lock(mu_);
  auto& ring = rings_[{node, gpu}];
  if (!ring.empty() && p.at - ring.back().at < spacing_) return;
  ring.push_back(p);
  while (ring.size() > capacity_) ring.pop_front();
}

std::vector<GpuPoint> TelemetryHistory::Range(const std::string& node, int gpu, Time from, Time to) const {
  MutexLock lock(mu_);
  std::vector<GpuPoint> out;
  auto it = rings_.find({node, gpu});
  if (it == rings_.end()) return out;
  for (const GpuPoint& p : it->second) {
    if (p.at >= from && p.at <= to) out.push_back(p);
  }
  return out;
}

void TelemetryHistory::Forget(const std::string& node) {
  MutexLock lock(mu_);
  for (auto it = rings_.lower_bound({node, INT32_MIN}); it != rings_.end() && it->first.first == node;) {
    it = rings_.erase(it);
  }
}

}  // namespace gpufleet::obs
