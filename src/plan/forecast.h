// Forecast: per GPU model, hourly demand = a level for each hour of the week + a linear trend,
//   y(t) = level[HourOfWeek(t)] + slope * t,
// fitted by least squares (the within-hour-of-week estimator: the slope from each hour-of-week's
// deviations from its own mean, then each level from its mean), clamped at zero when forecasting.
// GPU training demand follows the working week and grows with the team; this is the simplest model
// that captures both and that a reader can check by hand.
//
// Error metric. A backtest fits on the history minus a held-back tail and forecasts that tail.
// The headline is WAPE = sum |forecast - actual| / sum actual: it weighs hours by their demand,
// which is what capacity costs. MAPE (mean of |err| / actual) is reported over non-zero hours only,
// because an hour with zero demand makes its term infinite, and quiet nights and weekends are
// exactly where GPU demand is zero; even so MAPE overweights near-empty hours, so plan on WAPE.
//
// Upper band, for SLO headroom: forecast + the `band_quantile` of the backtest's out-of-sample
// residuals (actual - forecast), per hour of week where the tail holds at least
// kMinBandSamples weeks, pooled over all hours otherwise; never below the forecast. Residuals
// are additive, not ratios, since a ratio is undefined on zero-demand hours.
//
// Thread-safety: free functions over values; no shared state.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "plan/demand.h"

namespace gpufleet::plan {

inline constexpr int kMinBandSamples = 4;

struct SeasonalTrendFit {
  Time origin;                            // t = 0: the first hour fitted (on an hour boundary)
  std::array<double, kHoursPerWeek> level{};  // at t = 0 for each hour of week
  double slope_per_hour = 0;              // GPU-hours per hour, per hour
};

// Fits y (hourly, y[0] covering the hour from `start`). Needs at least one full week
// (InvalidArgument otherwise: every hour of the week must be seen). With exactly one week the
// slope is 0 (it cannot be told apart from the weekly shape).
Result<SeasonalTrendFit> FitSeasonalTrend(const std::vector<double>& y, Time start, bool with_trend = true);
// `hours` values from `from` (an hour boundary), each clamped at >= 0.
std::vector<double> Predict(const SeasonalTrendFit& fit, Time from, int64_t hours);

struct ForecastError {
  double wape = 0;                  // sum|err| / sum actual; 0 when both are 0, inf when only actual is 0
  std::optional<double> mape;       // mean |err|/actual over hours with actual > 0; none if no such hour
  double bias = 0;                  // sum(forecast - actual) / sum actual (> 0: over-forecast)
  int64_t hours = 0;
};
ForecastError MeasureError(const std::vector<double>& actual, const std::vector<double>& forecast);

struct ForecastOptions {
  // Held-back tail for the backtest; 0: the default rule, max(20 % of the history, one week) while
  // at least one week remains to fit; with less than two weeks, what is left after one week of
  // fitting; with exactly one week, no backtest (and a zero band).
  int64_t holdout_hours = 0;
  double band_quantile = 0.9;
  bool with_trend = true;
};

struct ModelForecast {
  std::vector<double> mean;   // GPU-hours per forecast hour, from Forecast::start
  std::vector<double> upper;  // mean + band
  SeasonalTrendFit fit;       // refitted on the whole history, the one `mean` comes from
  std::optional<ForecastError> backtest;
  int64_t train_hours = 0;    // of the backtest
  int64_t test_hours = 0;
};

struct Forecast {
  Time start;  // the hour after the history
  int64_t hours = 0;
  std::map<std::string, ModelForecast> models;
};

// Backtests each model's series, refits it on the whole history and forecasts `horizon_hours`
// from the end of the history. InvalidArgument for a history under one week, a non-positive
// horizon or a holdout that leaves under one week to fit.
Result<Forecast> ForecastDemand(const DemandSeries& history, int64_t horizon_hours,
                                const ForecastOptions& options = {});

}  // namespace gpufleet::plan
