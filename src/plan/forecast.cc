#include "plan/forecast.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gpufleet::plan {
namespace {

constexpr int64_t kMsPerHour = 3'600'000;

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  // Linear interpolation between order statistics (type 7, the R and numpy default).
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

int64_t DefaultHoldout(int64_t n) {
  if (n >= 2 * kHoursPerWeek) {
    const int64_t fifth = (n + 4) / 5;
    return std::min(std::max(fifth, static_cast<int64_t>(kHoursPerWeek)), n - kHoursPerWeek);
  }
  return n - kHoursPerWeek;  // 0 with exactly one week: no backtest
}

}  // namespace

Result<SeasonalTrendFit> FitSeasonalTrend(const std::vector<double>& y, Time start, bool with_trend) {
  if (static_cast<int64_t>(y.size()) < kHoursPerWeek) {
    return Status::InvalidArgument("forecast: needs at least one week (168 hours) of history to fit, got " +
                                   std::to_string(y.size()) + " hours");
  }
  const int first_how = HourOfWeek(start);
  std::array<double, kHoursPerWeek> sum_t{}, sum_y{}, count{};
  for (size_t i = 0; i < y.size(); ++i) {
    const int k = (first_how + static_cast<int>(i % kHoursPerWeek)) % kHoursPerWeek;
    sum_t[k] += static_cast<double>(i);
    sum_y[k] += y[i];
    count[k] += 1;
  }
  std::array<double, kHoursPerWeek> mean_t{}, mean_y{};
  for (int k = 0; k < kHoursPerWeek; ++k) {
    mean_t[k] = sum_t[k] / count[k];
    mean_y[k] = sum_y[k] / count[k];
  }
  double num = 0, den = 0;
  if (with_trend) {
    for (size_t i = 0; i < y.size(); ++i) {
      const int k = (first_how + static_cast<int>(i % kHoursPerWeek)) % kHoursPerWeek;
      const double dt = static_cast<double>(i) - mean_t[k];
      num += dt * (y[i] - mean_y[k]);
      den += dt * dt;
    }
  }
  SeasonalTrendFit fit;
  fit.origin = FloorToHour(start);
  fit.slope_per_hour = den > 0 ? num / den : 0;
  for (int k = 0; k < kHoursPerWeek; ++k) fit.level[k] = mean_y[k] - fit.slope_per_hour * mean_t[k];
  return fit;
}

std::vector<double> Predict(const SeasonalTrendFit& fit, Time from, int64_t hours) {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(std::max<int64_t>(hours, 0)));
  const Time first = FloorToHour(from);
  const int64_t t0 = (first - fit.origin).millis() / kMsPerHour;
  for (int64_t i = 0; i < hours; ++i) {
    const Time at = first + Duration::Hours(i);
    const double v = fit.level[HourOfWeek(at)] + fit.slope_per_hour * static_cast<double>(t0 + i);
    out.push_back(std::max(0.0, v));
  }
  return out;
}

ForecastError MeasureError(const std::vector<double>& actual, const std::vector<double>& forecast) {
  ForecastError e;
  const size_t n = std::min(actual.size(), forecast.size());
  double abs_err = 0, signed_err = 0, total = 0, ape = 0;
  int64_t nonzero = 0;
  for (size_t i = 0; i < n; ++i) {
    const double err = forecast[i] - actual[i];
    abs_err += std::fabs(err);
    signed_err += err;
    total += actual[i];
    if (actual[i] > 0) {
      ape += std::fabs(err) / actual[i];
      ++nonzero;
    }
  }
  e.hours = static_cast<int64_t>(n);
  if (total > 0) {
    e.wape = abs_err / total;
    e.bias = signed_err / total;
  } else {
    e.wape = abs_err > 0 ? std::numeric_limits<double>::infinity() : 0;
    e.bias = signed_err > 0 ? std::numeric_limits<double>::infinity() : 0;
  }
  if (nonzero > 0) e.mape = ape / static_cast<double>(nonzero);
  return e;
}

Result<Forecast> ForecastDemand(const DemandSeries& history, int64_t horizon_hours, const ForecastOptions& options) {
  if (horizon_hours <= 0) return Status::InvalidArgument("forecast: the horizon must be at least one hour");
  const int64_t n = history.hours;
  if (n < kHoursPerWeek) {
    return Status::InvalidArgument("forecast: needs at least one week (168 hours) of history, got " +
                                   std::to_string(n) + " hours");
  }
  const int64_t holdout = options.holdout_hours > 0 ? options.holdout_hours : DefaultHoldout(n);
  if (n - holdout < kHoursPerWeek) {
    return Status::InvalidArgument("forecast: a holdout of " + std::to_string(holdout) + " hours leaves " +
                                   std::to_string(n - holdout) + " hours to fit; at least 168 are needed");
  }

  Forecast out;
  out.start = history.start + Duration::Hours(n);
  out.hours = horizon_hours;
  for (const auto& [gpu, y] : history.gpu_hours) {
    ModelForecast mf;
    std::vector<double> residuals;  // backtest: actual - forecast
    std::vector<int> residual_how;
    if (holdout > 0) {
      const std::vector<double> train(y.begin(), y.end() - holdout);
      const std::vector<double> test(y.end() - holdout, y.end());
      GF_ASSIGN_OR_RETURN(SeasonalTrendFit fit, FitSeasonalTrend(train, history.start, options.with_trend));
      const Time test_start = history.start + Duration::Hours(n - holdout);
      const std::vector<double> predicted = Predict(fit, test_start, holdout);
      mf.backtest = MeasureError(test, predicted);
      mf.train_hours = n - holdout;
      mf.test_hours = holdout;
      for (int64_t i = 0; i < holdout; ++i) {
        residuals.push_back(test[i] - predicted[i]);
        residual_how.push_back(HourOfWeek(test_start + Duration::Hours(i)));
      }
    }
    GF_ASSIGN_OR_RETURN(mf.fit, FitSeasonalTrend(y, history.start, options.with_trend));
    mf.mean = Predict(mf.fit, out.start, horizon_hours);

    std::array<double, kHoursPerWeek> band{};
    if (!residuals.empty()) {
      const double pooled = Quantile(residuals, options.band_quantile);
      band.fill(pooled);
      if (holdout >= static_cast<int64_t>(kMinBandSamples) * kHoursPerWeek) {
        std::array<std::vector<double>, kHoursPerWeek> by_how;
        for (size_t i = 0; i < residuals.size(); ++i) by_how[residual_how[i]].push_back(residuals[i]);
        for (int k = 0; k < kHoursPerWeek; ++k) band[k] = Quantile(by_how[k], options.band_quantile);
      }
    }
    mf.upper.reserve(mf.mean.size());
    for (int64_t i = 0; i < horizon_hours; ++i) {
      const double b = std::max(0.0, band[HourOfWeek(out.start + Duration::Hours(i))]);
      mf.upper.push_back(mf.mean[i] + b);
    }
    out.models.emplace(gpu, std::move(mf));
  }
  return out;
}

}  // namespace gpufleet::plan
