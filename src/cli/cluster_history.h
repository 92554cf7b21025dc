// The controller's own job history, as `gpufleet history` lists it and as a trace: the one code
// path behind `gpufleet history` (all outputs, -o jsonl included) and `gpufleet plan
// --from-cluster`, so a plan made from the live cluster sees exactly the jobs that `history -o
// jsonl` exports. Private to src/cli/.
//
// Thread-safety: the functions use the client they are given; one thread at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api/job_summary.h"
#include "cli/client.h"
#include "common/time.h"
#include "sim/trace.h"

namespace gpufleet::cli::client {

struct JobListQuery {
  std::string team;   // empty: every team the token may see
  std::string state;  // comma-separated states; empty: all
  int64_t limit = INT64_MAX;
  // Only jobs submitted at or after this; listing stops at the first page older than it.
  std::optional<Time> submitted_since;
};

// The outcome of a fetch: the value, or `error` (a message ready to print, and its exit code).
template <typename T>
struct Fetched {
  T value{};
  ApiResult error;  // ok() unless the fetch failed
  bool ok() const { return error.ok(); }
};

// GET /v1/jobs in pages of at most 1000, newest first.
Fetched<std::vector<api::JobSummary>> ListJobs(ApiClient& client, const JobListQuery& query);

// The finished jobs of `jobs` that ran, oldest first, each as the JSON Lines trace row that
// `gpufleet sim` and `gpufleet plan` read (sim::TraceJsonLine): its shape from its record, its
// work = the time it held its GPUs over all attempts (a job that named no GPU model gets the one
// it ran on). One GET /v1/jobs/{id} per finished job. Jobs that held no GPU (CPU-only: `gpus: 0`)
// are left out, counted in `*cpu_only` when given: a trace is of GPU work.
Fetched<std::vector<std::string>> TraceLinesOf(ApiClient& client, const std::vector<api::JobSummary>& jobs,
                                               int64_t now_ms, int64_t* cpu_only = nullptr);

// The cluster's finished jobs as a trace, read back with the JSON Lines trace reader that `plan
// --trace jobs.jsonl` uses (so both paths agree to the field): ListJobs, TraceLinesOf, ReadTrace.
// `listed` is how many jobs the controller listed (finished or not), `cpu_only` how many
// finished jobs held no GPU and were left out.
struct ClusterTrace {
  sim::Trace trace;
  int64_t listed = 0;
  int64_t cpu_only = 0;
};
Fetched<ClusterTrace> FetchClusterTrace(ApiClient& client, const JobListQuery& query, int64_t now_ms);

}  // namespace gpufleet::cli::client
