#include "plan/planner.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "common/strings.h"
#include "plan/svg.h"
#include "sim/simulator.h"

namespace gpufleet::plan {
namespace {

constexpr const char* kPlanScenario = "plan";
constexpr const char* kOnDemandScenario = "all on-demand";
constexpr const char* kPeakScenario = "all reserved (peak)";
constexpr const char* kSpotScenario = "all spot (on-demand fallback)";
constexpr const char* kZone = "plan-zone";
constexpr int64_t kCpuMilliPerGpu = 12 * 1000;
constexpr int64_t kMemMibPerGpu = 128 * 1024;

double Usd(cost::MicroUsd v) { return static_cast<double>(v) / static_cast<double>(cost::kMicroUsdPerUsd); }

// FNV-1a: a job's spot tolerance must not change from run to run or with the trace's order.
uint64_t HashId(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

bool MaySpot(const sim::TraceJob& job, double share) {
  if (share >= 1) return true;
  if (share <= 0) return false;
  return static_cast<double>(HashId(job.id) % 1'000'000) < share * 1'000'000;
}

model::NodeSpec Node(const std::string& name, const std::string& gpu_model, int gpus, model::Market market,
                     cost::MicroUsd price_per_gpu_hour) {
  model::NodeSpec n;
  n.name = name;
  n.gpu_model = gpu_model;
  n.gpus = gpus;
  n.cpu_milli = kCpuMilliPerGpu * gpus;
  n.mem_mib = kMemMibPerGpu * gpus;
  n.market = market;
  n.price_micros_per_hour = price_per_gpu_hour * gpus;
  n.labels[model::kLabelZone] = kZone;
  return n;
}

void AddReservedNodes(sim::ClusterSpec& c, const ModelReport& m, int64_t nodes, int gpus_per_node) {
  for (int64_t i = 0; i < nodes; ++i) {
    c.nodes.push_back(Node(m.gpu_model + "-reserved-" + std::to_string(i), m.gpu_model, gpus_per_node,
                           model::Market::kReserved, m.prices.reserved));
  }
}

void AddOfferOfSize(sim::ClusterSpec& c, const std::string& gpu_model, const GpuPrices& prices, model::Market market,
                    int gpus, const VerifyOptions& v) {
  const bool spot = market == model::Market::kSpot;
  const std::optional<cost::MicroUsd>& price = spot ? prices.spot : prices.on_demand;
  if (!price) return;
  sim::AutoscaleOffer o;
  o.name = gpu_model + "-" + std::to_string(gpus) + "gpu" + (spot ? "-spot" : "-on-demand");
  o.node = Node(o.name, gpu_model, gpus, market, *price);
  o.boot_delay = v.boot_delay;
  o.interruptions_per_hour = spot ? prices.spot_interruptions_per_hour : 0;
  if (spot && !v.spot_capacity.empty()) {
    const cost::SpotCapacity& cap = cost::SpotCapacityFor(v.spot_capacity, gpus);
    o.capacity_available = cap.mean_available;
    o.capacity_outage = cap.mean_outage;
  }
  c.autoscale.offers.push_back(std::move(o));
}

// The node-size offer of `market`, and the one-GPU one where asked for and priced.
void AddOffer(sim::ClusterSpec& c, const ModelReport& m, model::Market market, int gpus_per_node,
              const VerifyOptions& v) {
  AddOfferOfSize(c, m.gpu_model, m.prices, market, gpus_per_node, v);
  if (v.single_gpu_nodes && gpus_per_node > 1 && m.single_gpu_prices) {
    AddOfferOfSize(c, m.gpu_model, *m.single_gpu_prices, market, 1, v);
  }
}

void SetPoolOptions(sim::ClusterSpec& c, const VerifyOptions& v) {
  c.autoscale.options.idle_duration = v.idle_duration;
  c.autoscale.options.boot_timeout = std::max(Duration::Minutes(15), v.boot_delay * 2);
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The offers the plan may price: in the regions asked for, with the node size it counts in.
cost::OfferTable FilterOffers(const cost::OfferTable& all, const PlannerOptions& options) {
  const auto& regions = options.regions;
  const auto& clouds = options.clouds;
  cost::OfferTable t;
  t.rows_read = all.rows_read;
  for (const cost::Offer& o : all.offers) {
    if (o.gpus != options.gpus_per_node) continue;
    if (!regions.empty() && std::find(regions.begin(), regions.end(), o.region) == regions.end()) continue;
    if (!clouds.empty() && std::find(clouds.begin(), clouds.end(), o.cloud) == clouds.end()) continue;
    t.offers.push_back(o);
  }
  return t;
}

std::string Where(const PlannerOptions& o) {
  std::string s = "with " + std::to_string(o.gpus_per_node) + " GPUs per instance";
  if (!o.clouds.empty()) s += " from " + Join(o.clouds, ", ");
  if (!o.regions.empty()) s += " in region" + std::string(o.regions.size() > 1 ? "s " : " ") + Join(o.regions, ", ");
  return s;
}

Status ValidateOptions(const PlannerOptions& o) {
  if (o.horizon_hours < 1 || o.horizon_hours > 24 * 366) {
    return Status::InvalidArgument("horizon must be 1 hour to 366 days, got " + std::to_string(o.horizon_hours) + " h");
  }
  if (o.gpus_per_node < 1 || o.gpus_per_node > 64) {
    return Status::InvalidArgument("gpus per node must be 1..64, got " + std::to_string(o.gpus_per_node));
  }
  if (o.from && o.to && *o.to <= *o.from) return Status::InvalidArgument("the window's end must be after its start");
  if (o.verify.boot_delay < Duration::Zero() || o.verify.idle_duration <= Duration::Zero()) {
    return Status::InvalidArgument("boot delay must be >= 0 and idle duration > 0");
  }
  return Status::Ok();
}

// One verification run's inputs: the cluster and the jobs as that cluster sees them.
struct Run {
  Scenario scenario;
  std::vector<sim::TraceJob> jobs;
};

// Marks the jobs that may use spot (a share, picked by a hash of the id) and the rest on-demand.
// With spot_only the tolerant ones run on spot alone, as the plan's optimiser assumes (its spot
// share is served by spot, the rest by reserved and on-demand); otherwise they may run anywhere.
std::vector<sim::TraceJob> WithSpotShare(const std::vector<sim::TraceJob>& jobs, double share, bool spot_only,
                                         double& actual) {
  std::vector<sim::TraceJob> out = jobs;
  int64_t tolerant = 0;
  for (sim::TraceJob& j : out) {
    if (j.spec.market == model::MarketPreference::kOnDemand) continue;
    if (MaySpot(j, share)) {
      ++tolerant;
      if (spot_only) j.spec.market = model::MarketPreference::kSpot;
    } else {
      j.spec.market = model::MarketPreference::kOnDemand;
    }
  }
  actual = out.empty() ? 0 : static_cast<double>(tolerant) / static_cast<double>(out.size());
  return out;
}

Status Verify(const std::vector<sim::TraceJob>& jobs, const model::GpuCatalog& catalog,
              const std::string& reference, const PlannerOptions& o, PlannerReport& report) {
  const int n = o.gpus_per_node;
  const bool any_spot = std::any_of(report.models.begin(), report.models.end(),
                                    [](const ModelReport& m) { return m.prices.spot.has_value(); });
  std::vector<Run> runs;
  {
    Run r;
    r.scenario.name = kPlanScenario;
    r.scenario.cluster = PlannedCluster(report.models, n, o.verify, o.plan.spot_max_share > 0);
    r.jobs = WithSpotShare(jobs, o.plan.spot_max_share > 0 && any_spot ? o.plan.spot_max_share : 0,
                           /*spot_only=*/true, r.scenario.spot_job_share);
    runs.push_back(std::move(r));
  }
  if (o.verify.baselines) {
    Run od;
    od.scenario.name = kOnDemandScenario;
    for (const ModelReport& m : report.models) AddOffer(od.scenario.cluster, m, model::Market::kOnDemand, n, o.verify);
    SetPoolOptions(od.scenario.cluster, o.verify);
    od.jobs = jobs;
    runs.push_back(std::move(od));

    Run peak;
    peak.scenario.name = kPeakScenario;
    for (const ModelReport& m : report.models) {
      const int64_t gpus = std::max<int64_t>(static_cast<int64_t>(std::ceil(m.peak_gpu_hours_per_hour - 1e-9)),
                                             m.max_job_gpus);
      AddReservedNodes(peak.scenario.cluster, m, CeilDiv(std::max<int64_t>(gpus, 1), n), n);
    }
    peak.jobs = jobs;
    runs.push_back(std::move(peak));

    if (any_spot) {
      Run spot;
      spot.scenario.name = kSpotScenario;
      for (const ModelReport& m : report.models) {
        if (m.prices.spot) AddOffer(spot.scenario.cluster, m, model::Market::kSpot, n, o.verify);
        AddOffer(spot.scenario.cluster, m, model::Market::kOnDemand, n, o.verify);
      }
      SetPoolOptions(spot.scenario.cluster, o.verify);
      spot.jobs = WithSpotShare(jobs, 1.0, /*spot_only=*/false, spot.scenario.spot_job_share);
      runs.push_back(std::move(spot));
    }
  }
  for (Run& r : runs) {
    for (const model::NodeSpec& node : r.scenario.cluster.nodes) {
      if (node.market == model::Market::kReserved) ++r.scenario.reserved_nodes;
    }
  }

  sim::SimOptions base;
  base.policy = o.verify.policy;
  base.reference_gpu = reference;
  base.checkpoint_interval = o.plan.checkpoint_interval;
  base.restart_overhead = o.plan.restart_overhead;
  base.seed = o.verify.seed;

  std::vector<Result<sim::SimResult>> results(runs.size(), Status::Internal("not run"));
  std::vector<int64_t> done(runs.size(), 0);
  int64_t total = 0;
  for (const Run& r : runs) total += static_cast<int64_t>(r.jobs.size());
  std::mutex mu;
  auto run_one = [&](size_t i) {
    sim::SimOptions so = base;
    if (o.progress) {
      so.progress = [&, i](int64_t d, int64_t) {
        std::lock_guard<std::mutex> lock(mu);
        done[i] = d;
        int64_t sum = 0;
        for (int64_t x : done) sum += x;
        o.progress(sum, total);
      };
    }
    results[i] = sim::Simulate(runs[i].jobs, runs[i].scenario.cluster, so, catalog);
  };
  size_t workers = o.verify.threads > 0 ? static_cast<size_t>(o.verify.threads)
                                        : std::max<unsigned>(1, std::thread::hardware_concurrency());
  workers = std::min(workers, runs.size());
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (size_t w = 0; w < workers; ++w) {
    pool.emplace_back([&]() {
      for (size_t i = next++; i < runs.size(); i = next++) run_one(i);
    });
  }
  for (std::thread& t : pool) t.join();

  double on_demand_cost = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!results[i].ok()) return results[i].status().WithContext("simulating " + runs[i].scenario.name);
    runs[i].scenario.summary = sim::Summarize(*results[i]);
    runs[i].scenario.summary.policy = runs[i].scenario.name;
    if (runs[i].scenario.name == kOnDemandScenario) on_demand_cost = runs[i].scenario.summary.cost_usd;
  }
  for (Run& r : runs) {
    if (on_demand_cost > 0) r.scenario.cost_ratio_to_on_demand = r.scenario.summary.cost_usd / on_demand_cost;
    report.verification.push_back(std::move(r.scenario));
  }
  return Status::Ok();
}

}  // namespace

sim::ClusterSpec PlannedCluster(const std::vector<ModelReport>& models, int gpus_per_node, const VerifyOptions& verify,
                                bool with_spot) {
  sim::ClusterSpec c;
  for (const ModelReport& m : models) {
    AddReservedNodes(c, m, m.reserved_nodes, gpus_per_node);
    if (m.prices.on_demand) AddOffer(c, m, model::Market::kOnDemand, gpus_per_node, verify);
    if (with_spot && m.prices.spot) AddOffer(c, m, model::Market::kSpot, gpus_per_node, verify);
  }
  SetPoolOptions(c, verify);
  return c;
}

Result<PlannerReport> RunPlanner(const std::vector<sim::TraceJob>& all_jobs, const cost::OfferTable& offers,
                                 const model::GpuCatalog& catalog, const PlannerOptions& o) {
  GF_RETURN_IF_ERROR(ValidateOptions(o));
  if (all_jobs.empty()) return Status::InvalidArgument("the history has no jobs");

  // Names: everything canonical from here on.
  auto canonical = [&](const std::string& name, const std::string& what) -> Result<std::string> {
    const model::GpuModel* g = catalog.Find(name);
    if (g == nullptr) {
      std::vector<std::string> known;
      for (const model::GpuModel& m : catalog.models()) known.push_back(m.name);
      return Status::InvalidArgument(what + ": unknown GPU model '" + name + "' (known: " + Join(known, ", ") + ")");
    }
    return g->name;
  };
  std::string default_model;
  if (!o.default_gpu_model.empty()) {
    GF_ASSIGN_OR_RETURN(default_model, canonical(o.default_gpu_model, "default GPU"));
  }
  std::vector<std::string> allowed;
  for (const std::string& g : o.gpu_models) {
    GF_ASSIGN_OR_RETURN(std::string name, canonical(g, "GPU models"));
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) allowed.push_back(name);
  }

  // Jobs: each with its model named, those of models not planned for left out.
  PlannerReport report;
  report.jobs = static_cast<int64_t>(all_jobs.size());
  report.gpus_per_node = o.gpus_per_node;
  std::vector<sim::TraceJob> jobs;
  jobs.reserve(all_jobs.size());
  std::map<std::string, int> max_job_gpus;
  for (const sim::TraceJob& j : all_jobs) {
    if ((o.from && j.spec.submit < *o.from) || (o.to && j.spec.submit >= *o.to)) {
      ++report.jobs_outside_window;
      continue;
    }
    std::string first;
    if (!j.spec.gpu_models.empty()) {
      const model::GpuModel* g = catalog.Find(j.spec.gpu_models.front());
      first = g ? g->name : j.spec.gpu_models.front();
    } else if (!default_model.empty()) {
      first = default_model;
    } else {
      return Status::InvalidArgument("job " + j.id +
                                     " names no GPU model: give a default GPU model for such jobs");
    }
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), first) == allowed.end()) {
      ++report.jobs_left_out;
      continue;
    }
    sim::TraceJob copy = j;
    copy.spec.gpu_models = {first};  // planned per model: the replay keeps each job on it
    int gpus = static_cast<int>(CeilDiv(copy.spec.total_gpu_milli(), model::kMilliGpuPerGpu));
    max_job_gpus[first] = std::max(max_job_gpus[first], gpus);
    jobs.push_back(std::move(copy));
  }
  if (jobs.empty() && report.jobs_outside_window > 0 && report.jobs_left_out == 0) {
    return Status::InvalidArgument("no job of the history was submitted in the window asked for (" +
                                   (o.from ? FormatIso8601(*o.from) : std::string("start")) + " to " +
                                   (o.to ? FormatIso8601(*o.to) : std::string("end")) + ")");
  }
  if (jobs.empty()) {
    return Status::InvalidArgument("no job of the history asks for " + Join(allowed, " or ") +
                                   " (" + std::to_string(report.jobs_left_out) + " jobs of other models)");
  }
  std::string reference = o.reference_gpu_model;
  if (!reference.empty()) {
    GF_ASSIGN_OR_RETURN(reference, canonical(reference, "reference GPU"));
  } else {
    reference = !default_model.empty() ? default_model : jobs.front().spec.gpu_models.front();
  }

  DemandOptions dopts;
  dopts.default_gpu_model = default_model;
  dopts.catalog = &catalog;
  dopts.reference_gpu_model = reference;
  dopts.start = o.from;
  dopts.end = o.to;
  GF_ASSIGN_OR_RETURN(DemandSeries demand, BuildDemand(jobs, dopts));
  report.history_start = demand.start;
  report.history_hours = demand.hours;
  if (demand.hours < kHoursPerWeek) {
    return Status::InvalidArgument("the history spans " + std::to_string(demand.hours) +
                                   " hours; the forecast needs at least one week (168 hours) to see every hour of the week");
  }
  GF_ASSIGN_OR_RETURN(Forecast forecast, ForecastDemand(demand, o.horizon_hours, o.forecast));
  report.forecast_start = forecast.start;
  report.horizon_hours = forecast.hours;

  // Prices and demand per model, in a stable order (the allowed list, else by name).
  std::vector<std::string> order = allowed;
  for (const auto& [name, series] : demand.gpu_hours) {
    if (std::find(order.begin(), order.end(), name) == order.end()) order.push_back(name);
  }
  const cost::OfferTable priced = FilterOffers(offers, o);
  for (const std::string& name : order) {
    auto series = demand.gpu_hours.find(name);
    if (series == demand.gpu_hours.end()) continue;  // allowed, but the history never asks for it
    ModelReport m;
    m.gpu_model = name;
    Result<GpuPrices> prices = PricesFromCatalog(priced, name, o.term, o.ratios);
    if (!prices.ok()) {
      if (prices.status().code() == StatusCode::kNotFound) {
        return Status::NotFound("the catalog has no on-demand offer of " + name + " " +
                                Where(o) +
                                " (try another --region or --gpus-per-node; `gpufleet offers --gpu " + name +
                                "` lists them)");
      }
      return prices.status();
    }
    m.prices = *prices;
    if (o.verify.single_gpu_nodes && o.gpus_per_node > 1) {
      PlannerOptions single = o;
      single.gpus_per_node = 1;
      Result<GpuPrices> small = PricesFromCatalog(FilterOffers(offers, single), name, o.term, o.ratios);
      if (small.ok()) m.single_gpu_prices = *small;
    }
    const ModelForecast& f = forecast.models.at(name);
    m.backtest = f.backtest;
    m.backtest_train_hours = f.train_hours;
    m.backtest_test_hours = f.test_hours;
    for (double v : series->second) {
      m.history_gpu_hours += v;
      m.peak_gpu_hours_per_hour = std::max(m.peak_gpu_hours_per_hour, v);
    }
    m.max_job_gpus = max_job_gpus[name];
    m.planned_demand = o.basis == PlanBasis::kForecastUpper ? f.upper : f.mean;

    report.models.push_back(std::move(m));
  }

  // The optimiser's spot row bounds spot by a share of the work queued in an hour (backlog
  // included), so a plan that lets everything wait one hour could run it all on spot while
  // meeting a one-hour SLO. The replay lets only a fixed share of the jobs use spot; the
  // optimiser is given the same split: per model, the spot-tolerant share of the demand (spot
  // allowed for all of it) and the rest (no spot), each with its own reservation.
  const double share = o.plan.spot_max_share;
  PlanOptions popts = o.plan;
  popts.spot_max_share = 1.0;
  std::vector<ModelInput> inputs;
  std::vector<std::pair<size_t, size_t>> parts;  // per model: its inputs [first, last)
  for (const ModelReport& m : report.models) {
    const size_t first = inputs.size();
    auto add = [&](const std::string& label, double weight, bool spot) {
      ModelInput in;
      in.gpu_model = m.gpu_model + label;
      for (double v : m.planned_demand) in.demand.push_back(v * weight);
      in.prices = m.prices;
      if (!spot) in.prices.spot.reset();
      in.reserve_multiple = o.gpus_per_node;
      inputs.push_back(std::move(in));
    };
    if (!m.prices.spot || share <= 0) {
      add("", 1.0, false);
    } else if (share >= 1) {
      add("", 1.0, true);
    } else {
      add(" (no spot)", 1.0 - share, false);
      add(" (spot-tolerant)", share, true);
    }
    parts.emplace_back(first, inputs.size());
  }
  auto merge = [&](const Plan& split) {
    Plan p = split;
    p.models.clear();
    for (size_t i = 0; i < report.models.size(); ++i) {
      ModelPlan sum;
      sum.gpu_model = report.models[i].gpu_model;
      const size_t hours = static_cast<size_t>(split.hours);
      sum.reserved_used.assign(hours, 0);
      sum.on_demand.assign(hours, 0);
      sum.spot.assign(hours, 0);
      sum.backlog.assign(hours, 0);
      double used = 0;
      for (size_t k = parts[i].first; k < parts[i].second; ++k) {
        const ModelPlan& part = split.models[k];
        sum.reserved_gpus += part.reserved_gpus;
        for (size_t h = 0; h < hours; ++h) {
          sum.reserved_used[h] += part.reserved_used[h];
          sum.on_demand[h] += part.on_demand[h];
          sum.spot[h] += part.spot[h];
          sum.backlog[h] += part.backlog[h];
          used += part.reserved_used[h];
        }
        sum.late_gpu_hours += part.late_gpu_hours;
        sum.spot_rework = std::max(sum.spot_rework, part.spot_rework);
        sum.reserved_cost += part.reserved_cost;
        sum.on_demand_cost += part.on_demand_cost;
        sum.spot_cost += part.spot_cost;
      }
      if (sum.reserved_gpus > 0) {
        sum.reserved_utilisation = used / static_cast<double>(sum.reserved_gpus * split.hours);
      }
      p.models.push_back(std::move(sum));
    }
    return p;
  };

  GF_ASSIGN_OR_RETURN(Plan split, SolvePlan(inputs, popts));
  report.plan = merge(split);
  for (size_t i = 0; i < report.models.size(); ++i) {
    report.models[i].plan = report.plan.models[i];
    report.models[i].reserved_nodes = report.plan.models[i].reserved_gpus / o.gpus_per_node;
  }
  if (!o.frontier_waits.empty()) {
    for (FrontierPoint& point : SolveFrontier(inputs, popts, o.frontier_waits)) {
      if (point.plan.ok()) point.plan = merge(*point.plan);
      report.frontier.push_back(std::move(point));
    }
  }

  if (o.verify.enabled) GF_RETURN_IF_ERROR(Verify(jobs, catalog, reference, o, report));
  return report;
}

Result<std::vector<std::pair<std::string, std::string>>> RenderPlannerCharts(const PlannerReport& r) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const ModelReport& m : r.models) {
    LineChart c;
    c.title = m.gpu_model + ": planned demand and reserved capacity, " + std::to_string(r.horizon_hours) +
              " h from " + FormatIso8601(r.forecast_start);
    c.x_label = "hours into the planning window";
    c.y_label = "GPUs (GPU-hours per hour)";
    const size_t h = m.planned_demand.size();
    for (size_t i = 0; i < h; ++i) c.x.push_back(static_cast<double>(i));
    c.series.push_back({"planned demand", m.planned_demand, SeriesStyle::kArea});
    std::vector<double> reserved(h, static_cast<double>(m.plan.reserved_gpus));
    c.series.push_back({"reserved GPUs", reserved, SeriesStyle::kStep});
    std::vector<double> served(h);
    for (size_t i = 0; i < h && i < m.plan.reserved_used.size(); ++i) {
      served[i] = m.plan.reserved_used[i] + m.plan.on_demand[i] + m.plan.spot[i];
    }
    c.series.push_back({"reserved + on-demand + spot used", served, SeriesStyle::kStep});
    GF_ASSIGN_OR_RETURN(std::string svg, RenderLineChart(c));
    out.emplace_back("demand-" + m.gpu_model + ".svg", std::move(svg));
  }

  BarChart bars;
  bars.y_label = "USD";
  const std::vector<std::string> markets = {"reserved", "on-demand", "spot"};
  std::vector<ChartSeries> stacks;
  for (const std::string& market : markets) stacks.push_back({market, {}, SeriesStyle::kArea});
  if (!r.verification.empty()) {
    bars.title = "Simulated cost of the history by market: plan vs baselines";
    for (const Scenario& s : r.verification) {
      bars.categories.push_back(s.name);
      for (size_t k = 0; k < markets.size(); ++k) {
        auto it = s.summary.cost_by_market_usd.find(markets[k]);
        stacks[k].values.push_back(it == s.summary.cost_by_market_usd.end() ? 0.0 : it->second);
      }
    }
  } else {
    bars.title = "Planned cost by market over the planning window";
    bars.categories.push_back(kPlanScenario);
    double res = 0, od = 0, sp = 0;
    for (const ModelPlan& m : r.plan.models) {
      res += Usd(m.reserved_cost);
      od += Usd(m.on_demand_cost);
      sp += Usd(m.spot_cost);
    }
    stacks[0].values.push_back(res);
    stacks[1].values.push_back(od);
    stacks[2].values.push_back(sp);
  }
  bars.stacks = std::move(stacks);
  GF_ASSIGN_OR_RETURN(std::string bar_svg, RenderStackedBarChart(bars));
  out.emplace_back("cost-by-market.svg", std::move(bar_svg));

  LineChart f;
  f.title = "Cost against the SLO wait (" + std::to_string(r.horizon_hours) + " h window)";
  f.x_label = "SLO wait (hours)";
  f.y_label = "USD";
  ChartSeries milp{"plan (MILP)", {}, SeriesStyle::kLine};
  ChartSeries bound{"LP lower bound", {}, SeriesStyle::kLine};
  for (const FrontierPoint& p : r.frontier) {
    if (!p.plan.ok()) continue;
    f.x.push_back(p.slo_wait.hours_f());
    milp.values.push_back(Usd(p.plan->total_cost));
    bound.values.push_back(Usd(p.plan->lp_bound));
  }
  if (f.x.size() >= 2) {
    f.series = {milp, bound};
    GF_ASSIGN_OR_RETURN(std::string svg, RenderLineChart(f));
    out.emplace_back("cost-vs-slo.svg", std::move(svg));
  }
  return out;
}

}  // namespace gpufleet::plan
