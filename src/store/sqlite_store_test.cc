#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "store/state_store.h"
#include "testing/memory_store.h"

namespace gpufleet::store {
namespace {

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

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

api::JobRecord MakeJob(const std::string& team, int64_t submitted_ms, int array_index = -1) {
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

Submission MakeSubmission(const std::string& request_id, int jobs = 1, const std::string& team = "nlp",
                          int64_t submitted_ms = 1000) {
  Submission s{request_id, {}, std::nullopt};
  for (int i = 0; i < jobs; ++i) s.jobs.push_back(MakeJob(team, submitted_ms, jobs > 1 ? i : -1));
  return s;
}

std::vector<int64_t> Ids(const std::vector<JobId>& ids) {
  std::vector<int64_t> out;
  for (JobId id : ids) out.push_back(id.value());
  return out;
}
std::vector<int64_t> Ids(const std::vector<api::JobRecord>& jobs) {
  std::vector<int64_t> out;
  for (const auto& j : jobs) out.push_back(j.id.value());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Behaviour shared by every StateStore: the SQLite store and the in-memory fake.

struct StoreKind {
  std::string name;
  bool durable;  // reopening keeps the data (SQLite); the fake's "reopen" keeps the object
};

class StateStoreTest : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override { Open(); }

  void Open() {
    if (GetParam().durable) {
      auto s = OpenSqliteStore(db_path());
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      store_ = std::move(s).value();
    } else {
      store_ = std::make_unique<testing::MemoryStore>();
    }
  }
  // Closes and opens the database again; a no-op for the fake, which has nothing to reopen.
  void Reopen() {
    if (!GetParam().durable) return;
    store_.reset();
    Open();
  }
  std::string db_path() const { return dir_.path() + "/state.db"; }

  std::vector<SubmitOutcome> SubmitOk(std::vector<Submission> subs) {
    auto r = store_->Submit(std::move(subs));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::vector<SubmitOutcome>{};
  }
  api::JobRecord GetOk(JobId id) {
    auto r = store_->GetJob(id);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r.ok() && r->has_value()) << "no job " << id;
    return r.ok() && r->has_value() ? **r : api::JobRecord{};
  }
  std::vector<api::JobRecord> ListOk(const JobFilter& filter) {
    auto r = store_->ListJobs(filter);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::vector<api::JobRecord>{};
  }
  std::vector<api::Transition> HistoryOk(JobId id) {
    auto r = store_->History(id);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::vector<api::Transition>{};
  }

  TempDir dir_;
  std::unique_ptr<StateStore> store_;
};

TEST_P(StateStoreTest, IdsAscendFromOneAndAreNeverReusedAcrossReopen) {
  // Given a batch of three submissions (the middle one an array of two), expect ids 1..4 in
  // submission order; after a reopen, expect the next submission to get 5.
  auto out = SubmitOk({MakeSubmission("a"), MakeSubmission("b", 2), MakeSubmission("c")});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(Ids(out[0].ids), (std::vector<int64_t>{1}));
  EXPECT_EQ(Ids(out[1].ids), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Ids(out[2].ids), (std::vector<int64_t>{4}));
  EXPECT_TRUE(out[0].created && out[1].created && out[2].created);
  Reopen();
  auto more = SubmitOk({MakeSubmission("d")});
  ASSERT_EQ(more.size(), 1u);
  EXPECT_EQ(Ids(more[0].ids), (std::vector<int64_t>{5}));
}

TEST_P(StateStoreTest, ResubmittedRequestIdGetsTheEarlierIds) {
  // Given a request submitted twice (the second time with other content), and another request
  // twice within one batch, expect the earlier ids with created=false and no new jobs.
  auto first = SubmitOk({MakeSubmission("req-1", 2)});
  auto again = SubmitOk({MakeSubmission("req-1", 3, "vision")});
  ASSERT_EQ(again.size(), 1u);
  EXPECT_FALSE(again[0].created);
  EXPECT_EQ(Ids(again[0].ids), Ids(first[0].ids));

  auto batch = SubmitOk({MakeSubmission("req-2"), MakeSubmission("req-2"), MakeSubmission("req-1")});
  ASSERT_EQ(batch.size(), 3u);
  EXPECT_TRUE(batch[0].created);
  EXPECT_FALSE(batch[1].created);
  EXPECT_EQ(Ids(batch[1].ids), Ids(batch[0].ids));
  EXPECT_FALSE(batch[2].created);
  EXPECT_EQ(Ids(batch[2].ids), Ids(first[0].ids));
  EXPECT_EQ(ListOk({}).size(), 3u);
  Reopen();
  auto after_reopen = SubmitOk({MakeSubmission("req-2")});
  EXPECT_FALSE(after_reopen[0].created);
  EXPECT_EQ(Ids(after_reopen[0].ids), Ids(batch[0].ids));
}

TEST_P(StateStoreTest, SubmitStoresTheRecordAndASubmittedTransition) {
  // Given an array submission, expect each job stored with its id, the request id, its index and
  // its request, and a history of one pending -> pending "submitted" transition at submission.
  auto out = SubmitOk({MakeSubmission("sweep", 2, "nlp", 7000)});
  ASSERT_EQ(out[0].ids.size(), 2u);
  api::JobRecord job = GetOk(out[0].ids[1]);
  EXPECT_EQ(job.id, out[0].ids[1]);
  EXPECT_EQ(job.request_id, "sweep");
  EXPECT_EQ(job.array_index, 1);
  EXPECT_EQ(job.state, api::JobState::kPending);
  EXPECT_EQ(job.reason, "submitted");
  EXPECT_EQ(job.submitted, Time::FromMillis(7000));
  EXPECT_EQ(job.request.spec.team, "nlp");
  EXPECT_EQ(job.request.argv, (std::vector<std::string>{"python", "train.py"}));
  auto history = HistoryOk(job.id);
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].at, Time::FromMillis(7000));
  EXPECT_EQ(history[0].from, api::JobState::kPending);
  EXPECT_EQ(history[0].to, api::JobState::kPending);
  EXPECT_EQ(history[0].reason, "submitted");

  auto missing = store_->GetJob(JobId(99));
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
  EXPECT_TRUE(HistoryOk(JobId(99)).empty());
}

TEST_P(StateStoreTest, BadSubmissionFailsTheWholeBatch) {
  // Given a batch with a good submission and one without a request id (or without jobs), expect
  // InvalidArgument and nothing stored, not even the good one.
  auto r = store_->Submit({MakeSubmission("good"), MakeSubmission("")});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(r.status().message(), "submission 1")) << r.status().message();
  auto empty = store_->Submit({MakeSubmission("good"), Submission{"no-jobs", {}, std::nullopt}});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(ListOk({}).empty());
  // The ids were not spent either.
  EXPECT_EQ(Ids(SubmitOk({MakeSubmission("good")})[0].ids), (std::vector<int64_t>{1}));
}

TEST_P(StateStoreTest, UpdateWritesRecordsAndAppendsHistoryInOrder) {
  // Given a job that starts and then succeeds (two updates, the first covering two jobs), expect
  // the latest record and the transitions oldest first.
  auto ids = SubmitOk({MakeSubmission("a"), MakeSubmission("b")});
  api::JobRecord a = GetOk(ids[0].ids[0]);
  api::JobRecord b = GetOk(ids[1].ids[0]);
  a.state = api::JobState::kStarting;
  a.reason = "placed on node-a gpus 0-1";
  a.attempt = 1;
  a.updated = Time::FromMillis(2000);
  a.placement = model::Placement{"H100", {{NodeId(1), {0, 1}, 1000, 0, 0}}};
  b.state = api::JobState::kCancelled;
  b.reason = "cancelled by alice";
  ASSERT_TRUE(store_
                  ->Update({{a, {Time::FromMillis(2000), api::JobState::kPending, api::JobState::kStarting, a.reason}},
                            {b, {Time::FromMillis(2000), api::JobState::kPending, api::JobState::kCancelled, b.reason}}})
                  .ok());
  a.state = api::JobState::kSucceeded;
  a.exit_code = 0;
  a.reason = "exit code 0";
  ASSERT_TRUE(
      store_->Update({{a, {Time::FromMillis(3000), api::JobState::kStarting, api::JobState::kSucceeded, a.reason}}})
          .ok());
  Reopen();
  api::JobRecord stored = GetOk(a.id);
  EXPECT_EQ(stored.state, api::JobState::kSucceeded);
  EXPECT_EQ(stored.attempt, 1);
  EXPECT_EQ(stored.exit_code, 0);
  ASSERT_TRUE(stored.placement.has_value());
  EXPECT_EQ(stored.placement->parts[0].gpus, (std::vector<int>{0, 1}));
  auto history = HistoryOk(a.id);
  ASSERT_EQ(history.size(), 3u);
  EXPECT_EQ(history[0].reason, "submitted");
  EXPECT_EQ(history[1].to, api::JobState::kStarting);
  EXPECT_EQ(history[1].reason, "placed on node-a gpus 0-1");
  EXPECT_EQ(history[2].from, api::JobState::kStarting);
  EXPECT_EQ(history[2].to, api::JobState::kSucceeded);
  EXPECT_EQ(history[2].at, Time::FromMillis(3000));
  EXPECT_EQ(HistoryOk(b.id).size(), 2u);
  EXPECT_EQ(GetOk(b.id).state, api::JobState::kCancelled);
}

TEST_P(StateStoreTest, UpdateOfAnUnknownJobChangesNothing) {
  // Given a batch updating a known job and an unknown one, expect NotFound and the known job and
  // its history untouched.
  auto ids = SubmitOk({MakeSubmission("a")});
  api::JobRecord a = GetOk(ids[0].ids[0]);
  a.state = api::JobState::kRunning;
  api::JobRecord ghost = a;
  ghost.id = JobId(42);
  Status s = store_->Update({{a, {Time::FromMillis(5), api::JobState::kPending, api::JobState::kRunning, "x"}},
                             {ghost, {Time::FromMillis(5), api::JobState::kPending, api::JobState::kRunning, "x"}}});
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "42")) << s.message();
  EXPECT_EQ(GetOk(a.id).state, api::JobState::kPending);
  EXPECT_EQ(HistoryOk(a.id).size(), 1u);
  EXPECT_FALSE(store_->GetJob(JobId(42))->has_value());
}

TEST_P(StateStoreTest, ListJobsHonoursTeamSinceTerminalAndLimit) {
  // Given jobs of two teams submitted at different times, one of them finished, expect each
  // filter to select the right ones: oldest first without a limit, newest first with one.
  auto out = SubmitOk({MakeSubmission("1", 1, "nlp", 1000), MakeSubmission("2", 1, "vision", 2000),
                       MakeSubmission("3", 1, "nlp", 3000), MakeSubmission("4", 1, "nlp", 4000)});
  api::JobRecord third = GetOk(out[2].ids[0]);
  third.state = api::JobState::kFailed;
  ASSERT_TRUE(
      store_->Update({{third, {Time::FromMillis(3500), api::JobState::kPending, api::JobState::kFailed, "exit 1"}}})
          .ok());
  Reopen();
  EXPECT_EQ(Ids(ListOk({})), (std::vector<int64_t>{1, 2, 3, 4}));
  JobFilter nlp;
  nlp.team = "nlp";
  EXPECT_EQ(Ids(ListOk(nlp)), (std::vector<int64_t>{1, 3, 4}));
  JobFilter live;
  live.include_terminal = false;
  EXPECT_EQ(Ids(ListOk(live)), (std::vector<int64_t>{1, 2, 4}));
  JobFilter since;
  since.since = Time::FromMillis(2000);
  EXPECT_EQ(Ids(ListOk(since)), (std::vector<int64_t>{2, 3, 4}));
  JobFilter newest;
  newest.limit = 2;
  EXPECT_EQ(Ids(ListOk(newest)), (std::vector<int64_t>{4, 3}));
  JobFilter all;
  all.team = "nlp";
  all.include_terminal = false;
  all.since = Time::FromMillis(1000);
  all.limit = 5;
  EXPECT_EQ(Ids(ListOk(all)), (std::vector<int64_t>{4, 1}));
  JobFilter nobody;
  nobody.team = "robotics";
  EXPECT_TRUE(ListOk(nobody).empty());
}

TEST_P(StateStoreTest, UpsertNodeKeepsTheIdOfAName) {
  // Given two nodes registered and the first registering again with new details (and a wrong id),
  // expect it to keep its id and get the new details.
  api::NodeRecord a;
  a.name = "node-a";
  a.spec.name = "node-a";
  a.spec.gpus = 8;
  a.spec.gpu_model = "H100";
  a.gpus = {{0, "GPU-a0", "NVIDIA H100", 81'559}};
  a.address = "10.0.0.1";
  auto id_a = store_->UpsertNode(a);
  ASSERT_TRUE(id_a.ok()) << id_a.status().ToString();
  api::NodeRecord b = a;
  b.name = "node-b";
  auto id_b = store_->UpsertNode(b);
  ASSERT_TRUE(id_b.ok());
  EXPECT_EQ(*id_a, NodeId(1));
  EXPECT_EQ(*id_b, NodeId(2));
  a.id = NodeId(77);
  a.address = "10.0.0.9";
  a.state = api::NodeState::kDraining;
  auto again = store_->UpsertNode(a);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, NodeId(1));
  Reopen();
  auto nodes = store_->ListNodes();
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].id, NodeId(1));
  EXPECT_EQ((*nodes)[0].name, "node-a");
  EXPECT_EQ((*nodes)[0].address, "10.0.0.9");
  EXPECT_EQ((*nodes)[0].state, api::NodeState::kDraining);
  EXPECT_EQ((*nodes)[0].gpus.size(), 1u);
  EXPECT_EQ((*nodes)[1].id, NodeId(2));
  api::NodeRecord unnamed;
  EXPECT_EQ(store_->UpsertNode(unnamed).status().code(), StatusCode::kInvalidArgument);
}

TEST_P(StateStoreTest, TokensArePutFoundReplacedAndListed) {
  // Given two tokens and one replaced (revoked) by hash, expect lookups by hash to see the latest
  // and the list to hold both, ordered by hash.
  api::TokenRecord user{"bbbb", api::TokenKind::kUser, "alice", "user", "nlp", Time::FromMillis(1), false, std::nullopt, std::nullopt};
  api::TokenRecord agent{"aaaa", api::TokenKind::kAgent, "node-a", "agent", "", Time::FromMillis(2), false, std::nullopt, std::nullopt};
  ASSERT_TRUE(store_->PutToken(user).ok());
  ASSERT_TRUE(store_->PutToken(agent).ok());
  user.revoked = true;
  ASSERT_TRUE(store_->PutToken(user).ok());
  Reopen();
  auto found = store_->FindToken("bbbb");
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_TRUE((*found)->revoked);
  EXPECT_EQ((*found)->subject, "alice");
  EXPECT_EQ((*found)->team, "nlp");
  auto none = store_->FindToken("cccc");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto all = store_->ListTokens();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].hash, "aaaa");
  EXPECT_EQ((*all)[0].kind, api::TokenKind::kAgent);
  EXPECT_EQ((*all)[1].hash, "bbbb");
  EXPECT_EQ(store_->PutToken(api::TokenRecord{}).code(), StatusCode::kInvalidArgument);
}

TEST_P(StateStoreTest, MetaHoldsSettingsAndTheSchemaVersion) {
  // Given settings written and overwritten, expect the latest values back; expect the schema
  // version to read 2 and to be off limits to callers.
  ASSERT_TRUE(store_->SetMeta("cluster_id", "c-1").ok());
  ASSERT_TRUE(store_->SetMeta("cluster_id", "c-2").ok());
  ASSERT_TRUE(store_->SetMeta("next_master_port", "29500").ok());
  Reopen();
  auto id = store_->GetMeta("cluster_id");
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, std::optional<std::string>("c-2"));
  EXPECT_EQ(*store_->GetMeta("next_master_port"), std::optional<std::string>("29500"));
  EXPECT_EQ(*store_->GetMeta("absent"), std::nullopt);
  EXPECT_EQ(*store_->GetMeta("schema_version"), std::optional<std::string>("2"));
  EXPECT_EQ(store_->SetMeta("schema_version", "7").code(), StatusCode::kInvalidArgument);
}

api::AuditRecord Audit(const std::string& subject, const std::string& verb, int64_t at_ms) {
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

TEST_P(StateStoreTest, AuditRecordsCommitWithTheirChangeOrNotAtAll) {
  // Given a record attached to a token write, expect both stored; given one attached to a write
  // that fails validation, expect neither stored and the record not carried to the next write.
  store_->AttachAudit({Audit("alice", "token.create", 10)});
  api::TokenRecord t;
  t.hash = "abc";
  t.subject = "alice";
  t.role = "user";
  ASSERT_TRUE(store_->PutToken(t).ok());
  store_->AttachAudit({Audit("bob", "token.create", 20)});
  api::TokenRecord bad;  // no hash: refused
  EXPECT_FALSE(store_->PutToken(bad).ok());
  ASSERT_TRUE(store_->SetMeta("k", "v").ok());
  ASSERT_TRUE(store_->AppendAudit({Audit("carol", "auth.login", 30)}).ok());
  Reopen();
  auto log = store_->ListAudit({});
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  ASSERT_EQ(log->size(), 2u);
  EXPECT_EQ((*log)[0].subject, "alice");
  EXPECT_EQ((*log)[0].seq, 1);
  EXPECT_EQ((*log)[1].subject, "carol");
  EXPECT_EQ((*log)[1].verb, "auth.login");
  EXPECT_EQ((*log)[0].request_id, "r");
}

TEST_P(StateStoreTest, AuditFiltersBySubjectVerbPrefixTimeAndCursor) {
  // Given four records, expect the filters to pick the matching ones, oldest first.
  ASSERT_TRUE(store_->AppendAudit({Audit("a", "job.submit", 1), Audit("b", "job.cancel", 2),
                                   Audit("a", "token.create", 3), Audit("a", "job.cancel", 4)})
                  .ok());
  AuditFilter f;
  f.subject = "a";
  f.verb = "job.";
  auto r = store_->ListAudit(f);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].at.millis(), 1);
  EXPECT_EQ((*r)[1].at.millis(), 4);
  AuditFilter g;
  g.since = Time::FromMillis(2);
  g.limit = 2;
  auto page = store_->ListAudit(g);
  ASSERT_EQ(page->size(), 2u);
  g.after_seq = page->back().seq;
  auto next = store_->ListAudit(g);
  ASSERT_EQ(next->size(), 1u);
  EXPECT_EQ(next->front().at.millis(), 4);
  AuditFilter exact;
  exact.verb = "job";
  EXPECT_TRUE(store_->ListAudit(exact)->empty()) << "a verb without a trailing dot matches exactly";
}

TEST_P(StateStoreTest, ConcurrentSubmitsGetDistinctAscendingIds) {
  // Given four threads each submitting 25 requests, expect 100 distinct ids, 1..100, and each
  // thread's ids ascending in its own order.
  constexpr int kThreads = 4;
  constexpr int kEach = 25;
  std::vector<std::vector<int64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        auto r = store_->Submit({MakeSubmission("t" + std::to_string(t) + "-" + std::to_string(i))});
        if (r.ok()) seen[t].push_back((*r)[0].ids[0].value());
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<int64_t> all;
  for (const auto& ids : seen) {
    EXPECT_EQ(ids.size(), static_cast<size_t>(kEach));
    EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
    all.insert(ids.begin(), ids.end());
  }
  ASSERT_EQ(all.size(), static_cast<size_t>(kThreads * kEach));
  EXPECT_EQ(*all.begin(), 1);
  EXPECT_EQ(*all.rbegin(), kThreads * kEach);
}

INSTANTIATE_TEST_SUITE_P(Stores, StateStoreTest,
                         ::testing::Values(StoreKind{"Sqlite", true}, StoreKind{"Memory", false}),
                         [](const ::testing::TestParamInfo<StoreKind>& info) { return info.param.name; });

// ---------------------------------------------------------------------------------------------
// SQLite only: files, schema versions, errors, crashes.

class SqliteStoreTest : public ::testing::Test {
 protected:
  std::string db_path() const { return dir_.path() + "/state.db"; }

  // Runs SQL on the file through a separate connection, as an operator with sqlite3 would.
  void RawExec(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_path().c_str(), &db), SQLITE_OK);
    char* err = nullptr;
    int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    std::string msg = err != nullptr ? err : "";
    sqlite3_free(err);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_OK) << msg;
  }
  std::string RawQuery(const std::string& sql) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(db_path().c_str(), &db), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    std::string out;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
      const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
      out = p == nullptr ? "" : p;
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
  }

  TempDir dir_;
};

TEST_F(SqliteStoreTest, NewDatabaseUsesWalAndReadableColumns) {
  // Given a new database with one job, expect the file in WAL mode, schema version 2 in meta, and
  // the job's columns and JSON record readable with plain SQL.
  {
    auto store = OpenSqliteStore(db_path());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->Submit({MakeSubmission("r", 1, "nlp", 1234)}).ok());
  }
  EXPECT_EQ(RawQuery("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(RawQuery("SELECT value FROM meta WHERE key = 'schema_version'"), "2");
  EXPECT_EQ(RawQuery("SELECT team || ',' || state || ',' || submitted_ms || ',' || request_id FROM jobs"),
            "nlp,pending,1234,r");
  EXPECT_EQ(RawQuery("SELECT json_extract(record, '$.request.spec.team') FROM jobs WHERE id = 1"), "nlp");
  EXPECT_EQ(RawQuery("SELECT job_ids FROM requests WHERE request_id = 'r'"), "[1]");
  EXPECT_EQ(RawQuery("SELECT seq || ',' || from_state || ',' || to_state || ',' || reason FROM transitions"),
            "1,pending,pending,submitted");
}

TEST_F(SqliteStoreTest, TheAuditLogIsAppendOnly) {
  // Given a stored audit record, expect plain SQL to be unable to change or delete it.
  {
    auto store = OpenSqliteStore(db_path());
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->AppendAudit({Audit("a", "job.submit", 1)}).ok());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path().c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  EXPECT_NE(sqlite3_exec(db, "DELETE FROM audit", nullptr, nullptr, &err), SQLITE_OK);
  EXPECT_NE(std::string(err ? err : "").find("append-only"), std::string::npos);
  sqlite3_free(err);
  err = nullptr;
  EXPECT_NE(sqlite3_exec(db, "UPDATE audit SET subject = 'x'", nullptr, nullptr, &err), SQLITE_OK);
  sqlite3_free(err);
  sqlite3_close(db);
  EXPECT_EQ(RawQuery("SELECT subject FROM audit"), "a");
}

TEST_F(SqliteStoreTest, NewerSchemaVersionIsRefused) {
  // Given a database written by a newer gpufleet (schema version 3), expect opening it to fail
  // with FailedPrecondition naming the path and both versions, and the file left as it was.
  { ASSERT_TRUE(OpenSqliteStore(db_path()).ok()); }
  RawExec("UPDATE meta SET value = '3' WHERE key = 'schema_version'");
  auto store = OpenSqliteStore(db_path());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  const std::string& msg = store.status().message();
  EXPECT_TRUE(Contains(msg, db_path())) << msg;
  EXPECT_TRUE(Contains(msg, "schema version 3 is newer than this gpufleet knows (2)")) << msg;
  EXPECT_EQ(RawQuery("SELECT value FROM meta WHERE key = 'schema_version'"), "3");
}

TEST_F(SqliteStoreTest, FileThatIsNotADatabaseIsAnError) {
  // Given a file of garbage at the path, expect an error naming the path and SQLite's reason.
  {
    std::ofstream f(db_path(), std::ios::binary);
    f << std::string(8192, 'x');
  }
  auto store = OpenSqliteStore(db_path());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kInternal);
  EXPECT_TRUE(Contains(store.status().message(), db_path())) << store.status().message();
  EXPECT_TRUE(Contains(store.status().message(), "not a database")) << store.status().message();
}

TEST_F(SqliteStoreTest, UnopenablePathIsAnError) {
  // Given a path in a directory that does not exist, expect Unavailable naming the path.
  const std::string path = dir_.path() + "/missing/dir/state.db";
  auto store = OpenSqliteStore(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Contains(store.status().message(), path)) << store.status().message();
  EXPECT_TRUE(Contains(store.status().message(), "unable to open")) << store.status().message();
}

TEST_F(SqliteStoreTest, DamagedRecordIsReportedNotThrown) {
  // Given a job row whose JSON was damaged by hand, expect reads to fail with Internal naming the
  // job, and other jobs to stay readable.
  auto store = OpenSqliteStore(db_path());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Submit({MakeSubmission("a"), MakeSubmission("b")}).ok());
  RawExec("UPDATE jobs SET record = '{\"id\": 1' WHERE id = 1");
  auto bad = (*store)->GetJob(JobId(1));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInternal);
  EXPECT_TRUE(Contains(bad.status().message(), "job 1")) << bad.status().message();
  EXPECT_FALSE((*store)->ListJobs({}).ok());
  auto good = (*store)->GetJob(JobId(2));
  ASSERT_TRUE(good.ok());
  EXPECT_TRUE(good->has_value());
}

TEST_F(SqliteStoreTest, KillNineLosesNoCommittedSubmission) {
  // Given a child process that submits batches in a loop and reports each batch's request ids on
  // a pipe once Submit has returned, killed with SIGKILL mid-loop, expect the reopened database to
  // hold every reported request exactly once, with all its jobs and their transitions.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    auto store = OpenSqliteStore(db_path());
    if (!store.ok()) _exit(2);
    for (int i = 0;; ++i) {
      const std::string id = std::to_string(i);
      auto out = (*store)->Submit({MakeSubmission("single-" + id), MakeSubmission("array-" + id, 3)});
      if (!out.ok()) _exit(3);
      const std::string line = id + "\n";
      if (write(fds[1], line.data(), line.size()) != static_cast<ssize_t>(line.size())) _exit(4);
    }
  }
  close(fds[1]);
  constexpr int kReportsBeforeKill = 30;
  std::string data;
  char buf[4096];
  while (std::count(data.begin(), data.end(), '\n') < kReportsBeforeKill) {
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) data.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int wstatus = 0;
  ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL)
      << "child ended on its own, exit code " << (WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1);

  // Only whole lines were reported; a line cut by the kill was not.
  std::vector<std::string> reported;
  for (size_t start = 0, end; (end = data.find('\n', start)) != std::string::npos; start = end + 1) {
    reported.push_back(data.substr(start, end - start));
  }
  ASSERT_GE(reported.size(), static_cast<size_t>(kReportsBeforeKill));

  auto store = OpenSqliteStore(db_path());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto jobs = (*store)->ListJobs({});
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  std::map<std::string, int> jobs_per_request;
  std::set<int64_t> ids;
  for (const auto& job : *jobs) {
    ++jobs_per_request[job.request_id];
    EXPECT_TRUE(ids.insert(job.id.value()).second) << "id " << job.id << " twice";
  }
  for (const std::string& id : reported) {
    EXPECT_EQ(jobs_per_request["single-" + id], 1) << "request single-" << id;
    EXPECT_EQ(jobs_per_request["array-" + id], 3) << "request array-" << id;
  }
  // Every stored job, reported or not, is whole: it has its submitted transition.
  for (const auto& job : *jobs) {
    auto history = (*store)->History(job.id);
    ASSERT_TRUE(history.ok());
    ASSERT_EQ(history->size(), 1u) << "job " << job.id;
  }
  // The ids go on from where the child stopped.
  auto next = (*store)->Submit({MakeSubmission("after")});
  ASSERT_TRUE(next.ok());
  EXPECT_GT((*next)[0].ids[0].value(), *ids.rbegin());
}

}  // namespace
}  // namespace gpufleet::store
