// Arrays stored once: what the SQLite and PostgreSQL stores share of it (docs/operations.md,
// "Arrays stored once"). A submission of at least kMinStoredArray jobs that differ only in their
// api::ArrayTaskFields is stored as one array row (the first task's record, the id range, team
// and submit time) plus the tasks' own fields in chunks of kArrayChunk; a task gets its own job
// row and its "submitted" transition at its first change. Reads answer as if every task had had
// its row from the start. The stores keep the rows; this file decides which tasks a listing
// shows, merges them with the job rows, and decodes a task from its array's record and chunk.
//
// Thread-safety: ArrayTaskCache is used under its store's lock; the rest are free functions.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/records.h"
#include "common/status.h"
#include "store/state_store.h"

namespace gpufleet::store {

// Submissions of at least this many jobs that differ only in their array fields are stored once.
inline constexpr size_t kMinStoredArray = 16;
// Tasks per stored chunk: a read of one task decodes one chunk.
inline constexpr int64_t kArrayChunk = 1024;

// Whether `jobs` (ids assigned) are stored as one array.
bool StoreAsArray(std::vector<api::JobRecord>& jobs);
// The JSON text of chunk `chunk` of the jobs' own fields (api::DumpArrayTasks).
std::string ArrayChunkText(const std::vector<api::JobRecord>& jobs, int64_t chunk);
// How many chunks `jobs` take.
int64_t ArrayChunks(size_t jobs);
// The one transition of a task that has no row yet.
api::Transition SubmittedTransition(int64_t submitted_ms);

// A stored array's id range, as a listing reads it.
struct ArraySpan {
  int64_t first_id = 0;
  int64_t last_id = 0;
};
// A task of an array listed without a row of its own.
struct ArrayTaskRef {
  int64_t id = 0;
  int64_t first_id = 0;
};

// The tasks without rows that a listing by `filter` shows, in its order: of `spans`, the arrays
// that match the filter's team and time, in the listing's order (oldest first without a limit,
// newest first with one), the ids from `floor_id` on; `ids_with_rows(lo, hi, max)` reads the ids
// in lo..hi that have rows, in the same order, the first `max` of them (0: all). With a limit,
// no more than it.
Result<std::vector<ArrayTaskRef>> ArrayTasksToList(
    const JobFilter& filter, int64_t floor_id, const std::vector<ArraySpan>& spans,
    const std::function<Result<std::vector<int64_t>>(int64_t lo, int64_t hi, int64_t max)>& ids_with_rows);
// The lowest id a listing's array tasks may have (0: any): with a limit and a full page of job
// rows (`rows` of them, the last one `last_row_id`), one above the page's last id.
int64_t ArrayListingFloor(const JobFilter& filter, size_t rows, int64_t last_row_id);
// `jobs` and the tasks merged in the listing's order (under its limit); `task` reads one task.
Result<std::vector<api::JobRecord>> MergeArrayTasks(const JobFilter& filter, std::vector<api::JobRecord> jobs,
                                                    const std::vector<ArrayTaskRef>& tasks,
                                                    const std::function<Result<api::JobRecord>(const ArrayTaskRef&)>& task);

// The last array record and chunk decoded, so that reading an array's tasks in order decodes the
// record once and each chunk once. Stored arrays never change; Forget() when a store writes one
// (the ids of an array whose transaction rolled back may be handed out again).
class ArrayTaskCache {
 public:
  // What a store reads for the cache: the array's record text, or one chunk's text. NotFound
  // when the row is missing.
  using ReadText = std::function<Result<std::string>()>;

  // Task `id` of the array starting at `first_id`, as submitted. `where` names the store in
  // errors ("/var/lib/gpufleet/state.db"); a record or chunk that does not decode is Internal
  // naming the job.
  Result<api::JobRecord> Task(int64_t first_id, JobId id, const std::string& where, const ReadText& read_record,
                              const std::function<Result<std::string>(int64_t chunk)>& read_chunk);
  void Forget();

 private:
  int64_t first_id_ = 0;  // 0: nothing decoded
  api::JobRecord base_;
  int64_t chunk_ = -1;
  nlohmann::json tasks_;
};

}  // namespace gpufleet::store
