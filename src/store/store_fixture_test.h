// Helpers of the store tests: values to store, a temporary directory, and the PostgreSQL server
// the PostgreSQL tests of this process share.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/check.h"
#include "store/state_store.h"
#include "testing/postgres_server.h"

namespace gpufleet::store {

inline bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "gpufleet_store_XXXXXX";
    CHECK(mkdtemp(tmpl.data()) != nullptr) << "mkdtemp " << tmpl;
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline api::JobRecord MakeJob(const std::string& team, int64_t submitted_ms, int array_index = -1) {
  api::JobRecord job;
  job.request.spec.name = "train";
  job.request.spec.team = team;
  job.request.spec.gpus_per_node = 2;
  job.request.spec.submit = Time::FromMillis(submitted_ms);
  job.request.argv = {"python", "train.py"};
  job.array_index = array_index;
  job.submitted = Time::FromMillis(submitted_ms);
  job.updated = Time::FromMillis(submitted_ms);
  return job;
}

inline Submission MakeSubmission(const std::string& request_id, int jobs = 1, const std::string& team = "nlp",
                          int64_t submitted_ms = 1000) {
  Submission s{request_id, {}, std::nullopt};
  for (int i = 0; i < jobs; ++i) s.jobs.push_back(MakeJob(team, submitted_ms, jobs > 1 ? i : -1));
  return s;
}

inline std::vector<int64_t> Ids(const std::vector<JobId>& ids) {
  std::vector<int64_t> out;
  for (JobId id : ids) out.push_back(id.value());
  return out;
}
inline std::vector<int64_t> Ids(const std::vector<api::JobRecord>& jobs) {
  std::vector<int64_t> out;
  for (const auto& j : jobs) out.push_back(j.id.value());
  return out;
}

inline api::AuditRecord Audit(const std::string& subject, const std::string& verb, int64_t at_ms) {
  api::AuditRecord a;
  a.at = Time::FromMillis(at_ms);
  a.subject = subject;
  a.role = "user";
  a.team = "nlp";
  a.source = "127.0.0.1";
  a.verb = verb;
  a.object = "job 1";
  a.outcome = "allowed";
  a.reason = "ok";
  a.request_id = "r";
  return a;
}

// The PostgreSQL server of this test process, started on first use (a second or two) and stopped
// when the process exits. When it cannot start, every test that asks for it fails with the reason;
// the PostgreSQL tests are registered with ctest as one test (one process, one server).
inline Result<testing::PostgresServer*> SharedPostgres() {
  static Result<std::unique_ptr<testing::PostgresServer>> server = testing::PostgresServer::Start();
  if (!server.ok()) return server.status();
  return server->get();
}

// A URL to a new, empty schema of the shared server, so that each test starts from nothing.
inline Result<std::string> FreshPostgresSchema() {
  static int next = 0;
  GF_ASSIGN_OR_RETURN(testing::PostgresServer* server, SharedPostgres());
  const std::string schema = "test_" + std::to_string(++next);
  GF_ASSIGN_OR_RETURN(std::string out,
                      server->Psql("DROP SCHEMA IF EXISTS " + schema + " CASCADE; CREATE SCHEMA " + schema));
  return server->Url("options=-csearch_path%3D" + schema);
}

}  // namespace gpufleet::store
