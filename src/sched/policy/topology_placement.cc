#include "sched/policy/topology_placement.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <span>
#include <tuple>

#include "common/strings.h"

namespace gpufleet::sched {

using model::JobSpec;
using model::MarketPreference;
using model::NodeAssignment;
using Node = ClusterView::Node;

namespace {

bool MarketOk(const JobSpec& job, const Node& n) {
  switch (job.market) {
    case MarketPreference::kAny: return true;
    case MarketPreference::kOnDemand: return n.spec.market != model::Market::kSpot;
    case MarketPreference::kSpot: return n.spec.market == model::Market::kSpot;
  }
  return true;
}

bool LabelsOk(const JobSpec& job, const Node& n) {
  for (const auto& [k, v] : job.constraints) {
    auto it = n.spec.labels.find(k);
    if (it == n.spec.labels.end() || it->second != v) return false;
  }
  return job.environment.empty() || n.spec.Supports(job.environment);
}

// Could this node ever hold one part of the job (ignoring what runs on it now)?
bool StaticallyFits(const JobSpec& job, const Node& n) {
  return n.spec.gpus >= job.gpus_per_node && n.spec.cpu_milli >= job.cpu_milli &&
         n.spec.mem_mib >= job.mem_mib && LabelsOk(job, n) && MarketOk(job, n);
}

bool TrivialJob(const JobSpec& job) {
  return job.constraints.empty() && job.market == MarketPreference::kAny && job.cpu_milli == 0 &&
         job.mem_mib == 0 && job.environment.empty();
}

// Which capacity to use first, lower first. A job that may run on spot takes spot first (the
// cheapest hour), then reserved (paid for anyway), then on-demand; a job that may not takes
// reserved, then on-demand. So reserved capacity is left to the jobs that cannot use spot, and
// on-demand nodes, the dearest, are the ones that fall idle and are released.
int MarketRank(MarketPreference job, model::Market node) {
  switch (node) {
    case model::Market::kSpot: return 0;
    case model::Market::kReserved: return job == MarketPreference::kOnDemand ? 0 : 1;
    case model::Market::kOnDemand: return 2;
  }
  return 2;
}

// The best rank any node of `mask` (ClusterView::market_mask) can give the job.
int BestMarketRank(MarketPreference job, int mask) {
  int best = 3;
  for (model::Market m : {model::Market::kReserved, model::Market::kSpot, model::Market::kOnDemand}) {
    const bool allowed = job == MarketPreference::kAny || (job == MarketPreference::kSpot) == (m == model::Market::kSpot);
    if (allowed && (mask & (1 << static_cast<int>(m)))) best = std::min(best, MarketRank(job, m));
  }
  return best;
}

// The most GPUs a node may have (NodeSpec::Validate): ChooseGpus works in arrays of this size.
constexpr int kMaxNodeGpus = 64;

struct Choice {
  int pos = -1;
  std::vector<int> gpus;
  // Lower is better, compared as a tuple.
  int split = 0;
  int hot = 0;
  int market = 0;
  int cold = 0;  // 1 when the job's environment is not prepared on the node yet (no warm start)
  int leftover = 0;
};

bool Better(const Choice& a, const Choice& b) {
  return std::tie(a.split, a.hot, a.market, a.cold, a.leftover, a.pos) <
         std::tie(b.split, b.hot, b.market, b.cold, b.leftover, b.pos);
}

class Placer {
 public:
  Placer(const JobSpec& job, const ClusterView& view, const PlaceOptions& po, const TopologyPlacementOptions& o)
      : job_(job), view_(view), po_(po), hot_c_(o.hot_c), first_fit_(o.fit == Fit::kFirst) {}

  bool Eligible(int pos) const {
    const Node& n = view_.nodes()[pos];
    if (!n.schedulable()) return false;
    if (po_.excluded && !po_.excluded->empty() && (*po_.excluded)[pos]) return false;
    if (n.free_cpu_milli < job_.cpu_milli || n.free_mem_mib < job_.mem_mib) return false;
    if (job_.fractional()) {
      bool any = false;
      for (int32_t f : n.free_milli) any |= f >= job_.gpu_milli;
      if (!any) return false;
    } else if (n.free_whole < job_.gpus_per_node) {
      return false;
    }
    return TrivialJob(job_) || (LabelsOk(job_, n) && MarketOk(job_, n));
  }

  // Whether the job would start cold on the node: it names an environment not prepared there.
  int Cold(int pos) const {
    return !job_.environment.empty() && !view_.nodes()[pos].spec.Warm(job_.environment) ? 1 : 0;
  }

  // Picks GPUs on one node for a whole-GPU part; fills the choice's score.
  Choice ChooseGpus(int pos) const {
    const Node& n = view_.nodes()[pos];
    const int g = job_.gpus_per_node;
    Choice c;
    c.pos = pos;
    c.leftover = n.free_whole - g;
    if (n.spec.nvlink_domain.empty()) {
      // One domain: the g coolest free GPUs (by temperature, then index), without sorting by domain.
      std::array<int, kMaxNodeGpus> free{};
      int count = 0;
      bool warm = false;  // some free GPU reported a temperature
      for (int i = 0; i < n.spec.gpus; ++i) {
        if (n.free_milli[i] == model::kMilliGpuPerGpu) {
          free[count++] = i;
          warm = warm || n.temp_c[i] != 0;
        }
      }
      if (count >= g) {
        // All at 0 °C (no temperature reported): by temperature, then index, is index order,
        // the order they were collected in.
        if (warm) {
          std::sort(free.begin(), free.begin() + count,
                    [&](int a, int b) { return std::tie(n.temp_c[a], a) < std::tie(n.temp_c[b], b); });
          std::sort(free.begin(), free.begin() + g);
        }
        c.gpus.assign(free.begin(), free.begin() + g);
        for (int i : c.gpus) c.hot += n.temp_c[i] >= hot_c_ ? 1 : 0;
        if (first_fit_) c.leftover = 0;
        return c;
      }
    }
    return ChooseAcrossDomains(n, c);
  }

  // Whole GPUs on a node with NVLink domains (or too few free GPUs for the shortcut above): the
  // tightest domain that holds the part, coolest GPUs first, the first domain by id on ties;
  // else the largest domains first (ties by id), to cross as few links as possible. The free
  // GPUs are sorted by (domain, temperature, index) and the domains read as runs of that order,
  // in fixed arrays (a node has at most kMaxNodeGpus GPUs: NodeSpec::Validate), so nothing is
  // allocated per node looked at.
  Choice ChooseAcrossDomains(const Node& n, Choice& c) const {
    const int g = job_.gpus_per_node;
    auto domain = [&](int i) { return n.spec.nvlink_domain.empty() ? 0 : n.spec.nvlink_domain[i]; };
    CHECK(n.spec.gpus <= kMaxNodeGpus) << "node " << n.spec.name << " has more GPUs than a node may";
    std::array<int, kMaxNodeGpus> free{}, by_size{};
    std::array<int, kMaxNodeGpus + 1> start{};  // run k is [start[k], start[k + 1])
    int count = 0;
    for (int i = 0; i < n.spec.gpus; ++i) {
      if (n.free_milli[i] == model::kMilliGpuPerGpu) free[count++] = i;
    }
    std::sort(free.begin(), free.begin() + count, [&](int a, int b) {
      return std::make_tuple(domain(a), n.temp_c[a], a) < std::make_tuple(domain(b), n.temp_c[b], b);
    });
    int runs = 0;
    for (int k = 0; k < count; ++k) {
      if (k == 0 || domain(free[k]) != domain(free[k - 1])) start[runs++] = k;
    }
    start[runs] = count;
    auto size = [&](int r) { return start[r + 1] - start[r]; };
    int best = -1;
    for (int r = 0; r < runs; ++r) {
      if (size(r) >= g && (best < 0 || size(r) < size(best))) best = r;
    }
    if (best >= 0) {
      c.gpus.assign(free.begin() + start[best], free.begin() + start[best] + g);
    } else {
      for (int r = 0; r < runs; ++r) by_size[r] = r;
      std::stable_sort(by_size.begin(), by_size.begin() + runs, [&](int a, int b) { return size(a) > size(b); });
      c.gpus.reserve(g);
      for (int k = 0; k < runs && static_cast<int>(c.gpus.size()) < g; ++k) {
        const int r = by_size[k];
        for (int i = start[r]; i < start[r + 1] && static_cast<int>(c.gpus.size()) < g; ++i) c.gpus.push_back(free[i]);
      }
      c.split = 1;
    }
    std::sort(c.gpus.begin(), c.gpus.end());
    for (int i : c.gpus) c.hot += n.temp_c[i] >= hot_c_ ? 1 : 0;
    if (first_fit_) c.leftover = 0;  // node order decides
    return c;
  }

  // A GPU slice: the partly used GPU it fits most tightly, else a whole GPU on the busiest node.
  Choice ChooseSlice(int pos) const {
    const Node& n = view_.nodes()[pos];
    Choice c;
    c.pos = pos;
    int best = -1;
    for (int i = 0; i < n.spec.gpus; ++i) {
      if (n.free_milli[i] < job_.gpu_milli) continue;
      auto key = [&](int k) {
        return std::make_tuple(n.free_milli[k] == model::kMilliGpuPerGpu ? 1 : 0,
                               n.temp_c[k] >= hot_c_ ? 1 : 0, n.free_milli[k], k);
      };
      if (best < 0 || key(i) < key(best)) best = i;
    }
    c.gpus = {best};
    bool whole = n.free_milli[best] == model::kMilliGpuPerGpu;
    c.split = whole ? 1 : 0;  // prefer packing into partly used GPUs
    c.hot = n.temp_c[best] >= hot_c_ ? 1 : 0;
    c.leftover = whole ? n.free_whole * model::kMilliGpuPerGpu : n.free_milli[best] - static_cast<int>(job_.gpu_milli);
    if (first_fit_) c.leftover = 0;
    return c;
  }

  NodeAssignment Assign(Choice&& c) const {
    NodeAssignment a;
    a.node = view_.nodes()[c.pos].id;
    a.gpus = std::move(c.gpus);
    a.gpu_milli = job_.fractional() ? job_.gpu_milli : model::kMilliGpuPerGpu;
    a.cpu_milli = job_.cpu_milli;
    a.mem_mib = job_.mem_mib;
    return a;
  }

  // Best node for a one-part job; stops early at a perfect fit.
  std::optional<Choice> PlaceOne(int model) const {
    if (!first_fit_ && !job_.fractional() && TrivialJob(job_) && view_.UniformBarMarket(model)) {
      // Nodes of this model differ only in free GPUs, position and market, so the scan below
      // picks the node of the best market rank that comes first in (free GPUs, position) order
      // among those with enough free: the first such node of each market in the index. The walk
      // ends at a node of the best rank this model's markets allow (with one market, the first).
      const int floor = BestMarketRank(job_.market, view_.ModelMarketMask(model));
      const auto& by_free = view_.ByFreeWhole(model);
      int best_pos = -1;
      int best_rank = std::numeric_limits<int>::max();
      for (auto it = by_free.From(job_.gpus_per_node, po_.excluded); it != by_free.end(); ++it) {
        const int pos = it->second;
        const int rank = MarketRank(job_.market, view_.nodes()[pos].spec.market);
        if (rank < best_rank) {
          best_rank = rank;
          best_pos = pos;
          if (rank <= floor) break;
        }
      }
      if (best_pos < 0) return std::nullopt;
      Choice c = ChooseGpus(best_pos);
      c.market = best_rank;
      c.cold = Cold(best_pos);
      return c;
    }
    std::optional<Choice> best;
    const int best_market = BestMarketRank(job_.market, view_.market_mask());
    // Looks at one node in the scan; true once nothing later can be better.
    auto visit = [&](int pos) {
      if (!Eligible(pos)) return false;
      Choice c = job_.fractional() ? ChooseSlice(pos) : ChooseGpus(pos);
      c.market = MarketRank(job_.market, view_.nodes()[pos].spec.market);
      c.cold = Cold(pos);
      if (!best || Better(c, *best)) best = std::move(c);
      return best->split == 0 && best->hot == 0 && best->leftover == 0 && best->market <= best_market;
    };
    if (!job_.fractional()) {
      // A whole-GPU part fits only on a node in the free-GPU index with enough free (Eligible):
      // none there, none anywhere. A few there, in position order, are what the scan below
      // would stop at, in the order it would (its list is in position order), without reading
      // every other node of the model (first fit, or a job with labels, on a busy cluster).
      const int64_t room = view_.NodesWithFreeWhole(model, job_.gpus_per_node);
      if (room == 0) return std::nullopt;
      constexpr int64_t kFew = 16;
      if (room <= kFew && view_.NodesInPositionOrder(model)) {
        std::array<int, kFew> few;
        size_t count = 0;
        const auto& by_free = view_.ByFreeWhole(model);
        for (auto it = by_free.From(job_.gpus_per_node); it != by_free.end() && count < few.size(); ++it) {
          few[count++] = it->second;
        }
        std::sort(few.begin(), few.begin() + static_cast<long>(count));
        for (size_t k = 0; k < count; ++k) {
          if (visit(few[k])) break;
        }
        return best;
      }
    }
    for (int pos : view_.NodesOfModel(model)) {
      if (visit(pos)) break;
    }
    return best;
  }

  // Whether PlaceOne or PlaceGang would place the job on this model, without choosing GPUs. Both
  // succeed exactly when enough nodes are eligible (a whole-GPU job's eligible nodes are in the
  // free-GPU index): PlaceOne takes the best of them, and PlaceGang, when no rack or zone holds
  // the gang, spans racks with the first `nodes` of them.
  bool Fits(int model) const {
    const int n = job_.nodes;
    if (job_.fractional()) {
      int count = 0;
      for (int pos : view_.NodesOfModel(model)) {
        if (Eligible(pos) && ++count >= n) return true;
      }
      return false;
    }
    const bool no_exclusions = !po_.excluded || po_.excluded->empty();
    if (no_exclusions && TrivialJob(job_)) return view_.NodesWithFreeWhole(model, job_.gpus_per_node) >= n;
    const auto& by_free = view_.ByFreeWhole(model);
    int count = 0;
    for (auto it = by_free.From(job_.gpus_per_node, po_.excluded); it != by_free.end(); ++it) {
      if (Eligible(it->second) && ++count >= n) return true;
    }
    return false;
  }

  // A gang: all parts in one rack if possible, else one zone, else the fewest racks.
  std::optional<std::vector<Choice>> PlaceGang(int model) const {
    const int n = job_.nodes;
    if (!first_fit_ && !job_.fractional() && TrivialJob(job_) && view_.UniformModel(model)) {
      // Nodes of this model differ only in free GPUs and position: the candidates in the order
      // the scan below sorts them are the nodes with enough free GPUs in (free GPUs, position)
      // order. Count them per rack group and take the tightest group that holds the gang, as
      // the scan does; if no group holds it, the scan below spans zones and racks.
      const auto& by_free = view_.ByFreeWhole(model);
      const bool no_exclusions = !po_.excluded || po_.excluded->empty();
      if (no_exclusions && view_.NodesWithFreeWhole(model, job_.gpus_per_node) < n) return std::nullopt;
      const auto from = by_free.From(job_.gpus_per_node, po_.excluded);
      std::vector<int> per_group(view_.group_count(), 0);
      int total = 0;
      for (auto it = from; it != by_free.end(); ++it) {
        ++per_group[view_.nodes()[it->second].group];
        ++total;
      }
      if (total < n) return std::nullopt;
      int best = -1;
      for (int g = 0; g < view_.group_count(); ++g) {
        if (per_group[g] < n) continue;
        if (best < 0 || per_group[g] < per_group[best] ||
            (per_group[g] == per_group[best] && view_.group_name(g) < view_.group_name(best))) {
          best = g;
        }
      }
      if (best >= 0) {
        std::vector<Choice> out;
        for (auto it = from; it != by_free.end() && static_cast<int>(out.size()) < n; ++it) {
          const int pos = it->second;
          if (view_.nodes()[pos].group != best) continue;
          out.push_back(ChooseGpus(pos));
          out.back().market = MarketRank(job_.market, view_.nodes()[pos].spec.market);
          out.back().cold = Cold(pos);
        }
        return out;
      }
    }
    std::vector<Choice> cands;
    auto consider = [&](int pos) {
      if (!Eligible(pos)) return;
      cands.push_back(ChooseGpus(pos));
      cands.back().market = MarketRank(job_.market, view_.nodes()[pos].spec.market);
      cands.back().cold = Cold(pos);
    };
    if (!job_.fractional()) {
      // Only schedulable nodes with enough whole GPUs free are eligible: read them from the
      // free-GPU index instead of every node (the sort below orders them the same either way).
      const auto& by_free = view_.ByFreeWhole(model);
      for (auto it = by_free.From(job_.gpus_per_node, po_.excluded); it != by_free.end(); ++it) {
        consider(it->second);
      }
    } else {
      for (int pos : view_.NodesOfModel(model)) consider(pos);
    }
    if (static_cast<int>(cands.size()) < n) return std::nullopt;
    std::sort(cands.begin(), cands.end(), Better);
    auto zone_of = [&](const Choice& c) {
      const auto& labels = view_.nodes()[c.pos].spec.labels;
      auto it = labels.find(model::kLabelZone);
      return it == labels.end() ? std::string() : it->second;
    };
    // Level 1: one rack group; level 2: one zone. Pick the tightest group that holds the gang.
    for (int level = 1; level <= 2; ++level) {
      std::map<std::string, std::vector<const Choice*>> groups;
      for (const Choice& c : cands) {
        std::string key = level == 1 ? view_.group_name(view_.nodes()[c.pos].group) : zone_of(c);
        groups[key].push_back(&c);
      }
      const std::vector<const Choice*>* best = nullptr;
      for (const auto& [key, list] : groups) {
        if (static_cast<int>(list.size()) < n) continue;
        // Best fit: the tightest group. First fit: the group whose first node comes first.
        bool better = !best || (first_fit_ ? list.front()->pos < best->front()->pos : list.size() < best->size());
        if (better) best = &list;
      }
      if (best) {
        std::vector<Choice> out;
        for (int i = 0; i < n; ++i) out.push_back(*(*best)[i]);
        return out;
      }
    }
    // Span racks: take whole racks with the most candidates first.
    std::map<int, std::vector<const Choice*>> by_group;
    for (const Choice& c : cands) by_group[view_.nodes()[c.pos].group].push_back(&c);
    std::vector<const std::vector<const Choice*>*> order;
    for (const auto& [g, list] : by_group) order.push_back(&list);
    std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) { return a->size() > b->size(); });
    std::vector<Choice> out;
    for (const auto* list : order) {
      for (const Choice* c : *list) {
        if (static_cast<int>(out.size()) < n) out.push_back(*c);
      }
    }
    return out;
  }

  // Whether the job can never run on this model, whatever runs there now. `count` gets how many
  // of its nodes could hold one part (counted only as far as the job's node count).
  bool Never(int model, int& count) const {
    count = 0;
    if (!job_.fractional() && view_.MaxGpusPerNode(model) < job_.gpus_per_node) return true;
    if (TrivialJob(job_)) {
      if (job_.nodes == 1) return false;
      const auto& nodes = view_.NodesOfModel(model);
      if (view_.MinGpusPerNode(model) >= job_.gpus_per_node) {  // every node of the model counts
        count = static_cast<int>(std::min<size_t>(nodes.size(), static_cast<size_t>(job_.nodes)));
        return count < job_.nodes;
      }
      for (int pos : nodes) {
        count += view_.nodes()[pos].spec.gpus >= job_.gpus_per_node;
        if (count >= job_.nodes) return false;
      }
    } else {
      for (int pos : view_.NodesOfModel(model)) {
        count += StaticallyFits(job_, view_.nodes()[pos]);
        if (count >= job_.nodes) return false;
      }
    }
    return count < job_.nodes;
  }
  bool Never(int model) const {
    int count = 0;
    return Never(model, count);
  }

  // Why the job can never run on this model (Never), or empty if it could some day.
  std::string NeverReason(int model) const {
    int count = 0;
    if (!Never(model, count)) return "";
    const std::string& name = view_.models()[model];
    if (job_.fractional() == false && view_.MaxGpusPerNode(model) < job_.gpus_per_node) {
      return "needs " + std::to_string(job_.gpus_per_node) + " GPUs per node but the largest " + name +
             " node has " + std::to_string(view_.MaxGpusPerNode(model));
    }
    std::string what = std::to_string(job_.nodes) + " " + name + " node(s) with " +
                       std::to_string(job_.gpus_per_node) + (job_.gpus_per_node == 1 ? " GPU" : " GPUs");
    if (!job_.constraints.empty()) {
      std::vector<std::string> kv;
      for (const auto& [k, v] : job_.constraints) kv.push_back(k + "=" + v);
      what += ", labels " + Join(kv, ",");
    }
    if (job_.market != MarketPreference::kAny) what += std::string(", market ") + model::MarketPreferenceName(job_.market);
    if (!job_.environment.empty()) what += ", environment " + job_.environment;
    if (job_.cpu_milli || job_.mem_mib) {
      what += ", " + std::to_string(job_.cpu_milli / 1000) + " CPUs and " + std::to_string(job_.mem_mib) + " MiB";
    }
    return "needs " + what + " but only " + std::to_string(count) + " such node(s) exist";
  }

  std::string WaitReason(int model) const {
    if (!po_.explain) return "";
    const std::string& name = view_.models()[model];
    int largest = 0, qualifying = 0;
    for (int pos : view_.NodesOfModel(model)) {
      const Node& n = view_.nodes()[pos];
      if (!n.schedulable()) continue;
      largest = std::max(largest, n.free_whole);
      qualifying += Eligible(pos) ? 1 : 0;
    }
    if (job_.fractional()) {
      return "waiting for a " + name + " GPU with " + std::to_string(job_.gpu_milli) + " milli-GPU free";
    }
    if (job_.nodes > 1) {
      return "gang waits for " + std::to_string(job_.nodes) + " " + name + " nodes with " +
             std::to_string(job_.gpus_per_node) + " free GPUs each (" + std::to_string(qualifying) +
             " such node(s) now)";
    }
    return "waiting for " + std::to_string(job_.gpus_per_node) + " free " + name + " GPUs on one node (" +
           std::to_string(view_.FreeWholeGpus(model)) + " free in total, largest free block " +
           std::to_string(largest) + ")";
  }

 private:
  const JobSpec& job_;
  const ClusterView& view_;
  const PlaceOptions& po_;
  int hot_c_;
  bool first_fit_;
};

}  // namespace

PlaceResult TopologyPlacement::Place(const JobSpec& job, const ClusterView& view, const PlaceOptions& po) const {
  PlaceResult out;
  // The models to try, in order (on the stack for the usual few; Place is asked very often).
  constexpr size_t kInline = 16;
  std::array<int, kInline> inline_models;
  std::vector<int> more_models;
  size_t model_count = 0;
  auto add_model = [&](int m) {
    if (model_count < kInline) {
      inline_models[model_count] = m;
    } else {
      if (more_models.empty()) more_models.assign(inline_models.begin(), inline_models.end());
      more_models.push_back(m);
    }
    ++model_count;
  };
  if (job.gpu_models.empty()) {
    for (size_t m = 0; m < view.models().size(); ++m) add_model(static_cast<int>(m));
  } else {
    for (const auto& name : job.gpu_models) {
      int m = view.ModelIndex(name);
      if (m >= 0) add_model(m);
    }
  }
  const std::span<const int> models =
      model_count > kInline ? std::span<const int>(more_models) : std::span<const int>(inline_models.data(), model_count);
  if (models.empty()) {
    out.kind = PlaceResult::Kind::kInfeasible;
    if (po.explain) {
      // (A job without GPUs is told so only where there is no node at all: nodes without GPUs
      // add no model.)
      out.reason = job.gpu_models.empty() ? (job.total_gpu_milli() == 0 && view.nodes().empty() ? "the cluster has no nodes"
                                                                                              : "the cluster has no GPU nodes")
                                          : "no node has GPU model " + Join(job.gpu_models, " or ") +
                                                " (the cluster has: " + Join(view.models(), ", ") + ")";
    }
    return out;
  }
  Placer placer(job, view, po, o_);
  const int64_t need = job.total_gpu_milli();
  std::vector<std::string> never, wait;
  bool ever = false;
  for (int m : models) {
    if (placer.Never(m)) {
      if (po.explain) never.push_back(placer.NeverReason(m));
      continue;
    }
    ever = true;
    bool enough = job.fractional() ? view.FreeMilli(m) >= need : view.FreeWholeGpus(m) * model::kMilliGpuPerGpu >= need;
    if (enough && po.answer_only) {
      if (placer.Fits(m)) {
        out.kind = PlaceResult::Kind::kPlaced;
        return out;
      }
    } else if (enough) {
      if (job.nodes == 1) {
        if (std::optional<Choice> c = placer.PlaceOne(m)) {
          out.kind = PlaceResult::Kind::kPlaced;
          out.placement.gpu_model = view.models()[m];
          out.placement.parts.push_back(placer.Assign(std::move(*c)));
          return out;
        }
      } else if (auto gang = placer.PlaceGang(m)) {
        out.kind = PlaceResult::Kind::kPlaced;
        out.placement.gpu_model = view.models()[m];
        out.placement.parts.reserve(gang->size());
        for (Choice& c : *gang) out.placement.parts.push_back(placer.Assign(std::move(c)));
        return out;
      }
    }
    if (po.explain) wait.push_back(placer.WaitReason(m));
  }
  out.kind = ever ? PlaceResult::Kind::kWait : PlaceResult::Kind::kInfeasible;
  if (po.explain) out.reason = Join(ever ? wait : never, "; ");
  return out;
}

Result<std::unique_ptr<PlacementPolicy>> MakeTopologyPlacement(const std::map<std::string, std::string>& opts) {
  TopologyPlacementOptions o;
  for (const auto& [k, v] : opts) {
    if (k == "hot" || k == "hot_c") {
      auto n = ParseInt(v);
      if (!n || *n < 0 || *n > 150) return Status::InvalidArgument("hot must be a temperature in °C (0..150), got '" + v + "'");
      o.hot_c = static_cast<int>(*n);
    } else if (k == "fit") {
      if (v == "best") {
        o.fit = Fit::kBest;
      } else if (v == "first") {
        o.fit = Fit::kFirst;
      } else {
        return Status::InvalidArgument("fit must be best or first, got '" + v + "'");
      }
    } else {
      return Status::InvalidArgument("unknown placement option '" + k + "' (known: hot, fit)");
    }
  }
  return std::unique_ptr<PlacementPolicy>(std::make_unique<TopologyPlacement>(o));
}

}  // namespace gpufleet::sched
