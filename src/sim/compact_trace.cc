#include "sim/compact_trace.h"

#include <algorithm>
#include <charconv>
#include <functional>

#include "common/check.h"
#include "common/radix_sort.h"
#include "sim/trace.h"

namespace gpufleet::sim {
namespace {

// Every field of a JobSpec but its submit time, with `b_name` for b's name. A field added to
// JobSpec must be added here too (CompactTraceTest.JobSpecHasTheFieldsTheShapeKnows fails until
// it is).
bool SameShape(const model::JobSpec& a, const model::JobSpec& b, std::string_view b_name) {
  return a.name == b_name && a.team == b.team && a.priority == b.priority && a.gpus_per_node == b.gpus_per_node &&
         a.nodes == b.nodes && a.gpu_milli == b.gpu_milli && a.gpu_models == b.gpu_models &&
         a.cpu_milli == b.cpu_milli && a.mem_mib == b.mem_mib && a.duration_estimate == b.duration_estimate &&
         a.checkpoint_interval == b.checkpoint_interval && a.constraints == b.constraints && a.market == b.market &&
         a.max_cost_micros == b.max_cost_micros && a.environment == b.environment;
}

uint64_t Mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ULL + (h >> 29); }

// Over the fields that tell real traces' jobs apart, with `name` for the spec's name; SameShape
// settles the rest.
uint64_t ShapeHash(const model::JobSpec& s, std::string_view name) {
  std::hash<std::string_view> str;
  uint64_t h = 0xcbf29ce484222325ULL;
  h = Mix(h, str(s.team));
  h = Mix(h, str(name));
  h = Mix(h, static_cast<uint64_t>(s.gpus_per_node));
  h = Mix(h, static_cast<uint64_t>(s.nodes));
  h = Mix(h, static_cast<uint64_t>(s.gpu_milli));
  h = Mix(h, static_cast<uint64_t>(static_cast<int64_t>(s.priority)));
  for (const std::string& m : s.gpu_models) h = Mix(h, str(m));
  return h;
}

}  // namespace

CompactTrace CompactTrace::Of(const std::vector<TraceJob>& jobs) {
  CompactTrace t;
  t.Reserve(jobs.size());
  for (const TraceJob& j : jobs) t.Add(j);
  return t;
}

void CompactTrace::Reserve(size_t jobs) {
  submit_ms_.reserve(jobs);
  work_ms_.reserve(jobs);
  shape_.reserve(jobs);
  id_end_.reserve(jobs);
}

uint32_t CompactTrace::ShapeOf(const model::JobSpec& spec, bool without_name) {
  // Looked up as the shape it would be (no submit time; no name when the name is the id), and
  // copied only when new: a trace has far fewer shapes than jobs.
  const std::string_view name = without_name ? std::string_view() : std::string_view(spec.name);
  const uint64_t h = ShapeHash(spec, name);
  auto [lo, hi] = shape_by_hash_.equal_range(h);
  for (auto it = lo; it != hi; ++it) {
    if (SameShape(shapes_[it->second], spec, name)) return it->second;
  }
  CHECK(shapes_.size() < kShapeMask) << "too many distinct job shapes for a compact trace";
  const uint32_t index = static_cast<uint32_t>(shapes_.size());
  model::JobSpec& shape = shapes_.emplace_back(spec);
  shape.submit = Time();
  if (without_name) shape.name.clear();
  shape_by_hash_.emplace(h, index);
  return index;
}

void CompactTrace::Add(const TraceJob& job) {
  const bool name_is_id = !job.id.empty() && job.spec.name == job.id;
  submit_ms_.push_back(job.spec.submit.millis());
  work_ms_.push_back(job.work.millis());
  shape_.push_back(ShapeOf(job.spec, name_is_id) | (name_is_id ? kNameIsId : 0));
  ids_ += job.id;
  id_end_.push_back(ids_.size());
}

void CompactTrace::AppendNumbered(const CompactTrace& other, int64_t first_id) {
  // Other's shapes are numbered by their first job there; looked up here in that order, the new
  // ones get the numbers they would have had if its jobs had been added one by one.
  std::vector<uint32_t> index(other.shapes_.size());
  for (size_t k = 0; k < other.shapes_.size(); ++k) index[k] = ShapeOf(other.shapes_[k], /*without_name=*/false);
  Reserve(size() + other.size());
  submit_ms_.insert(submit_ms_.end(), other.submit_ms_.begin(), other.submit_ms_.end());
  work_ms_.insert(work_ms_.end(), other.work_ms_.begin(), other.work_ms_.end());
  char digits[24];
  for (size_t i = 0; i < other.size(); ++i) {
    CHECK((other.shape_[i] & kNameIsId) == 0) << "AppendNumbered: job " << other.id(i) << " is named by its id";
    shape_.push_back(index[other.shape_[i]]);
    auto [end, ec] = std::to_chars(digits, digits + sizeof(digits), first_id + static_cast<int64_t>(i));
    ids_.append(digits, end);
    id_end_.push_back(ids_.size());
  }
}

std::string_view CompactTrace::id(size_t i) const {
  const uint64_t begin = i == 0 ? 0 : id_end_[i - 1];
  return std::string_view(ids_).substr(begin, id_end_[i] - begin);
}

model::JobSpec CompactTrace::Spec(size_t i) const {
  model::JobSpec spec = shape(i);
  spec.submit = submit(i);
  if (shape_[i] & kNameIsId) spec.name = std::string(id(i));
  return spec;
}

TraceJob CompactTrace::Job(size_t i) const {
  TraceJob job;
  job.id = std::string(id(i));
  job.spec = Spec(i);
  job.work = work(i);
  return job;
}

void CompactTrace::SortBySubmit() {
  if (std::is_sorted(submit_ms_.begin(), submit_ms_.end())) return;
  CHECK(size() <= UINT32_MAX) << "a compact trace holds at most 2^32 jobs";
  // Radix-sorted (stable: ties keep their order) by submit time, each job carrying its position.
  std::vector<std::pair<uint64_t, uint32_t>> keyed(size());
  for (size_t i = 0; i < size(); ++i) keyed[i] = {OrderedBits(submit_ms_[i]), static_cast<uint32_t>(i)};
  RadixSort(keyed, [](const std::pair<uint64_t, uint32_t>& k) { return k.first; });
  std::vector<uint32_t> order(size());
  for (size_t i = 0; i < size(); ++i) order[i] = keyed[i].second;
  auto permute = [&](auto& column) {
    std::remove_reference_t<decltype(column)> out;
    out.reserve(column.size());
    for (uint32_t k : order) out.push_back(column[k]);
    column = std::move(out);
  };
  permute(submit_ms_);
  permute(work_ms_);
  permute(shape_);
  std::string ids;
  ids.reserve(ids_.size());
  std::vector<uint64_t> ends;
  ends.reserve(id_end_.size());
  for (uint32_t k : order) {
    ids += id(k);
    ends.push_back(ids.size());
  }
  ids_ = std::move(ids);
  id_end_ = std::move(ends);
}

void CompactTrace::Truncate(size_t jobs) {
  if (jobs >= size()) return;
  submit_ms_.resize(jobs);
  work_ms_.resize(jobs);
  shape_.resize(jobs);
  id_end_.resize(jobs);
  ids_.resize(jobs == 0 ? 0 : id_end_.back());
}

}  // namespace gpufleet::sim
