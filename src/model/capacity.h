// CapacityProcess: whether a cloud offer has capacity for a new instance now. Clouds often have
// none for a while (spot above all; data/catalog/spot_availability.csv measures how often and how
// long), so an offer alternates between periods with capacity and periods without, each
// exponential with its mean. The simulator (sim/simulator.cc) and the local provider's emulated
// cloud (provider/local_provider.cc) draw from the same process.
//
//   CapacityProcess p(Duration::Minutes(104), Duration::Minutes(74), seed);
//   if (!p.Available(now)) ...   // a rent now fails: no capacity
//
// Deterministic: the same means, seed and query times give the same answers. Queries must come
// at non-decreasing times (the first one starts the process: in a period drawn with the
// long-run share of time with capacity). A zero mean outage means always available.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

#include "common/time.h"

namespace gpufleet::model {

class CapacityProcess {
 public:
  CapacityProcess() = default;
  CapacityProcess(Duration mean_available, Duration mean_outage, uint64_t seed)
      : available_mean_(mean_available), outage_mean_(mean_outage), rng_(seed) {}

  bool enabled() const { return outage_mean_ > Duration::Zero() && available_mean_ > Duration::Zero(); }

  bool Available(Time now) {
    if (!enabled()) return true;
    if (!started_) {
      started_ = true;
      const double a = available_mean_.seconds_f();
      available_ = Uniform() < a / (a + outage_mean_.seconds_f());
      until_ = now + Period(available_);
    }
    while (now >= until_) {
      available_ = !available_;
      until_ = until_ + Period(available_);
    }
    return available_;
  }

 private:
  double Uniform() { return std::generate_canonical<double, 53>(rng_); }
  Duration Period(bool available) {
    const double mean_ms = static_cast<double>((available ? available_mean_ : outage_mean_).millis());
    return Duration::Millis(static_cast<int64_t>(-std::log(1.0 - Uniform()) * mean_ms) + 1);
  }

  Duration available_mean_;
  Duration outage_mean_;
  std::mt19937_64 rng_;
  bool started_ = false;
  bool available_ = true;
  Time until_;
};

}  // namespace gpufleet::model
