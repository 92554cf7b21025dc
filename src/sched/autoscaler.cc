#include "sched/autoscaler.h"

#include <algorithm>
#include <cmath>
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

// Position of `model` in the job's any-of list (0 when the list is empty); -1 if not allowed.
int ModelRank(const PendingJob& job, const std::string& model) {
  if (job.gpu_models.empty()) return 0;
  auto it = std::find(job.gpu_models.begin(), job.gpu_models.end(), model);
  return it == job.gpu_models.end() ? -1 : static_cast<int>(it - job.gpu_models.begin());
}

bool NodeFits(const PendingJob& job, const PoolNode& n, bool fallen_back) {
  return !n.spec.gpu_model.empty() && ModelRank(job, n.spec.gpu_model) >= 0 &&
         n.spec.gpus >= job.gpus_per_node && MarketAllowed(job, n.spec.market, fallen_back);
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

ScalePlan Autoscaler::Decide(const ScaleInput& in) {
  const Time now = in.now;
  ScalePlan plan;
  std::optional<Time> wake;
  auto wake_at = [&wake](Time t) {
    if (!wake || t < *wake) wake = t;
  };

  // Forget what no longer matters: rate-limit events older than the window, expired rents and
  // offer back-offs.
  for (auto* h : {&rent_history_, &release_history_}) {
    while (!h->empty() && h->front().at + kRateWindow <= now) h->pop_front();
  }
  for (auto it = rented_for_.begin(); it != rented_for_.end();) {
    it = it->second.at + options_.boot_timeout <= now ? rented_for_.erase(it) : std::next(it);
  }
  for (auto it = failed_until_.begin(); it != failed_until_.end();) {
    it = it->second <= now ? failed_until_.erase(it) : std::next(it);
  }

  // Nodes in id order, so that every walk below is independent of the caller's order.
  std::vector<const PoolNode*> nodes;
  nodes.reserve(in.nodes.size());
  for (const PoolNode& n : in.nodes) nodes.push_back(&n);
  std::sort(nodes.begin(), nodes.end(),
            [](const PoolNode* a, const PoolNode* b) { return a->id < b->id; });

  // 1. Boot timeouts.
  std::set<NodeId> released;
  for (const PoolNode* n : nodes) {
    if (n->state != PoolNodeState::kBooting) continue;
    const Time deadline = n->booting_since + options_.boot_timeout;
    if (now <= deadline) {
      wake_at(deadline + Duration::Millis(1));
      continue;
    }
    released.insert(n->id);
    plan.releases.push_back(
        {n->id, "booting for " + FormatDuration(now - n->booting_since) + ", past the boot timeout of " +
                    FormatDuration(options_.boot_timeout) +
                    (n->offer.empty() ? std::string() : "; offer " + n->offer + " is avoided for " +
                                                            FormatDuration(options_.failed_offer_backoff))});
    if (!n->offer.empty()) failed_until_[n->offer] = now + options_.failed_offer_backoff;
    for (JobId j : n->for_jobs) rented_for_.erase(j);
  }

  // Pool size after the releases above; rents add to it.
  int pool_nodes = 0;
  int64_t pool_gpus = 0;
  for (const PoolNode* n : nodes) {
    if (released.count(n->id)) continue;
    ++pool_nodes;
    pool_gpus += n->spec.gpus;
  }

  // 2. Coverage by booting capacity. A booting node's GPUs are claimed by the pending jobs it was
  // rented for: a gang member takes the whole node, a one-node job its GPUs. What is left of a
  // node may cover other one-node jobs (packing), and a node nobody claims may cover a gang.
  std::set<int64_t> pending_ids;
  std::map<int64_t, const PendingJob*> pending_by_id;
  for (const PendingJob& j : in.pending) {
    pending_ids.insert(j.id.value());
    pending_by_id[j.id.value()] = &j;
  }
  std::map<NodeId, int> free_gpus;  // booting, not released nodes -> GPUs not claimed
  std::set<int64_t> covered;
  for (const PoolNode* n : nodes) {
    if (n->state != PoolNodeState::kBooting || released.count(n->id)) continue;
    int free = n->spec.gpus;
    for (JobId j : n->for_jobs) {
      auto p = pending_by_id.find(j.value());
      if (p == pending_by_id.end()) continue;
      covered.insert(j.value());
      free -= p->second->nodes == 1 ? p->second->gpus_per_node : n->spec.gpus;
    }
    free_gpus[n->id] = std::max(0, free);
  }
  // Nodes rented in this Decide for one-node jobs, with the GPUs the job leaves free.
  struct Fresh {
    size_t rent = 0;
    int offer = -1;
    int free = 0;
  };
  std::vector<Fresh> fresh;
  int rents_in_window = 0;
  for (const Event& e : rent_history_) rents_in_window += e.nodes;
  bool held_by_rate = false;

  for (const PendingJob& job : in.pending) {
    if (covered.count(job.id.value())) continue;
    if (rented_for_.count(job.id)) continue;
    const bool fallen_back = FallenBack(job, options_, now);
    if (!fallen_back && job.market == model::MarketPreference::kAny &&
        options_.spot_fallback_after_wait < Duration::Max()) {
      wake_at(job.queued_since + options_.spot_fallback_after_wait);
    }
    bool covered_now = false;
    if (job.nodes == 1) {
      // The booting node with the fewest free GPUs that still holds the job (best fit).
      const PoolNode* fit = nullptr;
      for (const PoolNode* n : nodes) {
        auto f = free_gpus.find(n->id);
        if (f == free_gpus.end() || f->second < job.gpus_per_node || !NodeFits(job, *n, fallen_back)) continue;
        if (!fit || f->second < free_gpus[fit->id]) fit = n;
      }
      if (fit) {
        free_gpus[fit->id] -= job.gpus_per_node;
        covered_now = true;
      } else {
        for (Fresh& f : fresh) {
          const RentableOffer& o = in.offers[static_cast<size_t>(f.offer)];
          if (f.free < job.gpus_per_node || ModelRank(job, o.gpu_model) < 0 ||
              !MarketAllowed(job, o.market, fallen_back)) {
            continue;
          }
          f.free -= job.gpus_per_node;
          plan.rents[f.rent].for_jobs.push_back(job.id);
          rented_for_[job.id] = {now, o.name};
          covered_now = true;
          break;
        }
      }
    } else {
      // Enough untouched booting nodes that fit, in one zone, cover a gang.
      std::map<std::string, std::vector<NodeId>> by_zone;
      for (const PoolNode* n : nodes) {
        auto f = free_gpus.find(n->id);
        if (f == free_gpus.end() || f->second != n->spec.gpus || !NodeFits(job, *n, fallen_back)) continue;
        by_zone[ZoneOf(n->spec)].push_back(n->id);
      }
      for (auto& [zone, ids] : by_zone) {
        if (static_cast<int>(ids.size()) < job.nodes) continue;
        for (int i = 0; i < job.nodes; ++i) free_gpus[ids[i]] = 0;
        covered_now = true;
        break;
      }
    }
    if (covered_now) continue;

    // 3. The cheapest allowed offer.
    int best = -1;
    std::tuple<int64_t, int, Duration, std::string, std::string> best_key;
    bool any_shape = false;
    for (int i = 0; i < static_cast<int>(in.offers.size()); ++i) {
      const RentableOffer& o = in.offers[i];
      const int model_rank = ModelRank(job, o.gpu_model);
      if (model_rank < 0 || o.gpus_per_node < job.gpus_per_node) continue;
      if (!MarketAllowed(job, o.market, fallen_back)) continue;
      any_shape = true;
      if (failed_until_.count(o.name)) continue;
      auto key = std::make_tuple(ExpectedCost(job, o), model_rank, o.boot_estimate,
                                 o.zone, o.name);
      if (best < 0 || key < best_key) {
        best = i;
        best_key = std::move(key);
      }
    }
    if (best < 0) {
      plan.held.push_back({job.id, any_shape ? "every offer that fits failed recently"
                                             : "no offer has the GPU model, GPUs per node and market it needs"});
      continue;
    }
    const RentableOffer& o = in.offers[best];

    // 4. Limits.
    const int64_t gpus = static_cast<int64_t>(o.gpus_per_node) * job.nodes;
    if (in.limits.max_nodes > 0 && pool_nodes + job.nodes > in.limits.max_nodes) {
      plan.held.push_back({job.id, "the pool would exceed max_nodes " +
                                       std::to_string(in.limits.max_nodes) + " (" +
                                       std::to_string(pool_nodes) + " now, the gang needs " +
                                       std::to_string(job.nodes) + ")"});
      continue;
    }
    if (in.limits.max_gpus > 0 && pool_gpus + gpus > in.limits.max_gpus) {
      plan.held.push_back({job.id, "the pool would exceed max_gpus " + std::to_string(in.limits.max_gpus) +
                                       " (" + std::to_string(pool_gpus) + " now, " + o.name + " adds " +
                                       std::to_string(gpus) + ")"});
      continue;
    }
    const int rate = options_.max_rents_per_minute;
    if (rate > 0 && rents_in_window > 0 && rents_in_window + job.nodes > rate) {
      plan.held.push_back({job.id, "rent rate: " + std::to_string(rents_in_window) +
                                       " nodes rented in the last minute, limit " + std::to_string(rate)});
      held_by_rate = true;
      continue;
    }

    const int64_t expected = std::get<0>(best_key);
    std::string why = FormatDuration(now - job.queued_since) + " pending; lowest expected cost: " +
                      std::to_string(o.price_micros_per_hour * job.nodes) + " micro-USD/h for " +
                      std::to_string(job.nodes) + " node(s), " + std::to_string(expected) +
                      " micro-USD per hour of work";
    if (fallen_back && job.market != model::MarketPreference::kOnDemand) why += "; fell back from spot";
    plan.rents.push_back({best, job.nodes, o.zone, {job.id}, std::move(why), expected});
    if (job.nodes == 1 && o.gpus_per_node > job.gpus_per_node) {
      fresh.push_back({plan.rents.size() - 1, best, o.gpus_per_node - job.gpus_per_node});
    }
    rent_history_.push_back({now, job.nodes});
    rents_in_window += job.nodes;
    rented_for_[job.id] = {now, o.name};
    pool_nodes += job.nodes;
    pool_gpus += gpus;
  }
  if (held_by_rate && !rent_history_.empty()) wake_at(rent_history_.front().at + kRateWindow);

  // 5. Idle releases.
  std::vector<const PoolNode*> idle;
  for (const PoolNode* n : nodes) {
    if (!n->managed || n->state != PoolNodeState::kUp || !n->idle_since) continue;
    const Time due = *n->idle_since + options_.idle_duration;
    if (now < due) {
      wake_at(due);
      continue;
    }
    idle.push_back(n);
  }
  std::sort(idle.begin(), idle.end(), [](const PoolNode* a, const PoolNode* b) {
    return std::make_tuple(*a->idle_since, -a->spec.price_micros_per_hour, a->id) <
           std::make_tuple(*b->idle_since, -b->spec.price_micros_per_hour, b->id);
  });
  int releases_in_window = 0;
  for (const Event& e : release_history_) releases_in_window += e.nodes;
  bool release_held_by_rate = false;
  for (const PoolNode* n : idle) {
    if (pool_nodes - 1 < in.limits.min_nodes) break;
    if (options_.max_releases_per_minute > 0 && releases_in_window + 1 > options_.max_releases_per_minute) {
      release_held_by_rate = true;
      break;
    }
    plan.releases.push_back({n->id, "idle for " + FormatDuration(now - *n->idle_since) + " (idle_duration " +
                                        FormatDuration(options_.idle_duration) + ")"});
    release_history_.push_back({now, 1});
    ++releases_in_window;
    --pool_nodes;
  }
  if (release_held_by_rate && !release_history_.empty()) {
    wake_at(release_history_.front().at + kRateWindow);
  }
  plan.next_wakeup = wake;
  return plan;
}

}  // namespace gpufleet::sched
