#include "api/records.h"

#include <array>
#include <utility>

namespace gpufleet::api {
namespace {

// One table per enum, in declaration order, so that the name and the parser cannot disagree.
constexpr std::array<std::pair<JobState, const char*>, 8> kJobStates = {{
    {JobState::kPending, "pending"},
    {JobState::kStarting, "starting"},
    {JobState::kRunning, "running"},
    {JobState::kStopping, "stopping"},
    {JobState::kSucceeded, "succeeded"},
    {JobState::kFailed, "failed"},
    {JobState::kCancelled, "cancelled"},
    {JobState::kPreempted, "preempted"},
}};
constexpr std::array<std::pair<NodeState, const char*>, 4> kNodeStates = {{
    {NodeState::kUp, "up"},
    {NodeState::kDraining, "draining"},
    {NodeState::kLost, "lost"},
    {NodeState::kGone, "gone"},
}};
constexpr std::array<std::pair<TokenKind, const char*>, 3> kTokenKinds = {{
    {TokenKind::kUser, "user"},
    {TokenKind::kJoin, "join"},
    {TokenKind::kAgent, "agent"},
}};

template <typename E, size_t N>
const char* NameOf(const std::array<std::pair<E, const char*>, N>& table, E value) {
  for (const auto& [e, name] : table) {
    if (e == value) return name;
  }
  return "?";
}

template <typename E, size_t N>
Result<E> Parse(const std::array<std::pair<E, const char*>, N>& table, const char* what,
                const std::string& s) {
  std::string valid;
  for (const auto& [e, name] : table) {
    if (s == name) return e;
    if (!valid.empty()) valid += ", ";
    valid += name;
  }
  return Status::InvalidArgument("unknown " + std::string(what) + " '" + s + "' (expected one of: " +
                                 valid + ")");
}

}  // namespace

const char* JobStateName(JobState s) { return NameOf(kJobStates, s); }
Result<JobState> ParseJobState(const std::string& s) { return Parse(kJobStates, "job state", s); }

bool IsTerminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
}

const char* NodeStateName(NodeState s) { return NameOf(kNodeStates, s); }
Result<NodeState> ParseNodeState(const std::string& s) { return Parse(kNodeStates, "node state", s); }

const char* TokenKindName(TokenKind k) { return NameOf(kTokenKinds, k); }
Result<TokenKind> ParseTokenKind(const std::string& s) { return Parse(kTokenKinds, "token kind", s); }

ArrayTaskFields TakeArrayTaskFields(JobRecord& job) {
  ArrayTaskFields f;
  std::swap(f.id, job.id);
  std::swap(f.array_index, job.array_index);
  std::swap(f.name, job.request.spec.name);
  std::swap(f.argv, job.request.argv);
  std::swap(f.workdir, job.request.workdir);
  std::swap(f.env, job.request.env);
  std::swap(f.array_params, job.request.array_params);
  return f;
}

void PutArrayTaskFields(JobRecord& job, ArrayTaskFields f) {
  job.id = f.id;
  job.array_index = f.array_index;
  job.request.spec.name = std::move(f.name);
  job.request.argv = std::move(f.argv);
  job.request.workdir = std::move(f.workdir);
  job.request.env = std::move(f.env);
  job.request.array_params = std::move(f.array_params);
}

bool ShareAllButArrayTaskFields(std::vector<JobRecord>& jobs) {
  if (jobs.empty()) return true;
  ArrayTaskFields first = TakeArrayTaskFields(jobs[0]);
  bool same = true;
  for (size_t i = 1; i < jobs.size() && same; ++i) {
    ArrayTaskFields own = TakeArrayTaskFields(jobs[i]);
    same = jobs[i] == jobs[0];
    PutArrayTaskFields(jobs[i], std::move(own));
  }
  PutArrayTaskFields(jobs[0], std::move(first));
  return same;
}

std::string JobsAuditObject(const std::vector<int64_t>& ids) {
  if (ids.size() == 1) return "job " + std::to_string(ids[0]);
  std::string out = "jobs ";
  for (size_t i = 0; i < ids.size();) {
    size_t end = i + 1;
    while (end < ids.size() && ids[end] == ids[end - 1] + 1) ++end;
    if (i > 0) out += ",";
    if (end - i >= 3) {
      out += std::to_string(ids[i]) + "-" + std::to_string(ids[end - 1]);
    } else {
      for (size_t k = i; k < end; ++k) out += (k > i ? "," : "") + std::to_string(ids[k]);
    }
    i = end;
  }
  if (ids.size() >= 3) out += " (" + std::to_string(ids.size()) + ")";
  return out;
}

}  // namespace gpufleet::api
