// MemoryStore: a StateStore held in memory, for unit tests of the controller and the API. It has
// the SQLite store's semantics (ids ascending from 1 and never reused, idempotent request ids, a
// "submitted" transition per new job, all-or-nothing batches, the same filters and orders, the
// same errors for bad input); the shared behaviour tests in src/store/sqlite_store_test.cc run over
// both so they cannot drift apart. Nothing survives the object.
//
// FailNextWrite lets a test see how its caller handles a store that is busy or broken.
//
// Thread-safety: safe to call from several threads; one mutex around every call.
#pragma once

#include <cstdint>
#include <map>
#include <thread>
#include <optional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "store/state_store.h"

namespace gpufleet::testing {

class MemoryStore : public store::StateStore {
 public:
  MemoryStore();

  Result<std::vector<store::SubmitOutcome>> Submit(std::vector<store::Submission> submissions) override;
  Status Update(const std::vector<store::JobUpdate>& updates) override;
  Status SaveJobMemory(const std::vector<store::JobMemoryRecord>& memory) override;
  Result<std::vector<store::JobMemoryRecord>> ListJobMemory() override;
  Result<std::optional<api::JobRecord>> GetJob(JobId id) override;
  Result<std::vector<api::JobRecord>> ListJobs(const store::JobFilter& filter) override;
  Result<std::map<std::string, int64_t>> EndedCostByTeam() override;
  Result<std::vector<api::Transition>> History(JobId id) override;
  Result<NodeId> UpsertNode(const api::NodeRecord& node) override;
  Result<std::vector<api::NodeRecord>> ListNodes() override;
  Status PutToken(const api::TokenRecord& token) override;
  Status TouchToken(const std::string& hash, Time when) override;
  Result<std::optional<api::TokenRecord>> FindToken(const std::string& hash) override;
  Result<std::vector<api::TokenRecord>> ListTokens() override;
  Result<std::optional<std::string>> GetMeta(const std::string& key) override;
  Status SetMeta(const std::string& key, const std::string& value) override;
  Status SkipJobIdsThrough(int64_t id) override;
  // Always the leader (one process): held, token 1.
  Result<store::Leadership> AcquireLeadership(const store::LeaderAddress& self, Duration lease) override;
  Status ReleaseLeadership(const store::LeaderAddress& self) override;
  void AttachAudit(std::vector<api::AuditRecord> records) override;
  Status AppendAudit(const std::vector<api::AuditRecord>& records) override;
  Result<std::vector<api::AuditRecord>> ListAudit(const store::AuditFilter& filter) override;

  // The next write call (Submit, Update, SaveJobMemory, UpsertNode, PutToken, SetMeta) returns `error` and
  // changes nothing; later calls behave normally.
  void FailNextWrite(Status error);
  // The next `count` writes fail with `error` (a store that stays broken for a while).
  void FailNextWrites(int count, Status error);
  // The next `count` token lookups (FindToken) fail with `error`: a store that cannot be read.
  void FailNextTokenReads(int count, Status error);

 private:
  // The injected failure, consumed; OK when none is pending. Needs mu_ held.
  Status TakeFailure() GF_REQUIRES(mu_);
  // Starts a write: the injected failure (the attached audit records are dropped with it), or
  // the attached audit records appended. Needs mu_ held.
  Status BeginWrite() GF_REQUIRES(mu_);
  // A write refused before it began: this thread's attached records go with it.
  void DropAttached() GF_EXCLUDES(mu_);

  Mutex mu_;
  int64_t next_job_id_ GF_GUARDED_BY(mu_) = 1;
  int64_t next_node_id_ GF_GUARDED_BY(mu_) = 1;
  std::map<int64_t, api::JobRecord> jobs_ GF_GUARDED_BY(mu_);
  std::map<int64_t, std::vector<api::Transition>> transitions_ GF_GUARDED_BY(mu_);
  std::map<std::string, std::vector<JobId>> requests_ GF_GUARDED_BY(mu_);
  std::map<int64_t, model::JobMemory> memory_ GF_GUARDED_BY(mu_);  // by job id
  std::map<std::string, api::NodeRecord> nodes_ GF_GUARDED_BY(mu_);  // by name
  std::map<std::string, api::TokenRecord> tokens_ GF_GUARDED_BY(mu_);  // by hash
  std::map<std::string, std::string> meta_ GF_GUARDED_BY(mu_);
  Status next_write_failure_ GF_GUARDED_BY(mu_);
  int failures_left_ GF_GUARDED_BY(mu_) = 0;  // FailNextWrites: how many more writes fail with next_write_failure_
  Status token_read_failure_ GF_GUARDED_BY(mu_);
  int token_read_failures_left_ GF_GUARDED_BY(mu_) = 0;
  std::vector<api::AuditRecord> audit_ GF_GUARDED_BY(mu_);
  std::map<std::thread::id, std::vector<api::AuditRecord>> attached_ GF_GUARDED_BY(mu_);
};

}  // namespace gpufleet::testing
