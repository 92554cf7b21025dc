#include "plan/planner.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include "common/strings.h"
#include "cost/offer_names.h"
#include "plan/svg.h"
#include "sim/simulator.h"

namespace gpufleet::plan {
namespace {

constexpr const char* kPlanScenario = "plan";
constexpr const char* kOnDemandScenario = "all on-demand";
constexpr const char* kPeakScenario = "all reserved (peak)";
constexpr const char* kSpotScenario = "all spot (on-demand fallback)";
constexpr const char* kNoSubstitutionScenario = "plan without substitution";
constexpr const char* kZone = "plan-zone";
constexpr int64_t kCpuMilliPerGpu = kPlannedCpuMilliPerGpu;
constexpr int64_t kMemMibPerGpu = kPlannedMemMibPerGpu;

std::string Cpus(int64_t milli) {
  char out[32];
  std::snprintf(out, sizeof out, milli % 1000 == 0 ? "%.0f" : "%.1f", static_cast<double>(milli) / 1000);
  return out;
}

double Usd(cost::MicroUsd v) { return static_cast<double>(v) / static_cast<double>(cost::kMicroUsdPerUsd); }

// A job's spot tolerance must not change from run to run or with the trace's order. The basis is
// one digit short of FNV's standard one, as it always was here: it decides which jobs the
// documented plans put on spot.
uint64_t HashId(const std::string& s) { return Fnv1a64(s, 1469598103934665603ull); }

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
  if (o.plan.checkpoint_interval <= Duration::Zero()) {
    // The optimiser charges half an interval of rework per interruption, so zero would price spot
    // as if jobs checkpointed continuously, where a job file's missing interval means never.
    return Status::InvalidArgument(
        "checkpoint interval must be positive; for jobs that never checkpoint, give their typical run time "
        "(an interruption loses half of it on average) or plan them off spot");
  }
  if (o.verify.boot_delay < Duration::Zero() || o.verify.idle_duration <= Duration::Zero()) {
    return Status::InvalidArgument("boot delay must be >= 0 and idle duration > 0");
  }
  return Status::Ok();
}

// The optimiser's input for one spot share: per model, the spot-tolerant share of the demand
// (spot allowed for all of it) and the rest (no spot), each with its own reservation; `parts`
// holds each model's inputs [first, last).
//
// Why split: the optimiser's spot row bounds spot by a share of the work queued in an hour
// (backlog included), so a plan that lets everything wait one hour could run it all on spot while
// meeting a one-hour SLO. The replay lets only a fixed share of the jobs use spot; the optimiser
// is given the same split.
struct SplitInputs {
  std::vector<ModelInput> inputs;
  std::vector<std::pair<size_t, size_t>> parts;
  // Substitution between the parts: every part of FROM to every part of TO (a part without spot
  // takes no spot elsewhere either: the optimiser gives it none).
  std::vector<Substitution> substitutions;
};

SplitInputs SplitBySpotShare(const std::vector<ModelReport>& models, double share, int gpus_per_node) {
  SplitInputs s;
  for (const ModelReport& m : models) {
    const size_t first = s.inputs.size();
    auto add = [&](const std::string& label, double weight, bool spot) {
      ModelInput in;
      in.gpu_model = m.gpu_model + label;
      for (double v : m.planned_demand) in.demand.push_back(v * weight);
      in.prices = m.prices;
      if (!spot) in.prices.spot.reset();
      in.reserve_multiple = gpus_per_node;
      s.inputs.push_back(std::move(in));
    };
    // The share is of the work that may use spot; the rest of the demand, in the history's
    // proportion, never does.
    const double pinned =
        m.history_gpu_hours > 0 ? std::clamp(m.no_spot_gpu_hours / m.history_gpu_hours, 0.0, 1.0) : 0.0;
    const double tolerant = share * (1.0 - pinned);
    if (!m.prices.spot || share <= 0 || pinned >= 1) {
      add("", 1.0, false);
    } else if (share >= 1 && pinned <= 0) {
      add("", 1.0, true);
    } else {
      add(" (no spot)", 1.0 - tolerant, false);
      add(" (spot-tolerant)", tolerant, true);
    }
    s.parts.emplace_back(first, s.inputs.size());
  }
  for (size_t to = 0; to < models.size(); ++to) {
    for (const auto& [from_name, ratio] : models[to].substitutes_for) {
      size_t from = 0;
      while (from < models.size() && models[from].gpu_model != from_name) ++from;
      if (from == models.size()) continue;
      for (size_t p = s.parts[from].first; p < s.parts[from].second; ++p) {
        for (size_t q = s.parts[to].first; q < s.parts[to].second; ++q) {
          s.substitutions.push_back({s.inputs[p].gpu_model, s.inputs[q].gpu_model, ratio});
        }
      }
    }
  }
  return s;
}

// The plan of a split, summed back per model.
Plan MergeParts(const Plan& split, const SplitInputs& s, const std::vector<ModelReport>& models) {
  Plan p = split;
  p.models.clear();
  for (size_t i = 0; i < models.size(); ++i) {
    ModelPlan sum;
    sum.gpu_model = models[i].gpu_model;
    const size_t hours = static_cast<size_t>(split.hours);
    sum.reserved_used.assign(hours, 0);
    sum.on_demand.assign(hours, 0);
    sum.spot.assign(hours, 0);
    sum.backlog.assign(hours, 0);
    double used = 0;
    for (size_t k = s.parts[i].first; k < s.parts[i].second; ++k) {
      const ModelPlan& part = split.models[k];
      sum.reserved_gpus += part.reserved_gpus;
      sum.foreign_gpu_hours += part.foreign_gpu_hours;
      for (const auto& [part_name, gpu_hours] : part.moved_to) {
        std::string to = part_name;  // the model whose part it is
        for (size_t j = 0; j < models.size(); ++j) {
          for (size_t q = s.parts[j].first; q < s.parts[j].second; ++q) {
            if (s.inputs[q].gpu_model == part_name) to = models[j].gpu_model;
          }
        }
        auto it = std::find_if(sum.moved_to.begin(), sum.moved_to.end(), [&](const auto& e) { return e.first == to; });
        if (it == sum.moved_to.end()) {
          sum.moved_to.emplace_back(to, gpu_hours);
        } else {
          it->second += gpu_hours;
        }
      }
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
}

// 0, kSpotShareStep, ... below `cap`, and `cap`.
std::vector<double> SpotShareGrid(double cap) {
  std::vector<double> out;
  for (int i = 0;; ++i) {
    const double share = i * kSpotShareStep;
    if (share >= cap - 1e-9) break;
    out.push_back(share);
  }
  out.push_back(std::clamp(cap, 0.0, 1.0));
  return out;
}

// Cheaper by more than rounding: a cent, or a millionth of the cost.
bool Cheaper(cost::MicroUsd a, cost::MicroUsd b) {
  const cost::MicroUsd margin = std::max<cost::MicroUsd>(cost::kMicroUsdPerUsd / 100, b / 1'000'000);
  return a < b - margin;
}

std::string SharePct(double share) { return std::to_string(static_cast<int>(std::lround(share * 100))) + " %"; }

// A plan to replay: reserved nodes per model (in report order) and the share of jobs on spot;
// `delta`: the reserved nodes added to every model of the optimiser's plan (a neighbour).
struct Candidate {
  std::string name;
  std::vector<int64_t> reserved_nodes;
  double share = 0;
  int delta = 0;
};

// The optimiser's plan with `delta` reserved nodes more (fewer) of every model; nullopt when no
// model moves (all at 0 already).
std::optional<Candidate> ReservedNeighbour(const std::vector<int64_t>& nodes, double share, int delta) {
  Candidate c{std::string(kPlanScenario) + ", reserved " + (delta > 0 ? "+" : "") + std::to_string(delta), nodes,
              share, delta};
  bool moved = false;
  for (int64_t& k : c.reserved_nodes) {
    const int64_t next = std::max<int64_t>(0, k + delta);
    moved = moved || next != k;
    k = next;
  }
  if (!moved) return std::nullopt;
  return c;
}

// Whether reserved nodes can run any job at this spot share: at 100 % every job that may use
// spot runs on spot alone (`spot_only`: without stock-outs; with them, spot jobs fall back), so
// only the work kept off spot (no-spot teams, marked jobs, models without a spot price) can.
bool ReservedNodesUseful(const PlannerReport& r, double share, bool spot_only) {
  if (share < 1 - 1e-9 || !spot_only) return true;
  return std::any_of(r.models.begin(), r.models.end(), [](const ModelReport& m) {
    return m.no_spot_gpu_hours > 0 || (!m.prices.spot && m.history_gpu_hours > 0);
  });
}

std::vector<int64_t> NodesOf(const Plan& p, int gpus_per_node) {
  std::vector<int64_t> out;
  for (const ModelPlan& m : p.models) out.push_back(m.reserved_gpus / gpus_per_node);
  return out;
}

// The optimiser's plan, then its neighbours: reserved -2..+2 nodes of every model at its share,
// and the plans of the adjacent spot shares. Where reserved nodes could run no job (spot share
// 100 %, nothing kept off spot), the plans two shares away replace the reserved neighbours.
// Duplicates (a model at 0 cannot go lower) are dropped.
std::vector<Candidate> Candidates(const PlannerReport& r, size_t best, bool neighbours, bool spot_only) {
  const int n = r.gpus_per_node;
  std::vector<Candidate> out;
  auto add = [&](Candidate c) {
    for (const Candidate& x : out) {
      if (x.reserved_nodes == c.reserved_nodes && std::fabs(x.share - c.share) < 1e-9) return;
    }
    out.push_back(std::move(c));
  };
  const SpotShareOption& chosen = r.spot_shares[best];
  const std::vector<int64_t> nodes = NodesOf(*chosen.plan, n);
  add({kPlanScenario, nodes, chosen.share});
  if (!neighbours) return out;
  const bool reserved = ReservedNodesUseful(r, chosen.share, spot_only);
  if (reserved) {
    for (int delta : {-1, 1, -2, 2}) {
      if (std::optional<Candidate> c = ReservedNeighbour(nodes, chosen.share, delta)) add(std::move(*c));
    }
  }
  std::vector<size_t> shares = {best - 1, best + 1};
  if (!reserved) shares = {best - 1, best + 1, best - 2, best + 2};
  for (size_t i : shares) {
    if (i >= r.spot_shares.size() || !r.spot_shares[i].plan.ok()) continue;  // best - 1 wraps past 0
    const SpotShareOption& s = r.spot_shares[i];
    add({std::string(kPlanScenario) + " at spot share " + SharePct(s.share), NodesOf(*s.plan, n), s.share});
  }
  return out;
}

// The optimiser's options for split inputs: the split says which work may use spot, and where
// work may move.
PlanOptions SplitPlanOptions(const PlannerOptions& o, const SplitInputs& split) {
  PlanOptions p = o.plan;
  p.spot_max_share = 1.0;
  p.substitutions = split.substitutions;
  return p;
}

// The spot share and the reservation, jointly: one MILP per share of the grid, the cheapest wins
// (ties, within the solver's rounding: the smaller share, the less exposed to spot). A share the
// SLO cannot be met at is kept as a failed option; other solver errors stop the plan.
struct Optimised {
  std::vector<SpotShareOption> shares;
  std::vector<SplitInputs> splits;  // per share
  std::optional<size_t> best;       // none: no share meets the SLO
};

Result<Optimised> Optimise(const std::vector<ModelReport>& models, const PlannerOptions& o) {
  const bool any_spot =
      std::any_of(models.begin(), models.end(), [](const ModelReport& m) { return m.prices.spot.has_value(); });
  Optimised out;
  for (double share : SpotShareGrid(any_spot ? o.plan.spot_max_share : 0)) {
    SplitInputs split = SplitBySpotShare(models, share, o.gpus_per_node);
    Result<Plan> solved = SolvePlan(split.inputs, SplitPlanOptions(o, split));
    if (!solved.ok() && solved.status().code() != StatusCode::kFailedPrecondition) return solved.status();
    if (solved.ok()) {
      solved = MergeParts(*solved, split, models);
      if (!out.best || Cheaper(solved->total_cost, out.shares[*out.best].plan->total_cost)) out.best = out.shares.size();
    }
    out.shares.push_back(SpotShareOption{share, std::move(solved)});
    out.splits.push_back(std::move(split));
  }
  return out;
}

bool SamePrices(const std::vector<GpuPrices>& a, const std::vector<GpuPrices>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].reserved != b[i].reserved || a[i].on_demand != b[i].on_demand || a[i].spot != b[i].spot ||
        a[i].spot_interruptions_per_hour != b[i].spot_interruptions_per_hour ||
        a[i].spot_unavailable_fraction != b[i].spot_unavailable_fraction) {
      return false;
    }
  }
  return true;
}

sim::ClusterSpec CandidateCluster(const std::vector<ModelReport>& models, const std::vector<int64_t>& reserved_nodes,
                                  int gpus_per_node, const VerifyOptions& verify, bool with_spot) {
  sim::ClusterSpec c;
  for (size_t i = 0; i < models.size(); ++i) {
    const ModelReport& m = models[i];
    AddReservedNodes(c, m, reserved_nodes[i], gpus_per_node);
    if (m.prices.on_demand) AddOffer(c, m, model::Market::kOnDemand, gpus_per_node, verify);
    if (with_spot && m.prices.spot) AddOffer(c, m, model::Market::kSpot, gpus_per_node, verify);
  }
  SetPoolOptions(c, verify);
  return c;
}

// One verification run's inputs: the cluster and the jobs as that cluster sees them (shared
// between runs that mark the same jobs for spot: a long history is large).
struct Run {
  Scenario scenario;
  const std::vector<sim::TraceJob>* jobs = nullptr;
};

// Marks the jobs that may use spot (a share, picked by a hash of the id) and the rest on-demand.
// With spot_only the tolerant ones run on spot alone, as the plan's optimiser assumes (its spot
// share is served by spot, the rest by reserved and on-demand); otherwise they may run anywhere.
// `spot_models` (the candidates'): only jobs of these models may be tolerant, as the optimiser
// gives a model without a spot price no spot; null (the baselines): any job.
std::vector<sim::TraceJob> WithSpotShare(const std::vector<sim::TraceJob>& jobs, double share, bool spot_only,
                                         const std::set<std::string>* spot_models, double& actual) {
  std::vector<sim::TraceJob> out = jobs;
  int64_t tolerant = 0;
  for (sim::TraceJob& j : out) {
    if (j.spec.market == model::MarketPreference::kOnDemand) continue;
    const bool model_has_spot = spot_models == nullptr || spot_models->count(j.spec.gpu_models.front()) > 0;
    if (model_has_spot && MaySpot(j, share)) {
      ++tolerant;
      if (spot_only) j.spec.market = model::MarketPreference::kSpot;
    } else {
      j.spec.market = model::MarketPreference::kOnDemand;
    }
  }
  actual = out.empty() ? 0 : static_cast<double>(tolerant) / static_cast<double>(out.size());
  return out;
}

// `pinned_jobs`: with substitution, the jobs kept on their own models (for the plan without
// substitution); null without.
Status Verify(const std::vector<sim::TraceJob>& jobs, const std::vector<sim::TraceJob>* pinned_jobs,
              const model::GpuCatalog& catalog, const std::string& reference, const PlannerOptions& o, size_t best,
              PlannerReport& report) {
  const int n = o.gpus_per_node;
  const bool any_spot = std::any_of(report.models.begin(), report.models.end(),
                                    [](const ModelReport& m) { return m.prices.spot.has_value(); });
  std::deque<std::vector<sim::TraceJob>> job_sets;  // stable addresses
  std::set<std::string> spot_models;  // models with a spot price at the chosen place
  for (const ModelReport& m : report.models) {
    if (m.prices.spot) spot_models.insert(m.gpu_model);
  }
  // Job sets by (share, spot only, pinned, a candidate's): a candidate keeps jobs of models without
  // spot off it, a baseline does not.
  std::map<std::tuple<int64_t, bool, bool, bool>, std::pair<const std::vector<sim::TraceJob>*, double>> marked;
  auto jobs_for = [&](double share, bool spot_only, double& actual, bool pinned = false, bool candidate = true) {
    const std::tuple<int64_t, bool, bool, bool> key{std::llround(share * 1e6), spot_only, pinned, candidate};
    auto it = marked.find(key);
    if (it == marked.end()) {
      double a = 0;
      job_sets.push_back(
          WithSpotShare(pinned ? *pinned_jobs : jobs, share, spot_only, candidate ? &spot_models : nullptr, a));
      it = marked.emplace(key, std::make_pair(&job_sets.back(), a)).first;
    }
    actual = it->second.second;
    return it->second.first;
  };

  // The plan's spot-tolerant jobs run on spot alone, as the optimiser assumes; where spot runs out
  // of capacity (--spot-capacity), they fall back to on-demand after the autoscaler's wait, as the
  // optimiser then prices that share of them.
  const bool spot_only = o.verify.spot_capacity.empty();
  std::vector<Run> runs;
  // A candidate's replay: its reserved nodes, the offers, and its share of the jobs on spot.
  auto candidate_run = [&](const Candidate& c) {
    Run r;
    r.scenario.name = c.name;
    r.scenario.kind = ScenarioKind::kCandidate;
    r.scenario.spot_share = c.share;
    const bool spot = c.share > 0 && any_spot;
    r.scenario.cluster = CandidateCluster(report.models, c.reserved_nodes, n, o.verify, spot);
    r.jobs = jobs_for(spot ? c.share : 0, spot_only, r.scenario.spot_job_share);
    return r;
  };
  for (const Candidate& c : Candidates(report, best, o.verify.neighbours, spot_only)) runs.push_back(candidate_run(c));
  if (pinned_jobs != nullptr && report.plan_without_substitution) {
    Run r;
    r.scenario.name = kNoSubstitutionScenario;
    r.scenario.kind = ScenarioKind::kCandidate;
    r.scenario.spot_share = report.spot_share_without_substitution;
    const bool spot = r.scenario.spot_share > 0 && any_spot;
    r.scenario.cluster =
        CandidateCluster(report.models, NodesOf(*report.plan_without_substitution, n), n, o.verify, spot);
    r.jobs = jobs_for(spot ? r.scenario.spot_share : 0, spot_only, r.scenario.spot_job_share, true);
    runs.push_back(std::move(r));
  }
  if (o.verify.baselines) {
    Run od;
    od.scenario.name = kOnDemandScenario;
    od.scenario.kind = ScenarioKind::kBaseline;
    for (const ModelReport& m : report.models) AddOffer(od.scenario.cluster, m, model::Market::kOnDemand, n, o.verify);
    SetPoolOptions(od.scenario.cluster, o.verify);
    od.jobs = &jobs;
    runs.push_back(std::move(od));

    Run peak;
    peak.scenario.name = kPeakScenario;
    peak.scenario.kind = ScenarioKind::kBaseline;
    for (const ModelReport& m : report.models) {
      if (m.history_gpu_hours <= 0) continue;  // a substitution target: the baseline keeps work on its own model
      const int64_t gpus = std::max<int64_t>(static_cast<int64_t>(std::ceil(m.peak_gpu_hours_per_hour - 1e-9)),
                                             m.max_job_gpus);
      AddReservedNodes(peak.scenario.cluster, m, CeilDiv(std::max<int64_t>(gpus, 1), n), n);
    }
    peak.jobs = pinned_jobs != nullptr ? pinned_jobs : &jobs;
    runs.push_back(std::move(peak));

    if (any_spot) {
      Run spot;
      spot.scenario.name = kSpotScenario;
      spot.scenario.kind = ScenarioKind::kBaseline;
      spot.scenario.spot_share = 1.0;
      for (const ModelReport& m : report.models) {
        if (m.prices.spot) AddOffer(spot.scenario.cluster, m, model::Market::kSpot, n, o.verify);
        AddOffer(spot.scenario.cluster, m, model::Market::kOnDemand, n, o.verify);
      }
      SetPoolOptions(spot.scenario.cluster, o.verify);
      spot.jobs = jobs_for(1.0, /*spot_only=*/false, spot.scenario.spot_job_share, /*pinned=*/false,
                           /*candidate=*/false);
      runs.push_back(std::move(spot));
    }
  }
  auto count_reserved = [](Run& r) {
    for (const model::NodeSpec& node : r.scenario.cluster.nodes) {
      if (node.market == model::Market::kReserved) ++r.scenario.reserved_nodes;
    }
  };
  for (Run& r : runs) count_reserved(r);

  sim::SimOptions base;
  base.policy = o.verify.policy;
  base.reference_gpu = reference;
  base.checkpoint_interval = o.plan.checkpoint_interval;
  base.restart_overhead = o.plan.restart_overhead;
  base.seed = o.verify.seed;
  // The reservation is paid whole over the history's window, as the optimiser pays it over its
  // own; after it, the reserved GPUs the draining jobs hold (sim::SimOptions). The window ends at
  // --to, else with the hour of the last submission (the demand's window runs on to the last
  // job's end, which is the replay's end).
  if (o.to) {
    base.reserved_billing_end = *o.to;
  } else {
    Time last = report.history_start;
    for (const sim::TraceJob& j : jobs) last = std::max(last, j.spec.submit);
    base.reserved_billing_end = FloorToHour(last) + Duration::Hours(1);
  }

  // Each worker keeps only the summary and the SLO wait of its run: whole results of a dozen
  // replays of a long history would not fit in memory together. Runs go in rounds (the line
  // search below adds some); progress counts every round's jobs.
  std::mutex mu;
  int64_t done_before = 0, total = 0;
  auto execute = [&](std::vector<Run>& batch) -> Status {
    std::vector<Status> errors(batch.size(), Status::Ok());
    std::vector<int64_t> done(batch.size(), 0);
    for (const Run& r : batch) total += static_cast<int64_t>(r.jobs->size());
    auto run_one = [&](size_t i) {
      sim::SimOptions so = base;
      if (o.progress) {
        so.progress = [&, i](int64_t d, int64_t) {
          std::lock_guard<std::mutex> lock(mu);
          done[i] = d;
          int64_t sum = done_before;
          for (int64_t x : done) sum += x;
          o.progress(sum, total);
        };
      }
      Result<sim::SimResult> result = sim::Simulate(*batch[i].jobs, batch[i].scenario.cluster, so, catalog);
      if (!result.ok()) {
        errors[i] = result.status();
        return;
      }
      Scenario& sc = batch[i].scenario;
      sc.summary = sim::Summarize(*result);
      sc.summary.policy = sc.name;
      sc.slo_wait_s = ReplayedWait(*result, o.plan.slo_quantile);
      sc.meets_slo = sc.summary.never_ran.empty() && sc.slo_wait_s <= o.plan.slo_wait.seconds_f();
    };
    size_t workers = o.verify.threads > 0 ? static_cast<size_t>(o.verify.threads)
                                          : std::max<unsigned>(1, std::thread::hardware_concurrency());
    workers = std::min(workers, batch.size());
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    for (size_t w = 0; w < workers; ++w) {
      pool.emplace_back([&]() {
        for (size_t i = next++; i < batch.size(); i = next++) run_one(i);
      });
    }
    for (std::thread& t : pool) t.join();
    for (const Run& r : batch) done_before += static_cast<int64_t>(r.jobs->size());
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!errors[i].ok()) return errors[i].WithContext("simulating " + batch[i].scenario.name);
    }
    return Status::Ok();
  };
  GF_RETURN_IF_ERROR(execute(runs));

  const double cap = any_spot ? o.plan.spot_max_share : 0;
  auto within_caps = [&](const Scenario& sc) { return sc.spot_job_share == 0 || sc.spot_share <= cap + 1e-9; };
  // The cheapest replay that meets the SLO within the caps; a tie goes to the earlier one (the
  // plan first).
  auto cheapest = [&](const std::vector<Run>& all) {
    std::optional<size_t> rec;
    for (size_t i = 0; i < all.size(); ++i) {
      const Scenario& sc = all[i].scenario;
      if (!sc.meets_slo || !within_caps(sc)) continue;
      if (!rec || sc.summary.cost_usd < all[*rec].scenario.summary.cost_usd) rec = i;
    }
    return rec;
  };
  // Line search: while the cheapest replay is the plan moved by the largest reserved step tried,
  // go on in that direction, two steps a round (at most kLineSearchRounds rounds), so that a
  // recommendation never sits at the edge of what was replayed.
  constexpr int kLineSearchRounds = 6;
  const std::vector<int64_t> planned = NodesOf(*report.spot_shares[best].plan, n);
  const double planned_share = report.spot_shares[best].share;
  std::map<std::string, int> deltas;  // candidate name -> its delta
  std::set<std::vector<int64_t>> tried;  // reserved nodes per model replayed at the planned share
  for (const Candidate& c : Candidates(report, best, o.verify.neighbours, spot_only)) {
    deltas[c.name] = c.delta;
    if (std::fabs(c.share - planned_share) < 1e-9) tried.insert(c.reserved_nodes);
  }
  for (int round = 0; o.verify.neighbours && round < kLineSearchRounds; ++round) {
    const std::optional<size_t> rec = cheapest(runs);
    if (!rec) break;
    auto d = deltas.find(runs[*rec].scenario.name);
    if (d == deltas.end() || d->second == 0) break;
    int edge = 0;
    for (const auto& [name, delta] : deltas) {
      if ((delta > 0) == (d->second > 0)) edge = d->second > 0 ? std::max(edge, delta) : std::min(edge, delta);
    }
    if (d->second != edge) break;
    const int step = edge > 0 ? 1 : -1;
    std::vector<Run> more;
    for (int delta : {edge + step, edge + 2 * step}) {
      std::optional<Candidate> c = ReservedNeighbour(planned, planned_share, delta);
      if (!c || !tried.insert(c->reserved_nodes).second) continue;  // every model already at 0
      Run r = candidate_run(*c);
      count_reserved(r);
      deltas[c->name] = delta;
      more.push_back(std::move(r));
    }
    if (more.empty()) break;
    GF_RETURN_IF_ERROR(execute(more));
    // Keep the candidates together, before the baselines.
    size_t at = 0;
    while (at < runs.size() && runs[at].scenario.kind == ScenarioKind::kCandidate) ++at;
    runs.insert(runs.begin() + static_cast<std::ptrdiff_t>(at), std::make_move_iterator(more.begin()),
                std::make_move_iterator(more.end()));
  }

  double on_demand_cost = 0;
  for (Run& r : runs) {
    r.scenario.within_caps = within_caps(r.scenario);
    if (r.scenario.name == kOnDemandScenario) on_demand_cost = r.scenario.summary.cost_usd;
  }
  for (Run& r : runs) {
    if (on_demand_cost > 0) r.scenario.cost_ratio_to_on_demand = r.scenario.summary.cost_usd / on_demand_cost;
  }
  report.recommended = cheapest(runs);
  for (Run& r : runs) report.verification.push_back(std::move(r.scenario));
  return Status::Ok();
}

}  // namespace

sim::ClusterSpec PlannedCluster(const std::vector<ModelReport>& models, int gpus_per_node, const VerifyOptions& verify,
                                bool with_spot) {
  std::vector<int64_t> nodes;
  for (const ModelReport& m : models) nodes.push_back(m.reserved_nodes);
  return CandidateCluster(models, nodes, gpus_per_node, verify, with_spot);
}

double ReplayedWait(const sim::SimResult& result, double quantile) {
  std::vector<int64_t> waits;
  for (const sim::JobRecord& j : result.jobs) {
    if (j.first_start) waits.push_back(j.queued.millis());
  }
  if (waits.empty()) return 0;
  std::sort(waits.begin(), waits.end());
  const double rank = std::ceil(std::clamp(quantile, 0.0, 1.0) * static_cast<double>(waits.size()));
  const size_t i = static_cast<size_t>(std::max(1.0, rank)) - 1;
  return static_cast<double>(waits[std::min(i, waits.size() - 1)]) / 1000.0;
}

Result<PlannerReport> RunPlanner(const std::vector<sim::TraceJob>& all_jobs, const cost::OfferTable& offers,
                                 const model::GpuCatalog& catalog, const PlannerOptions& o) {
  GF_RETURN_IF_ERROR(ValidateOptions(o));
  if (all_jobs.empty()) return Status::InvalidArgument("the history has no jobs");
  // A cloud or region the catalog lacks is a typo: it would price nothing, and the error would
  // then blame the GPU model.
  for (const std::string& c : o.clouds) {
    if (Status s = cost::CheckCloud(offers, c); !s.ok()) return Status::InvalidArgument("--cloud: " + s.message());
  }
  for (const std::string& r : o.regions) {
    if (Status s = cost::CheckRegion(offers, r); !s.ok()) return Status::InvalidArgument("--region: " + s.message());
  }

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

  // Substitution pairs, canonical, each once.
  std::vector<std::pair<std::string, std::string>> substitutes;
  for (const auto& [from_name, to_name] : o.substitutes) {
    GF_ASSIGN_OR_RETURN(std::string from, canonical(from_name, "--substitute"));
    GF_ASSIGN_OR_RETURN(std::string to, canonical(to_name, "--substitute"));
    if (from == to) {
      return Status::InvalidArgument("--substitute " + from_name + ":" + to_name + ": both sides name " + from +
                                     "; give FROM:TO of two models");
    }
    if (std::find(substitutes.begin(), substitutes.end(), std::make_pair(from, to)) == substitutes.end()) {
      substitutes.emplace_back(from, to);
    }
  }

  // No-spot teams: each must be one of the history's, or the flag is mistyped.
  std::set<std::string> teams;
  for (const sim::TraceJob& j : all_jobs) {
    if (!j.spec.team.empty()) teams.insert(j.spec.team);
  }
  for (const std::string& t : o.no_spot_teams) {
    if (teams.count(t) > 0) continue;
    constexpr size_t kListed = 40;  // Philly has 15 teams; a trace of users may have thousands
    std::vector<std::string> present;
    for (const std::string& name : teams) {
      if (present.size() == kListed) break;
      present.push_back(name);
    }
    std::string listed = present.empty() ? "none: the history names no team" : Join(present, ", ");
    if (teams.size() > kListed) listed += " and " + std::to_string(teams.size() - kListed) + " more";
    return Status::InvalidArgument("--no-spot-teams: team '" + t + "' does not occur in the history (its teams: " +
                                   listed + ")");
  }
  const std::set<std::string> no_spot(o.no_spot_teams.begin(), o.no_spot_teams.end());

  // Jobs: each with its model named, those of models not planned for left out.
  PlannerReport report;
  report.no_spot_teams = o.no_spot_teams;
  // Jobs that may not use spot, for their share of the demand: the teams', the history's marked.
  std::vector<sim::TraceJob> team_jobs, marked_jobs;
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
    if (j.spec.cpu_milli > kCpuMilliPerGpu * o.gpus_per_node || j.spec.mem_mib > kMemMibPerGpu * o.gpus_per_node) {
      if (report.jobs_too_large++ == 0) {
        report.first_too_large = j.id + " (" + Cpus(j.spec.cpu_milli) + " vCPUs, " +
                                 std::to_string(j.spec.mem_mib / 1024) + " GiB per node)";
      }
      continue;
    }
    sim::TraceJob copy = j;
    copy.spec.gpu_models = {first};  // planned per model: the replay keeps each job on it
    if (no_spot.count(copy.spec.team) > 0) {
      // The replay's own way to keep a job off spot: reserved or on-demand nodes only.
      copy.spec.market = model::MarketPreference::kOnDemand;
      ++report.no_spot_team_jobs;
      team_jobs.push_back(copy);
    } else if (copy.spec.market == model::MarketPreference::kOnDemand) {
      ++report.marked_no_spot_jobs;
      marked_jobs.push_back(copy);
    }
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
                                   (demand.hours == 1 ? " hour" : " hours") + "; the forecast needs at least one week (168 hours) to see every hour of the week");
  }
  // The demand that may not use spot, over the same window.
  auto gpu_hours_of = [&](const std::vector<sim::TraceJob>& some) -> Result<std::map<std::string, double>> {
    std::map<std::string, double> out;
    if (some.empty()) return out;
    DemandOptions popts = dopts;
    popts.start = demand.start;
    popts.end = demand.start + Duration::Hours(demand.hours);
    GF_ASSIGN_OR_RETURN(DemandSeries d, BuildDemand(some, popts));
    for (const auto& [name, series] : d.gpu_hours) {
      for (double v : series) out[name] += v;
    }
    return out;
  };
  GF_ASSIGN_OR_RETURN(const auto team_gpu_hours, gpu_hours_of(team_jobs));
  GF_ASSIGN_OR_RETURN(const auto marked_gpu_hours, gpu_hours_of(marked_jobs));
  GF_ASSIGN_OR_RETURN(Forecast forecast, ForecastDemand(demand, o.horizon_hours, o.forecast));
  report.forecast_start = forecast.start;
  report.horizon_hours = forecast.hours;

  // Substitution: FROM must be work the plan has; TO is planned whether the history asks for it
  // or not (with --substitute any: every allowed model).
  for (const auto& [from, to] : substitutes) {
    if (demand.gpu_hours.count(from) == 0) {
      std::vector<std::string> have;
      for (const auto& [name, series] : demand.gpu_hours) have.push_back(name);
      return Status::InvalidArgument("--substitute " + from + ":" + to + ": no planned job of the history runs on " +
                                     from + " (its planned models: " + Join(have, ", ") + ")");
    }
  }
  auto planned_without_demand = [&](const std::string& name) {
    if (o.substitute_any) return true;
    return std::any_of(substitutes.begin(), substitutes.end(), [&](const auto& p) { return p.second == name; });
  };

  // Prices and demand per model, in a stable order (the allowed list, else by name; then the
  // substitution targets).
  std::vector<std::string> order = allowed;
  for (const auto& [name, series] : demand.gpu_hours) {
    if (std::find(order.begin(), order.end(), name) == order.end()) order.push_back(name);
  }
  for (const auto& [from, to] : substitutes) {
    if (std::find(order.begin(), order.end(), to) == order.end()) order.push_back(to);
  }
  const cost::OfferTable priced = FilterOffers(offers, o);
  for (const std::string& name : order) {
    auto series = demand.gpu_hours.find(name);
    const bool has_demand = series != demand.gpu_hours.end();
    if (!has_demand && !planned_without_demand(name)) continue;  // allowed, but the history never asks for it
    ModelReport m;
    m.gpu_model = name;
    Result<GpuPrices> prices = PricesFromCatalog(priced, name, o.term, o.ratios);
    if (!prices.ok() && !has_demand && prices.status().code() == StatusCode::kNotFound) {
      const bool named = std::any_of(substitutes.begin(), substitutes.end(), [&](const auto& p) { return p.second == name; });
      if (!named) continue;  // --substitute any: a listed model the catalog does not price here is not planned
      return Status::NotFound("--substitute: the catalog has no on-demand offer of " + name + " " + Where(o) +
                              " to plan it as a substitute (`gpufleet offers --gpu " + name + "` lists them)");
    }
    if (!prices.ok()) {
      if (prices.status().code() == StatusCode::kNotFound) {
        return Status::NotFound("the catalog has no on-demand offer of " + name + " " +
                                Where(o) +
                                " (try another --cloud, --region or --gpus-per-node; `gpufleet offers --gpu " + name +
                                "` lists them)");
      }
      return prices.status();
    }
    if (!has_demand) {  // a substitution target: no work of its own
      m.planned_demand.assign(static_cast<size_t>(forecast.hours), 0.0);
      report.models.push_back(std::move(m));
      continue;
    }
    const ModelForecast& f = forecast.models.at(name);
    m.backtest = f.backtest;
    m.backtest_train_hours = f.train_hours;
    m.backtest_test_hours = f.test_hours;
    m.backtest_folds = f.folds;
    m.forecast_method = f.method;
    m.forecast_candidates = f.candidates;
    for (double v : series->second) {
      m.history_gpu_hours += v;
      m.peak_gpu_hours_per_hour = std::max(m.peak_gpu_hours_per_hour, v);
    }
    m.max_job_gpus = max_job_gpus[name];
    if (auto t = team_gpu_hours.find(name); t != team_gpu_hours.end()) m.no_spot_team_gpu_hours = t->second;
    m.no_spot_gpu_hours = m.no_spot_team_gpu_hours;
    if (auto k = marked_gpu_hours.find(name); k != marked_gpu_hours.end()) m.no_spot_gpu_hours += k->second;
    m.no_spot_gpu_hours = std::min(m.no_spot_gpu_hours, m.history_gpu_hours);
    m.planned_demand = o.basis == PlanBasis::kForecastUpper ? f.upper : f.mean;

    report.models.push_back(std::move(m));
  }

  // Who may take whose work, at the replay's speeds.
  auto speed = [&](const std::string& m) { return catalog.RelativeSpeed(reference, m, model::Boundness::kBalanced); };
  std::map<std::string, std::vector<std::string>> runs_on;  // FROM -> the other models its jobs may use
  for (ModelReport& to : report.models) {
    for (const ModelReport& from : report.models) {
      if (from.gpu_model == to.gpu_model || from.history_gpu_hours <= 0) continue;
      bool allowed_move = std::find(substitutes.begin(), substitutes.end(),
                                    std::make_pair(from.gpu_model, to.gpu_model)) != substitutes.end();
      if (!allowed_move && o.substitute_any) {
        const model::GpuModel* f = catalog.Find(from.gpu_model);
        const model::GpuModel* t = catalog.Find(to.gpu_model);
        allowed_move = f != nullptr && t != nullptr && f->mem_mib > 0 && t->mem_mib >= f->mem_mib;
      }
      if (!allowed_move) continue;
      to.substitutes_for.emplace_back(from.gpu_model, speed(to.gpu_model) / speed(from.gpu_model));
      runs_on[from.gpu_model].push_back(to.gpu_model);
    }
  }
  // The replay's jobs: each may run on its own model and on those that may take its work.
  std::vector<sim::TraceJob> pinned_jobs;
  if (!runs_on.empty()) {
    pinned_jobs = jobs;
    for (sim::TraceJob& j : jobs) {
      auto it = runs_on.find(j.spec.gpu_models.front());
      if (it == runs_on.end()) continue;
      for (const std::string& to : it->second) j.spec.gpu_models.push_back(to);
    }
  }

  // Prices from one (cloud, region) per plan: every place that prices every model is planned, and
  // the one whose plan costs least is chosen (ties: the first by cloud and region name).
  std::vector<LocationOption> places;
  for (const PriceLocation& where : PriceLocations(priced)) {
    const cost::OfferTable here = OffersAt(priced, where);
    LocationOption place{where.cloud, where.region, {}, Status::Internal("not planned"), 0};
    bool all = true;
    for (const ModelReport& m : report.models) {
      Result<GpuPrices> p = PricesFromCatalog(here, m.gpu_model, o.term, o.ratios);
      if (!p.ok()) {
        if (p.status().code() != StatusCode::kNotFound) return p.status();
        all = false;
        break;
      }
      p->cloud = where.cloud;
      p->region = where.region;
      if (p->spot && !o.verify.spot_capacity.empty()) {
        // The optimiser prices the stock-outs the replay has: that share of spot work on on-demand.
        p->spot_unavailable_fraction =
            cost::SpotCapacityFor(o.verify.spot_capacity, o.gpus_per_node).unavailable_fraction;
      }
      place.prices.push_back(*p);
    }
    if (all) places.push_back(std::move(place));
  }
  if (places.empty()) {
    return Status::NotFound("no single cloud and region of the catalog prices every model planned " + Where(o) +
                            " (plan the models one at a time with --gpu)");
  }
  std::optional<size_t> chosen;
  for (size_t i = 0; i < places.size(); ++i) {
    LocationOption& place = places[i];
    std::optional<size_t> same;  // an earlier place with the same prices: the same plan
    for (size_t j = 0; j < i && !same; ++j) {
      if (SamePrices(places[j].prices, place.prices)) same = j;
    }
    if (same) {
      place.plan = places[*same].plan;
      place.spot_share = places[*same].spot_share;
    } else {
      std::vector<ModelReport> priced_models = report.models;
      for (size_t k = 0; k < priced_models.size(); ++k) priced_models[k].prices = place.prices[k];
      GF_ASSIGN_OR_RETURN(Optimised opt, Optimise(priced_models, o));
      if (opt.best) {
        place.plan = *opt.shares[*opt.best].plan;
        place.spot_share = opt.shares[*opt.best].share;
      } else {
        place.plan = opt.shares.back().plan.status();
      }
    }
    if (place.plan.ok() && (!chosen || Cheaper(place.plan->total_cost, places[*chosen].plan->total_cost))) chosen = i;
  }
  if (!chosen) return places.front().plan.status();
  const PriceLocation where{places[*chosen].cloud, places[*chosen].region};
  for (size_t k = 0; k < report.models.size(); ++k) {
    ModelReport& m = report.models[k];
    m.prices = places[*chosen].prices[k];
    if (o.verify.single_gpu_nodes && o.gpus_per_node > 1) {
      PlannerOptions single = o;
      single.gpus_per_node = 1;
      Result<GpuPrices> small = PricesFromCatalog(OffersAt(FilterOffers(offers, single), where), m.gpu_model, o.term,
                                                  o.ratios);
      if (small.ok()) m.single_gpu_prices = *small;
    }
  }
  report.location = *chosen;
  report.locations = std::move(places);

  // The spot share and the reservation at the chosen place.
  GF_ASSIGN_OR_RETURN(Optimised opt, Optimise(report.models, o));
  const std::vector<SplitInputs>& splits = opt.splits;
  const std::optional<size_t> best = opt.best;
  if (!best) return opt.shares.back().plan.status();
  report.spot_shares = std::move(opt.shares);
  report.spot_share = report.spot_shares[*best].share;
  report.plan = *report.spot_shares[*best].plan;
  for (size_t i = 0; i < report.models.size(); ++i) {
    report.models[i].plan = report.plan.models[i];
    report.models[i].reserved_nodes = report.plan.models[i].reserved_gpus / o.gpus_per_node;
  }
  if (!runs_on.empty()) {
    // The same without substitution, for comparison: every model's work on its own GPUs.
    std::vector<ModelReport> own = report.models;
    for (ModelReport& m : own) m.substitutes_for.clear();
    GF_ASSIGN_OR_RETURN(Optimised alone, Optimise(own, o));
    if (alone.best) {
      report.plan_without_substitution = *alone.shares[*alone.best].plan;
      report.spot_share_without_substitution = alone.shares[*alone.best].share;
    }
  }
  if (!o.frontier_waits.empty()) {
    const SplitInputs& split = splits[*best];
    const PlanOptions popts = SplitPlanOptions(o, split);
    for (FrontierPoint& point : SolveFrontier(split.inputs, popts, o.frontier_waits)) {
      if (point.plan.ok()) point.plan = MergeParts(*point.plan, split, report.models);
      report.frontier.push_back(std::move(point));
    }
  }

  if (o.verify.enabled) {
    GF_RETURN_IF_ERROR(Verify(jobs, runs_on.empty() ? nullptr : &pinned_jobs, catalog, reference, o, *best, report));
  }
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
