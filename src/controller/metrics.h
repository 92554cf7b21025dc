// The controller's GET /metrics (Prometheus text format; docs/observability.md lists every
// series). Built at scrape time from the engine's state, the monitor's alerts and the pool's
// instances; only request counts and latencies are kept between scrapes (ApiMetrics).
#pragma once

#include <string>

#include "controller/engine.h"
#include "obs/exposition.h"

namespace gpufleet::controller {

class Monitor;
class Pool;

// Kept by the API server between scrapes.
struct ApiMetrics {
  obs::CounterVec requests{{"route", "method", "code"}};
  obs::Histogram submit_seconds{obs::Histogram::LatencyBuckets()};
};

struct MetricsSources {
  const Engine* engine = nullptr;
  const Monitor* monitor = nullptr;  // optional
  const Pool* pool = nullptr;        // optional
  const ApiMetrics* api = nullptr;   // optional
  std::string version;
  Time now;
};

std::string ControllerMetricsText(const MetricsSources& s);

}  // namespace gpufleet::controller
