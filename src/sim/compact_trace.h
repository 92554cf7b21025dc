// A trace's jobs held compactly, for replays of millions of jobs.
//
// A TraceJob carries a whole model::JobSpec (strings, a map, a vector: 256 bytes before its heap
// parts) although most jobs of a real trace differ only in their submit time, work and id: Philly
// has a few hundred distinct (team, GPUs) shapes among 82k jobs. CompactTrace keeps each distinct
// shape (a JobSpec apart from its submit time) once, and per job only its submit time, work, shape
// and id: 28 bytes plus the id's characters.
//
// Jobs keep the order they were added in; Job(i) gives back exactly the TraceJob that was added.
//
// Thread-safety: a value; const methods may be called from several threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/time.h"
#include "model/types.h"

namespace gpufleet::sim {

struct TraceJob;

class CompactTrace {
 public:
  CompactTrace() = default;
  static CompactTrace Of(const std::vector<TraceJob>& jobs);

  void Reserve(size_t jobs);
  void Add(const TraceJob& job);
  // Adds `other`'s jobs after these, in their order, with the ids first_id, first_id + 1, ...
  // instead of their own: the rows of a trace without ids read apart (a trace numbers such rows
  // from 1, so a later part's numbers are known only once the parts before it are read). No job
  // of `other` may be named by its id (its name would no longer be its id).
  void AppendNumbered(const CompactTrace& other, int64_t first_id);

  size_t size() const { return submit_ms_.size(); }
  bool empty() const { return submit_ms_.empty(); }
  std::string_view id(size_t i) const;
  Time submit(size_t i) const { return Time::FromMillis(submit_ms_[i]); }
  Duration work(size_t i) const { return Duration::Millis(work_ms_[i]); }
  // The job's shape: its spec with no submit time and, when the job's name is its id, no name.
  // For the fields every job of a shape shares (team, GPUs, checkpoint interval, ...).
  const model::JobSpec& shape(size_t i) const { return shapes_[shape_[i] & kShapeMask]; }
  // The job's whole spec, submit time and name included.
  model::JobSpec Spec(size_t i) const;
  TraceJob Job(size_t i) const;
  // Distinct shapes held (for tests and reports of memory use).
  size_t shapes() const { return shapes_.size(); }

  // Orders the jobs by submit time, ties in their present order.
  void SortBySubmit();
  // Keeps the first `jobs` jobs.
  void Truncate(size_t jobs);

 private:
  // The top bit of a job's shape index says its name is its id (Alibaba pods are named by their
  // id; keeping the name in the shape would make every job a shape of its own).
  static constexpr uint32_t kNameIsId = 0x8000'0000u;
  static constexpr uint32_t kShapeMask = 0x7fff'ffffu;

  // The index of `spec`'s shape (its submit time left out, and its name with `without_name`).
  uint32_t ShapeOf(const model::JobSpec& spec, bool without_name);

  std::vector<int64_t> submit_ms_;
  std::vector<int64_t> work_ms_;
  std::vector<uint32_t> shape_;
  std::vector<uint64_t> id_end_;  // ids_[id_end_[i - 1], id_end_[i]) is job i's id
  std::string ids_;
  std::vector<model::JobSpec> shapes_;
  std::unordered_multimap<uint64_t, uint32_t> shape_by_hash_;
};

}  // namespace gpufleet::sim
