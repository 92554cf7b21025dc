#include "store/stored_arrays.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "api/codec.h"

namespace gpufleet::store {

bool StoreAsArray(std::vector<api::JobRecord>& jobs) {
  return jobs.size() >= kMinStoredArray && api::ShareAllButArrayTaskFields(jobs);
}

int64_t ArrayChunks(size_t jobs) { return (static_cast<int64_t>(jobs) + kArrayChunk - 1) / kArrayChunk; }

std::string ArrayChunkText(const std::vector<api::JobRecord>& jobs, int64_t chunk) {
  const size_t begin = static_cast<size_t>(chunk * kArrayChunk);
  const size_t end = std::min(jobs.size(), begin + static_cast<size_t>(kArrayChunk));
  return api::DumpArrayTasks(jobs, begin, end);
}

api::Transition SubmittedTransition(int64_t submitted_ms) {
  return api::Transition{Time::FromMillis(submitted_ms), api::JobState::kPending, api::JobState::kPending,
                         "submitted"};
}

int64_t ArrayListingFloor(const JobFilter& filter, size_t rows, int64_t last_row_id) {
  const bool full_page = filter.limit > 0 && rows > 0 && static_cast<int64_t>(rows) >= filter.limit;
  return full_page ? last_row_id + 1 : 0;
}

Result<std::vector<ArrayTaskRef>> ArrayTasksToList(
    const JobFilter& filter, int64_t floor_id, const std::vector<ArraySpan>& spans,
    const std::function<Result<std::vector<int64_t>>(int64_t lo, int64_t hi, int64_t max)>& ids_with_rows) {
  const bool newest_first = filter.limit > 0;
  const int64_t end_id = filter.before ? filter.before->value() : std::numeric_limits<int64_t>::max();
  // With a limit, the ids with rows are read a page at a time: a page needs at most `limit` tasks,
  // however many of the array's tasks have rows.
  const int64_t page = newest_first ? filter.limit + 64 : 0;
  std::vector<ArrayTaskRef> tasks;
  auto full = [&] { return newest_first && static_cast<int64_t>(tasks.size()) >= filter.limit; };
  for (const ArraySpan& span : spans) {
    const int64_t lo = std::max(span.first_id, floor_id);
    const int64_t hi = std::min(span.last_id, end_id - 1);
    // `next`: the next id to look at, walking in the listing's order.
    for (int64_t next = newest_first ? hi : lo; !full() && lo <= next && next <= hi;) {
      GF_ASSIGN_OR_RETURN(std::vector<int64_t> with_row,
                          newest_first ? ids_with_rows(lo, next, page) : ids_with_rows(next, hi, page));
      // Known up to the last id read when the page is full, else to the end of the range.
      const bool more = page > 0 && static_cast<int64_t>(with_row.size()) >= page;
      const int64_t through = more ? with_row.back() : (newest_first ? lo : hi);
      size_t r = 0;
      const int64_t step = newest_first ? -1 : 1;
      for (int64_t id = next; id != through + step && !full(); id += step) {
        if (r < with_row.size() && with_row[r] == id) {
          ++r;
          continue;
        }
        tasks.push_back({id, span.first_id});
      }
      next = through + step;
    }
    if (full()) break;
  }
  return tasks;
}

Result<std::vector<api::JobRecord>> MergeArrayTasks(const JobFilter& filter, std::vector<api::JobRecord> jobs,
                                                    const std::vector<ArrayTaskRef>& tasks,
                                                    const std::function<Result<api::JobRecord>(const ArrayTaskRef&)>& task) {
  if (tasks.empty()) return jobs;
  const bool newest_first = filter.limit > 0;
  auto comes_first = [&](int64_t a, int64_t b) { return newest_first ? a > b : a < b; };
  std::vector<api::JobRecord> out;
  out.reserve(jobs.size() + tasks.size());
  size_t j = 0;
  size_t t = 0;
  while (j < jobs.size() || t < tasks.size()) {
    if (newest_first && static_cast<int64_t>(out.size()) >= filter.limit) break;
    if (t == tasks.size() || (j < jobs.size() && comes_first(jobs[j].id.value(), tasks[t].id))) {
      out.push_back(std::move(jobs[j++]));
    } else {
      GF_ASSIGN_OR_RETURN(api::JobRecord one, task(tasks[t++]));
      out.push_back(std::move(one));
    }
  }
  return out;
}

Result<api::JobRecord> ArrayTaskCache::Task(int64_t first_id, JobId id, const std::string& where,
                                            const ReadText& read_record,
                                            const std::function<Result<std::string>(int64_t chunk)>& read_chunk) {
  // The error's words, built only when there is an error (this runs once per task listed).
  auto what = [&] {
    return where + ": job " + std::to_string(id.value()) + " (array " + std::to_string(first_id) + ")";
  };
  if (first_id_ != first_id) {
    first_id_ = 0;
    GF_ASSIGN_OR_RETURN(std::string text, read_record());
    auto j = api::ParseJson(text);
    if (!j.ok()) return Status::Internal(what() + ": its array's record does not decode: " + j.status().message());
    auto base = api::JobRecordFromJson(*j);
    if (!base.ok()) return Status::Internal(what() + ": its array's record does not decode: " + base.status().message());
    base_ = std::move(base).value();
    base_.id = JobId(first_id);
    first_id_ = first_id;
    chunk_ = -1;
  }
  const int64_t k = id.value() - first_id;
  if (k < 0) return Status::Internal(what() + ": before its array's first id");
  const int64_t chunk = k / kArrayChunk;
  if (chunk_ != chunk) {
    chunk_ = -1;
    GF_ASSIGN_OR_RETURN(std::string text, read_chunk(chunk));
    auto j = api::ParseJson(text);
    if (!j.ok()) return Status::Internal(what() + ": its chunk of tasks does not decode: " + j.status().message());
    if (!j->is_array()) return Status::Internal(what() + ": its chunk of tasks is not an array");
    tasks_ = std::move(j).value();
    chunk_ = chunk;
  }
  const size_t i = static_cast<size_t>(k % kArrayChunk);
  if (i >= tasks_.size()) return Status::Internal(what() + ": missing from its chunk of tasks");
  api::JobRecord job = base_;
  job.id = id;
  Status s = api::ApplyArrayTask(tasks_[i], "task", job);
  if (!s.ok()) return Status::Internal(what() + ": stored task does not decode: " + s.message());
  return job;
}

void ArrayTaskCache::Forget() {
  first_id_ = 0;
  chunk_ = -1;
  tasks_ = nlohmann::json();
}

}  // namespace gpufleet::store
