#include "sched/autoscaler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <tuple>
#include <utility>

namespace gpufleet::sched {
namespace {

constexpr Duration kRateWindow = Duration::Minutes(1);

std::string ZoneOf(const model::NodeSpec& spec) {
  auto it = spec.labels.find(model::kLabelZone);
  return it == spec.labels.end() ? std::string() : it->second;
}

bool FallenBack(const PendingJob& job, const AutoscalerOptions& o, Time now) {
  if (o.spot_fallback_after_preemptions > 0 &&
      job.spot_preemptions >= o.spot_fallback_after_preemptions) {
    return true;
  }
  return now - job.queued_since >= o.spot_fallback_after_wait;
}

// Whether `job` may be given capacity of market `m` now.
bool MarketAllowed(const PendingJob& job, model::Market m, bool fallen_back) {
  const bool spot = m == model::Market::kSpot;
  switch (job.market) {
    case model::MarketPreference::kOnDemand:
      return !spot;
    case model::MarketPreference::kSpot:
      return spot;  // spot only, as placement holds it: renting it anything else would be waste
    case model::MarketPreference::kAny:
      return fallen_back ? !spot : true;
  }
  return false;
}

bool LabelsOk(const PendingJob& job, const model::Labels& labels);
bool SizeFits(const PendingJob& job, int64_t cpu_milli, int64_t mem_mib);
bool EnvironmentOk(const PendingJob& job, const RentableOffer& o);
int ModelRank(const PendingJob& job, const std::string& model);

// Whether some offer that is not spot could hold the job: falling back to on-demand capacity
// where the pool offers none would leave the job waiting for good, so it goes on with spot.
bool OnDemandOffered(const PendingJob& job, const std::vector<RentableOffer>& offers) {
  for (const RentableOffer& o : offers) {
    if (o.market != model::Market::kSpot && ModelRank(job, o.gpu_model) >= 0 && o.gpus_per_node >= job.gpus_per_node &&
        LabelsOk(job, o.labels) && SizeFits(job, o.cpu_milli, o.mem_mib) && EnvironmentOk(job, o)) {
      return true;
    }
  }
  return false;
}

// Position of `model` in the job's any-of list (0 when the list is empty); -1 if not allowed.
int ModelRank(const PendingJob& job, const std::string& model) {
  if (job.gpu_models.empty()) return 0;
  auto it = std::find(job.gpu_models.begin(), job.gpu_models.end(), model);
  return it == job.gpu_models.end() ? -1 : static_cast<int>(it - job.gpu_models.begin());
}

// Whether `labels` carry every k=v the job's constraints ask for.
bool LabelsOk(const PendingJob& job, const model::Labels& labels) {
  for (const auto& [k, v] : job.constraints) {
    auto it = labels.find(k);
    if (it == labels.end() || it->second != v) return false;
  }
  return true;
}

// A node of `cpu_milli` and `mem_mib` (0: not known) can hold the job's part.
bool SizeFits(const PendingJob& job, int64_t cpu_milli, int64_t mem_mib) {
  return (cpu_milli <= 0 || job.cpu_milli <= cpu_milli) && (mem_mib <= 0 || job.mem_mib <= mem_mib);
}

// Whether the offer's nodes may run the job's environment (yes while nobody has seen one).
bool EnvironmentOk(const PendingJob& job, const RentableOffer& o) {
  return job.environment.empty() || !o.runs_environments ||
         std::find(o.runs_environments->begin(), o.runs_environments->end(), job.environment) !=
             o.runs_environments->end();
}

// A booting node's offer known not to run the job's environment: the node will not either.
bool BootingNodeRunsEnvironment(const PendingJob& job, const PoolNode& n, const std::vector<RentableOffer>& offers) {
  if (job.environment.empty() || n.state != PoolNodeState::kBooting || n.offer.empty()) return true;
  for (const RentableOffer& o : offers) {
    if (o.name == n.offer) return EnvironmentOk(job, o);
  }
  return true;
}

bool NodeFits(const PendingJob& job, const PoolNode& n, bool fallen_back) {
  // A node that is up says which environments it runs (placement checks the same); a booting
  // one does not yet (its offer was checked when it was rented).
  if (!job.environment.empty() && n.state == PoolNodeState::kUp && !n.spec.Supports(job.environment)) return false;
  return !n.spec.gpu_model.empty() && ModelRank(job, n.spec.gpu_model) >= 0 &&
         n.spec.gpus >= job.gpus_per_node && MarketAllowed(job, n.spec.market, fallen_back) &&
         LabelsOk(job, n.spec.labels) && SizeFits(job, n.spec.cpu_milli, n.spec.mem_mib);
}

// Expected micro-dollars per hour of the job's reference work on `o` (the header's rule).
int64_t ExpectedCost(const PendingJob& job, const RentableOffer& o) {
  const double speed = o.speed > 0 ? o.speed : 1.0;
  double rework_hours = 0;
  if (o.market == model::Market::kSpot && o.interruptions_per_hour > 0) {
    rework_hours = o.interruptions_per_hour * (job.checkpoint_interval.hours_f() / 2 + job.restart_overhead.hours_f());
  }
  const double micros = static_cast<double>(o.price_micros_per_hour) * job.nodes / speed * (1.0 + rework_hours);
  return static_cast<int64_t>(std::llround(std::min(micros, 9.0e18)));
}

}  // namespace

Autoscaler::Autoscaler(AutoscalerOptions options) : options_(std::move(options)) {}

void Autoscaler::ReportRentFailed(const std::string& offer, Time now) {
  failed_until_[offer] = now + options_.failed_offer_backoff;
  for (auto it = rented_for_.begin(); it != rented_for_.end();) {
    it = it->second.offer == offer ? rented_for_.erase(it) : std::next(it);
  }
}

void Autoscaler::ReportNodeGone(const std::vector<JobId>& jobs) {
  for (JobId j : jobs) rented_for_.erase(j);
}

// What one Decide works with: the input, the plan it builds, and the pool as the plan changes it.
struct Autoscaler::Round {
  // The pool's nodes in id order, so that every walk is independent of the caller's order.
  explicit Round(const ScaleInput& input) : in(input), now(input.now) {
    nodes.reserve(in.nodes.size());
    for (const PoolNode& n : in.nodes) nodes.push_back(&n);
    auto by_id = [](const PoolNode* a, const PoolNode* b) { return a->id < b->id; };
    // A caller that lists its nodes in id order (the simulator does) needs no sort.
    if (!std::is_sorted(nodes.begin(), nodes.end(), by_id)) std::sort(nodes.begin(), nodes.end(), by_id);
  }

  // The pending job with this id, or null.
  const PendingJob* Pending(int64_t id) const {
    auto it = std::lower_bound(pending_by_id.begin(), pending_by_id.end(), id,
                               [](const std::pair<int64_t, const PendingJob*>& e, int64_t v) { return e.first < v; });
    return it != pending_by_id.end() && it->first == id ? it->second : nullptr;
  }
  bool Released(NodeId id) const { return released.count(id) > 0; }

  const ScaleInput& in;
  const Time now;
  ScalePlan plan;
  std::optional<Time> wake;
  std::vector<const PoolNode*> nodes;  // in id order
  std::set<NodeId> released;
  int pool_nodes = 0;  // after the releases so far; rents add to it
  int floor_nodes = 0;  // ... of which hold the floor (min_nodes): not out of service
  int64_t pool_gpus = 0;
  std::vector<std::pair<int64_t, const PendingJob*>> pending_by_id;  // sorted by id
  // Booting, not released nodes -> GPUs not claimed, and the node (in id order, as `nodes`).
  struct Free {
    int gpus = 0;
    const PoolNode* node = nullptr;
  };
  std::map<NodeId, Free> free_gpus;
  std::set<int64_t> covered;
  std::map<std::string, int64_t> team_rate_added;  // per hour, by the rents of this plan, per team
  // Nodes rented in this Decide for one-node jobs, with the GPUs the job leaves free.
  struct Fresh {
    size_t rent = 0;
    int offer = -1;
    int free = 0;
  };
  std::vector<Fresh> fresh;
  // Nodes a gang will use: booting ones lose their free GPUs, idle up ones are kept from release.
  std::set<NodeId> kept;
  std::map<std::string, std::vector<NodeId>> gang_zones;  // the current gang's usable nodes
  int rents_in_window = 0;
  bool held_by_rate = false;

  void WakeAt(Time t) {
    if (!wake || t < *wake) wake = t;
  }
};

ScalePlan Autoscaler::Decide(const ScaleInput& in) {
  Round r(in);
  Forget(r.now);

  ReleaseBootTimeouts(r);
  CountCoverage(r);
  for (const Event& e : rent_history_) r.rents_in_window += e.nodes;
  for (const PendingJob& job : in.pending) {
    if (r.covered.count(job.id.value()) || rented_for_.count(job.id)) continue;
    const bool on_demand = job.market == model::MarketPreference::kAny && OnDemandOffered(job, in.offers);
    const bool fallen_back = on_demand && FallenBack(job, options_, r.now);
    if (!fallen_back && on_demand && options_.spot_fallback_after_wait < Duration::Max()) {
      r.WakeAt(job.queued_since + options_.spot_fallback_after_wait);
    }
    if (CoverWithPool(r, job, fallen_back)) continue;
    RentFor(r, job, fallen_back);
  }
  if (r.held_by_rate && !rent_history_.empty()) r.WakeAt(rent_history_.front().at + kRateWindow);
  ReleaseIdle(r);
  r.plan.next_wakeup = r.wake;
  return std::move(r.plan);
}

// Forgets what no longer matters: rate-limit events older than the window, expired rents and
// offer back-offs.
void Autoscaler::Forget(Time now) {
  for (auto* h : {&rent_history_, &release_history_}) {
    while (!h->empty() && h->front().at + kRateWindow <= now) h->pop_front();
  }
  for (auto it = rented_for_.begin(); it != rented_for_.end();) {
    it = it->second.at + options_.boot_timeout <= now ? rented_for_.erase(it) : std::next(it);
  }
  for (auto it = failed_until_.begin(); it != failed_until_.end();) {
    it = it->second <= now ? failed_until_.erase(it) : std::next(it);
  }
}

// 1. Boot timeouts (and booting nodes of a stopped team), then the pool's size without them.
void Autoscaler::ReleaseBootTimeouts(Round& r) {
  const Time now = r.now;
  for (const PoolNode* n : r.nodes) {
    if (n->state != PoolNodeState::kBooting) continue;
    if (n->budget_spent && n->managed) {
      r.released.insert(n->id);
      r.plan.releases.push_back({n->id, "the hard budget of the team it is billed to is spent", true});
      for (JobId j : n->for_jobs) rented_for_.erase(j);
      continue;
    }
    const Time deadline = n->booting_since + options_.boot_timeout;
    if (now <= deadline) {
      r.WakeAt(deadline + Duration::Millis(1));
      continue;
    }
    r.released.insert(n->id);
    r.plan.releases.push_back(
        {n->id, "booting for " + FormatDuration(now - n->booting_since) + ", past the boot timeout of " +
                    FormatDuration(options_.boot_timeout) +
                    (n->offer.empty() ? std::string() : "; offer " + n->offer + " is avoided for " +
                                                            FormatDuration(options_.failed_offer_backoff))});
    if (!n->offer.empty()) failed_until_[n->offer] = now + options_.failed_offer_backoff;
    for (JobId j : n->for_jobs) rented_for_.erase(j);
  }
  for (const PoolNode* n : r.nodes) {
    if (r.Released(n->id)) continue;
    ++r.pool_nodes;
    if (!n->out_of_service) ++r.floor_nodes;
    r.pool_gpus += n->spec.gpus;
  }
}

// 2. Coverage by booting capacity. A booting node's GPUs are claimed by the pending jobs it was
// rented for: a gang member takes the whole node, a one-node job its GPUs. What is left of a node
// may cover other one-node jobs (packing), and a node nobody claims may cover a gang.
void Autoscaler::CountCoverage(Round& r) {
  r.pending_by_id.reserve(r.in.pending.size());
  for (const PendingJob& j : r.in.pending) r.pending_by_id.emplace_back(j.id.value(), &j);
  std::sort(r.pending_by_id.begin(), r.pending_by_id.end());
  // A job rented for that is no longer pending was placed: its rent has done its work.
  for (auto it = rented_for_.begin(); it != rented_for_.end();) {
    it = r.Pending(it->first.value()) ? std::next(it) : rented_for_.erase(it);
  }
  for (const PoolNode* n : r.nodes) {
    if (n->state != PoolNodeState::kBooting || r.Released(n->id)) continue;
    int free = n->spec.gpus;
    for (JobId j : n->for_jobs) {
      const PendingJob* p = r.Pending(j.value());
      if (p == nullptr) continue;
      r.covered.insert(j.value());
      rented_for_.erase(j);  // seen booting: from now on the node itself covers the job
      free -= p->nodes == 1 ? p->gpus_per_node : n->spec.gpus;
    }
    r.free_gpus[n->id] = {std::max(0, free), n};
  }
  // Idle nodes kept for a pending gang by an earlier Decide stay kept while it waits.
  for (auto it = kept_for_.begin(); it != kept_for_.end();) {
    if (it->second.until <= r.now || !r.Pending(it->second.job.value())) {
      it = kept_for_.erase(it);
    } else {
      r.kept.insert(it->first);
      ++it;
    }
  }
}

// Booting nodes lose their free GPUs to `job`; idle up nodes are kept for it.
void Autoscaler::Claim(Round& r, const std::vector<NodeId>& ids, JobId job) {
  for (NodeId id : ids) {
    auto f = r.free_gpus.find(id);
    if (f != r.free_gpus.end()) {
      f->second.gpus = 0;
    } else {
      r.kept.insert(id);
      kept_for_[id] = {job, r.now + options_.boot_timeout};
    }
  }
}

// Whether nodes the pool already has or this plan rents cover `job`: a one-node job the booting
// node it fits best, or spare GPUs of a node rented in this plan; a gang enough untouched booting
// or idle up nodes in one zone (fewer are kept for it in gang_zones, and RentFor rents the rest).
bool Autoscaler::CoverWithPool(Round& r, const PendingJob& job, bool fallen_back) {
  bool covered_now = false;
  if (job.nodes == 1) {
    // The booting node with the fewest free GPUs that still holds the job (best fit; the first
    // in id order of those).
    Round::Free* fit = nullptr;
    for (auto& [id, f] : r.free_gpus) {
      if (f.gpus < job.gpus_per_node || (fit && f.gpus >= fit->gpus) || !NodeFits(job, *f.node, fallen_back) ||
          !BootingNodeRunsEnvironment(job, *f.node, r.in.offers)) {
        continue;
      }
      fit = &f;
    }
    if (fit) {
      fit->gpus -= job.gpus_per_node;
      covered_now = true;
    } else {
      for (Round::Fresh& f : r.fresh) {
        const RentableOffer& o = r.in.offers[static_cast<size_t>(f.offer)];
        if (f.free < job.gpus_per_node || ModelRank(job, o.gpu_model) < 0 ||
            !MarketAllowed(job, o.market, fallen_back) || !LabelsOk(job, o.labels) || !EnvironmentOk(job, o)) {
          continue;
        }
        f.free -= job.gpus_per_node;
        r.plan.rents[f.rent].for_jobs.push_back(job.id);
        rented_for_[job.id] = {r.now, o.name};
        covered_now = true;
        break;
      }
    }
  } else {
    // Untouched booting nodes and idle up nodes that fit, by zone: enough in one zone cover a
    // gang; fewer are kept for it and only the rest is rented (step 3).
    r.gang_zones.clear();
    for (const PoolNode* n : r.nodes) {
      if (!NodeFits(job, *n, fallen_back) || !BootingNodeRunsEnvironment(job, *n, r.in.offers)) continue;
      auto f = r.free_gpus.find(n->id);
      const bool booting_free = f != r.free_gpus.end() && f->second.gpus == n->spec.gpus;
      const bool idle_up = n->state == PoolNodeState::kUp && n->idle_since && !r.kept.count(n->id) && !n->budget_spent;
      if (booting_free || idle_up) r.gang_zones[ZoneOf(n->spec)].push_back(n->id);
    }
    for (auto& [zone, ids] : r.gang_zones) {
      if (static_cast<int>(ids.size()) < job.nodes) continue;
      ids.resize(static_cast<size_t>(job.nodes));
      Claim(r, ids, job.id);
      covered_now = true;
      break;
    }
  }
  return covered_now;
}

// 3. The cheapest allowed offer for `job`, and 4. the pool's limits and rent rate; a rent, or the
// job held with the reason.
void Autoscaler::RentFor(Round& r, const PendingJob& job, bool fallen_back) {
  const Time now = r.now;
  // 3. The cheapest allowed offer.
  int best = -1;
  std::tuple<int64_t, int, Duration, std::string, std::string> best_key;
  bool any_shape = false;
  std::vector<std::string> cannot_run;  // offers that fit but whose nodes do not run its environment
  // The team's hourly cap: what it may still add, less this plan's rents for it so far.
  const int64_t headroom = job.max_added_rate_micros < 0
                               ? -1
                               : std::max<int64_t>(0, job.max_added_rate_micros - r.team_rate_added[job.team]);
  const RentableOffer* too_dear = nullptr;  // the cheapest per hour of the offers over the cap
  int too_dear_count = 0;
  for (int i = 0; i < static_cast<int>(r.in.offers.size()); ++i) {
    const RentableOffer& o = r.in.offers[i];
    const int model_rank = ModelRank(job, o.gpu_model);
    if (model_rank < 0 || o.gpus_per_node < job.gpus_per_node) continue;
    if (!MarketAllowed(job, o.market, fallen_back) || !LabelsOk(job, o.labels)) continue;
    // A node too small in CPUs or memory would be rented, stay idle and be released, again and
    // again.
    if (!SizeFits(job, o.cpu_milli, o.mem_mib)) continue;
    if (!EnvironmentOk(job, o)) {
      cannot_run.push_back(o.name);
      continue;
    }
    any_shape = true;
    if (auto failed = failed_until_.find(o.name); failed != failed_until_.end()) {
      // Looked at again once its back-off ends (with nothing else happening meanwhile, a replay
      // would otherwise end with the job never run).
      r.WakeAt(failed->second);
      continue;
    }
    // A gang rents only what the nodes kept for it in the offer's zone do not cover.
    const int have = job.nodes > 1 && r.gang_zones.count(o.zone) ? static_cast<int>(r.gang_zones[o.zone].size()) : 0;
    const int count = job.nodes - std::min(have, job.nodes - 1);
    if (headroom >= 0 && o.price_micros_per_hour * count > headroom) {
      if (!too_dear || o.price_micros_per_hour * count < too_dear->price_micros_per_hour * too_dear_count) {
        too_dear = &o;
        too_dear_count = count;
      }
      continue;
    }
    auto key = std::make_tuple(ExpectedCost(job, o) * count / job.nodes, model_rank, o.boot_estimate,
                               o.zone, o.name);
    if (best < 0 || key < best_key) {
      best = i;
      best_key = std::move(key);
    }
  }
  if (best < 0) {
    std::string why = any_shape ? "every offer that fits failed recently"
                                : "no offer has the GPU model, GPUs per node, CPUs, memory, market and labels it needs";
    if (too_dear) {
      auto usd = [](int64_t micros) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "$%.2f", static_cast<double>(micros) / 1e6);
        return std::string(buf);
      };
      why = "team " + job.team + " may add only " + usd(headroom) + "/h more (its budget's max hourly rate); " +
            "the cheapest offer that fits, " + too_dear->name + ", costs " +
            usd(too_dear->price_micros_per_hour * too_dear_count) + "/h";
    }
    if (!any_shape && !cannot_run.empty()) {
      std::string names;
      for (const std::string& n : cannot_run) names += (names.empty() ? "" : ", ") + n;
      why = "the nodes of every offer that fits (" + names + ") were seen not to run environment " +
            job.environment + " (a registered node of the offer lists what it runs)";
    }
    r.plan.held.push_back({job.id, why});
    return;
  }
  const RentableOffer& o = r.in.offers[best];
  std::vector<NodeId> reuse;
  if (job.nodes > 1 && r.gang_zones.count(o.zone)) {
    reuse = r.gang_zones[o.zone];
    if (static_cast<int>(reuse.size()) > job.nodes - 1) reuse.resize(static_cast<size_t>(job.nodes - 1));
  }
  const int count = job.nodes - static_cast<int>(reuse.size());

  // 4. Limits.
  const int64_t gpus = static_cast<int64_t>(o.gpus_per_node) * count;
  if (r.in.limits.max_nodes > 0 && r.pool_nodes + count > r.in.limits.max_nodes) {
    r.plan.held.push_back({job.id, "the pool would exceed max_nodes " +
                                     std::to_string(r.in.limits.max_nodes) + " (" +
                                     std::to_string(r.pool_nodes) + " now, the gang needs " +
                                     std::to_string(count) + " more)"});
    return;
  }
  if (r.in.limits.max_gpus > 0 && r.pool_gpus + gpus > r.in.limits.max_gpus) {
    r.plan.held.push_back({job.id, "the pool would exceed max_gpus " + std::to_string(r.in.limits.max_gpus) +
                                     " (" + std::to_string(r.pool_gpus) + " now, " + o.name + " adds " +
                                     std::to_string(gpus) + ")"});
    return;
  }
  const int rate = options_.max_rents_per_minute;
  if (rate > 0 && r.rents_in_window > 0 && r.rents_in_window + count > rate) {
    r.plan.held.push_back({job.id, "rent rate: " + std::to_string(r.rents_in_window) +
                                     " nodes rented in the last minute, limit " + std::to_string(rate)});
    r.held_by_rate = true;
    return;
  }

  const int64_t expected = std::get<0>(best_key);
  std::string why = FormatDuration(now - job.queued_since) + " pending; lowest expected cost: " +
                    std::to_string(o.price_micros_per_hour * count) + " micro-USD/h for " +
                    std::to_string(count) + " node(s), " + std::to_string(expected) +
                    " micro-USD per hour of work";
  if (!reuse.empty()) why += "; " + std::to_string(reuse.size()) + " idle or booting node(s) kept for the gang";
  if (fallen_back && job.market != model::MarketPreference::kOnDemand) why += "; fell back from spot";
  Claim(r, reuse, job.id);
  r.team_rate_added[job.team] += o.price_micros_per_hour * count;
  r.plan.rents.push_back({best, count, o.zone, {job.id}, std::move(why), expected});
  if (job.nodes == 1 && o.gpus_per_node > job.gpus_per_node) {
    r.fresh.push_back({r.plan.rents.size() - 1, best, o.gpus_per_node - job.gpus_per_node});
  }
  rent_history_.push_back({now, count});
  r.rents_in_window += count;
  rented_for_[job.id] = {now, o.name};
  r.pool_nodes += count;
  r.floor_nodes += count;
  r.pool_gpus += gpus;
}

// 5. Idle releases: managed up nodes idle for idle_duration, longest idle first, never below
// min_nodes; a stopped team's idle nodes at once.
void Autoscaler::ReleaseIdle(Round& r) {
  const Time now = r.now;
  std::vector<const PoolNode*> idle;
  for (const PoolNode* n : r.nodes) {
    if (!n->managed || n->state != PoolNodeState::kUp || !n->idle_since || r.kept.count(n->id)) continue;
    const Time due = n->budget_spent ? *n->idle_since : *n->idle_since + options_.idle_duration;
    if (now < due) {
      r.WakeAt(due);
      continue;
    }
    idle.push_back(n);
  }
  std::sort(idle.begin(), idle.end(), [](const PoolNode* a, const PoolNode* b) {
    return std::make_tuple(!a->budget_spent, *a->idle_since, -a->spec.price_micros_per_hour, a->id) <
           std::make_tuple(!b->budget_spent, *b->idle_since, -b->spec.price_micros_per_hour, b->id);
  });
  int releases_in_window = 0;
  for (const Event& e : release_history_) releases_in_window += e.nodes;
  bool release_held_by_rate = false;
  for (const PoolNode* n : idle) {
    // A node billed to a stopped team goes whatever min_nodes and the release rate say: every
    // minute of it would be billed over that team's budget.
    if (n->budget_spent) {
      r.plan.releases.push_back({n->id, "idle, and the hard budget of the team it is billed to is spent", true});
      release_history_.push_back({now, 1});
      ++releases_in_window;
      --r.pool_nodes;
      --r.floor_nodes;
      continue;
    }
    if (r.floor_nodes - 1 < r.in.limits.min_nodes) {
      // This one and the rest (idle past idle_duration, none of a stopped team: those come first)
      // stay for the pool's floor alone.
      for (auto it = std::find(idle.begin(), idle.end(), n); it != idle.end(); ++it) r.plan.floor_kept.push_back((*it)->id);
      break;
    }
    if (options_.max_releases_per_minute > 0 && releases_in_window + 1 > options_.max_releases_per_minute) {
      release_held_by_rate = true;
      break;
    }
    r.plan.releases.push_back({n->id, "idle for " + FormatDuration(now - *n->idle_since) + " (idle_duration " +
                                        FormatDuration(options_.idle_duration) + ")"});
    release_history_.push_back({now, 1});
    ++releases_in_window;
    --r.pool_nodes;
    --r.floor_nodes;
  }
  if (release_held_by_rate && !release_history_.empty()) {
    r.WakeAt(release_history_.front().at + kRateWindow);
  }
}

}  // namespace gpufleet::sched
