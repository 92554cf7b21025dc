// ClusterView: the scheduler's picture of the nodes — what each has, what is free, which GPUs
// run hot — with per-model counts of free GPUs so that a pass rejects jobs that cannot fit in
// O(1) instead of rescanning every node.
//
// A ClusterView is a value: copying it gives a what-if world. The scheduler's what-ifs (a job's
// earliest start, the smallest set of preemption victims) use a trial instead (StartTrial), which
// undoes its changes and so costs what it touches, not the size of the cluster.
// Not thread-safe; the scheduler owns it.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <unordered_map>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "model/types.h"

namespace gpufleet::sched {

enum class NodeHealth { kUp, kDraining, kDown };
const char* NodeHealthName(NodeHealth h);

// A set of node positions, one bit each (a reservation's nodes, the nodes claimed for stopping
// victims). Sized to the view's nodes when anything is in it; empty (size 0) holds nothing.
class NodeMask {
 public:
  // `n` positions, none in the set.
  void Assign(size_t n) {
    size_ = n;
    words_.assign((n + 63) >> 6, 0);
  }
  void clear() {
    size_ = 0;
    words_.clear();
  }
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  // (A position past the end is not in the set, as Word reads it.)
  bool operator[](size_t pos) const { return pos < size_ && ((words_[pos >> 6] >> (pos & 63)) & 1); }
  void Set(size_t pos) { words_[pos >> 6] |= uint64_t{1} << (pos & 63); }
  void Reset(size_t pos) { words_[pos >> 6] &= ~(uint64_t{1} << (pos & 63)); }
  // Set, growing the set to hold `pos` first if it is past the end.
  void SetGrowing(size_t pos) {
    if (pos >= size_) {
      size_ = pos + 1;
      words_.resize((size_ + 63) >> 6, 0);
    }
    Set(pos);
  }
  // Adds every position of `o`, growing to its size if it is larger.
  NodeMask& operator|=(const NodeMask& o) {
    if (o.size_ > size_) {
      size_ = o.size_;
      words_.resize(o.words_.size(), 0);
    }
    for (size_t w = 0; w < o.words_.size(); ++w) words_[w] |= o.words_[w];
    return *this;
  }
  void swap(NodeMask& o) {
    std::swap(size_, o.size_);
    words_.swap(o.words_);
  }
  bool operator==(const NodeMask& o) const = default;
  // Word w of the set (bit p of word w: position 64w + p); 0 past its end.
  uint64_t Word(size_t w) const { return w < words_.size() ? words_[w] : 0; }

 private:
  size_t size_ = 0;
  std::vector<uint64_t> words_;
};

// Node positions keyed by a small count (a node's whole free GPUs): one two-level bitset of
// positions per count. Walks them in (count, position) order, the order of a std::set<std::pair<int, int>>, but
// moving a node from one count to another is two bit flips instead of a tree erase and insert
// (a what-if search moves nodes millions of times in a replay).
class FreeGpuIndex {
 public:
  void Insert(int count, int pos);
  void Erase(int count, int pos);
  void Move(int from, int to, int pos);
  // Nodes filed under `count`, and under `count` or more.
  int64_t Count(int count) const {
    return count >= 0 && static_cast<size_t>(count) < counts_.size() ? counts_[count] : 0;
  }
  int64_t CountAtLeast(int count) const;
  bool empty() const { return size_ == 0; }

  // Forward iterator over (count, position) pairs in order, passing over the positions of a
  // mask when it has one.
  class Iterator {
   public:
    const std::pair<int, int>& operator*() const { return cur_; }
    const std::pair<int, int>* operator->() const { return &cur_; }
    Iterator& operator++() {
      cur_ = index_->Next(cur_.first, cur_.second + 1, skip_);
      return *this;
    }
    bool operator==(const Iterator& o) const { return cur_ == o.cur_; }
    bool operator!=(const Iterator& o) const { return cur_ != o.cur_; }

   private:
    friend class FreeGpuIndex;
    Iterator(const FreeGpuIndex* index, std::pair<int, int> cur, const NodeMask* skip)
        : index_(index), cur_(cur), skip_(skip) {}
    const FreeGpuIndex* index_;
    std::pair<int, int> cur_;
    const NodeMask* skip_;  // null: nothing passed over
  };
  // The first node with at least `count` free, and the end. With `skip`, the walk passes over
  // the positions in it 64 at a time (a reservation that holds most nodes costs a walk a word
  // per 64 of them, not a step per node).
  Iterator From(int count, const NodeMask* skip = nullptr) const {
    if (skip && skip->empty()) skip = nullptr;
    return Iterator(this, Next(std::max(count, 0), 0, skip), skip);
  }
  Iterator begin() const { return From(0); }
  Iterator end() const { return Iterator(this, kEnd, nullptr); }

 private:
  static constexpr std::pair<int, int> kEnd{-1, -1};
  // The first filed (count, position) at or after (count, pos) in order and not in `skip`; kEnd
  // if none.
  std::pair<int, int> Next(int count, int pos, const NodeMask* skip) const;
  // Per count: bit p of `words` set when position p is filed there, and bit w of `summary` set
  // when word w of `words` is not zero, so that a walk over a sparse count skips 64 empty words
  // at a time instead of reading each (the cost of a step stays flat as the cluster grows).
  struct Level {
    std::vector<uint64_t> words;
    std::vector<uint64_t> summary;
  };
  std::vector<Level> levels_;
  std::vector<int64_t> counts_;  // per count: positions filed
  int64_t size_ = 0;
};

class ClusterView {
 public:
  struct Node {
    NodeId id;
    model::NodeSpec spec;
    int model = -1;  // index into models(); -1 for a CPU-only node
    NodeHealth health = NodeHealth::kUp;
    std::vector<int32_t> free_milli;  // per GPU: milli-GPU not allocated
    std::vector<int16_t> temp_c;      // per GPU: last reported temperature
    // Thermal hold (SetThermalLimits): per GPU, the milli-GPU withheld from new work while it is
    // too hot, and whether it is (a GPU turns hot at the limit and cool again at the resume
    // temperature, so one hovering at the limit does not flap).
    std::vector<int32_t> held_milli;
    std::vector<uint8_t> hot;
    int hot_count = 0;                // GPUs in a thermal hold (hot set): with none, `hot` need not be read
    int free_whole = 0;               // GPUs with nothing allocated
    int64_t free_cpu_milli = 0;
    int64_t free_mem_mib = 0;
    int group = 0;  // index of (zone, rack); gangs prefer one group

    bool schedulable() const { return health == NodeHealth::kUp; }
  };

  // A trial: Allocate and Release between StartTrial and EndTrial are undone by EndTrial, which
  // puts every node they touched and every count back exactly as it was. Other changes are not
  // allowed during a trial; trials do not nest.
  void StartTrial();
  void EndTrial();
  // Counts the changes made outside a trial (allocations, releases, nodes, health, temperatures,
  // thermal limits): while it stays the same the view is as it was, so an answer read from it
  // earlier (a placement that failed) still holds.
  uint64_t changes() const { return changes_; }

  // Adds a node or, for a known id, replaces its spec (allocations are kept if they still fit).
  Status UpsertNode(NodeId id, model::NodeSpec spec);
  Status SetHealth(NodeId id, NodeHealth health);
  Status SetTemperatures(NodeId id, const std::vector<int>& temperature_c);
  // A GPU at or over `hot_c` takes no new work (its free capacity is withheld) until it cools to
  // `resume_c` or below; work already on it runs on. 0: off (the default; the simulator's).
  void SetThermalLimits(int hot_c, int resume_c);
  int thermal_limit() const { return hot_c_; }
  int thermal_resume() const { return resume_c_; }

  // Books or frees the resources of a placement. Allocate CHECKs that they are free.
  bool CanAllocate(const model::Placement& p) const;
  void Allocate(const model::Placement& p);
  void Release(const model::Placement& p);
  // Takes back exactly what Release(p) gave, where it went: the share of a GPU held for heat
  // comes back out of what is held, the rest out of what is free. A what-if's undo step (a GPU
  // that turned hot cannot be allocated again, so Allocate would refuse it).
  void Reacquire(const model::Placement& p);
  // The same for one part of a placement (a what-if that frees a job node by node).
  void ReleasePart(const model::NodeAssignment& part);
  void ReacquirePart(const model::NodeAssignment& part);

  const std::vector<Node>& nodes() const { return nodes_; }
  const Node* Find(NodeId id) const;
  int IndexOf(NodeId id) const;  // -1 if unknown

  // GPU models present, in the order they first joined.
  const std::vector<std::string>& models() const { return models_; }
  int ModelIndex(const std::string& name) const;  // -1 if no node has it
  // Node indices of one model, in join order.
  const std::vector<int>& NodesOfModel(int model) const { return nodes_by_model_[model]; }
  // The same positions as a set (sized to the last of them).
  const NodeMask& NodeMaskOfModel(int model) const { return mask_by_model_[model]; }
  // Whole free GPUs of a model on schedulable nodes.
  int64_t FreeWholeGpus(int model) const { return free_whole_by_model_[model]; }
  // Free milli-GPU of a model on schedulable nodes (slices of partly used GPUs included).
  int64_t FreeMilli(int model) const { return free_milli_by_model_[model]; }
  int64_t FreeMilliAll() const;
  // GPUs on schedulable nodes, all models, in milli-GPU.
  int64_t SchedulableMilli() const { return schedulable_milli_; }
  // GPUs on nodes that are up or draining (capacity that exists now).
  int64_t OnlineMilli() const { return online_milli_; }
  int MaxGpusPerNode(int model) const { return max_gpus_by_model_[model]; }
  // The fewest GPUs a node of the model has (INT_MAX while it has no node).
  int MinGpusPerNode(int model) const { return min_gpus_by_model_[model]; }
  // Schedulable nodes of a model ordered by (whole free GPUs, position): best fit without a scan.
  const FreeGpuIndex& ByFreeWhole(int model) const { return by_free_whole_[model]; }
  // Schedulable nodes of a model with at least `gpus` whole GPUs free.
  int64_t NodesWithFreeWhole(int model, int gpus) const;
  // True when the nodes of a model differ in nothing a whole-GPU placement ranks them by except
  // their free GPUs and position: one market, no NVLink domains, no temperature reported, and
  // NodesOfModel in position order.
  bool UniformModel(int model) const;
  // The same but for the market: nodes may differ in free GPUs, position and market.
  bool UniformBarMarket(int model) const;
  // NodesOfModel is in position order (nodes of the model joined in the order they are kept).
  bool NodesInPositionOrder(int model) const { return !unsorted_[model]; }
  // Bit (1 << Market) for every market a node of this model is in now.
  int ModelMarketMask(int model) const;
  // Bit (1 << Market) for every market a node has ever been seen in.
  int market_mask() const { return market_mask_; }
  int group_count() const { return static_cast<int>(groups_.size()); }
  const std::string& group_name(int g) const { return groups_[g]; }

 private:
  void Account(const Node& n, int sign);
  void Index(const Node& n, int sign);      // by_free_whole_ (schedulable nodes)
  void Reindex(const Node& n, int old_free_whole);
  // After an allocation or release on schedulable node n: the per-model totals move by its change
  // of whole free GPUs and by `milli_delta` free milli-GPU, and the index follows.
  void Recount(const Node& n, int old_free_whole, int64_t milli_delta);
  void CountTraits(const Node& n, int sign);  // what UniformModel reads
  void Journal(int pos);                    // saves node `pos` before a trial changes it
  void ReleaseAt(const model::NodeAssignment& part);
  void ReacquireAt(const model::NodeAssignment& part);
  void GrowModels();
  int InternModel(const std::string& name);
  // Turns GPU g of n hot (withholding its free capacity) or cool (giving it back). Caller has
  // taken n out of the books (Account -1) and puts it back after.
  static void Hold(Node& n, size_t g);
  static void Unhold(Node& n, size_t g);
  int hot_c_ = 0;
  int resume_c_ = 0;

  std::vector<Node> nodes_;
  // NodeId -> position: small ids (all of them, in practice) in a vector, others in a map.
  std::vector<int> dense_index_;
  std::unordered_map<int64_t, int> index_;
  std::vector<std::string> models_;
  std::vector<std::vector<int>> nodes_by_model_;
  std::vector<NodeMask> mask_by_model_;  // per model: nodes_by_model_ as a set
  std::vector<int64_t> free_whole_by_model_;
  std::vector<int64_t> free_milli_by_model_;
  std::vector<int> max_gpus_by_model_;
  std::vector<int> min_gpus_by_model_;
  int market_mask_ = 0;
  std::vector<FreeGpuIndex> by_free_whole_;  // per model: (free_whole, position)
  // Per model, what UniformModel reads: nodes per market, nodes with NVLink domains, GPUs with a
  // reported temperature, and whether a node list is out of position order.
  std::vector<std::array<int64_t, 3>> market_nodes_;
  std::vector<int64_t> nvlink_nodes_;
  std::vector<int64_t> warm_gpus_;
  std::vector<char> unsorted_;
  // Trial state: saved nodes (entries [0, journal_size_) are live; the rest keep their buffers).
  struct Saved {
    int pos = -1;
    std::vector<int32_t> free_milli;
    std::vector<int32_t> held_milli;
    int free_whole = 0;
    int64_t free_cpu_milli = 0;
    int64_t free_mem_mib = 0;
  };
  bool in_trial_ = false;
  uint64_t changes_ = 0;
  std::vector<Saved> journal_;
  size_t journal_size_ = 0;
  std::vector<char> journaled_;  // per node position
  std::vector<int64_t> saved_free_whole_by_model_;
  std::vector<int64_t> saved_free_milli_by_model_;
  int64_t saved_schedulable_milli_ = 0;
  int64_t saved_online_milli_ = 0;
  int64_t schedulable_milli_ = 0;
  int64_t online_milli_ = 0;
  std::vector<std::string> groups_;
  std::unordered_map<std::string, int> group_index_;
};

}  // namespace gpufleet::sched
