#include "testing/memory_store.h"

#include <algorithm>
#include <utility>

namespace gpufleet::testing {
namespace {

constexpr const char* kSchemaVersionKey = "schema_version";

}  // namespace

MemoryStore::MemoryStore() { meta_[kSchemaVersionKey] = "8"; }  // as the SQLite store's

void MemoryStore::FailNextWrite(Status error) {
  MutexLock lock(mu_);
  next_write_failure_ = std::move(error);
}

void MemoryStore::FailNextWrites(int count, Status error) {
  MutexLock lock(mu_);
  next_write_failure_ = std::move(error);
  failures_left_ = count;
}

Status MemoryStore::TakeFailure() {
  if (failures_left_ > 1) {
    --failures_left_;
    return next_write_failure_;
  }
  failures_left_ = 0;
  return std::exchange(next_write_failure_, Status::Ok());
}

Status MemoryStore::BeginWrite() {
  Status failure = TakeFailure();
  auto it = attached_.find(std::this_thread::get_id());
  if (it == attached_.end()) return failure;
  std::vector<api::AuditRecord> mine = std::move(it->second);
  attached_.erase(it);
  if (!failure.ok()) return failure;
  for (auto& a : mine) {
    a.seq = static_cast<int64_t>(audit_.size()) + 1;
    audit_.push_back(std::move(a));
  }
  return Status::Ok();
}

void MemoryStore::DropAttached() {
  MutexLock lock(mu_);
  attached_.erase(std::this_thread::get_id());
}

void MemoryStore::AttachAudit(std::vector<api::AuditRecord> records) {
  MutexLock lock(mu_);
  auto& mine = attached_[std::this_thread::get_id()];
  for (auto& r : records) mine.push_back(std::move(r));
}

Status MemoryStore::AppendAudit(const std::vector<api::AuditRecord>& records) {
  MutexLock lock(mu_);
  GF_RETURN_IF_ERROR(BeginWrite());
  for (auto a : records) {
    a.seq = static_cast<int64_t>(audit_.size()) + 1;
    audit_.push_back(std::move(a));
  }
  return Status::Ok();
}

Result<std::vector<api::AuditRecord>> MemoryStore::ListAudit(const store::AuditFilter& filter) {
  MutexLock lock(mu_);
  std::vector<api::AuditRecord> out;
  for (const auto& a : audit_) {
    if (a.seq <= filter.after_seq) continue;
    if (filter.since && a.at < *filter.since) continue;
    if (filter.subject && a.subject != *filter.subject) continue;
    if (filter.verb) {
      const std::string& v = *filter.verb;
      bool prefix = !v.empty() && v.back() == '.' && a.verb.compare(0, v.size(), v) == 0;
      if (a.verb != v && !prefix) continue;
    }
    out.push_back(a);
    if (filter.limit > 0 && static_cast<int64_t>(out.size()) >= filter.limit) break;
  }
  return out;
}

Result<std::vector<store::SubmitOutcome>> MemoryStore::Submit(std::vector<store::Submission> submissions) {
  if (Status bad = store::CheckSubmissions(submissions); !bad.ok()) {
    DropAttached();
    return bad;
  }
  MutexLock lock(mu_);
  GF_RETURN_IF_ERROR(BeginWrite());
  std::vector<store::SubmitOutcome> outcomes;
  for (store::Submission& sub : submissions) {
    if (auto it = requests_.find(sub.request_id); it != requests_.end()) {
      outcomes.push_back({it->second, false, {}});
      continue;
    }
    if (sub.only_if_seen) {
      outcomes.push_back({{}, false, {}});
      continue;
    }
    store::SubmitOutcome out;
    for (api::JobRecord& job : sub.jobs) {
      job.id = JobId(next_job_id_++);
      job.request_id = sub.request_id;
      job.reason = "submitted";
      transitions_[job.id.value()].push_back(
          {job.submitted, api::JobState::kPending, api::JobState::kPending, "submitted"});
      out.ids.push_back(job.id);
      jobs_[job.id.value()] = job;
    }
    requests_[sub.request_id] = out.ids;
    if (sub.audit) {
      std::vector<int64_t> ids;
      for (const JobId& id : out.ids) ids.push_back(id.value());
      api::AuditRecord a = *sub.audit;
      a.object = api::JobsAuditObject(ids);
      a.seq = static_cast<int64_t>(audit_.size()) + 1;
      audit_.push_back(std::move(a));
    }
    outcomes.push_back(std::move(out));
  }
  for (size_t i = 0; i < outcomes.size(); ++i) outcomes[i].jobs = std::move(submissions[i].jobs);
  return outcomes;
}

Status MemoryStore::Update(const std::vector<store::JobUpdate>& updates) {
  MutexLock lock(mu_);
  GF_RETURN_IF_ERROR(BeginWrite());
  // All or nothing: check every id before changing anything.
  for (const store::JobUpdate& u : updates) {
    if (!jobs_.contains(u.job.id.value())) {
      return Status::NotFound("update: no job " + std::to_string(u.job.id.value()));
    }
  }
  for (const store::JobUpdate& u : updates) {
    jobs_[u.job.id.value()] = u.job;
    // Not again when the job's last transition is this one (StateStore::Update).
    auto& history = transitions_[u.job.id.value()];
    const bool again = !history.empty() && history.back().at == u.transition.at &&
                       history.back().from == u.transition.from && history.back().to == u.transition.to &&
                       history.back().reason == u.transition.reason;
    if (!again) history.push_back(u.transition);
    if (api::IsTerminal(u.job.state)) {
      memory_.erase(u.job.id.value());
    } else if (u.memory) {
      memory_[u.job.id.value()] = *u.memory;
    }
  }
  return Status::Ok();
}

Status MemoryStore::SaveJobMemory(const std::vector<store::JobMemoryRecord>& memory) {
  MutexLock lock(mu_);
  GF_RETURN_IF_ERROR(BeginWrite());
  for (const store::JobMemoryRecord& m : memory) {
    if (!jobs_.contains(m.job.value())) return Status::NotFound("save memory: no job " + std::to_string(m.job.value()));
  }
  for (const store::JobMemoryRecord& m : memory) memory_[m.job.value()] = m.memory;
  return Status::Ok();
}

Result<std::vector<store::JobMemoryRecord>> MemoryStore::ListJobMemory() {
  MutexLock lock(mu_);
  std::vector<store::JobMemoryRecord> out;
  for (const auto& [id, m] : memory_) out.push_back({JobId(id), m});
  return out;
}

Result<std::optional<api::JobRecord>> MemoryStore::GetJob(JobId id) {
  MutexLock lock(mu_);
  auto it = jobs_.find(id.value());
  if (it == jobs_.end()) return std::optional<api::JobRecord>();
  return std::optional<api::JobRecord>(it->second);
}

Result<std::vector<api::JobRecord>> MemoryStore::ListJobs(const store::JobFilter& filter) {
  MutexLock lock(mu_);
  auto matches = [&](const api::JobRecord& job) {
    if (filter.team && job.request.spec.team != *filter.team) return false;
    if (filter.since && job.submitted < *filter.since) return false;
    if (!filter.include_terminal && api::IsTerminal(job.state)) return false;
    if (filter.before && !(job.id < *filter.before)) return false;
    return true;
  };
  std::vector<api::JobRecord> out;
  if (filter.limit > 0) {
    for (auto it = jobs_.rbegin(); it != jobs_.rend() && static_cast<int64_t>(out.size()) < filter.limit; ++it) {
      if (matches(it->second)) out.push_back(it->second);
    }
  } else {
    for (const auto& [id, job] : jobs_) {
      if (matches(job)) out.push_back(job);
    }
  }
  return out;
}

Result<std::map<std::string, int64_t>> MemoryStore::EndedCostByTeam() {
  MutexLock lock(mu_);
  std::map<std::string, int64_t> out;
  for (const auto& [id, job] : jobs_) {
    if (api::IsTerminal(job.state) && job.cost_micros != 0) out[job.request.spec.team] += job.cost_micros;
  }
  return out;
}

Result<std::vector<api::Transition>> MemoryStore::History(JobId id) {
  MutexLock lock(mu_);
  auto it = transitions_.find(id.value());
  if (it == transitions_.end()) return std::vector<api::Transition>();
  return it->second;
}

Result<NodeId> MemoryStore::UpsertNode(const api::NodeRecord& node) {
  if (node.name.empty()) {
    DropAttached();
    return Status::InvalidArgument("node name must not be empty");
  }
  MutexLock lock(mu_);
  GF_RETURN_IF_ERROR(BeginWrite());
  api::NodeRecord stored = node;
  auto it = nodes_.find(node.name);
  stored.id = it != nodes_.end() ? it->second.id : NodeId(next_node_id_++);
  nodes_[node.name] = stored;
  return stored.id;
}

Result<std::vector<api::NodeRecord>> MemoryStore::ListNodes() {
  MutexLock lock(mu_);
  std::vector<api::NodeRecord> out;
  for (const auto& [name, node] : nodes_) out.push_back(node);
  std::sort(out.begin(), out.end(), [](const api::NodeRecord& a, const api::NodeRecord& b) { return a.id < b.id; });
  return out;
}

Status MemoryStore::TouchToken(const std::string& hash, Time when) {
  MutexLock lock(mu_);
  auto it = tokens_.find(hash);
  if (it == tokens_.end()) return Status::NotFound("no token " + hash.substr(0, 12));
  it->second.last_used = when;
  return Status::Ok();
}

Status MemoryStore::PutToken(const api::TokenRecord& token) {
  if (token.hash.empty()) {
    DropAttached();
    return Status::InvalidArgument("token hash must not be empty");
  }
  MutexLock lock(mu_);
  GF_RETURN_IF_ERROR(BeginWrite());
  tokens_[token.hash] = token;
  return Status::Ok();
}

void MemoryStore::FailNextTokenReads(int count, Status error) {
  MutexLock lock(mu_);
  token_read_failures_left_ = count;
  token_read_failure_ = std::move(error);
}

Result<std::optional<api::TokenRecord>> MemoryStore::FindToken(const std::string& hash) {
  MutexLock lock(mu_);
  if (token_read_failures_left_ > 0) {
    --token_read_failures_left_;
    return token_read_failure_;
  }
  auto it = tokens_.find(hash);
  if (it == tokens_.end()) return std::optional<api::TokenRecord>();
  return std::optional<api::TokenRecord>(it->second);
}

Result<std::vector<api::TokenRecord>> MemoryStore::ListTokens() {
  MutexLock lock(mu_);
  std::vector<api::TokenRecord> out;
  for (const auto& [hash, token] : tokens_) out.push_back(token);
  return out;
}

Result<std::optional<std::string>> MemoryStore::GetMeta(const std::string& key) {
  MutexLock lock(mu_);
  auto it = meta_.find(key);
  if (it == meta_.end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second);
}

Status MemoryStore::SetMeta(const std::string& key, const std::string& value) {
  if (key == kSchemaVersionKey) {
    DropAttached();
    return Status::InvalidArgument("meta key schema_version is managed by the store");
  }
  MutexLock lock(mu_);
  GF_RETURN_IF_ERROR(BeginWrite());
  meta_[key] = value;
  return Status::Ok();
}

Status MemoryStore::SkipJobIdsThrough(int64_t id) {
  MutexLock lock(mu_);
  GF_RETURN_IF_ERROR(BeginWrite());
  next_job_id_ = std::max(next_job_id_, id + 1);
  return Status::Ok();
}

Result<store::Leadership> MemoryStore::AcquireLeadership(const store::LeaderAddress& self, Duration lease) {
  if (lease <= Duration::Zero()) return Status::InvalidArgument("leader lease must be positive");
  return store::Leadership{true, 1, self.url, lease, self.agent_url, Time()};
}

Status MemoryStore::ReleaseLeadership(const store::LeaderAddress&) { return Status::Ok(); }

}  // namespace gpufleet::testing
