#include "sched/cluster_view.h"

#include <algorithm>
#include <limits>

namespace gpufleet::sched {

const char* NodeHealthName(NodeHealth h) {
  switch (h) {
    case NodeHealth::kUp: return "up";
    case NodeHealth::kDraining: return "draining";
    case NodeHealth::kDown: return "down";
  }
  return "?";
}

void FreeGpuIndex::Insert(int count, int pos) {
  if (counts_.size() <= static_cast<size_t>(count)) {
    counts_.resize(count + 1, 0);
    levels_.resize(count + 1);
  }
  Level& l = levels_[count];
  const size_t w = static_cast<size_t>(pos) >> 6;
  if (l.words.size() <= w) {
    l.words.resize(w + 1, 0);
    l.summary.resize((w >> 6) + 1, 0);
  }
  l.words[w] |= uint64_t{1} << (pos & 63);
  l.summary[w >> 6] |= uint64_t{1} << (w & 63);
  ++counts_[count];
  ++size_;
}

void FreeGpuIndex::Erase(int count, int pos) {
  Level& l = levels_[count];
  const size_t w = static_cast<size_t>(pos) >> 6;
  l.words[w] &= ~(uint64_t{1} << (pos & 63));
  if (l.words[w] == 0) l.summary[w >> 6] &= ~(uint64_t{1} << (w & 63));
  --counts_[count];
  --size_;
}

void FreeGpuIndex::Move(int from, int to, int pos) {
  Erase(from, pos);
  Insert(to, pos);
}

int64_t FreeGpuIndex::CountAtLeast(int count) const {
  int64_t total = 0;
  for (size_t c = static_cast<size_t>(std::max(count, 0)); c < counts_.size(); ++c) total += counts_[c];
  return total;
}

std::pair<int, int> FreeGpuIndex::Next(int count, int pos, const NodeMask* skip) const {
  auto open = [skip](const std::vector<uint64_t>& words, size_t w) {
    return skip ? words[w] & ~skip->Word(w) : words[w];
  };
  for (size_t c = static_cast<size_t>(count); c < counts_.size(); ++c, pos = 0) {
    if (counts_[c] == 0) continue;
    const Level& l = levels_[c];
    size_t w = static_cast<size_t>(pos) >> 6;
    if (w >= l.words.size()) continue;
    const uint64_t word = open(l.words, w) & (~uint64_t{0} << (pos & 63));
    if (word) return {static_cast<int>(c), static_cast<int>((w << 6) + __builtin_ctzll(word))};
    // The next words after w that are not zero, from the summary, until one has an open position.
    ++w;
    size_t s = w >> 6;
    if (s >= l.summary.size()) continue;
    uint64_t sword = l.summary[s] & (~uint64_t{0} << (w & 63));
    for (;;) {
      while (!sword && ++s < l.summary.size()) sword = l.summary[s];
      if (!sword) break;
      w = (s << 6) + __builtin_ctzll(sword);
      sword &= sword - 1;
      if (const uint64_t open_word = open(l.words, w)) {
        return {static_cast<int>(c), static_cast<int>((w << 6) + __builtin_ctzll(open_word))};
      }
    }
  }
  return kEnd;
}

int ClusterView::InternModel(const std::string& name) {
  for (size_t i = 0; i < models_.size(); ++i) {
    if (models_[i] == name) return static_cast<int>(i);
  }
  models_.push_back(name);
  GrowModels();
  return static_cast<int>(models_.size() - 1);
}

void ClusterView::GrowModels() {
  nodes_by_model_.emplace_back();
  mask_by_model_.emplace_back();
  free_whole_by_model_.push_back(0);
  free_milli_by_model_.push_back(0);
  max_gpus_by_model_.push_back(0);
  min_gpus_by_model_.push_back(std::numeric_limits<int>::max());
  by_free_whole_.emplace_back();
  market_nodes_.push_back({0, 0, 0});
  nvlink_nodes_.push_back(0);
  warm_gpus_.push_back(0);
  unsorted_.push_back(0);
}

int ClusterView::ModelIndex(const std::string& name) const {
  for (size_t i = 0; i < models_.size(); ++i) {
    if (models_[i] == name) return static_cast<int>(i);
  }
  return -1;
}

const ClusterView::Node* ClusterView::Find(NodeId id) const {
  int i = IndexOf(id);
  return i < 0 ? nullptr : &nodes_[i];
}

int ClusterView::IndexOf(NodeId id) const {
  const int64_t v = id.value();
  if (v >= 0 && static_cast<uint64_t>(v) < dense_index_.size() && dense_index_[v] >= 0) return dense_index_[v];
  if (index_.empty()) return -1;
  auto it = index_.find(v);
  return it == index_.end() ? -1 : it->second;
}

// Adds (sign=+1) or removes (sign=-1) a node's free GPUs from the per-model totals; only
// schedulable nodes count.
void ClusterView::Account(const Node& n, int sign) {
  int64_t gpus_milli = static_cast<int64_t>(n.spec.gpus) * model::kMilliGpuPerGpu;
  if (n.health != NodeHealth::kDown) online_milli_ += sign * gpus_milli;
  if (n.model < 0 || !n.schedulable()) return;
  schedulable_milli_ += sign * gpus_milli;
  int64_t milli = 0;
  for (int32_t f : n.free_milli) milli += f;
  free_whole_by_model_[n.model] += sign * n.free_whole;
  free_milli_by_model_[n.model] += sign * milli;
  Index(n, sign);
}

void ClusterView::Recount(const Node& n, int old_free_whole, int64_t milli_delta) {
  if (n.model < 0 || !n.schedulable()) return;
  free_whole_by_model_[n.model] += n.free_whole - old_free_whole;
  free_milli_by_model_[n.model] += milli_delta;
  Reindex(n, old_free_whole);
}

void ClusterView::Reindex(const Node& n, int old_free_whole) {
  if (n.model < 0 || !n.schedulable() || n.free_whole == old_free_whole) return;
  by_free_whole_[n.model].Move(old_free_whole, n.free_whole, static_cast<int>(&n - nodes_.data()));
}

void ClusterView::Index(const Node& n, int sign) {
  if (n.model < 0 || !n.schedulable()) return;
  const int pos = static_cast<int>(&n - nodes_.data());
  if (sign > 0) {
    by_free_whole_[n.model].Insert(n.free_whole, pos);
  } else {
    by_free_whole_[n.model].Erase(n.free_whole, pos);
  }
}

void ClusterView::CountTraits(const Node& n, int sign) {
  if (n.model < 0) return;
  market_nodes_[n.model][static_cast<int>(n.spec.market)] += sign;
  if (!n.spec.nvlink_domain.empty()) nvlink_nodes_[n.model] += sign;
  int64_t warm = 0;
  for (int16_t t : n.temp_c) warm += t != 0 ? 1 : 0;
  warm_gpus_[n.model] += sign * warm;
}

int64_t ClusterView::NodesWithFreeWhole(int model, int gpus) const {
  return by_free_whole_[model].CountAtLeast(gpus);
}

bool ClusterView::UniformModel(int model) const {
  int markets = 0;
  for (int64_t c : market_nodes_[model]) markets += c > 0 ? 1 : 0;
  return markets <= 1 && UniformBarMarket(model);
}

bool ClusterView::UniformBarMarket(int model) const {
  return nvlink_nodes_[model] == 0 && warm_gpus_[model] == 0 && !unsorted_[model];
}

int ClusterView::ModelMarketMask(int model) const {
  int mask = 0;
  for (size_t m = 0; m < market_nodes_[model].size(); ++m) mask |= market_nodes_[model][m] > 0 ? 1 << m : 0;
  return mask;
}

void ClusterView::StartTrial() {
  CHECK(!in_trial_) << "trials do not nest";
  in_trial_ = true;
  journal_size_ = 0;
  if (journaled_.size() < nodes_.size()) journaled_.resize(nodes_.size(), 0);
  saved_free_whole_by_model_ = free_whole_by_model_;
  saved_free_milli_by_model_ = free_milli_by_model_;
  saved_schedulable_milli_ = schedulable_milli_;
  saved_online_milli_ = online_milli_;
}

void ClusterView::Journal(int pos) {
  if (!in_trial_ || journaled_[pos]) return;
  journaled_[pos] = 1;
  if (journal_size_ == journal_.size()) journal_.emplace_back();
  Saved& s = journal_[journal_size_++];
  const Node& n = nodes_[pos];
  s.pos = pos;
  s.free_milli = n.free_milli;  // reuses the entry's buffer
  s.held_milli = n.held_milli;
  s.free_whole = n.free_whole;
  s.free_cpu_milli = n.free_cpu_milli;
  s.free_mem_mib = n.free_mem_mib;
}

void ClusterView::EndTrial() {
  CHECK(in_trial_) << "no trial to end";
  for (size_t i = journal_size_; i-- > 0;) {
    const Saved& s = journal_[i];
    Node& n = nodes_[s.pos];
    const int free_whole = n.free_whole;
    n.free_milli = s.free_milli;
    n.held_milli = s.held_milli;
    n.free_whole = s.free_whole;
    n.free_cpu_milli = s.free_cpu_milli;
    n.free_mem_mib = s.free_mem_mib;
    Reindex(n, free_whole);
    journaled_[s.pos] = 0;
  }
  journal_size_ = 0;
  free_whole_by_model_ = saved_free_whole_by_model_;
  free_milli_by_model_ = saved_free_milli_by_model_;
  schedulable_milli_ = saved_schedulable_milli_;
  online_milli_ = saved_online_milli_;
  in_trial_ = false;
}

Status ClusterView::UpsertNode(NodeId id, model::NodeSpec spec) {
  GF_RETURN_IF_ERROR(spec.Validate());
  CHECK(!in_trial_) << "nodes change during a trial";
  ++changes_;
  market_mask_ |= 1 << static_cast<int>(spec.market);
  std::string zone = spec.labels.count(model::kLabelZone) ? spec.labels.at(model::kLabelZone) : "";
  std::string rack = spec.labels.count(model::kLabelRack) ? spec.labels.at(model::kLabelRack) : "";
  std::string group_key = zone + "/" + rack;
  int group;
  if (auto it = group_index_.find(group_key); it != group_index_.end()) {
    group = it->second;
  } else {
    group = static_cast<int>(groups_.size());
    groups_.push_back(group_key);
    group_index_[group_key] = group;
  }

  int pos = IndexOf(id);
  if (pos >= 0) {
    Node& n = nodes_[pos];
    // Keep existing allocations when the node is re-registered with the same shape.
    bool same_shape = n.spec.gpus == spec.gpus && n.spec.gpu_model == spec.gpu_model;
    if (!same_shape) {
      // Other GPUs: what was hot about the old ones no longer applies (their temperatures are
      // reset below). The same GPUs stay held until their telemetry says they cooled.
      Account(n, -1);
      for (size_t g = 0; g < n.hot.size(); ++g) Unhold(n, g);
      Account(n, +1);
    }
    if (!same_shape) {
      bool busy = n.free_whole != n.spec.gpus || n.free_cpu_milli != n.spec.cpu_milli ||
                  n.free_mem_mib != n.spec.mem_mib;
      if (busy) {
        return Status::FailedPrecondition("node " + spec.name +
                                          " changed its GPUs while jobs hold them");
      }
    }
    Account(n, -1);
    CountTraits(n, -1);
    int64_t used_cpu = n.spec.cpu_milli - n.free_cpu_milli;
    int64_t used_mem = n.spec.mem_mib - n.free_mem_mib;
    if (!same_shape) {
      int old_model = n.model;
      n.free_milli.assign(spec.gpus, model::kMilliGpuPerGpu);
      n.temp_c.assign(spec.gpus, 0);
      n.held_milli.assign(spec.gpus, 0);
      n.hot.assign(spec.gpus, 0);
      n.hot_count = 0;
      n.free_whole = spec.gpus;
      n.model = spec.gpus > 0 ? InternModel(spec.gpu_model) : -1;
      if (old_model >= 0) {
        // Leave the old model's books: its node list and its largest and smallest node sizes.
        auto& list = nodes_by_model_[old_model];
        list.erase(std::remove(list.begin(), list.end(), pos), list.end());
        mask_by_model_[old_model].Reset(pos);
        int largest = 0, smallest = std::numeric_limits<int>::max();
        for (int other : list) {
          largest = std::max(largest, nodes_[other].spec.gpus);
          smallest = std::min(smallest, nodes_[other].spec.gpus);
        }
        max_gpus_by_model_[old_model] = largest;
        min_gpus_by_model_[old_model] = smallest;
      }
    }
    if (spec.cpu_milli < used_cpu || spec.mem_mib < used_mem) {
      CountTraits(n, +1);
      Account(n, +1);
      return Status::FailedPrecondition("node " + spec.name + " shrank below the CPUs or memory its jobs hold");
    }
    n.free_cpu_milli = spec.cpu_milli - used_cpu;
    n.free_mem_mib = spec.mem_mib - used_mem;
    n.group = group;
    n.spec = std::move(spec);
    if (n.model >= 0) {
      auto& list = nodes_by_model_[n.model];
      if (std::find(list.begin(), list.end(), pos) == list.end()) {
        if (!list.empty() && list.back() > pos) unsorted_[n.model] = 1;
        list.push_back(pos);
        mask_by_model_[n.model].SetGrowing(pos);
      }
      max_gpus_by_model_[n.model] = std::max(max_gpus_by_model_[n.model], n.spec.gpus);
      min_gpus_by_model_[n.model] = std::min(min_gpus_by_model_[n.model], n.spec.gpus);
    }
    CountTraits(n, +1);
    Account(n, +1);
    return Status::Ok();
  }

  Node n;
  n.id = id;
  n.model = spec.gpus > 0 ? InternModel(spec.gpu_model) : -1;
  n.free_milli.assign(spec.gpus, model::kMilliGpuPerGpu);
  n.temp_c.assign(spec.gpus, 0);
  n.held_milli.assign(spec.gpus, 0);
  n.hot.assign(spec.gpus, 0);
  n.free_whole = spec.gpus;
  n.free_cpu_milli = spec.cpu_milli;
  n.free_mem_mib = spec.mem_mib;
  n.group = group;
  n.spec = std::move(spec);
  pos = static_cast<int>(nodes_.size());
  // Ids are dense in practice (the controller's and the simulator's count up from 1); a stray
  // large one goes to the map instead of growing the vector.
  if (id.value() >= 0 && id.value() < 4 * static_cast<int64_t>(nodes_.size()) + 4096) {
    if (dense_index_.size() <= static_cast<uint64_t>(id.value())) dense_index_.resize(id.value() + 1, -1);
    dense_index_[id.value()] = pos;
  } else {
    index_[id.value()] = pos;
  }
  if (n.model >= 0) {
    nodes_by_model_[n.model].push_back(pos);
    mask_by_model_[n.model].SetGrowing(pos);
    max_gpus_by_model_[n.model] = std::max(max_gpus_by_model_[n.model], n.spec.gpus);
    min_gpus_by_model_[n.model] = std::min(min_gpus_by_model_[n.model], n.spec.gpus);
  }
  nodes_.push_back(std::move(n));
  CountTraits(nodes_.back(), +1);
  Account(nodes_.back(), +1);
  return Status::Ok();
}

Status ClusterView::SetHealth(NodeId id, NodeHealth health) {
  CHECK(!in_trial_) << "health changes during a trial";
  ++changes_;
  int pos = IndexOf(id);
  if (pos < 0) return Status::NotFound("unknown node " + std::to_string(id.value()));
  Node& n = nodes_[pos];
  Account(n, -1);
  n.health = health;
  Account(n, +1);
  return Status::Ok();
}

Status ClusterView::SetTemperatures(NodeId id, const std::vector<int>& temperature_c) {
  int pos = IndexOf(id);
  if (pos < 0) return Status::NotFound("unknown node " + std::to_string(id.value()));
  Node& n = nodes_[pos];
  if (temperature_c.size() != n.temp_c.size()) {
    return Status::InvalidArgument("node " + n.spec.name + " has " + std::to_string(n.temp_c.size()) +
                                   " GPUs but telemetry reports " +
                                   std::to_string(temperature_c.size()));
  }
  CHECK(!in_trial_) << "telemetry during a trial";
  ++changes_;
  CountTraits(n, -1);
  for (size_t i = 0; i < temperature_c.size(); ++i) {
    n.temp_c[i] = static_cast<int16_t>(std::clamp(temperature_c[i], -100, 300));
  }
  CountTraits(n, +1);
  if (hot_c_ > 0) {
    Account(n, -1);
    for (size_t i = 0; i < n.temp_c.size(); ++i) {
      if (!n.hot[i] && n.temp_c[i] >= hot_c_) Hold(n, i);
      else if (n.hot[i] && n.temp_c[i] <= resume_c_) Unhold(n, i);
    }
    Account(n, +1);
  }
  return Status::Ok();
}

void ClusterView::SetThermalLimits(int hot_c, int resume_c) {
  CHECK(!in_trial_) << "thermal limits change during a trial";
  ++changes_;
  hot_c_ = hot_c;
  resume_c_ = std::min(resume_c, hot_c);
  for (Node& n : nodes_) {
    Account(n, -1);
    for (size_t i = 0; i < n.temp_c.size(); ++i) {
      bool hot = hot_c_ > 0 && (n.hot[i] ? n.temp_c[i] > resume_c_ : n.temp_c[i] >= hot_c_);
      if (hot && !n.hot[i]) Hold(n, i);
      if (!hot && n.hot[i]) Unhold(n, i);
    }
    Account(n, +1);
  }
}

void ClusterView::Hold(Node& n, size_t g) {
  if (n.hot[g]) return;
  n.hot[g] = 1;
  ++n.hot_count;
  if (n.free_milli[g] == model::kMilliGpuPerGpu) --n.free_whole;
  n.held_milli[g] = n.free_milli[g];
  n.free_milli[g] = 0;
}

void ClusterView::Unhold(Node& n, size_t g) {
  if (!n.hot[g]) return;
  n.hot[g] = 0;
  --n.hot_count;
  n.free_milli[g] += n.held_milli[g];
  n.held_milli[g] = 0;
  if (n.free_milli[g] == model::kMilliGpuPerGpu) ++n.free_whole;
}

bool ClusterView::CanAllocate(const model::Placement& p) const {
  for (const auto& part : p.parts) {
    int pos = IndexOf(part.node);
    if (pos < 0) return false;
    const Node& n = nodes_[pos];
    if (part.cpu_milli > n.free_cpu_milli || part.mem_mib > n.free_mem_mib) return false;
    for (int g : part.gpus) {
      if (g < 0 || g >= n.spec.gpus || n.free_milli[g] < part.gpu_milli) return false;
    }
  }
  return true;
}

void ClusterView::Allocate(const model::Placement& p) {
  CHECK(CanAllocate(p)) << "allocation of busy or unknown resources";
  if (!in_trial_) ++changes_;
  for (const auto& part : p.parts) {
    const int pos = IndexOf(part.node);
    Journal(pos);
    Node& n = nodes_[pos];
    const int free_whole = n.free_whole;
    for (int g : part.gpus) {
      if (n.free_milli[g] == model::kMilliGpuPerGpu) --n.free_whole;
      n.free_milli[g] -= static_cast<int32_t>(part.gpu_milli);
    }
    n.free_cpu_milli -= part.cpu_milli;
    n.free_mem_mib -= part.mem_mib;
    Recount(n, free_whole, -static_cast<int64_t>(part.gpus.size()) * part.gpu_milli);
  }
}

void ClusterView::Release(const model::Placement& p) {
  if (!in_trial_) ++changes_;
  for (const auto& part : p.parts) ReleaseAt(part);
}

void ClusterView::ReleasePart(const model::NodeAssignment& part) {
  if (!in_trial_) ++changes_;
  ReleaseAt(part);
}

void ClusterView::ReleaseAt(const model::NodeAssignment& part) {
  int pos = IndexOf(part.node);
  CHECK(pos >= 0) << "release on unknown node " << part.node;
  Journal(pos);
  Node& n = nodes_[pos];
  const int free_whole = n.free_whole;
  int64_t freed = 0;
  for (int g : part.gpus) {
    if (n.hot_count > 0 && n.hot[g]) {
      // Too hot for new work: what the job gives back is withheld until the GPU cools.
      n.held_milli[g] += static_cast<int32_t>(part.gpu_milli);
      CHECK(n.held_milli[g] <= model::kMilliGpuPerGpu) << "double release on " << n.spec.name;
      continue;
    }
    n.free_milli[g] += static_cast<int32_t>(part.gpu_milli);
    freed += part.gpu_milli;
    CHECK(n.free_milli[g] <= model::kMilliGpuPerGpu) << "double release on " << n.spec.name;
    if (n.free_milli[g] == model::kMilliGpuPerGpu) ++n.free_whole;
  }
  n.free_cpu_milli += part.cpu_milli;
  n.free_mem_mib += part.mem_mib;
  Recount(n, free_whole, freed);
}

void ClusterView::Reacquire(const model::Placement& p) {
  if (!in_trial_) ++changes_;
  for (const auto& part : p.parts) ReacquireAt(part);
}

void ClusterView::ReacquirePart(const model::NodeAssignment& part) {
  if (!in_trial_) ++changes_;
  ReacquireAt(part);
}

void ClusterView::ReacquireAt(const model::NodeAssignment& part) {
  const int pos = IndexOf(part.node);
  CHECK(pos >= 0) << "reacquire on unknown node " << part.node;
  Journal(pos);
  Node& n = nodes_[pos];
  const int free_whole = n.free_whole;
  int64_t taken = 0;
  for (int g : part.gpus) {
    if (n.hot_count > 0 && n.hot[g]) {
      CHECK(n.held_milli[g] >= part.gpu_milli) << "reacquire of GPUs not released on " << n.spec.name;
      n.held_milli[g] -= static_cast<int32_t>(part.gpu_milli);
      continue;
    }
    CHECK(n.free_milli[g] >= part.gpu_milli) << "reacquire of GPUs not released on " << n.spec.name;
    if (n.free_milli[g] == model::kMilliGpuPerGpu) --n.free_whole;
    n.free_milli[g] -= static_cast<int32_t>(part.gpu_milli);
    taken += part.gpu_milli;
  }
  n.free_cpu_milli -= part.cpu_milli;
  n.free_mem_mib -= part.mem_mib;
  Recount(n, free_whole, -taken);
}

int64_t ClusterView::FreeMilliAll() const {
  int64_t total = 0;
  for (int64_t f : free_milli_by_model_) total += f;
  return total;
}

}  // namespace gpufleet::sched
