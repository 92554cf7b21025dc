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

// One week of test window, or with under two weeks what is left after a week of fitting.
int64_t DefaultHoldout(int64_t n) { return n >= 2 * kHoursPerWeek ? kHoursPerWeek : n - kHoursPerWeek; }

constexpr int kRecentWeeks = 4;
constexpr double kDamping = 0.8;  // of the weekly rate of change, per week ahead
constexpr double kMinWeeklyRate = 0.5, kMaxWeeklyRate = 1.5;

// Mean of the last `weeks` (at most what y holds) at each of the 168 positions after y's end:
// out[i] forecasts y's hour n + i (i < 168).
std::vector<double> RecentWeeksMean(const std::vector<double>& y, int weeks) {
  const int64_t n = static_cast<int64_t>(y.size());
  const int64_t k_max = std::min<int64_t>(weeks, n / kHoursPerWeek);
  std::vector<double> out(kHoursPerWeek, 0.0);
  for (int64_t i = 0; i < kHoursPerWeek; ++i) {
    double sum = 0;
    for (int64_t k = 1; k <= k_max; ++k) sum += y[static_cast<size_t>(n - k * kHoursPerWeek + i)];
    out[static_cast<size_t>(i)] = sum / static_cast<double>(k_max);
  }
  return out;
}

double Mean(const std::vector<double>& v, size_t from, size_t to) {
  double sum = 0;
  for (size_t i = from; i < to; ++i) sum += v[i];
  return to > from ? sum / static_cast<double>(to - from) : 0;
}

// The level-shift and level-decay forecasts: the recent shape scaled to the last week's level,
// times the damped weekly rate for level-decay.
std::vector<double> LevelForecast(const std::vector<double>& y, int64_t hours, bool decay) {
  const size_t n = y.size();
  const size_t week = kHoursPerWeek;
  std::vector<double> shape = RecentWeeksMean(y, kRecentWeeks);
  const double shape_mean = Mean(shape, 0, week);
  const double level = Mean(y, n - week, n);
  double rate = 1;
  const int64_t weeks = std::min<int64_t>(kRecentWeeks, static_cast<int64_t>(n / week));
  if (decay && weeks >= 2) {
    // Least squares of log(weekly mean) on the week index, over the last `weeks` weeks.
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    bool positive = true;
    for (int64_t k = 0; k < weeks; ++k) {
      const size_t end = n - static_cast<size_t>(weeks - 1 - k) * week;
      const double m = Mean(y, end - week, end);
      if (m <= 0) positive = false;
      const double x = static_cast<double>(k), ly = positive ? std::log(m) : 0;
      sx += x;
      sy += ly;
      sxx += x * x;
      sxy += x * ly;
    }
    const double w = static_cast<double>(weeks);
    if (positive) rate = std::clamp(std::exp((w * sxy - sx * sy) / (w * sxx - sx * sx)), kMinWeeklyRate, kMaxWeeklyRate);
  }
  std::vector<double> out;
  out.reserve(static_cast<size_t>(hours));
  for (int64_t i = 0; i < hours; ++i) {
    // Weeks ahead of the last week's middle: 1 for the first forecast week, damped beyond.
    const int64_t ahead = i / kHoursPerWeek + 1;
    double exponent = 0, d = 1;
    for (int64_t j = 0; j < ahead; ++j) {
      exponent += d;
      d *= kDamping;
    }
    const double s = shape_mean > 0 ? shape[static_cast<size_t>(i % kHoursPerWeek)] / shape_mean : 0;
    out.push_back(std::max(0.0, s * level * std::pow(rate, exponent)));
  }
  return out;
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

std::string ForecastMethodName(ForecastMethod m) {
  switch (m) {
    case ForecastMethod::kSeasonalTrend: return "seasonal-trend";
    case ForecastMethod::kSeasonalMean: return "seasonal-mean";
    case ForecastMethod::kLevelShift: return "level-shift";
    case ForecastMethod::kLevelDecay: return "level-decay";
    case ForecastMethod::kNaiveFourWeekMean: return "naive-4w-mean";
    case ForecastMethod::kNaiveLastWeek: return "naive-last-week";
  }
  return "unknown";
}

bool IsNaive(ForecastMethod m) {
  return m == ForecastMethod::kNaiveFourWeekMean || m == ForecastMethod::kNaiveLastWeek;
}

Result<std::vector<double>> ForecastWith(ForecastMethod method, const std::vector<double>& y, Time start,
                                         int64_t hours) {
  if (static_cast<int64_t>(y.size()) < kHoursPerWeek) {
    return Status::InvalidArgument("forecast: needs at least one week (168 hours) of history to fit, got " +
                                   std::to_string(y.size()) + " hours");
  }
  const Time end = FloorToHour(start) + Duration::Hours(static_cast<int64_t>(y.size()));
  switch (method) {
    case ForecastMethod::kSeasonalTrend:
    case ForecastMethod::kSeasonalMean: {
      GF_ASSIGN_OR_RETURN(SeasonalTrendFit fit, FitSeasonalTrend(y, start, method == ForecastMethod::kSeasonalTrend));
      return Predict(fit, end, hours);
    }
    case ForecastMethod::kLevelShift:
    case ForecastMethod::kLevelDecay:
      return LevelForecast(y, hours, method == ForecastMethod::kLevelDecay);
    case ForecastMethod::kNaiveFourWeekMean:
    case ForecastMethod::kNaiveLastWeek: {
      const std::vector<double> week = RecentWeeksMean(y, method == ForecastMethod::kNaiveLastWeek ? 1 : kRecentWeeks);
      std::vector<double> out;
      out.reserve(static_cast<size_t>(hours));
      for (int64_t i = 0; i < hours; ++i) out.push_back(std::max(0.0, week[static_cast<size_t>(i % kHoursPerWeek)]));
      return out;
    }
  }
  return Status::InvalidArgument("forecast: unknown method");
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
  if (options.folds < 1) return Status::InvalidArgument("forecast: at least one cross-validation fold is needed");
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
  std::vector<ForecastMethod> methods = options.methods;
  if (methods.empty()) methods.assign(kForecastMethods.begin(), kForecastMethods.end());
  // Fold origins, latest first: n - holdout, n - 2 holdout, ... while a week remains to fit.
  std::vector<int64_t> origins;
  if (holdout > 0) {
    for (int k = 1; k <= options.folds && n - k * holdout >= kHoursPerWeek; ++k) origins.push_back(n - k * holdout);
  }

  Forecast out;
  out.start = history.start + Duration::Hours(n);
  out.hours = horizon_hours;
  for (const auto& [gpu, y] : history.gpu_hours) {
    ModelForecast mf;
    // Per method: the folds' actuals and forecasts, concatenated, and the hour of week of each.
    std::vector<std::vector<double>> predicted(methods.size());
    std::vector<double> actual;
    std::vector<int> actual_how;
    for (int64_t origin : origins) {
      const std::vector<double> train(y.begin(), y.begin() + origin);
      const Time test_start = history.start + Duration::Hours(origin);
      for (int64_t i = 0; i < holdout; ++i) {
        actual.push_back(y[static_cast<size_t>(origin + i)]);
        actual_how.push_back(HourOfWeek(test_start + Duration::Hours(i)));
      }
      for (size_t k = 0; k < methods.size(); ++k) {
        GF_ASSIGN_OR_RETURN(std::vector<double> p, ForecastWith(methods[k], train, history.start, holdout));
        predicted[k].insert(predicted[k].end(), p.begin(), p.end());
      }
    }
    size_t winner = 0;
    if (!origins.empty()) {
      for (size_t k = 0; k < methods.size(); ++k) {
        mf.candidates.push_back({methods[k], MeasureError(actual, predicted[k])});
        // Better by more than rounding: methods that agree exactly keep the earlier one.
        if (mf.candidates[k].error.wape < mf.candidates[winner].error.wape - 1e-9) winner = k;
      }
      mf.backtest = mf.candidates[winner].error;
      mf.folds = static_cast<int>(origins.size());
      mf.train_hours = origins.front();
      mf.test_hours = holdout;
    }
    mf.method = methods[winner];
    GF_ASSIGN_OR_RETURN(mf.fit, FitSeasonalTrend(y, history.start, true));
    GF_ASSIGN_OR_RETURN(mf.mean, ForecastWith(mf.method, y, history.start, horizon_hours));

    std::array<double, kHoursPerWeek> band{};
    if (!actual.empty()) {
      std::vector<double> residuals;
      residuals.reserve(actual.size());
      for (size_t i = 0; i < actual.size(); ++i) residuals.push_back(actual[i] - predicted[winner][i]);
      band.fill(Quantile(residuals, options.band_quantile));
      if (static_cast<int64_t>(actual.size()) >= static_cast<int64_t>(kMinBandSamples) * kHoursPerWeek) {
        std::array<std::vector<double>, kHoursPerWeek> by_how;
        for (size_t i = 0; i < residuals.size(); ++i) by_how[actual_how[i]].push_back(residuals[i]);
        for (int k = 0; k < kHoursPerWeek; ++k) band[k] = Quantile(by_how[k], options.band_quantile);
      }
    }
    mf.upper.reserve(mf.mean.size());
    for (int64_t i = 0; i < horizon_hours; ++i) {
      const double b = std::max(0.0, band[HourOfWeek(out.start + Duration::Hours(i))]);
      mf.upper.push_back(mf.mean[static_cast<size_t>(i)] + b);
    }
    out.models.emplace(gpu, std::move(mf));
  }
  return out;
}

}  // namespace gpufleet::plan
