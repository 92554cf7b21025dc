#include "plan/optimizer.h"

#include <CbcModel.hpp>
#include <CoinMessageHandler.hpp>
#include <CoinPackedMatrix.hpp>
#include <OsiClpSolverInterface.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace gpufleet::plan {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kBacklogPenaltyUsd = 1e-6;  // per backlogged GPU-hour and hour
constexpr double kMicro = 1e6;

// Columns and rows of the program, built row by row.
class Program {
 public:
  int AddColumn(double lb, double ub, double cost_usd, bool integer = false) {
    col_lb_.push_back(lb);
    col_ub_.push_back(ub);
    obj_.push_back(cost_usd);
    if (integer) integers_.push_back(static_cast<int>(col_lb_.size()) - 1);
    return static_cast<int>(col_lb_.size()) - 1;
  }
  int AddBlock(int64_t n, double lb, double ub, double cost_usd) {
    const int first = static_cast<int>(col_lb_.size());
    for (int64_t i = 0; i < n; ++i) AddColumn(lb, ub, cost_usd);
    return first;
  }
  void SetUpper(int col, double ub) { col_ub_[static_cast<size_t>(col)] = ub; }
  void AddRow(const std::vector<std::pair<int, double>>& terms, double lb, double ub) {
    for (const auto& [col, coef] : terms) {
      if (coef == 0) continue;
      rows_.push_back(static_cast<int>(row_lb_.size()));
      cols_.push_back(col);
      coefs_.push_back(coef);
    }
    row_lb_.push_back(lb);
    row_ub_.push_back(ub);
  }
  void Load(OsiClpSolverInterface& solver) const {
    CoinPackedMatrix m(/*colordered=*/false, rows_.data(), cols_.data(), coefs_.data(),
                       static_cast<CoinBigIndex>(coefs_.size()));
    m.setDimensions(static_cast<int>(row_lb_.size()), static_cast<int>(col_lb_.size()));
    solver.loadProblem(m, col_lb_.data(), col_ub_.data(), obj_.data(), row_lb_.data(), row_ub_.data());
  }
  const std::vector<int>& integers() const { return integers_; }

 private:
  std::vector<double> col_lb_, col_ub_, obj_, row_lb_, row_ub_, coefs_;
  std::vector<int> rows_, cols_, integers_;
};

struct Columns {
  int k;
  int u, o, s, b, l;  // first column of each hourly block
};

// A substitution resolved to model indices, with its columns (first of each hourly block).
struct Arc {
  size_t from = 0, to = 0;
  double ratio = 1;
  int mu = 0, mo = 0, ms = 0;
};

double OnDemandUpper(const ModelInput& m) { return m.prices.on_demand ? kInf : 0; }
double OnDemandUsd(const ModelInput& m) { return static_cast<double>(m.prices.on_demand.value_or(0)) / kMicro; }
double SpotUpper(const ModelInput& m, const PlanOptions& o) { return m.prices.spot && o.spot_max_share > 0 ? kInf : 0; }
// Per useful spot GPU-hour: spot with its rework, and where spot is out of capacity part of the
// time, that part at on-demand (the fallback; at spot where there is no on-demand).
double SpotMicros(const GpuPrices& p, double rework) {
  const double spot = static_cast<double>(p.spot.value_or(0)) * (1 + rework);
  const double u = std::clamp(p.spot_unavailable_fraction, 0.0, 1.0);
  if (u <= 0) return spot;
  return (1 - u) * spot + u * (p.on_demand ? static_cast<double>(*p.on_demand) : spot);
}
double SpotUsd(const ModelInput& m, double rework) {
  if (m.prices.spot_unavailable_fraction <= 0) return static_cast<double>(m.prices.spot.value_or(0)) / kMicro * (1 + rework);
  return SpotMicros(m.prices, rework) / kMicro;
}

Result<std::vector<Arc>> ResolveArcs(const std::vector<ModelInput>& models, const std::vector<Substitution>& subs) {
  auto index = [&](const std::string& name) -> std::optional<size_t> {
    for (size_t i = 0; i < models.size(); ++i) {
      if (models[i].gpu_model == name) return i;
    }
    return std::nullopt;
  };
  std::vector<Arc> out;
  for (const Substitution& s : subs) {
    const std::optional<size_t> from = index(s.from), to = index(s.to);
    if (!from || !to) {
      return Status::InvalidArgument("plan: substitution " + s.from + " -> " + s.to + " names a model not planned (" +
                                     (!from ? s.from : s.to) + ")");
    }
    if (*from == *to) return Status::InvalidArgument("plan: substitution " + s.from + " -> " + s.to + " is one model");
    if (!std::isfinite(s.work_per_gpu_hour) || s.work_per_gpu_hour <= 0) {
      return Status::InvalidArgument("plan: substitution " + s.from + " -> " + s.to +
                                     ": work per GPU-hour must be a positive number");
    }
    for (const Arc& a : out) {
      if (a.from == *from && a.to == *to) {
        return Status::InvalidArgument("plan: substitution " + s.from + " -> " + s.to + " is given twice");
      }
    }
    Arc a;
    a.from = *from;
    a.to = *to;
    a.ratio = s.work_per_gpu_hour;
    out.push_back(a);
  }
  return out;
}

void Quiet(OsiClpSolverInterface& solver) {
  solver.messageHandler()->setLogLevel(0);
  solver.getModelPtr()->setLogLevel(0);
}

Status Validate(const std::vector<ModelInput>& models, const PlanOptions& o) {
  if (models.empty()) return Status::InvalidArgument("plan: no GPU model to plan for");
  const size_t hours = models.front().demand.size();
  if (hours == 0) return Status::InvalidArgument("plan: the planning window is empty");
  if (!(o.slo_quantile > 0 && o.slo_quantile <= 1)) {
    return Status::InvalidArgument("plan: slo_quantile must be in (0, 1]");
  }
  if (!(o.spot_max_share >= 0 && o.spot_max_share <= 1)) {
    return Status::InvalidArgument("plan: spot_max_share must be in [0, 1]");
  }
  if (o.slo_wait < Duration::Zero() || o.max_wait < o.slo_wait) {
    return Status::InvalidArgument("plan: need 0 <= slo_wait <= max_wait");
  }
  for (const ModelInput& m : models) {
    if (m.demand.size() != hours) {
      return Status::InvalidArgument("plan: demand of " + m.gpu_model + " has " + std::to_string(m.demand.size()) +
                                     " hours, " + models.front().gpu_model + " has " + std::to_string(hours));
    }
    for (double d : m.demand) {
      if (!std::isfinite(d) || d < 0) {
        return Status::InvalidArgument("plan: demand of " + m.gpu_model + " must be finite and >= 0");
      }
    }
    if (m.reserve_multiple < 1) return Status::InvalidArgument("plan: reserve_multiple must be >= 1");
    if (m.prices.reserved < 0 || m.prices.on_demand.value_or(0) < 0 || m.prices.spot.value_or(0) < 0) {
      return Status::InvalidArgument("plan: prices of " + m.gpu_model + " must be >= 0");
    }
    if (m.fixed_reserved && (*m.fixed_reserved < 0 || *m.fixed_reserved % m.reserve_multiple != 0)) {
      return Status::InvalidArgument("plan: fixed_reserved of " + m.gpu_model +
                                     " must be a non-negative multiple of reserve_multiple");
    }
  }
  return Status::Ok();
}

// Arrivals of the `window` hours up to and including h (wrapping in a cyclic window).
double RecentArrivals(const std::vector<double>& d, int64_t h, int64_t window, bool cyclic) {
  const int64_t n = static_cast<int64_t>(d.size());
  double sum = 0;
  for (int64_t j = h - window + 1; j <= h; ++j) {
    if (j >= 0) {
      sum += d[static_cast<size_t>(j)];
    } else if (cyclic) {
      sum += d[static_cast<size_t>(((j % n) + n) % n)];
    }
  }
  return sum;
}

std::string LimitsText(const std::vector<ModelInput>& models, const PlanOptions& o) {
  std::string s;
  for (const ModelInput& m : models) {
    if (!s.empty()) s += "; ";
    s += m.gpu_model + ": reserved ";
    s += m.fixed_reserved ? "fixed at " + std::to_string(*m.fixed_reserved)
         : m.max_reserved ? "at most " + std::to_string(*m.max_reserved)
                          : "unlimited";
    s += m.prices.on_demand ? ", on-demand offered" : ", no on-demand";
    s += m.prices.spot && o.spot_max_share > 0 ? ", spot for " + std::to_string(std::lround(o.spot_max_share * 100)) + " %"
                                               : ", no spot";
  }
  return s;
}

}  // namespace

Result<Plan> SolvePlan(const std::vector<ModelInput>& models, const PlanOptions& options) {
  GF_RETURN_IF_ERROR(Validate(models, options));
  const int64_t hours = static_cast<int64_t>(models.front().demand.size());
  const int64_t slo_hours = options.slo_wait.millis() / 3'600'000;
  const int64_t max_hours = options.max_wait.millis() / 3'600'000;
  const bool hard_slo = options.slo_quantile >= 1;

  Program p;
  std::vector<Columns> cols;
  std::vector<double> rework(models.size());
  std::vector<std::pair<int, double>> late_sum;  // sum of L over every model
  double total_demand = 0;
  // Columns first (model by model), then the substitution arcs' columns, then the rows: without
  // arcs the program is the same, column for column and row for row, as one built model by model.
  for (size_t mi = 0; mi < models.size(); ++mi) {
    const ModelInput& m = models[mi];
    const double mult = m.reserve_multiple;
    const double reserved_usd = static_cast<double>(m.prices.reserved) / kMicro;
    rework[mi] = m.prices.spot_interruptions_per_hour *
                 (options.checkpoint_interval.hours_f() / 2 + options.restart_overhead.hours_f());
    Columns c;
    double k_lb = 0, k_ub = kInf;
    if (m.fixed_reserved) {
      k_lb = k_ub = static_cast<double>(*m.fixed_reserved / m.reserve_multiple);
    } else if (m.max_reserved) {
      k_ub = std::floor(static_cast<double>(*m.max_reserved) / mult);
    }
    c.k = p.AddColumn(k_lb, k_ub, mult * reserved_usd * static_cast<double>(hours), /*integer=*/true);
    c.u = p.AddBlock(hours, 0, kInf, 0);
    c.o = p.AddBlock(hours, 0, OnDemandUpper(m), OnDemandUsd(m));
    c.s = p.AddBlock(hours, 0, SpotUpper(m, options), SpotUsd(m, rework[mi]));
    c.b = p.AddBlock(hours, 0, kInf, kBacklogPenaltyUsd);
    if (!options.cyclic) p.SetUpper(c.b + static_cast<int>(hours) - 1, 0);  // all work done by the end
    c.l = p.AddBlock(hours, 0, hard_slo ? 0 : kInf, 0);
    cols.push_back(c);
  }
  GF_ASSIGN_OR_RETURN(std::vector<Arc> arcs, ResolveArcs(models, options.substitutions));
  for (Arc& a : arcs) {
    const ModelInput& to = models[a.to];
    a.mu = p.AddBlock(hours, 0, kInf, 0);
    a.mo = p.AddBlock(hours, 0, OnDemandUpper(to), OnDemandUsd(to));
    // Spot on `to` for work that may use spot: `from` has spot (a no-spot part has none).
    const bool spot = SpotUpper(models[a.from], options) > 0 && SpotUpper(to, options) > 0;
    a.ms = p.AddBlock(hours, 0, spot ? kInf : 0, SpotUsd(to, rework[a.to]));
  }

  for (size_t mi = 0; mi < models.size(); ++mi) {
    const ModelInput& m = models[mi];
    const Columns& c = cols[mi];
    const double mult = m.reserve_multiple;
    const bool spot_row = SpotUpper(m, options) > 0;
    for (int64_t h = 0; h < hours; ++h) {
      const int hi = static_cast<int>(h);
      const double d = m.demand[static_cast<size_t>(h)];
      total_demand += d;
      // Previous backlog column, if any.
      std::optional<int> prev;
      if (h > 0) {
        prev = c.b + hi - 1;
      } else if (options.cyclic) {
        prev = c.b + static_cast<int>(hours) - 1;
      }
      // U + O + S + r x (MU + MO + MS out) + B_h - B_{h-1} = d
      std::vector<std::pair<int, double>> balance = {{c.u + hi, 1}, {c.o + hi, 1}, {c.s + hi, 1}, {c.b + hi, 1}};
      if (prev) balance.push_back({*prev, -1});
      if (prev && *prev == c.b + hi) balance = {{c.u + hi, 1}, {c.o + hi, 1}, {c.s + hi, 1}};  // one-hour cycle
      for (const Arc& a : arcs) {
        if (a.from != mi) continue;
        balance.push_back({a.mu + hi, a.ratio});
        balance.push_back({a.mo + hi, a.ratio});
        balance.push_back({a.ms + hi, a.ratio});
      }
      p.AddRow(balance, d, d);
      // U_h + MU in_h <= mult x k
      std::vector<std::pair<int, double>> reserved = {{c.u + hi, 1}, {c.k, -mult}};
      for (const Arc& a : arcs) {
        if (a.to == mi) reserved.push_back({a.mu + hi, 1});
      }
      p.AddRow(reserved, -kInf, 0);
      // S_h + r x MS out_h - share x B_{h-1} <= share x d
      if (spot_row) {
        std::vector<std::pair<int, double>> spot = {{c.s + hi, 1}};
        if (prev) spot.push_back({*prev, -options.spot_max_share});
        for (const Arc& a : arcs) {
          if (a.from == mi) spot.push_back({a.ms + hi, a.ratio});
        }
        p.AddRow(spot, -kInf, options.spot_max_share * d);
      }
      // L_h >= B_h - recent arrivals  <=>  B_h - L_h <= recent
      p.AddRow({{c.b + hi, 1}, {c.l + hi, -1}}, -kInf, RecentArrivals(m.demand, h, slo_hours, options.cyclic));
      // B_h <= arrivals of the last max_wait hours
      p.AddRow({{c.b + hi, 1}}, -kInf, RecentArrivals(m.demand, h, max_hours, options.cyclic));
      late_sum.push_back({c.l + hi, 1});
    }
  }
  if (!hard_slo) p.AddRow(late_sum, -kInf, (1 - options.slo_quantile) * total_demand);

  OsiClpSolverInterface lp;
  Quiet(lp);
  p.Load(lp);
  lp.initialSolve();
  if (lp.isProvenPrimalInfeasible()) {
    char share[32];
    std::snprintf(share, sizeof share, "%.1f", options.slo_quantile * 100);
    return Status::FailedPrecondition("plan: no plan meets the SLO (wait at most " + FormatDuration(options.slo_wait) +
                                      " for " + share + " % of GPU-hours, none over " +
                                      FormatDuration(options.max_wait) +
                                      ") with the markets and caps given: " + LimitsText(models, options));
  }
  if (!lp.isProvenOptimal()) return Status::Internal("plan: the LP relaxation did not solve");
  const double lp_usd = lp.getObjValue();

  for (int col : p.integers()) lp.setInteger(col);
  CbcModel mip(lp);
  mip.setLogLevel(0);
  mip.messageHandler()->setLogLevel(0);
  mip.setMaximumSeconds(options.time_limit_s);
  mip.branchAndBound();
  const double* x = mip.bestSolution();
  if (x == nullptr) {
    if (mip.isProvenInfeasible()) {
      return Status::FailedPrecondition("plan: no plan with whole reserved nodes meets the SLO with the caps given: " +
                                        LimitsText(models, options));
    }
    return Status::Internal("plan: the solver found no integer plan within " +
                            std::to_string(options.time_limit_s) + " s");
  }

  Plan plan;
  plan.hours = hours;
  plan.proven_optimal = mip.isProvenOptimal();
  auto clean = [](double v) { return std::fabs(v) < 1e-9 ? 0.0 : v; };
  for (size_t mi = 0; mi < models.size(); ++mi) {
    const ModelInput& m = models[mi];
    const Columns& c = cols[mi];
    ModelPlan mp;
    mp.gpu_model = m.gpu_model;
    mp.reserved_gpus = std::llround(x[c.k]) * m.reserve_multiple;
    mp.spot_rework = rework[mi];
    double used = 0, od = 0, spot = 0;
    for (int64_t h = 0; h < hours; ++h) {
      const int hi = static_cast<int>(h);
      double u = clean(x[c.u + hi]), o = clean(x[c.o + hi]), s = clean(x[c.s + hi]);
      for (const Arc& a : arcs) {
        if (a.to != mi) continue;
        const double mu = clean(x[a.mu + hi]), mo = clean(x[a.mo + hi]), ms = clean(x[a.ms + hi]);
        u += mu;
        o += mo;
        s += ms;
        mp.foreign_gpu_hours += mu + mo + ms;
      }
      mp.reserved_used.push_back(u);
      mp.on_demand.push_back(o);
      mp.spot.push_back(s);
      mp.backlog.push_back(clean(x[c.b + hi]));
      mp.late_gpu_hours += clean(x[c.l + hi]);
      used += u;
      od += o;
      spot += s;
    }
    for (const Arc& a : arcs) {
      if (a.from != mi) continue;
      double moved = 0;
      for (int64_t h = 0; h < hours; ++h) {
        const int hi = static_cast<int>(h);
        moved += a.ratio * (clean(x[a.mu + hi]) + clean(x[a.mo + hi]) + clean(x[a.ms + hi]));
      }
      if (moved > 0) mp.moved_to.emplace_back(models[a.to].gpu_model, moved);
    }
    mp.reserved_cost = mp.reserved_gpus * m.prices.reserved * hours;
    mp.on_demand_cost = std::llround(od * static_cast<double>(m.prices.on_demand.value_or(0)));
    mp.spot_cost = m.prices.spot_unavailable_fraction <= 0
                       ? std::llround(spot * (1 + rework[mi]) * static_cast<double>(m.prices.spot.value_or(0)))
                       : std::llround(spot * SpotMicros(m.prices, rework[mi]));
    if (mp.reserved_gpus > 0) mp.reserved_utilisation = used / static_cast<double>(mp.reserved_gpus * hours);
    plan.total_cost += mp.reserved_cost + mp.on_demand_cost + mp.spot_cost;
    plan.models.push_back(std::move(mp));
  }
  plan.lp_bound = std::min<cost::MicroUsd>(std::llround(lp_usd * kMicro), plan.total_cost);
  plan.gap = plan.total_cost > 0 ? static_cast<double>(plan.total_cost - plan.lp_bound) /
                                       static_cast<double>(plan.total_cost)
                                 : 0;
  return plan;
}

std::vector<FrontierPoint> SolveFrontier(const std::vector<ModelInput>& models, const PlanOptions& options,
                                         const std::vector<Duration>& slo_waits) {
  std::vector<FrontierPoint> out;
  out.reserve(slo_waits.size());
  for (Duration w : slo_waits) {
    PlanOptions o = options;
    o.slo_wait = w;
    o.max_wait = std::max(o.max_wait, w);
    out.push_back(FrontierPoint{w, SolvePlan(models, o)});
  }
  return out;
}

}  // namespace gpufleet::plan
