// Forecast: per GPU model, hourly demand for the planning window, by the method that forecast the
// history's own recent weeks best. Candidate methods (ForecastMethod), all on hour-of-week
// seasonality, because GPU training demand follows the working week:
//   seasonal-trend      y(t) = level[HourOfWeek(t)] + slope * t, least squares over the whole
//                       history (the within-hour-of-week estimator: the slope from each
//                       hour-of-week's deviations from its own mean, then each level from its mean)
//   seasonal-mean       the same without the slope: each hour of week's mean over the history
//   level-shift         the last four weeks' hour-of-week shape, scaled to the last week's level:
//                       a history whose level stepped (a team came or went) is forecast at the new
//                       level, not the average of old and new
//   level-decay         level-shift with the weekly rate of change of the last four weeks' levels
//                       (a log-linear fit, clamped to x0.5..x1.5 a week), damped by 0.8 a week
//                       ahead: a load that halves over months is forecast to keep falling, slower
//   naive-4w-mean       (baseline) the mean of the last four weeks at the same hour of week
//   naive-last-week     (baseline) the same hour last week
// Forecasts are clamped at zero.
//
// Choosing: rolling-origin cross-validation. Each fold cuts the history at an origin, fits every
// method on what is before it and forecasts the test window after it (one week by default); the
// origins step back one window at a time from the end, while a week remains to fit. Errors are
// summed over the folds; the method with the least WAPE wins (ties: the earlier in the list
// above), is refitted on the whole history and forecasts the planning window.
//
// Error metric. The headline is WAPE = sum |forecast - actual| / sum actual: it weighs hours by
// their demand, which is what capacity costs. MAPE (mean of |err| / actual) is reported over
// non-zero hours only, because an hour with zero demand makes its term infinite, and quiet nights
// and weekends are exactly where GPU demand is zero; even so MAPE overweights near-empty hours, so
// plan on WAPE.
//
// Upper band, for SLO headroom: forecast + the `band_quantile` of the winner's out-of-sample
// residuals (actual - forecast) over the folds, per hour of week where the folds hold at least
// kMinBandSamples weeks, pooled over all hours otherwise; never below the forecast. Residuals
// are additive, not ratios, since a ratio is undefined on zero-demand hours. Planning on the band
// is planning on that quantile of demand.
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

enum class ForecastMethod {
  kSeasonalTrend,
  kSeasonalMean,
  kLevelShift,
  kLevelDecay,
  kNaiveFourWeekMean,
  kNaiveLastWeek,
};
// Every method, in tie-break order.
inline constexpr std::array<ForecastMethod, 6> kForecastMethods = {
    ForecastMethod::kSeasonalTrend, ForecastMethod::kSeasonalMean,      ForecastMethod::kLevelShift,
    ForecastMethod::kLevelDecay,    ForecastMethod::kNaiveFourWeekMean, ForecastMethod::kNaiveLastWeek};
// "seasonal-trend", "naive-last-week", ...
std::string ForecastMethodName(ForecastMethod m);
// The methods that are baselines (the naive ones).
bool IsNaive(ForecastMethod m);

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

// Fits `method` on y (hourly from `start`, at least one week) and forecasts the `hours` after it,
// each >= 0. InvalidArgument for under a week of history.
Result<std::vector<double>> ForecastWith(ForecastMethod method, const std::vector<double>& y, Time start,
                                         int64_t hours);

struct ForecastError {
  double wape = 0;                  // sum|err| / sum actual; 0 when both are 0, inf when only actual is 0
  std::optional<double> mape;       // mean |err|/actual over hours with actual > 0; none if no such hour
  double bias = 0;                  // sum(forecast - actual) / sum actual (> 0: over-forecast)
  int64_t hours = 0;
};
ForecastError MeasureError(const std::vector<double>& actual, const std::vector<double>& forecast);

struct ForecastOptions {
  // Test window of each cross-validation fold; 0: one week, or with under two weeks of history
  // what is left after one week of fitting (with exactly one week: no cross-validation, a zero
  // band, and the first method).
  int64_t holdout_hours = 0;
  int folds = 4;  // at most; fewer where the history is too short for a week of fitting
  double band_quantile = 0.9;
  // The methods to choose from, in tie-break order; empty: all (kForecastMethods).
  std::vector<ForecastMethod> methods;
};

struct MethodError {
  ForecastMethod method = ForecastMethod::kSeasonalTrend;
  ForecastError error;  // over all the folds together
};

struct ModelForecast {
  std::vector<double> mean;   // GPU-hours per forecast hour, from Forecast::start
  std::vector<double> upper;  // mean + band
  ForecastMethod method = ForecastMethod::kSeasonalTrend;  // the winner, that `mean` comes from
  SeasonalTrendFit fit;       // the seasonal-trend fit on the whole history, for reference
  std::optional<ForecastError> backtest;  // the winner's, over the folds; none with one week
  std::vector<MethodError> candidates;    // every method's, in the order tried
  int folds = 0;
  int64_t train_hours = 0;    // of the last fold (the longest fit)
  int64_t test_hours = 0;     // of each fold
};

struct Forecast {
  Time start;  // the hour after the history
  int64_t hours = 0;
  std::map<std::string, ModelForecast> models;
};

// Cross-validates every method on each model's series, refits the winner on the whole history and
// forecasts `horizon_hours` from the end of the history. InvalidArgument for a history under one
// week, a non-positive horizon, a holdout that leaves under one week to fit, or folds < 1.
Result<Forecast> ForecastDemand(const DemandSeries& history, int64_t horizon_hours,
                                const ForecastOptions& options = {});

}  // namespace gpufleet::plan
