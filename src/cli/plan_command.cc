#include "cli/plan_command.h"

#include "cli/trace_flags.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cli/exit_codes.h"
#include "cli/plan_cluster.h"
#include "cli/progress.h"
#include "common/iso_time.h"
#include "common/strings.h"
#include "cost/offer.h"
#include "plan/planner.h"
#include "sched/policy/registry.h"
#include "sim/trace.h"

#ifndef GPUFLEET_DATA_DIR
#define GPUFLEET_DATA_DIR "data"
#endif

namespace gpufleet::cli {

namespace {

using json = nlohmann::ordered_json;

// The SLO waits of the cost-vs-SLO curve unless --frontier names others; those over --max-wait
// are left out (a --frontier the user gave must keep within it).
constexpr const char* kDefaultFrontier = "1h,2h,4h,8h,24h";

struct PlanArgs {
  std::string trace;
  std::string format = "auto";
  std::string columns;
  std::string gavel_throughputs;  // --gavel-throughputs, --gavel-worker: a Gavel trace's run times
  std::string gavel_worker = "v100";
  bool skip_bad_rows = false;
  size_t max_jobs = 0;
  std::string catalog;
  std::vector<std::string> regions;
  std::vector<std::string> clouds;
  std::vector<std::string> no_spot_teams;
  std::vector<std::string> substitutes;
  std::string from;
  std::string to;
  int gpus_per_node = 8;
  std::string gpus;
  std::string default_gpu = "V100";
  std::string reference_gpu;
  std::string gpu_specs;
  std::string reserved_term = "1y";
  std::optional<double> reserved_ratio;  // none: the term's default
  std::string slo_wait = "1h";
  double slo_quantile = 0.95;
  std::string max_wait = "24h";
  std::string horizon = "1w";
  std::string basis = "mean";
  double band_quantile = 0.9;
  double spot_share = 1.0;
  std::string checkpoint_interval = "30m";
  std::string restart_overhead = "5m";
  std::string frontier = kDefaultFrontier;
  double time_limit_s = 60;
  bool no_verify = false;
  bool no_baselines = false;
  bool no_neighbours = false;
  bool compare_clouds = false;
  bool single_gpu_nodes = false;
  std::string spot_capacity = "always";
  std::string policy = "fifo";
  std::string boot_delay = "3m";
  std::string idle_release = "10m";
  uint64_t seed = 1;
  int threads = 0;
  std::string output = "text";
  std::string plots;
  bool progress = false;
  bool no_progress = false;
  PlanClusterArgs cluster;  // --from-cluster, --apply: plan_cluster.h
};

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "gpufleet plan: %s\n", Printable(msg).c_str());  // (a field's bytes, NULs too)
  return code;
}
// A failure with its status: 2 when an input was wrong (a bad or missing file), 1 otherwise.
int Fail(const Status& status, const std::string& suffix = "") {
  std::fprintf(stderr, "gpufleet plan: %s%s\n", Printable(status.message()).c_str(), suffix.c_str());
  return ExitCodeFor(status);
}

// Durations with weeks: "1w", "2w3d" is not needed; "1w" or anything ParseDuration reads.
std::optional<Duration> ParseSpan(const std::string& s) {
  std::string t(Trim(s));
  if (t.size() >= 2 && (t.back() == 'w' || t.back() == 'W')) {
    char* end = nullptr;
    double weeks = std::strtod(t.c_str(), &end);
    if (end != t.c_str() + t.size() - 1 || !(weeks > 0) || weeks > 520) return std::nullopt;
    return Duration::Millis(std::llround(weeks * 7 * 24 * 3'600'000.0));
  }
  return ParseDuration(t);
}

// "2017-09-18", "2017-09-18T06:00", "2017-09-18T06:00:00Z" or "2017-09-18 06:00:00" (UTC
// unless a zone is given): common/iso_time.h.
std::optional<Time> ParseUtc(const std::string& s) { return ParseIsoTime(Trim(s)); }

std::string CatalogPath(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("GPUFLEET_CATALOG"); env != nullptr && *env != '\0') return env;
  const std::string local = "data/catalog/offers.csv";
  std::error_code ec;
  if (std::filesystem::exists(local, ec)) return local;
  return std::string(GPUFLEET_DATA_DIR) + "/catalog/offers.csv";
}

double Usd(cost::MicroUsd v) { return static_cast<double>(v) / static_cast<double>(cost::kMicroUsdPerUsd); }

std::string Printf(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// "$12,345" for reports: whole dollars with thousands separators.
std::string Dollars(double usd) { return cost::FormatUsd(std::llround(usd * 1e6), usd < 100 ? 2 : 0); }

std::string Pct(double share) { return Printf("%.1f %%", share * 100); }

std::string Hours(double seconds) {
  if (seconds < 60) return Printf("%.0fs", seconds);
  return FormatDuration(Duration::Seconds(static_cast<int64_t>(std::llround(seconds))));
}

std::string Pad(const std::string& s, size_t w, bool right = false) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

double MarketCost(const sim::Summary& s, const std::string& market) {
  auto it = s.cost_by_market_usd.find(market);
  return it == s.cost_by_market_usd.end() ? 0.0 : it->second;
}

std::string TermName(plan::ReservedTerm t) { return t == plan::ReservedTerm::kOneYear ? "1y" : "3y"; }

// How reserved capacity is priced, for the report's header: the catalog's 1-year price where it
// has one (unless a ratio was given), else the ratio.
std::string ReservedPricing(const plan::PlannerOptions& o) {
  const bool one_year = o.term == plan::ReservedTerm::kOneYear;
  const std::string ratio = Printf("%.2f", one_year ? o.ratios.one_year : o.ratios.three_year) + " x on-demand";
  if (one_year && o.ratios.catalog_one_year) return "reserved 1y at the catalog's price where published, else " + ratio;
  return "reserved " + TermName(o.term) + " at " + ratio;
}

// "reserved $2.047 (catalog (AWS 1-year no-upfront): aws us-east-1 p4d.24xlarge)"
std::string ReservedText(const plan::GpuPrices& p) {
  std::string s = "reserved " + cost::FormatUsd(p.reserved, 3) + " (" + plan::ReservedSourceText(p);
  if (p.reserved_source == plan::ReservedSource::kCatalog) s += ": " + p.reserved_offer;
  return s + ")";
}

json ReservedJson(const plan::GpuPrices& p) {
  return {{"source", plan::ReservedSourceText(p)},
          {"from_catalog", p.reserved_source == plan::ReservedSource::kCatalog},
          {"ratio_to_on_demand", p.reserved_ratio},
          {"offer", p.reserved_source == plan::ReservedSource::kCatalog ? json(p.reserved_offer) : json(nullptr)}};
}

// The no-spot demand over every planned model: (teams', all kept off spot, all).
struct NoSpotDemand {
  double teams = 0, all = 0, total = 0;
};
NoSpotDemand NoSpot(const plan::PlannerReport& r) {
  NoSpotDemand d;
  for (const auto& m : r.models) {
    d.teams += m.no_spot_team_gpu_hours;
    d.all += m.no_spot_gpu_hours;
    d.total += m.history_gpu_hours;
  }
  return d;
}

// ------------------------------------------------------------------ the report

// Per cloud, the index of its region with the cheapest plan (a region that cannot meet the SLO
// only where none of the cloud's can), in cloud order.
std::vector<size_t> CheapestPerCloud(const plan::PlannerReport& r) {
  std::vector<size_t> out;
  for (size_t i = 0; i < r.locations.size(); ++i) {
    const auto& l = r.locations[i];
    auto same = std::find_if(out.begin(), out.end(), [&](size_t j) { return r.locations[j].cloud == l.cloud; });
    if (same == out.end()) {
      out.push_back(i);
      continue;
    }
    const auto& best = r.locations[*same];
    if (l.plan.ok() && (!best.plan.ok() || l.plan->total_cost < best.plan->total_cost)) *same = i;
  }
  return out;
}

std::string FormatText(const PlanArgs& a, const plan::PlannerOptions& o, const plan::PlannerReport& r) {
  std::string out;
  auto line = [&](const std::string& s) { out += s + "\n"; };
  // The jobs planned for, then (when some were left out) how many the trace has and why the rest
  // are not counted; those too large for a node are on a line of their own below.
  const int64_t planned = r.jobs - r.jobs_left_out - r.jobs_outside_window - r.jobs_too_large;
  std::vector<std::string> left;
  if (r.jobs_left_out > 0) left.push_back(std::to_string(r.jobs_left_out) + " of other GPU models");
  if (r.jobs_outside_window > 0) left.push_back(std::to_string(r.jobs_outside_window) + " outside the window");
  line("gpufleet plan: " + a.trace + ", " + std::to_string(planned) + " jobs over " + std::to_string(r.history_hours) +
       " h from " + FormatIso8601(r.history_start) +
       (left.empty() ? std::string()
                     : " (of " + std::to_string(r.jobs) + " in the trace; left out: " + Join(left, ", ") + ")"));
  if (r.jobs_too_large > 0) {
    line("  " + std::to_string(r.jobs_too_large) + " job(s) left out: they ask for more CPUs or memory per node than a " +
         std::to_string(r.gpus_per_node) + "-GPU node of the plan has (" + std::to_string(plan::kPlannedCpuMilliPerGpu / 1000 * r.gpus_per_node) + " vCPUs, " +
         std::to_string(plan::kPlannedMemMibPerGpu / 1024 * r.gpus_per_node) + " GiB), so no cluster could run them; the first: " +
         r.first_too_large);
  }
  line("SLO: " + Pct(o.plan.slo_quantile) + " of GPU-hours wait at most " + FormatDuration(o.plan.slo_wait) +
       ", none over " + FormatDuration(o.plan.max_wait) + "; spot for up to " + Pct(o.plan.spot_max_share) +
       " of the work (the optimiser chooses the share); " + ReservedPricing(o) + "; " +
       std::to_string(r.gpus_per_node) + "-GPU nodes" +
       (o.clouds.empty() ? "" : " from " + Join(o.clouds, ", ")) + (o.regions.empty() ? "" : " in " + Join(o.regions, ", ")));
  const NoSpotDemand ns = NoSpot(r);
  if (!r.no_spot_teams.empty()) {
    line("Kept off spot (reserved and on-demand only, in the plan and the replay): team" +
         std::string(r.no_spot_teams.size() > 1 ? "s " : " ") + Join(r.no_spot_teams, ", ") + ", " +
         std::to_string(r.no_spot_team_jobs) + " jobs, " + Printf("%.0f", ns.teams) + " GPU-h = " +
         Pct(ns.total > 0 ? ns.teams / ns.total : 0) + " of the demand");
  }
  if (r.marked_no_spot_jobs > 0) {
    line("Kept off spot as the history marks them (market on-demand): " + std::to_string(r.marked_no_spot_jobs) +
         " jobs, " + Printf("%.0f", ns.all - ns.teams) + " GPU-h = " +
         Pct(ns.total > 0 ? (ns.all - ns.teams) / ns.total : 0) + " of the demand");
  }
  if (ns.all > 0) line("  (the spot share below is of the rest of the work)");
  line("");

  line("Forecast of the " + std::to_string(r.horizon_hours) + " h from " + FormatIso8601(r.forecast_start) +
       " by the method with the least WAPE in rolling-origin cross-validation on the history:");
  line("  " + Pad("model", 10) + Pad("history GPU-h", 15, true) + Pad("peak GPUs", 11, true) +
       Pad("planned GPU-h", 15, true) + Pad("method", 17, true) + Pad("WAPE", 10, true) + Pad("MAPE", 12, true) +
       Pad("bias", 10, true) + "  cross-validation");
  for (const auto& m : r.models) {
    double planned = 0;
    for (double v : m.planned_demand) planned += v;
    std::string wape = "-", mape = "-", bias = "-", bt = "none (one week of history)";
    if (m.backtest) {
      wape = Pct(m.backtest->wape);
      mape = m.backtest->mape ? Pct(*m.backtest->mape) : "-";
      bias = Printf("%+.1f %%", m.backtest->bias * 100);
      bt = std::to_string(m.backtest_folds) + " folds of " + std::to_string(m.backtest_test_hours) +
           " h, the last fitted on " + std::to_string(m.backtest_train_hours) + " h";
    }
    line("  " + Pad(m.gpu_model, 10) + Pad(Printf("%.0f", m.history_gpu_hours), 15, true) +
         Pad(Printf("%.0f", m.peak_gpu_hours_per_hour), 11, true) + Pad(Printf("%.0f", planned), 15, true) +
         Pad(plan::ForecastMethodName(m.forecast_method), 17, true) + Pad(wape, 10, true) + Pad(mape, 12, true) +
         Pad(bias, 10, true) + "  " + bt);
  }
  for (const auto& m : r.models) {
    if (m.forecast_candidates.empty()) continue;
    std::string all;
    for (const auto& c : m.forecast_candidates) {
      if (!all.empty()) all += ", ";
      all += plan::ForecastMethodName(c.method) + " " + Pct(c.error.wape);
    }
    line("  " + m.gpu_model + " WAPE by method: " + all);
  }
  line("  (WAPE weighs hours by demand: plan on it. MAPE counts non-zero hours only.)");
  line("");

  const auto& place = r.locations.at(r.location);
  line("Prices per GPU-hour, all from " + place.cloud + " " + place.region + " (the cheapest plan of " +
       std::to_string(r.locations.size()) + " cloud region" +
       (r.locations.size() == 1 ? " that prices" : "s that price") + " every model):");
  for (const auto& m : r.models) {
    std::string s = "  " + Pad(m.gpu_model, 10) + ReservedText(m.prices) + "  on-demand " + cost::FormatUsd(*m.prices.on_demand, 3) + " (" + m.prices.on_demand_offer + ")";
    if (m.prices.spot) {
      s += "  spot " + cost::FormatUsd(*m.prices.spot, 3) + " (" + m.prices.spot_offer + ", " +
           Printf("%.4f", m.prices.spot_interruptions_per_hour) + " interruptions/h" +
           (m.prices.spot_unavailable_fraction > 0
                ? ", out of capacity " + Pct(m.prices.spot_unavailable_fraction) +
                      " of the time: that share priced at on-demand"
                : std::string()) +
           ")";
    }
    line(s);
    if (m.prices.spot_outlier_left_out) {
      line("  " + Pad("", 10) + "spot " + cost::FormatUsd(*m.prices.spot_outlier_left_out, 3) + " (" +
           m.prices.spot_outlier_offer + ") left out: flagged spot-outlier; " +
           (m.prices.spot ? "priced from the place's next spot offer" : "no other spot price here, so none"));
    }
  }
  // Places whose outliers were left out, the chosen one or not: a plan that changed place because
  // of it says so.
  int64_t outlier_places = 0;
  std::string outlier_example;
  for (const auto& l : r.locations) {
    for (const auto& p : l.prices) {
      if (!p.spot_outlier_left_out) continue;
      if (outlier_example.empty()) {
        outlier_example = p.spot_outlier_offer + " spot " + cost::FormatUsd(*p.spot_outlier_left_out, 3);
      }
      ++outlier_places;
      break;
    }
  }
  if (outlier_places > 0) {
    line("  Left out: spot prices flagged spot-outlier at " + std::to_string(outlier_places) + " of " +
         std::to_string(r.locations.size()) + " places (e.g. " + outlier_example + " per GPU-hour):");
    line("  a discount far beyond the usual for the GPU and cloud, with no capacity signal (`gpufleet offers`");
    line("  marks them, `select` ranks them last; docs/cost.md).");
  }
  line("");

  if (a.compare_clouds) {
    line("The plan per cloud (the optimiser's expected cost over the window at each cloud's cheapest region;");
    line("only the chosen place is replayed):");
    line("  " + Pad("cloud", 10) + Pad("region", 22) + Pad("on-demand", 11, true) + Pad("spot", 9, true) +
         Pad("reserved", 10, true) + Pad("spot share", 12, true) + Pad("reserved GPUs", 15, true) +
         Pad("cost", 12, true) + Pad("vs chosen", 11, true));
    for (const auto& c : CheapestPerCloud(r)) {
      const auto& l = r.locations[c];
      const auto& p0 = l.prices.front();
      std::string row = "  " + Pad(l.cloud, 10) + Pad(l.region, 22) +
                        Pad(cost::FormatUsd(*p0.on_demand, 3), 11, true) +
                        Pad(p0.spot ? cost::FormatUsd(*p0.spot, 3) : "-", 9, true) +
                        Pad(cost::FormatUsd(p0.reserved, 3), 10, true);
      if (!l.plan.ok()) {
        line(row + "  cannot meet the SLO");
        continue;
      }
      int64_t gpus = 0;
      for (const auto& m : l.plan->models) gpus += m.reserved_gpus;
      const double chosen = Usd(r.locations[r.location].plan->total_cost);
      line(row + Pad(Pct(l.spot_share), 12, true) + Pad(std::to_string(gpus), 15, true) +
           Pad(Dollars(Usd(l.plan->total_cost)), 12, true) +
           Pad(chosen > 0 ? Printf("%.2fx", Usd(l.plan->total_cost) / chosen) : "-", 11, true));
    }
    if (r.models.size() > 1) line("  (prices shown are the first model's)");
    line("");
  }

  line("Plan for the " + std::to_string(r.horizon_hours) + " h window (" +
       (o.basis == plan::PlanBasis::kForecastUpper ? "forecast upper band" : "forecast mean") + "):");
  line("  " + Pad("model", 10) + Pad("reserved", 10, true) + Pad("GPUs", 7, true) + Pad("used", 8, true) +
       Pad("on-dem GPU-h", 14, true) + Pad("spot GPU-h", 12, true) + Pad("reserved", 12, true) +
       Pad("on-demand", 12, true) + Pad("spot", 12, true));
  for (const auto& m : r.models) {
    double od = 0, sp = 0;
    for (double v : m.plan.on_demand) od += v;
    for (double v : m.plan.spot) sp += v;
    line("  " + Pad(m.gpu_model, 10) + Pad(std::to_string(m.reserved_nodes) + " nodes", 10, true) +
         Pad(std::to_string(m.plan.reserved_gpus), 7, true) + Pad(Pct(m.plan.reserved_utilisation), 8, true) +
         Pad(Printf("%.0f", od), 14, true) + Pad(Printf("%.0f", sp), 12, true) +
         Pad(Dollars(Usd(m.plan.reserved_cost)), 12, true) + Pad(Dollars(Usd(m.plan.on_demand_cost)), 12, true) +
         Pad(Dollars(Usd(m.plan.spot_cost)), 12, true));
  }
  for (const auto& m : r.models) {
    double own = 0;
    for (double v : m.planned_demand) own += v;
    for (const auto& [to, gpu_hours] : m.plan.moved_to) {
      double per = 1;
      for (const auto& t : r.models) {
        for (const auto& [from, ratio] : t.substitutes_for) {
          if (t.gpu_model == to && from == m.gpu_model) per = ratio;
        }
      }
      line("  " + m.gpu_model + " work on " + to + ": " + Printf("%.0f", gpu_hours) + " " + m.gpu_model +
           " GPU-hours (" + Pct(own > 0 ? gpu_hours / own : 0) + " of its planned work), " +
           Printf("%.0f", gpu_hours / per) + " " + to + " GPU-hours at " + Printf("%.2f", per) + " " + m.gpu_model +
           "-hours of work each");
    }
  }
  line("  expected cost " + Dollars(Usd(r.plan.total_cost)) + ", LP lower bound " + Dollars(Usd(r.plan.lp_bound)) +
       ", gap " + Printf("%.2f %%", r.plan.gap * 100) +
       (r.plan.proven_optimal ? " (proven optimal)" : " (solver time limit: best plan found)") + ", spot share " +
       Pct(r.spot_share));
  if (r.spot_shares.size() > 1) {
    std::string tried;
    for (const auto& s : r.spot_shares) {
      if (!tried.empty()) tried += ", ";
      tried += Pct(s.share) + " ";
      if (!s.plan.ok()) {
        tried += "cannot meet the SLO";
        continue;
      }
      int64_t gpus = 0;
      for (const auto& m : s.plan->models) gpus += m.reserved_gpus;
      tried += Dollars(Usd(s.plan->total_cost)) + " (" + std::to_string(gpus) + " reserved GPUs)";
    }
    line("  spot shares tried: " + tried);
  }
  if (r.plan_without_substitution) {
    const double with = Usd(r.plan.total_cost), without = Usd(r.plan_without_substitution->total_cost);
    std::string mix;
    for (const auto& m : r.plan_without_substitution->models) {
      if (m.reserved_gpus == 0) continue;
      mix += (mix.empty() ? "" : ", ") + std::to_string(m.reserved_gpus) + " " + m.gpu_model;
    }
    line("  without substitution (each model's work on its own GPUs): " + Dollars(without) + " at spot share " +
         Pct(r.spot_share_without_substitution) + ", reserved " + (mix.empty() ? "none" : mix) +
         (without > 0 ? "; substitution saves " + Pct((without - with) / without) : ""));
  }
  line("");

  if (!r.frontier.empty()) {
    line("Cost against the SLO wait (" + std::to_string(r.horizon_hours) + " h window, quantile " +
         Printf("%.3g", o.plan.slo_quantile) + "):");
    line("  " + Pad("wait", 8) + Pad("cost", 12, true) + Pad("LP bound", 12, true) + Pad("reserved GPUs", 15, true));
    for (const auto& p : r.frontier) {
      if (!p.plan.ok()) {
        line("  " + Pad(FormatDuration(p.slo_wait), 8) + "  cannot be met: " + p.plan.status().message());
        continue;
      }
      int64_t gpus = 0;
      for (const auto& m : p.plan->models) gpus += m.reserved_gpus;
      line("  " + Pad(FormatDuration(p.slo_wait), 8) + Pad(Dollars(Usd(p.plan->total_cost)), 12, true) +
           Pad(Dollars(Usd(p.plan->lp_bound)), 12, true) + Pad(std::to_string(gpus), 15, true));
    }
    line("");
  }

  if (!r.verification.empty()) {
    const std::string q = Printf("P%.3g", o.plan.slo_quantile * 100);
    line("Verification: the history replayed on each cluster (" + o.verify.policy + ", " +
         FormatDuration(o.verify.boot_delay) + " boot, idle nodes released after " +
         FormatDuration(o.verify.idle_duration) + ", spot interruptions at the catalog's rate" +
         (o.verify.spot_capacity.empty() ? std::string(", spot capacity always there")
                                         : std::string(", spot capacity as measured (out of capacity ") +
                                               std::to_string(static_cast<int>(std::lround(
                                                   100 * cost::SpotCapacityFor(o.verify.spot_capacity, 8).unavailable_fraction))) +
                                               "% of the time for 8-GPU nodes)") +
         "):");
    line("  " + Pad("cluster", 31) + Pad("reserved", 9, true) + Pad("rented", 8, true) + Pad("cost", 12, true) +
         Pad("reserved", 12, true) + Pad("on-demand", 12, true) + Pad("spot", 12, true) + Pad(q + " wait", 10, true) +
         Pad("SLO", 7, true) + Pad("util", 8, true) + Pad("res used", 9, true) + Pad("vs on-dem", 10, true));
    for (size_t i = 0; i < r.verification.size(); ++i) {
      const auto& s = r.verification[i];
      const bool rec = r.recommended && *r.recommended == i;
      line((rec ? "* " : "  ") + Pad(s.name, 31) + Pad(std::to_string(s.reserved_nodes), 9, true) +
           Pad(std::to_string(s.summary.nodes_rented), 8, true) + Pad(Dollars(s.summary.cost_usd), 12, true) +
           Pad(Dollars(MarketCost(s.summary, "reserved")), 12, true) +
           Pad(Dollars(MarketCost(s.summary, "on-demand")), 12, true) +
           Pad(Dollars(MarketCost(s.summary, "spot")), 12, true) + Pad(Hours(s.slo_wait_s), 10, true) +
           Pad(std::string(s.meets_slo ? "met" : "missed") + (s.within_caps ? "" : "+"), 7, true) + Pad(Pct(s.summary.utilisation), 8, true) +
           Pad(s.summary.reserved_utilisation >= 0 ? Pct(s.summary.reserved_utilisation) : "-", 9, true) +
           Pad(s.cost_ratio_to_on_demand > 0 ? Printf("%.2fx", s.cost_ratio_to_on_demand) : "-", 10, true));
    }
    const auto& p = r.verification.front();
    line("  plan: " + std::to_string(p.summary.finished) + "/" + std::to_string(p.summary.jobs) + " jobs finished, " +
         Pct(p.spot_job_share) + " of jobs allowed on spot, " + std::to_string(p.summary.spot_interruptions) +
         " spot interruptions; the wait is over jobs, the optimiser's SLO over GPU-hours");
    if (std::any_of(r.verification.begin(), r.verification.end(), [](const auto& s) { return !s.within_caps; })) {
      line("  +: uses spot beyond the --spot-share cap (" + Pct(o.plan.spot_max_share) + "): shown, never recommended");
    }
    line("");
    if (!r.recommended) {
      line("Recommendation: none of the replayed clusters meets the SLO (" + q + " wait at most " +
           FormatDuration(o.plan.slo_wait) + " with every job run) within the --spot-share cap; loosen the SLO "
           "or allow more capacity.");
    } else {
      const auto& rec = r.verification[*r.recommended];
      line("Recommendation (*): " + rec.name + ", the cheapest replay that meets the SLO: " +
           Dollars(rec.summary.cost_usd) + ", " + q + " wait " + Hours(rec.slo_wait_s) + ", " +
           std::to_string(rec.reserved_nodes) + " reserved nodes, " + Pct(rec.spot_job_share) + " of jobs on spot.");
      for (const auto& s : r.verification) {
        if (s.kind != plan::ScenarioKind::kBaseline) continue;
        const double saved = s.summary.cost_usd - rec.summary.cost_usd;
        std::string verdict;
        if (&s == &rec) {
          verdict = "is the recommendation";
        } else if (saved >= 0) {
          verdict = "saves " + Dollars(saved) + " (" + Pct(s.summary.cost_usd > 0 ? saved / s.summary.cost_usd : 0) +
                    " of its cost)" + (s.meets_slo ? "" : "; it also misses the SLO");
        } else if (!s.within_caps) {
          verdict = "costs " + Dollars(-saved) + " more, but that baseline uses spot beyond the --spot-share cap";
        } else {
          verdict = "costs " + Dollars(-saved) + " more, but that baseline misses the SLO";
        }
        line("  vs " + Pad(s.name + ":", 32) + verdict);
      }
    }
  }
  return out;
}

json PlanJson(const plan::Plan& p) {
  return {{"cost_usd", Usd(p.total_cost)},
          {"lp_bound_usd", Usd(p.lp_bound)},
          {"gap", p.gap},
          {"proven_optimal", p.proven_optimal}};
}

json SummaryJson(const sim::Summary& s) {
  json j = {{"jobs", s.jobs},
            {"finished", s.finished},
            {"queue_s", {{"avg", s.queue_s.avg}, {"p50", s.queue_s.p50}, {"p95", s.queue_s.p95},
                         {"p99", s.queue_s.p99}, {"max", s.queue_s.max}}},
            {"jct_s_p95", s.jct_s.p95},
            {"utilisation", s.utilisation},
            {"reserved_utilisation", s.reserved_utilisation >= 0 ? json(s.reserved_utilisation) : json(nullptr)},
            {"makespan_s", s.makespan_s},
            {"cost_usd", s.cost_usd},
            {"cost_by_market_usd", s.cost_by_market_usd},
            {"gpu_hours_used", s.gpu_hours_used},
            {"nodes_rented", s.nodes_rented},
            {"spot_interruptions", s.spot_interruptions},
            {"preemptions", s.preemptions}};
  return j;
}

json FormatJson(const PlanArgs& a, const plan::PlannerOptions& o, const plan::PlannerReport& r) {
  json j;
  j["trace"] = a.trace;
  j["jobs"] = r.jobs;
  j["jobs_left_out"] = r.jobs_left_out;
  j["jobs_outside_window"] = r.jobs_outside_window;
  j["jobs_too_large"] = r.jobs_too_large;
  if (r.jobs_too_large > 0) j["first_too_large"] = r.first_too_large;
  j["history"] = {{"start", FormatIso8601(r.history_start)}, {"hours", r.history_hours}};
  j["horizon"] = {{"start", FormatIso8601(r.forecast_start)}, {"hours", r.horizon_hours}};
  j["options"] = {{"slo_wait_s", o.plan.slo_wait.seconds_f()},
                  {"slo_quantile", o.plan.slo_quantile},
                  {"max_wait_s", o.plan.max_wait.seconds_f()},
                  {"spot_max_share", o.plan.spot_max_share},
                  {"checkpoint_interval_s", o.plan.checkpoint_interval.seconds_f()},
                  {"reserved_term", TermName(o.term)},
                  {"reserved_ratio", o.term == plan::ReservedTerm::kOneYear ? o.ratios.one_year : o.ratios.three_year},
                  {"reserved_prices", o.term == plan::ReservedTerm::kOneYear && o.ratios.catalog_one_year
                                          ? "catalog where published, else ratio"
                                          : "ratio"},
                  {"no_spot_teams", o.no_spot_teams},
                  {"gpus_per_node", r.gpus_per_node},
                  {"regions", o.regions},
                  {"clouds", o.clouds},
                  {"basis", o.basis == plan::PlanBasis::kForecastUpper ? "upper" : "mean"},
                  {"band_quantile", o.forecast.band_quantile}};
  json models = json::array();
  for (const auto& m : r.models) {
    json mj;
    mj["gpu_model"] = m.gpu_model;
    mj["prices_usd_per_gpu_hour"] = {
        {"reserved", Usd(m.prices.reserved)},
        {"on_demand", m.prices.on_demand ? json(Usd(*m.prices.on_demand)) : json(nullptr)},
        {"spot", m.prices.spot ? json(Usd(*m.prices.spot)) : json(nullptr)},
        {"spot_interruptions_per_hour", m.prices.spot_interruptions_per_hour},
        {"spot_unavailable_fraction", m.prices.spot_unavailable_fraction},
        {"on_demand_offer", m.prices.on_demand_offer},
        {"spot_offer", m.prices.spot_offer},
        {"spot_outlier_left_out", m.prices.spot_outlier_left_out ? json(Usd(*m.prices.spot_outlier_left_out)) : json(nullptr)},
        {"spot_outlier_offer", m.prices.spot_outlier_offer},
        {"reserved_price", ReservedJson(m.prices)}};
    json bt = nullptr;
    if (m.backtest) {
      bt = {{"wape", m.backtest->wape},
            {"mape", m.backtest->mape ? json(*m.backtest->mape) : json(nullptr)},
            {"bias", m.backtest->bias},
            {"folds", m.backtest_folds},
            {"train_hours", m.backtest_train_hours},
            {"test_hours", m.backtest_test_hours}};
    }
    json methods = json::array();
    for (const auto& c : m.forecast_candidates) {
      methods.push_back({{"method", plan::ForecastMethodName(c.method)},
                         {"naive", plan::IsNaive(c.method)},
                         {"wape", c.error.wape},
                         {"mape", c.error.mape ? json(*c.error.mape) : json(nullptr)},
                         {"bias", c.error.bias}});
    }
    mj["forecast"] = {{"history_gpu_hours", m.history_gpu_hours},
                      {"no_spot_gpu_hours", m.no_spot_gpu_hours},
                      {"no_spot_team_gpu_hours", m.no_spot_team_gpu_hours},
                      {"peak_gpus", m.peak_gpu_hours_per_hour},
                      {"planned_gpu_hours_per_hour", m.planned_demand},
                      {"method", plan::ForecastMethodName(m.forecast_method)},
                      {"backtest", bt},
                      {"methods", methods}};
    double od = 0, sp = 0;
    for (double v : m.plan.on_demand) od += v;
    for (double v : m.plan.spot) sp += v;
    mj["plan"] = {{"reserved_nodes", m.reserved_nodes},
                  {"reserved_gpus", m.plan.reserved_gpus},
                  {"reserved_utilisation", m.plan.reserved_utilisation},
                  {"on_demand_gpu_hours", od},
                  {"spot_gpu_hours", sp},
                  {"spot_rework", m.plan.spot_rework},
                  {"late_gpu_hours", m.plan.late_gpu_hours},
                  {"reserved_cost_usd", Usd(m.plan.reserved_cost)},
                  {"on_demand_cost_usd", Usd(m.plan.on_demand_cost)},
                  {"spot_cost_usd", Usd(m.plan.spot_cost)},
                  {"foreign_gpu_hours", m.plan.foreign_gpu_hours}};
    json moved = json::array();
    for (const auto& [to, gpu_hours] : m.plan.moved_to) moved.push_back({{"to", to}, {"gpu_hours_of_work", gpu_hours}});
    mj["plan"]["moved_to"] = moved;
    json takes = json::array();
    for (const auto& [from, ratio] : m.substitutes_for) takes.push_back({{"from", from}, {"work_per_gpu_hour", ratio}});
    mj["substitutes_for"] = takes;
    models.push_back(mj);
  }
  const auto& place = r.locations.at(r.location);
  j["location"] = {{"cloud", place.cloud}, {"region", place.region}, {"places_priced", r.locations.size()}};
  if (a.compare_clouds) {
    json clouds = json::array();
    for (size_t c : CheapestPerCloud(r)) {
      const auto& l = r.locations[c];
      json cj = {{"cloud", l.cloud}, {"region", l.region}, {"chosen", c == r.location}};
      json prices = json::array();
      for (const auto& p : l.prices) {
        prices.push_back({{"gpu_model", p.gpu_model},
                          {"reserved", Usd(p.reserved)},
                          {"on_demand", p.on_demand ? json(Usd(*p.on_demand)) : json(nullptr)},
                          {"spot", p.spot ? json(Usd(*p.spot)) : json(nullptr)},
                          {"reserved_price", ReservedJson(p)}});
      }
      cj["prices_usd_per_gpu_hour"] = prices;
      if (l.plan.ok()) {
        int64_t gpus = 0;
        for (const auto& m : l.plan->models) gpus += m.reserved_gpus;
        cj["cost_usd"] = Usd(l.plan->total_cost);
        cj["spot_share"] = l.spot_share;
        cj["reserved_gpus"] = gpus;
      } else {
        cj["error"] = l.plan.status().message();
      }
      clouds.push_back(cj);
    }
    j["clouds"] = clouds;
  }
  const NoSpotDemand ns = NoSpot(r);
  j["no_spot"] = {{"teams", r.no_spot_teams},
                  {"team_jobs", r.no_spot_team_jobs},
                  {"team_gpu_hours", ns.teams},
                  {"team_share_of_demand", ns.total > 0 ? ns.teams / ns.total : 0.0},
                  {"marked_jobs", r.marked_no_spot_jobs},
                  {"gpu_hours", ns.all},
                  {"share_of_demand", ns.total > 0 ? ns.all / ns.total : 0.0}};
  j["models"] = models;
  j["plan"] = PlanJson(r.plan);
  j["plan"]["spot_share"] = r.spot_share;
  if (r.plan_without_substitution) {
    json w = PlanJson(*r.plan_without_substitution);
    w["spot_share"] = r.spot_share_without_substitution;
    json reserved = json::object();
    for (const auto& m : r.plan_without_substitution->models) reserved[m.gpu_model] = m.reserved_gpus;
    w["reserved_gpus"] = reserved;
    j["plan_without_substitution"] = w;
  } else {
    j["plan_without_substitution"] = nullptr;
  }
  json shares = json::array();
  for (const auto& s : r.spot_shares) {
    json sj = {{"share", s.share}};
    if (s.plan.ok()) {
      sj.update(PlanJson(*s.plan));
      int64_t gpus = 0;
      for (const auto& m : s.plan->models) gpus += m.reserved_gpus;
      sj["reserved_gpus"] = gpus;
    } else {
      sj["error"] = s.plan.status().message();
    }
    shares.push_back(sj);
  }
  j["spot_shares"] = shares;
  json frontier = json::array();
  for (const auto& p : r.frontier) {
    json pj = {{"slo_wait_s", p.slo_wait.seconds_f()}};
    if (p.plan.ok()) {
      pj.update(PlanJson(*p.plan));
      int64_t gpus = 0;
      for (const auto& m : p.plan->models) gpus += m.reserved_gpus;
      pj["reserved_gpus"] = gpus;
    } else {
      pj["error"] = p.plan.status().message();
    }
    frontier.push_back(pj);
  }
  j["frontier"] = frontier;
  json ver = json::array();
  for (size_t i = 0; i < r.verification.size(); ++i) {
    const auto& s = r.verification[i];
    ver.push_back({{"name", s.name},
                   {"kind", s.kind == plan::ScenarioKind::kBaseline ? "baseline" : "candidate"},
                   {"recommended", r.recommended && *r.recommended == i},
                   {"reserved_nodes", s.reserved_nodes},
                   {"spot_share", s.spot_share},
                   {"spot_job_share", s.spot_job_share},
                   {"slo_wait_s", s.slo_wait_s},
                   {"meets_slo", s.meets_slo},
                   {"within_caps", s.within_caps},
                   {"cost_ratio_to_on_demand", s.cost_ratio_to_on_demand},
                   {"summary", SummaryJson(s.summary)}});
  }
  j["verification"] = ver;
  json rec = nullptr;
  if (r.recommended) {
    const auto& best = r.verification[*r.recommended];
    json vs = json::array();
    for (const auto& s : r.verification) {
      if (s.kind != plan::ScenarioKind::kBaseline) continue;
      const double saved = s.summary.cost_usd - best.summary.cost_usd;
      vs.push_back({{"name", s.name},
                    {"cost_usd", s.summary.cost_usd},
                    {"meets_slo", s.meets_slo},
                    {"within_caps", s.within_caps},
                    {"saving_usd", saved},
                    {"saving_share", s.summary.cost_usd > 0 ? saved / s.summary.cost_usd : 0.0}});
    }
    rec = {{"name", best.name}, {"cost_usd", best.summary.cost_usd}, {"slo_wait_s", best.slo_wait_s},
           {"reserved_nodes", best.reserved_nodes}, {"spot_job_share", best.spot_job_share}, {"vs_baselines", vs}};
  }
  j["recommendation"] = rec;
  return j;
}

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out) return Status::Unavailable("cannot write " + path);
  out << text;
  out.close();
  if (!out) return Status::Unavailable("cannot write " + path);
  return Status::Ok();
}

// ------------------------------------------------------------------ the command

int Run(const PlanArgs& args) {
  // Flags first, all of them, before reading a large trace: a wrong value is exit code 2.
  if (int rc = CheckPlanClusterFlags(args.cluster, !args.trace.empty(),
                                     {{"--trace", args.trace},
                                      {"--gavel-throughputs", args.gavel_throughputs},
                                      {"--catalog", args.catalog},
                                      {"--gpu-specs", args.gpu_specs},
                                      {"--spot-capacity", args.spot_capacity.ends_with(".csv") ? args.spot_capacity : ""}});
      rc != 0) {
    return rc;
  }
  PlanArgs a = args;  // with --from-cluster, `trace` names the cluster in the report
  plan::PlannerOptions o;
  auto trace_options = TraceOptionsFromFlags(a.format, a.columns, a.skip_bad_rows, a.max_jobs);
  if (!trace_options.ok()) return Fail(kExitUsage, trace_options.status().message());
  if (Status g = ApplyGavelFlags(a.gavel_throughputs, a.gavel_worker, *trace_options); !g.ok()) {
    return Fail(kExitUsage, g.message());
  }
  const sim::TraceOptions& topts = *trace_options;

  std::unique_ptr<model::GpuCatalog> loaded;
  auto loaded_catalog = GpuCatalogFromFlag(a.gpu_specs, loaded);
  if (!loaded_catalog.ok()) return Fail(loaded_catalog.status());
  const model::GpuCatalog* gpus = *loaded_catalog;
  for (const auto& g : Split(a.gpus, ',')) {
    std::string name(Trim(g));
    if (name.empty()) continue;
    if (gpus->Find(name) == nullptr) return Fail(kExitUsage, "--gpu: unknown GPU model '" + name + "'");
    o.gpu_models.push_back(name);
  }
  if (!a.default_gpu.empty() && gpus->Find(a.default_gpu) == nullptr) {
    return Fail(kExitUsage, "--default-gpu: unknown GPU model '" + a.default_gpu + "'");
  }
  o.default_gpu_model = a.default_gpu;
  if (!a.reference_gpu.empty() && gpus->Find(a.reference_gpu) == nullptr) {
    return Fail(kExitUsage, "--reference-gpu: unknown GPU model '" + a.reference_gpu + "'");
  }
  o.reference_gpu_model = a.reference_gpu;
  for (const auto& r : a.regions) {
    for (const auto& part : Split(r, ',')) {
      std::string name(Trim(part));
      if (!name.empty()) o.regions.push_back(name);
    }
  }
  for (const auto& c : a.clouds) {
    for (const auto& part : Split(c, ',')) {
      std::string name(Trim(part));
      if (!name.empty()) o.clouds.push_back(name);
    }
  }
  if (!a.from.empty()) {
    o.from = ParseUtc(a.from);
    if (!o.from) return Fail(kExitUsage, "--from: expected a UTC date such as 2017-09-18 or 2017-09-18T06:00:00Z, got '" + a.from + "'");
  }
  if (!a.to.empty()) {
    o.to = ParseUtc(a.to);
    if (!o.to) return Fail(kExitUsage, "--to: expected a UTC date such as 2017-12-04 or 2017-12-04T00:00:00Z, got '" + a.to + "'");
  }
  if (o.from && o.to && *o.to <= *o.from) return Fail(kExitUsage, "--to (" + a.to + ") must be after --from (" + a.from + ")");
  // Demand is counted by the hour: a window that does not start and end on the hour would count
  // its jobs from one instant and its hours from another.
  for (const auto& [flag, t, text] : {std::tuple{"--from", o.from, a.from}, std::tuple{"--to", o.to, a.to}}) {
    constexpr int64_t kHour = 3600 * 1000;
    if (!t || t->millis() % kHour == 0) continue;
    const Time down = Time::FromMillis(t->millis() - ((t->millis() % kHour) + kHour) % kHour);
    return Fail(kExitUsage, std::string(flag) + ": " + text + " is not on the hour (the planner counts demand by the hour): give " +
                                FormatIso8601(down) + " or " + FormatIso8601(down + Duration::Hours(1)));
  }
  if (a.gpus_per_node < 1 || a.gpus_per_node > 64) return Fail(kExitUsage, "--gpus-per-node must be 1..64");
  o.gpus_per_node = a.gpus_per_node;

  if (a.reserved_term == "1y" || a.reserved_term == "1") {
    o.term = plan::ReservedTerm::kOneYear;
  } else if (a.reserved_term == "3y" || a.reserved_term == "3") {
    o.term = plan::ReservedTerm::kThreeYear;
  } else {
    return Fail(kExitUsage, "--reserved-term must be 1y or 3y, got '" + a.reserved_term + "'");
  }
  if (a.reserved_ratio) {
    if (!(*a.reserved_ratio > 0 && *a.reserved_ratio <= 1)) {
      return Fail(kExitUsage, "--reserved-ratio must be in (0, 1] (reserved price / on-demand price), got " +
                                  Printf("%g", *a.reserved_ratio));
    }
    (o.term == plan::ReservedTerm::kOneYear ? o.ratios.one_year : o.ratios.three_year) = *a.reserved_ratio;
    o.ratios.catalog_one_year = false;  // the buyer's own contract beats the list price
  }
  for (const auto& spec : a.substitutes) {
    for (const auto& part : Split(spec, ',')) {
      const std::string item(Trim(part));
      if (item.empty()) continue;
      if (item == "any") {
        o.substitute_any = true;
        continue;
      }
      const size_t colon = item.find(':');
      if (colon == std::string::npos || colon == 0 || colon + 1 == item.size() ||
          item.find(':', colon + 1) != std::string::npos) {
        return Fail(kExitUsage, "--substitute: expected FROM:TO (work logged on FROM may run on TO, e.g. V100:H100) "
                                "or 'any', got '" + item + "'");
      }
      o.substitutes.emplace_back(std::string(Trim(item.substr(0, colon))), std::string(Trim(item.substr(colon + 1))));
    }
  }
  for (const auto& t : a.no_spot_teams) {
    for (const auto& part : Split(t, ',')) {
      std::string name(Trim(part));
      if (name.empty()) continue;
      if (std::find(o.no_spot_teams.begin(), o.no_spot_teams.end(), name) == o.no_spot_teams.end()) {
        o.no_spot_teams.push_back(name);
      }
    }
  }

  auto slo = ParseSpan(a.slo_wait);
  if (!slo) return Fail(kExitUsage, "--slo-p95-wait: expected a duration such as 1h or 30m, got '" + a.slo_wait + "'");
  o.plan.slo_wait = *slo;
  if (!(a.slo_quantile > 0 && a.slo_quantile <= 1)) {
    return Fail(kExitUsage, "--slo-quantile must be in (0, 1] (0.95 for P95), got " + Printf("%g", a.slo_quantile));
  }
  o.plan.slo_quantile = a.slo_quantile;
  auto max_wait = ParseSpan(a.max_wait);
  if (!max_wait) return Fail(kExitUsage, "--max-wait: expected a duration such as 24h, got '" + a.max_wait + "'");
  if (*max_wait < *slo) return Fail(kExitUsage, "--max-wait (" + a.max_wait + ") must be at least the SLO wait (" + a.slo_wait + ")");
  o.plan.max_wait = *max_wait;
  auto horizon = ParseSpan(a.horizon);
  if (!horizon || *horizon < Duration::Hours(1)) {
    return Fail(kExitUsage, "--horizon: expected a duration of at least an hour such as 1w or 72h, got '" + a.horizon + "'");
  }
  o.horizon_hours = horizon->millis() / Duration::Hours(1).millis();
  if (a.basis == "mean") {
    o.basis = plan::PlanBasis::kForecastMean;
  } else if (a.basis == "upper") {
    o.basis = plan::PlanBasis::kForecastUpper;
  } else {
    return Fail(kExitUsage, "--basis must be mean or upper, got '" + a.basis + "'");
  }
  if (!(a.band_quantile > 0 && a.band_quantile < 1)) {
    return Fail(kExitUsage, "--band-quantile must be in (0, 1) (0.9: plan on the 90th percentile), got " +
                                Printf("%g", a.band_quantile));
  }
  o.forecast.band_quantile = a.band_quantile;
  if (!(a.spot_share >= 0 && a.spot_share <= 1)) {
    return Fail(kExitUsage, "--spot-share must be in [0, 1] (0 = no spot), got " + Printf("%g", a.spot_share));
  }
  o.plan.spot_max_share = a.spot_share;
  auto ci = ParseSpan(a.checkpoint_interval);
  if (!ci) return Fail(kExitUsage, "--checkpoint-interval: expected a duration such as 30m, got '" + a.checkpoint_interval + "'");
  if (*ci <= Duration::Zero()) {
    return Fail(kExitUsage, "--checkpoint-interval must be positive, got '" + a.checkpoint_interval +
                                "'; for jobs that never checkpoint, give their typical run time such as 12h (an "
                                "interruption loses half of it on average), or keep them off spot with --spot-share 0");
  }
  o.plan.checkpoint_interval = *ci;
  auto ro = ParseSpan(a.restart_overhead);
  if (!ro) return Fail(kExitUsage, "--restart-overhead: expected a duration such as 5m, got '" + a.restart_overhead + "'");
  o.plan.restart_overhead = *ro;
  if (!(a.time_limit_s > 0 && a.time_limit_s <= 3600)) {
    return Fail(kExitUsage, "--time-limit must be more than 0 and at most 3600 seconds, got " + Printf("%g", a.time_limit_s));
  }
  o.plan.time_limit_s = a.time_limit_s;
  if (a.frontier != "none" && !a.frontier.empty()) {
    for (const auto& part : Split(a.frontier, ',')) {
      std::string w(Trim(part));
      if (w.empty()) continue;
      auto d = ParseSpan(w);
      if (!d) return Fail(kExitUsage, "--frontier: expected durations such as 1h,4h,24h, got '" + w + "'");
      if (*d > o.plan.max_wait) {
        if (a.frontier == kDefaultFrontier) continue;
        return Fail(kExitUsage, "--frontier: " + w + " is over --max-wait (" + a.max_wait + ")");
      }
      o.frontier_waits.push_back(*d);
    }
    if (o.frontier_waits.empty()) o.frontier_waits.push_back(o.plan.max_wait);  // all of the default over it
    std::sort(o.frontier_waits.begin(), o.frontier_waits.end());
    o.frontier_waits.erase(std::unique(o.frontier_waits.begin(), o.frontier_waits.end()), o.frontier_waits.end());
  }

  o.verify.enabled = !a.no_verify;
  o.verify.baselines = !a.no_baselines;
  o.verify.neighbours = !a.no_neighbours;
  o.verify.single_gpu_nodes = a.single_gpu_nodes;
  if (a.spot_capacity != "measured" && a.spot_capacity != "always" && !a.spot_capacity.ends_with(".csv")) {
    return Fail(kExitUsage, "--spot-capacity: expected measured, always or a table FILE.csv, got '" + a.spot_capacity + "'");
  }
  o.verify.policy = a.policy;
  // The replay's policy is checked now, not after the solver's minutes (with --no-verify too).
  if (auto p = sched::MakePolicies(a.policy, {}); !p.ok()) return Fail(kExitUsage, "--policy: " + p.status().message());
  auto boot = ParseSpan(a.boot_delay);
  if (!boot) return Fail(kExitUsage, "--boot-delay: expected a duration such as 3m, got '" + a.boot_delay + "'");
  o.verify.boot_delay = *boot;
  auto idle = ParseSpan(a.idle_release);
  if (!idle || *idle <= Duration::Zero()) {
    return Fail(kExitUsage, "--idle-release: expected a positive duration such as 10m, got '" + a.idle_release + "'");
  }
  o.verify.idle_duration = *idle;
  o.verify.seed = a.seed;
  if (a.threads < 0) return Fail(kExitUsage, "--threads must be >= 0 (0: one per core)");
  o.verify.threads = a.threads;
  if (a.output != "text" && a.output != "json") return Fail(kExitUsage, "-o must be text or json, got '" + a.output + "'");

  // Inputs.
  const std::string catalog_path = CatalogPath(a.catalog);
  auto offers = cost::LoadOffersCsv(catalog_path, *gpus);
  if (!offers.ok()) return Fail(offers.status());
  if (a.spot_capacity != "always") {
    // The measured table beside the catalog, else the shipped one.
    std::string path = a.spot_capacity;
    if (path == "measured") {
      path = std::filesystem::path(catalog_path).parent_path().string() + "/spot_availability.csv";
      std::error_code ec;
      if (!std::filesystem::exists(path, ec)) path = std::string(GPUFLEET_DATA_DIR) + "/catalog/spot_availability.csv";
    }
    auto capacity = cost::LoadSpotCapacity(path);
    if (!capacity.ok()) {
      return Fail(capacity.status(), " (--spot-capacity always replays without it)");
    }
    o.verify.spot_capacity = std::move(*capacity);
  }
  Result<sim::Trace> trace = Status::Unavailable("no history read");
  if (a.cluster.from_cluster) {
    ClusterHistory history = ReadClusterHistory(a.cluster, o.from.has_value());
    if (history.exit_code != 0) return history.exit_code;
    if (!o.from) o.from = history.from;
    if (!o.to) o.to = history.to;
    a.trace = history.source;
    trace = std::move(history.trace);
  } else {
    trace = sim::ReadTrace(a.trace, topts);
  }
  if (!trace.ok()) return Fail(trace.status());
  if (trace->bad_rows_skipped > 0) {
    std::fprintf(stderr, "gpufleet plan: skipped %lld bad row(s)\n", static_cast<long long>(trace->bad_rows_skipped));
  }
  for (const auto& w : trace->warnings) std::fprintf(stderr, "gpufleet plan: %s\n", w.c_str());
  if (trace->jobs.empty()) return Fail(kExitUsage, a.trace + ": no jobs to plan from");

  // Plan and verify.
  bool show = !a.no_progress && (a.progress || StderrIsTerminal());
  std::optional<ProgressBar> bar;
  if (o.verify.enabled) bar.emplace("verifying by simulation", show);
  std::mutex mu;
  o.progress = [&](int64_t done, int64_t total) {
    std::lock_guard<std::mutex> lock(mu);
    if (bar) bar->Update(done, total);
  };
  auto report = plan::RunPlanner(trace->jobs, *offers, *gpus, o);
  if (bar) bar->Finish();
  if (!report.ok()) return Fail(report.status());

  if (!a.plots.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(a.plots, ec);
    if (ec) return Fail(kExitFailed, "--plots: cannot create " + a.plots + ": " + ec.message());
    auto charts = plan::RenderPlannerCharts(*report);
    if (!charts.ok()) return Fail(charts.status());
    for (const auto& [name, svg] : *charts) {
      const std::string path = (std::filesystem::path(a.plots) / name).string();
      Status s = WriteFile(path, svg);
      if (!s.ok()) return Fail(kExitFailed, s.message());
      std::fprintf(stderr, "wrote %s\n", path.c_str());
    }
  }

  std::string out = a.output == "json" ? FormatJson(a, o, *report).dump(2) + "\n" : FormatText(a, o, *report);
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (!a.cluster.apply.empty()) {
    std::fflush(stdout);
    return ApplyPlan(a.cluster, *report, o, a.trace);
  }
  return 0;
}

}  // namespace

std::function<int()> SetupPlanCommand(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* sub = app.add_subcommand(
      "plan", "From job history, the cheapest reserved / on-demand / spot mix that meets a queueing SLO");
  sub->footer(R"(How it works:
  1. Demand: the trace's jobs as GPU-hours per hour and GPU model (as if each started on arrival).
  2. Forecast: six methods (hour-of-week shape with trend or mean, level shift, level decay, and the
     naive same-hour-last-week and four-week mean) cross-validated over rolling origins; the one
     with the least WAPE forecasts, every method's WAPE is reported.
  3. Prices: on-demand, spot and reserved from one cloud and region, the one whose plan is cheapest
     among those --cloud/--region allow (--compare-clouds shows each cloud's best). Spot prices
     flagged spot-outlier (`gpufleet offers --help`) are left out and named. Reserved 1y is
     the catalog's published price where it has one (AWS 1-year no-upfront); elsewhere, for 3y,
     and with --reserved-ratio, it is on-demand x a ratio. The report says which, per model.
  4. Optimise: reserved nodes (paid every hour), on-demand and spot burst, least expected cost with
     the SLO met; a MILP (CBC), with its LP bound and gap reported. The spot share is chosen with
     the reservation: one MILP per share 0, 0.25, ... up to the --spot-share cap, of the work
     that may use spot (not the --no-spot-teams' jobs, nor jobs the trace marks on-demand).
     With --substitute FROM:TO, FROM's work may also run on TO's GPUs at the catalog's speed
     ratio: the plan may reserve A100s for work logged on V100s, and says how much moved.
  5. Verify: replay the history on the planned cluster (reserved nodes + autoscaled on-demand and
     spot with boot delays and interruptions), on its neighbours (reserved +-1 and +-2 nodes, and
     further while the edge is cheapest; the adjacent spot shares), without substitution where
     it was asked for, and on three baselines: all on-demand, all reserved for the peak, all
     spot with on-demand fallback. Costs are compared over the same replay; reservations are
     paid over the history's window, and after it for the GPUs its last jobs still use.
  6. Recommend: the cheapest replay whose wait at the SLO quantile meets the SLO (marked *), and
     by how much it beats each baseline. It may be a neighbour or a baseline: the optimiser's
     fluid model is checked, not trusted.

Examples:
  # The Philly trace on AWS p3.16xlarge (8 x V100) in us-east-1, P95 wait under an hour
  gpufleet plan --trace data/traces/philly/philly.csv --gpu V100 --cloud aws --region us-east-1 \
                --slo-p95-wait 1h --plots plan-plots/

  # Three-year reservations at your contract's 50 % discount, no spot, JSON for a notebook
  gpufleet plan --trace jobs.jsonl --gpu A100 --reserved-term 3y --reserved-ratio 0.5 \
                --spot-share 0 -o json > plan.json

  # Let the V100 work of the history run on A100s or H100s where that is cheaper per unit of work
  gpufleet plan --trace data/traces/philly/philly.csv --gpu V100 --region us-east-1 \
                --substitute V100:A100,V100:H100 --spot-share 0

  # Keep two teams' jobs off spot (the trace's team column names them)
  gpufleet plan --trace data/traces/philly/philly.csv --gpu V100 --region us-east-1 \
                --no-spot-teams 11cb48,6214e9

  # Only the optimiser, no simulation; a cautious plan on the forecast's upper band
  gpufleet plan --trace jobs.csv --columns submit=ts,duration=secs,gpus=n --default-gpu A100 \
                --basis upper --no-verify

  # The live cluster's last four weeks (the controller 'gpufleet history' talks to), and the
  # recommendation written as a pool file, then run
  gpufleet plan --from-cluster --since 4w --cloud aws --region us-east-1 --apply pool.yaml
  gpufleet server --pool pool.yaml

Exit codes: 0 done, 1 an output could not be written (or --apply found no plan that meets the SLO), 2 a bad flag or an input that cannot be used (the trace, the cluster's history, the catalog, --gpu-specs, --spot-capacity FILE, an --apply FILE that exists without --force), 3 --from-cluster cannot reach the controller or its token was refused.
docs/planning.md explains the model, its limits and the results on the Philly trace.)");
  sub->add_option("--trace", args->trace,
                  "Job history: any trace `gpufleet sim` reads (Philly, Alibaba 2023, Tiresias, CSV with --columns, "
                  "JSON Lines); or --from-cluster")
      ->check(NotEmpty);
  AddPlanClusterFlags(sub, args->cluster);
  AddTraceFlags(sub, args->format, args->columns, args->skip_bad_rows, args->max_jobs);
  AddGavelFlags(sub, args->gavel_throughputs, args->gavel_worker);
  sub->add_option("--catalog", args->catalog, "Offer catalog CSV (default: $GPUFLEET_CATALOG, else data/catalog/offers.csv)")
      ->check(NotEmpty);
  sub->add_option("--region", args->regions, "Price only from offers in this region (repeatable or comma-separated; default: all). "
                  "Each plan is priced from one cloud and region: the one, among those allowed, whose plan is cheapest. "
                  "A region the catalog lacks is an error naming the nearest");
  sub->add_option("--cloud", args->clouds, "Price only from this cloud's offers: aws, gcp, azure, ... (repeatable or comma-separated); "
                  "a cloud the catalog lacks is an error naming its clouds");
  sub->add_option("--from", args->from,
                  "Plan from (and replay) only jobs submitted at or after this date or hour (UTC unless it has an offset), "
                  "e.g. 2017-09-18 or 2017-09-18T06:00:00Z");
  sub->add_option("--to", args->to, "... and before this date or hour; demand is counted up to it");
  sub->add_option("--gpus-per-node", args->gpus_per_node, "Node size: reserve whole nodes of this many GPUs and rent instances of this size")
      ->capture_default_str();
  sub->add_option("--gpu", args->gpus, "GPU models to plan for, comma-separated (default: every model the history asks for)");
  sub->add_option("--default-gpu", args->default_gpu, "GPU model of jobs whose trace names none (Philly, Tiresias)")->capture_default_str();
  sub->add_option("--reference-gpu", args->reference_gpu, "GPU model the trace's run times were measured on (default: --default-gpu)");
  sub->add_option("--gpu-specs", args->gpu_specs, "GPU spec CSV to use instead of the built-in table")
      ->check(NotEmpty);
  sub->add_option("--reserved-term", args->reserved_term,
                  "Reservation term: 1y (the catalog's published 1-year price where it has one: AWS no-upfront; "
                  "else 0.63 x on-demand) or 3y (0.45 x on-demand)")
      ->capture_default_str();
  sub->add_option("--reserved-ratio", args->reserved_ratio,
                  "Reserved price as a share of on-demand for every offer, e.g. your contract's 0.55: overrides the "
                  "term's default ratio and the catalog's reserved prices");
  sub->add_option("--substitute", args->substitutes,
                  "Work logged on one GPU model may run on another: FROM:TO (repeatable or comma-separated, e.g. "
                  "V100:A100,V100:H100; TO is planned too) or 'any' (each planned model on every other with at least "
                  "its memory). The plan may then reserve TO for FROM's work at the catalog's speed ratio");
  sub->add_option("--no-spot-teams", args->no_spot_teams,
                  "Teams whose jobs may not use spot (comma-separated or repeatable; each must occur in the trace): "
                  "their demand is served by reserved and on-demand only, in the plan and the replay");
  sub->add_option("--slo-p95-wait,--slo-wait", args->slo_wait, "The SLO: at most this queueing wait for the --slo-quantile of the work")
      ->capture_default_str();
  sub->add_option("--slo-quantile", args->slo_quantile, "Share of GPU-hours that must meet the SLO wait (1 = all)")->capture_default_str();
  sub->add_option("--max-wait", args->max_wait, "No work waits longer than this")->capture_default_str();
  sub->add_option("--horizon", args->horizon, "Planning window forecast from the end of the history (1w, 2w, 72h)")->capture_default_str();
  sub->add_option("--basis", args->basis, "Plan on the forecast's mean (expected cost) or its upper band (cautious)")->capture_default_str();
  sub->add_option("--band-quantile", args->band_quantile,
                  "The upper band: this quantile of the cross-validation's out-of-sample errors above the "
                  "forecast, so --basis upper plans on this quantile of demand")
      ->capture_default_str();
  sub->add_option("--spot-share", args->spot_share,
                  "Cap on the share of the work that may run on spot, 0..1: a risk limit; the optimiser chooses "
                  "the share from 0 up to it in steps of 0.25 (0 = no spot)")
      ->capture_default_str();
  sub->add_option("--checkpoint-interval", args->checkpoint_interval, "How often jobs checkpoint: half of it is the work redone after a spot interruption; must be positive "
                  "(for jobs that never checkpoint, give their typical run time)")
      ->capture_default_str();
  sub->add_option("--restart-overhead", args->restart_overhead, "Extra time each restart after an interruption costs")->capture_default_str();
  sub->add_option("--frontier", args->frontier, "SLO waits of the cost-vs-SLO curve, or 'none'")->capture_default_str()
      ->check(NotEmpty);
  sub->add_option("--time-limit", args->time_limit_s, "Seconds the MILP solver may take per plan")->capture_default_str();
  sub->add_flag("--no-verify", args->no_verify, "Skip the simulation check");
  sub->add_flag("--no-baselines", args->no_baselines, "Replay the plan and its neighbours only, not the baselines");
  sub->add_flag("--compare-clouds", args->compare_clouds,
                "Also show the plan at each cloud's cheapest region (the optimiser's cost; only the chosen place is replayed)");
  sub->add_flag("--no-neighbours", args->no_neighbours,
                "Replay the optimiser's plan only, not its neighbours (reserved +-1 and +-2 nodes, the adjacent spot shares)");
  sub->add_flag("--single-gpu-nodes", args->single_gpu_nodes,
                "In the replay, also rent one-GPU instances for one-GPU jobs (slower to simulate)");
  sub->add_option("--spot-capacity", args->spot_capacity,
                  "Spot capacity in the replay: always (spot is there whenever rented, as the optimiser "
                  "assumes), measured (data/catalog/spot_availability.csv: spot offers go without capacity "
                  "for periods of the measured length; rents then take the next offer, spot-only jobs wait), "
                  "or a table FILE.csv of the same columns")
      ->capture_default_str();
  sub->add_option("--policy", args->policy, "Queue policy of the replay")->capture_default_str();
  sub->add_option("--boot-delay", args->boot_delay, "Time from renting a node to its being up, in the replay")->capture_default_str();
  sub->add_option("--idle-release", args->idle_release, "Rented nodes idle this long are released, in the replay")->capture_default_str();
  sub->add_option("--seed", args->seed, "Seed for spot interruptions in the replay")->capture_default_str();
  sub->add_option("--threads", args->threads, "Simulations run at once (0: one per core)")->capture_default_str();
  sub->add_option("-o,--output", args->output, "Report format: text or json")->transform(CLI::Transformer(std::map<std::string, std::string>{{"table", "text"}}))->capture_default_str();
  sub->add_option("--plots", args->plots, "Write SVG charts here: demand-MODEL.svg, cost-by-market.svg, cost-vs-slo.svg")
      ->check(NotEmpty);
  sub->add_flag("--progress", args->progress, "Always draw the progress bar (default: only on a terminal)");
  sub->add_flag("--no-progress", args->no_progress, "Never draw the progress bar");
  return [args]() { return Run(*args); };
}

}  // namespace gpufleet::cli
