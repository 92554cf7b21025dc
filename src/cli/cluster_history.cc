#include "cli/cluster_history.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <unistd.h>

#include "api/codec.h"
#include "cli/client_common.h"

namespace gpufleet::cli::client {
namespace {

// How long a job held its GPUs, from its transitions: the time spent starting, running or
// stopping, over all attempts (a fast job can go from starting straight to succeeded).
int64_t HeldMs(const std::vector<api::Transition>& history, int64_t now_ms) {
  auto holds = [](api::JobState s) {
    return s == api::JobState::kStarting || s == api::JobState::kRunning || s == api::JobState::kStopping;
  };
  int64_t total = 0, since = -1;
  for (const api::Transition& h : history) {
    const int64_t at = h.at.millis();
    const bool from = holds(h.from), to = holds(h.to);
    if (to && !from) since = at;
    if (from && !to && since >= 0) {
      total += at - since;
      since = -1;
    }
  }
  if (since >= 0) total += now_ms - since;
  return total;
}

// The cluster's own history as a trace job: its shape from the record where the caller may see
// it (CPUs, memory, estimate, checkpoints, constraints too), else from the summary; the time it
// held its GPUs as its work; a job that named no GPU model gets the one it ran on, which is the
// GPU its work was measured on (the planner's --gpu keeps only the jobs of its model).
sim::TraceJob TraceJobOf(const api::JobSummary& j, const json& detail, int64_t work_ms) {
  sim::TraceJob t;
  t.id = std::to_string(j.id.value());
  bool from_record = false;
  if (detail.contains("record")) {
    if (auto rec = api::JobRecordFromJson(detail["record"]); rec.ok()) {
      t.spec = rec->request.spec;
      from_record = true;
    }
  }
  if (!from_record) {
    t.spec.gpus_per_node = j.gpus_per_node;
    t.spec.gpu_milli = j.gpu_milli;
    t.spec.nodes = j.nodes;
    t.spec.gpu_models = j.gpu_models;
  }
  t.spec.name = j.name;
  t.spec.team = j.team;
  t.spec.priority = j.priority;
  t.spec.submit = j.submitted;
  if (t.spec.gpu_models.empty() && j.placement && !j.placement->gpu_model.empty()) {
    t.spec.gpu_models = {j.placement->gpu_model};
  }
  t.work = Duration::Millis(work_ms);
  return t;
}

ApiResult Failed(int code, const std::string& message) {
  ApiResult r;
  r.error = message;
  r.exit_code = code;
  return r;
}

}  // namespace

Fetched<std::vector<api::JobSummary>> ListJobs(ApiClient& client, const JobListQuery& query) {
  Fetched<std::vector<api::JobSummary>> out;
  // Pages of at most 1000 (the controller's largest), newest first, until `limit` jobs.
  constexpr int64_t kPage = 1000;
  int64_t cursor = 0;
  // The controller filters states within each page (after its limit): with a state asked for,
  // whole pages are read until `limit` jobs matched or the history ends.
  while (static_cast<int64_t>(out.value.size()) < query.limit) {
    const int64_t want = query.limit - static_cast<int64_t>(out.value.size());
    std::map<std::string, std::string> q = {{"limit", std::to_string(query.state.empty() ? std::min(kPage, want) : kPage)}};
    if (cursor > 0) q["cursor"] = std::to_string(cursor);
    if (!query.team.empty()) q["team"] = query.team;
    if (!query.state.empty()) q["state"] = query.state;
    ApiResult r = client.Get("/v1/jobs", q);
    if (!r.ok()) {
      out.error = std::move(r);
      return out;
    }
    auto page = DecodeJobList(r.body);
    if (!page.ok()) {
      out.error = Failed(kExitFailed, "the controller's answer: " + page.status().message());
      return out;
    }
    bool all_older = !page->empty();
    for (auto& j : *page) {
      if (query.submitted_since && j.submitted < *query.submitted_since) continue;
      all_older = false;
      out.value.push_back(std::move(j));
    }
    cursor = IntField(r.body, "next_cursor");
    // Newest first: a page with nothing in the window ends it.
    if (cursor <= 0 || (query.submitted_since && all_older)) break;
  }
  std::stable_sort(out.value.begin(), out.value.end(),
                   [](const api::JobSummary& x, const api::JobSummary& y) { return x.id.value() > y.id.value(); });
  if (static_cast<int64_t>(out.value.size()) > query.limit) out.value.resize(static_cast<size_t>(query.limit));
  return out;
}

Fetched<std::vector<std::string>> TraceLinesOf(ApiClient& client, const std::vector<api::JobSummary>& jobs,
                                               int64_t now_ms, int64_t* cpu_only) {
  Fetched<std::vector<std::string>> out;
  // Oldest first, as a trace is read.
  for (auto it = jobs.rbegin(); it != jobs.rend(); ++it) {
    const api::JobSummary& j = *it;
    // Finished jobs only: a running one's work is not known yet.
    if (j.attempt == 0 || !IsTerminalState(api::JobStateName(j.state))) continue;
    if (j.gpus_per_node <= 0) {
      if (cpu_only != nullptr) ++*cpu_only;
      continue;
    }
    ApiResult d = client.Get("/v1/jobs/" + std::to_string(j.id.value()));
    if (!d.ok()) {
      out.error = std::move(d);
      return out;
    }
    auto history = DecodeHistory(d.body);
    if (!history.ok()) {
      out.error = Failed(kExitFailed, "the controller's answer: " + history.status().message());
      return out;
    }
    const int64_t work_ms = HeldMs(*history, now_ms);
    if (work_ms <= 0) continue;
    out.value.push_back(sim::TraceJsonLine(TraceJobOf(j, d.body, work_ms)));
  }
  return out;
}

Fetched<ClusterTrace> FetchClusterTrace(ApiClient& client, const JobListQuery& query, int64_t now_ms) {
  Fetched<ClusterTrace> out;
  auto jobs = ListJobs(client, query);
  if (!jobs.ok()) {
    out.error = std::move(jobs.error);
    return out;
  }
  out.value.listed = static_cast<int64_t>(jobs.value.size());
  auto lines = TraceLinesOf(client, jobs.value, now_ms, &out.value.cpu_only);
  if (!lines.ok()) {
    out.error = std::move(lines.error);
    return out;
  }
  if (lines.value.empty()) return out;
  // Through a file and the trace reader, exactly as `history -o jsonl > f; plan --trace f` does.
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
  if (ec) dir = "/tmp";
  std::string path = (dir / "gpufleet-history-XXXXXX.jsonl").string();
  const int fd = mkstemps(path.data(), 6);
  if (fd < 0) return {{}, Failed(kExitFailed, "cannot make a temporary file in " + dir.string() + ": " + std::strerror(errno))};
  std::string text;
  for (const std::string& line : lines.value) text += line + "\n";
  bool written = true;
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      written = false;
      break;
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (!written) {
    std::filesystem::remove(path, ec);
    return {{}, Failed(kExitFailed, "cannot write the history to " + path)};
  }
  sim::TraceOptions options;
  options.format = sim::TraceFormat::kJsonl;
  auto trace = sim::ReadTrace(path, options);
  std::filesystem::remove(path, ec);
  if (!trace.ok()) {
    // The temporary file is gone: name the history, not it.
    std::string why = trace.status().message();
    if (why.starts_with(path)) why = "line" + why.substr(path.size());
    return {{}, Failed(kExitUsage, "the controller's history does not read as a trace: " + why)};
  }
  out.value.trace = std::move(*trace);
  return out;
}

}  // namespace gpufleet::cli::client
