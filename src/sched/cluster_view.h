// ClusterView: the scheduler's picture of the nodes — what each has, what is free, which GPUs
// run hot — with per-model counts of free GPUs so that a pass rejects jobs that cannot fit in
// O(1) instead of rescanning every node.
//
// A ClusterView is a value: copying it gives a what-if world (used to find a job's earliest
// start and the smallest set of preemption victims). Not thread-safe; the scheduler owns it.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "model/types.h"

namespace gpufleet::sched {

enum class NodeHealth { kUp, kDraining, kDown };
const char* NodeHealthName(NodeHealth h);

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
    int free_whole = 0;               // GPUs with nothing allocated
    int64_t free_cpu_milli = 0;
    int64_t free_mem_mib = 0;
    int group = 0;  // index of (zone, rack); gangs prefer one group

    bool schedulable() const { return health == NodeHealth::kUp; }
  };

  // Makes this view equal to `other`. When both have the same nodes (the common case for a
  // scratch what-if copy), only the free-capacity state is copied, without allocating.
  void AssignFrom(const ClusterView& other);

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

  const std::vector<Node>& nodes() const { return nodes_; }
  const Node* Find(NodeId id) const;
  int IndexOf(NodeId id) const;  // -1 if unknown

  // GPU models present, in the order they first joined.
  const std::vector<std::string>& models() const { return models_; }
  int ModelIndex(const std::string& name) const;  // -1 if no node has it
  // Node indices of one model, in join order.
  const std::vector<int>& NodesOfModel(int model) const { return nodes_by_model_[model]; }
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
  // Bit (1 << Market) for every market a node has ever been seen in.
  int market_mask() const { return market_mask_; }
  int group_count() const { return static_cast<int>(groups_.size()); }
  const std::string& group_name(int g) const { return groups_[g]; }

 private:
  void Account(const Node& n, int sign);
  int InternModel(const std::string& name);
  // Turns GPU g of n hot (withholding its free capacity) or cool (giving it back). Caller has
  // taken n out of the books (Account -1) and puts it back after.
  static void Hold(Node& n, size_t g);
  static void Unhold(Node& n, size_t g);
  int hot_c_ = 0;
  int resume_c_ = 0;

  std::vector<Node> nodes_;
  std::unordered_map<int64_t, int> index_;  // NodeId -> position
  std::vector<std::string> models_;
  std::vector<std::vector<int>> nodes_by_model_;
  std::vector<int64_t> free_whole_by_model_;
  std::vector<int64_t> free_milli_by_model_;
  std::vector<int> max_gpus_by_model_;
  int market_mask_ = 0;
  int64_t structure_version_ = 0;  // bumped when nodes are added or change their spec
  int64_t schedulable_milli_ = 0;
  int64_t online_milli_ = 0;
  std::vector<std::string> groups_;
  std::unordered_map<std::string, int> group_index_;
};

}  // namespace gpufleet::sched
