// TopologyPlacement ("topology"): the default placement policy.
//
// Assumptions: GPUs of one node that share an NVLink domain talk fast; nodes of one rack (then
// one zone) talk faster than nodes far apart; a whole free node is worth more than the same
// number of free GPUs scattered over partly used nodes, because only it can take an 8-GPU job.
//
// Rules, in order:
//  1. Models in the job's ordered any-of list, first preferred; a job that names none may use
//     any model, in the order the models joined the cluster.
//  2. A node qualifies if it is up, not excluded, has the model, carries every constraint label,
//     suits the job's market (on-demand jobs never land on spot nodes; spot jobs only on spot),
//     and has the GPUs, CPUs and memory free.
//  3. Gang all-or-nothing: every part or none. A multi-node gang goes to one rack if any rack
//     has enough qualifying nodes, else one zone, else the fewest racks.
//  4. Among qualifying nodes (tie-breaks in this order): the GPUs fit in one NVLink domain;
//     fewer hot GPUs (>= hot_c, default 80 °C); best fit — the fewest GPUs left free afterwards,
//     so whole free nodes stay whole; the earlier node. With fit=first the best-fit rule is
//     dropped: the earliest qualifying node wins, and a gang takes the first rack (then zone) in
//     node order that holds it — the "first fit" of YARN and of Tiresias' simulator.
//  5. Within a node: the tightest NVLink domain that holds the job, coolest GPUs first, lower
//     index on ties. A GPU slice goes to the partly used GPU it fits most tightly, else to a
//     whole GPU on the busiest node.
// "Ever": a job is infeasible when no set of nodes could hold it even if the cluster were empty
// (down nodes count: they may return); the reason names the limit it hits.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "common/status.h"
#include "sched/policy.h"

namespace gpufleet::sched {

enum class Fit {
  kBest,   // fewest GPUs left free on the node (default)
  kFirst,  // the earliest node that qualifies
};

struct TopologyPlacementOptions {
  int hot_c = 80;
  Fit fit = Fit::kBest;
};

class TopologyPlacement : public PlacementPolicy {
 public:
  explicit TopologyPlacement(TopologyPlacementOptions o = {}) : o_(o) {}
  std::string Name() const override { return o_.fit == Fit::kFirst ? "topology:first-fit" : "topology"; }
  PlaceResult Place(const model::JobSpec& job, const ClusterView& view,
                    const PlaceOptions& options) const override;

 private:
  TopologyPlacementOptions o_;
};

Result<std::unique_ptr<PlacementPolicy>> MakeTopologyPlacement(const std::map<std::string, std::string>& opts);

}  // namespace gpufleet::sched
