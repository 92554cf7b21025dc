#include "cost/select.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

#include "common/strings.h"
#include "cost/offer_names.h"

namespace gpufleet::cost {

namespace {

MicroUsd Times(MicroUsd price_per_hour, double hours) {
  return static_cast<MicroUsd>(std::llround(static_cast<double>(price_per_hour) * hours));
}

Duration HoursToDuration(double hours) { return Duration::Millis(std::llround(hours * 3'600'000.0)); }

// Order: untrusted spot outliers last, then expected cost, expected wall time, $/h, then names
// (deterministic).
bool Better(const Candidate& a, const Candidate& b) {
  auto key = [](const Candidate& c) {
    return std::make_tuple(c.untrusted_outlier, c.expected_cost, c.expected_wall, c.price_per_hour, std::cref(c.offer.cloud),
                           std::cref(c.offer.region), std::cref(c.offer.zone), std::cref(c.offer.instance_type),
                           static_cast<int>(c.market));
  };
  return key(a) < key(b);
}

bool CheaperPerHour(const Candidate& a, const Candidate& b) {
  if (a.untrusted_outlier != b.untrusted_outlier) return b.untrusted_outlier;
  if (a.price_per_hour != b.price_per_hour) return a.price_per_hour < b.price_per_hour;
  return Better(a, b);
}

std::string Speed(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", s);
  return buf;
}

std::string Summary(const Candidate& c) {
  std::string s = c.Describe() + ": " + FormatDuration(c.expected_wall) + " at " +
                  FormatUsd(c.price_per_hour) + "/h = " + FormatUsd(c.expected_cost);
  if (c.market == model::Market::kSpot) {
    s += " (incl. " + FormatUsd(c.rework_cost + c.restart_cost) + " expected rework)";
  }
  return s;
}

}  // namespace

std::string Candidate::Describe() const {
  std::string where = offer.zone.empty() ? offer.region : offer.zone;
  return std::to_string(offer.price(market) ? price_per_hour / *offer.price(market) : 0) + " x " + offer.cloud +
         " " + offer.instance_type + " (" + std::to_string(offer.gpus) + "x " + offer.gpu + ") " +
         model::MarketName(market) + " " + where;
}

SpotEstimate ExpectedSpotTime(Duration runtime, double hazard_per_hour, Duration checkpoint_interval,
                              Duration restart) {
  SpotEstimate e;
  const double t = runtime.hours_f();
  if (hazard_per_hour <= 0 || t <= 0) {
    e.wall_hours = t;
    return e;
  }
  const double lambda = hazard_per_hour;
  const double r = restart.hours_f();
  // Work between checkpoints; without checkpoints an interruption loses everything done so far.
  const double tau = checkpoint_interval > Duration::Zero() && checkpoint_interval < runtime
                         ? checkpoint_interval.hours_f()
                         : t;
  const double full = std::floor(t / tau);
  const double rem = t - full * tau;
  // A segment of x hours of work: failures before the first clean run are geometric with mean
  // e^{lambda x} - 1, each costing its time until failure plus a restart; the expected total is
  // (e^{lambda x} - 1)(1/lambda + r). To first order: x + lambda x (x/2 + r).
  auto fails = [&](double x) { return std::expm1(lambda * x); };
  auto time = [&](double x) { return fails(x) * (1.0 / lambda + r); };
  e.interruptions = full * fails(tau) + fails(rem);
  e.wall_hours = full * time(tau) + time(rem);
  e.restart_hours = e.interruptions * r;
  return e;
}

Result<Selection> SelectOffers(const OfferTable& table, const CostJob& job, const model::GpuCatalog& gpus,
                               const model::GpuSpeeds& speeds) {
  if (job.gpus_per_node < 1) return Status::InvalidArgument("resources.gpus must be at least 1");
  if (job.nodes < 1) return Status::InvalidArgument("resources.nodes must be at least 1");
  if (job.reference_runtime <= Duration::Zero()) {
    return Status::InvalidArgument("estimate: the reference runtime must be positive");
  }
  const model::GpuModel* ref = gpus.Find(job.reference_gpu);
  if (ref == nullptr) return Status::InvalidArgument("estimate: unknown GPU model '" + job.reference_gpu + "'");
  std::vector<std::string> allowed;
  for (const auto& g : job.gpu_types) {
    const model::GpuModel* m = gpus.Find(g);
    if (m == nullptr) return Status::InvalidArgument("resources.gpu_type: unknown GPU model '" + g + "'");
    allowed.push_back(m->name);
  }
  if (Status s = speeds.CheckClass(job.workload_class); !s.ok()) return Status::InvalidArgument("workload: " + s.message());
  for (const auto& [gpu, seconds] : job.speed_overrides.step_seconds) {
    if (gpus.Find(gpu) == nullptr) return Status::InvalidArgument("step_time: unknown GPU model '" + gpu + "'");
    if (!(seconds > 0) || !std::isfinite(seconds)) {
      return Status::InvalidArgument("step_time: " + gpu + " must be a positive number of seconds");
    }
  }
  // A cloud, region or label value the catalog does not have is a typo: left to the filters, it
  // would reject every offer and read as "no offer holds the job".
  for (const auto& c : job.clouds) {
    if (Status s = CheckCloud(table, c); !s.ok()) return Status::InvalidArgument("clouds: " + s.message());
  }
  for (const auto& r : job.regions) {
    if (Status s = CheckRegionPattern(table, r); !s.ok()) return Status::InvalidArgument("regions: " + s.message());
  }
  for (const auto& [k, v] : job.constraints) {
    if (Status s = CheckLabel(table, k, v); !s.ok()) return Status::InvalidArgument("constraints." + k + ": " + s.message());
  }
  model::SpeedQuery speed_query;
  speed_query.reference = ref->name;
  speed_query.workload_class = job.workload_class;
  speed_query.profile = job.profile;
  speed_query.overrides = &job.speed_overrides;

  Selection sel;
  std::vector<Candidate> passing;  // static filters passed (deadline not yet applied)
  auto reject = [&](const std::string& why) { ++sel.rejected[why]; };
  for (const Offer& o : table.offers) {
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), o.gpu) == allowed.end()) {
      reject("GPU model not allowed");
      continue;
    }
    if (o.gpus < job.gpus_per_node) {
      reject("fewer than " + std::to_string(job.gpus_per_node) + " GPUs per instance");
      continue;
    }
    if (!job.clouds.empty() && std::find(job.clouds.begin(), job.clouds.end(), o.cloud) == job.clouds.end()) {
      reject("cloud not allowed");
      continue;
    }
    if (!job.regions.empty() &&
        std::none_of(job.regions.begin(), job.regions.end(), [&](const std::string& g) {
          return GlobMatch(g, o.region) || (!o.zone.empty() && GlobMatch(g, o.zone));
        })) {
      reject("region not allowed");
      continue;
    }
    if (!job.constraints.empty()) {
      model::Labels labels = o.labels();
      bool ok = true;
      for (const auto& [k, v] : job.constraints) {
        auto it = labels.find(k);
        if (it == labels.end() || !GlobMatch(v, it->second)) ok = false;
      }
      if (!ok) {
        reject("constraints not met");
        continue;
      }
    }
    for (model::Market m : {model::Market::kOnDemand, model::Market::kSpot}) {
      if (job.market == model::MarketPreference::kOnDemand && m == model::Market::kSpot) continue;
      if (job.market == model::MarketPreference::kSpot && m == model::Market::kOnDemand) continue;
      std::optional<MicroUsd> price = o.price(m);
      if (!price) {
        reject(std::string("no ") + model::MarketName(m) + " price");
        continue;
      }
      if (m == model::Market::kOnDemand && o.has(kSuspectPrice) && !job.allow_suspect_prices) {
        reject("suspect fallback price");
        continue;
      }
      Candidate c;
      c.offer = o;
      c.market = m;
      c.untrusted_outlier = m == model::Market::kSpot && o.has(kSpotOutlier) && !job.trust_spot_outliers;
      c.price_per_hour = *price * job.nodes;
      if (job.max_hourly_cost && c.price_per_hour > *job.max_hourly_cost) {
        reject("over max_hourly_cost");
        continue;
      }
      c.idle_gpus_per_node = o.gpus - job.gpus_per_node;
      speed_query.target = o.gpu;
      const model::SpeedEstimate speed = speeds.Lookup(speed_query, gpus);
      c.speed = speed.ratio;
      c.speed_source = speed.source;
      c.speed_confidence = speed.confidence;
      const double run_h = job.reference_runtime.hours_f() / c.speed;
      c.runtime = HoursToDuration(run_h);
      const double hazard = m == model::Market::kSpot ? o.spot_hazard_per_hour * job.nodes : 0.0;
      SpotEstimate e = ExpectedSpotTime(c.runtime, hazard, job.checkpoint_interval, job.restart_overhead);
      // A long run on spot without checkpoints restarts from zero at each interruption: its
      // expected time grows exponentially with its length, past any number worth ranking.
      constexpr double kMaxExpectedHours = 10 * 8766.0;  // ten years
      if (!std::isfinite(e.wall_hours) || e.wall_hours > kMaxExpectedHours) {
        reject("would hardly ever finish on spot (expected over ten years with its interruptions; "
               "a checkpoint interval makes it finish)");
        continue;
      }
      c.expected_wall = HoursToDuration(e.wall_hours);
      c.expected_interruptions = e.interruptions;
      c.compute_cost = Times(c.price_per_hour, c.runtime.hours_f());
      c.restart_cost = Times(c.price_per_hour, e.restart_hours);
      c.rework_cost =
          std::max<MicroUsd>(0, Times(c.price_per_hour, e.wall_hours - e.restart_hours - c.runtime.hours_f()));
      c.expected_cost = c.compute_cost + c.rework_cost + c.restart_cost;
      c.meets_deadline = !job.deadline || c.expected_wall <= *job.deadline;
      passing.push_back(std::move(c));
    }
  }

  for (const Candidate& c : passing) {
    if (!c.meets_deadline) {
      reject("misses the deadline");
    } else {
      sel.ranked.push_back(c);
    }
  }
  std::sort(sel.ranked.begin(), sel.ranked.end(), Better);
  if (!passing.empty()) sel.cheapest_hourly = *std::min_element(passing.begin(), passing.end(), CheaperPerHour);

  if (sel.ranked.empty()) {
    sel.reason = passing.empty() ? "no offer holds the job (see rejected)"
                                 : "every offer that holds the job misses the deadline";
    return sel;
  }
  const Candidate& w = sel.ranked.front();
  sel.reason = "cheapest expected cost: " + Summary(w) + ", " + Speed(w.speed) + " the " + ref->name + "'s speed (" + w.speed_source + ")";
  if (w.untrusted_outlier) sel.reason += " (only spot-outlier prices are left: check the capacity)";
  if (sel.cheapest_hourly) {
    const Candidate& h = *sel.cheapest_hourly;
    sel.saving_vs_cheapest_hourly = h.expected_cost - w.expected_cost;
    if (h.Describe() == w.Describe()) {
      sel.reason += "; the cheapest-$/h rule picks the same offer";
    } else {
      const MicroUsd d = sel.saving_vs_cheapest_hourly;
      std::string diff = d >= 0 ? FormatUsd(d) + " more" : FormatUsd(-d) + " less";
      if (!h.meets_deadline) diff += d >= 0 ? ", and it misses the deadline" : ", but it misses the deadline";
      sel.reason += "; the cheapest-$/h rule would pick " + Summary(h) + " (" + diff + ")";
    }
  }
  return sel;
}

}  // namespace gpufleet::cost
