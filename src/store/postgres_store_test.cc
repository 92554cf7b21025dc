// PostgreSQL only: schema, refusals, errors, a server crash. The behaviour every store shares is
// in state_store_test.cc. All of these share the process's server (store_fixture_test.h).
#include <libpq-fe.h>

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "store/state_store.h"
#include "store/store_fixture_test.h"

namespace gpufleet::store {
namespace {

class PostgresStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = SharedPostgres();
    ASSERT_TRUE(server.ok()) << "the PostgreSQL tests need a PostgreSQL server and could not start one: "
                             << server.status().ToString();
    server_ = *server;
    auto url = FreshPostgresSchema();
    ASSERT_TRUE(url.ok()) << url.status().ToString();
    url_ = *url;
    schema_ = url_.substr(url_.rfind("%3D") + 3);
  }

  // Runs SQL on the test's schema through psql, as an operator would.
  std::string Sql(const std::string& sql) {
    auto out = server_->Psql("SET search_path = " + schema_ + "; " + sql);
    EXPECT_TRUE(out.ok()) << sql << ": " << out.status().ToString();
    return out.ok() ? *out : "";
  }

  testing::PostgresServer* server_ = nullptr;
  std::string url_;
  std::string schema_;
};

TEST_F(PostgresStoreTest, NewDatabaseHasSchemaVersionAndReadableColumns) {
  // Given a new schema with one job, expect schema version 8 in meta, and the job's columns,
  // JSON record, request and transition readable with plain SQL.
  {
    auto store = OpenPostgresStore(url_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->Submit({MakeSubmission("r", 1, "nlp", 1234)}).ok());
  }
  EXPECT_EQ(Sql("SELECT value FROM meta WHERE key = 'schema_version'"), "8");
  EXPECT_EQ(Sql("SELECT team || ',' || state || ',' || submitted_ms || ',' || request_id FROM jobs"),
            "nlp,pending,1234,r");
  EXPECT_EQ(Sql("SELECT record::jsonb #>> '{request,spec,team}' FROM jobs WHERE id = 1"), "nlp");
  EXPECT_EQ(Sql("SELECT job_ids FROM requests WHERE request_id = 'r'"), "[1]");
  EXPECT_EQ(Sql("SELECT seq || ',' || from_state || ',' || to_state || ',' || reason FROM transitions"),
            "1,pending,pending,submitted");
  // Opening again migrates nothing and keeps the data.
  auto again = OpenPostgresStore(url_);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->ListJobs({})->size(), 1u);
}

TEST_F(PostgresStoreTest, AnArrayIsStoredOnceUntilItsTasksChange) {
  // Given an array of 2,000 tasks, expect one row in job_arrays, two chunks of tasks and no row in
  // jobs; the next submission gets the id after the array; once one task changes, expect its row,
  // its two transitions and the array's count of rows.
  auto store = OpenPostgresStore(url_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto out = (*store)->Submit({MakeSubmission("sweep", 2000, "nlp", 1000)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Sql("SELECT first_id || '-' || last_id || ',' || team || ',' || submitted_ms || ',' || with_row "
                "FROM job_arrays"),
            "1-2000,nlp,1000,0");
  EXPECT_EQ(Sql("SELECT count(*) FROM job_array_tasks"), "2");
  EXPECT_EQ(Sql("SELECT count(*) FROM jobs"), "0");
  auto next = (*store)->Submit({MakeSubmission("next")});
  ASSERT_TRUE(next.ok());
  EXPECT_EQ((*next)[0].ids[0], JobId(2001));
  api::JobRecord task = (*out)[0].jobs[1500];
  task.state = api::JobState::kRunning;
  ASSERT_TRUE(
      (*store)->Update({{task, {Time::FromMillis(2000), api::JobState::kPending, api::JobState::kRunning, "ok"}}}).ok());
  EXPECT_EQ(Sql("SELECT id || ',' || state FROM jobs WHERE id = 1501"), "1501,running");
  EXPECT_EQ(Sql("SELECT string_agg(seq || ':' || reason, ' ' ORDER BY seq) FROM transitions WHERE job_id = 1501"),
            "1:submitted 2:ok");
  EXPECT_EQ(Sql("SELECT with_row FROM job_arrays"), "1");
}

TEST_F(PostgresStoreTest, BatchesLargerThanOneDocumentGoInPieces) {
  // Given a store whose documents hold 2 KiB (a few records; the server takes 256 MiB), ten jobs
  // submitted at once, a 40-task array, one update that cancels the ten and 30 tasks and memories
  // for the other ten tasks, expect every row, transition and memory written as with one piece.
  auto store = OpenPostgresStore(url_, 2048);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  std::vector<Submission> singles;
  for (int i = 0; i < 10; ++i) singles.push_back(MakeSubmission("one-" + std::to_string(i)));
  auto jobs = (*store)->Submit(singles);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  auto array = (*store)->Submit({MakeSubmission("sweep", 40, "nlp", 1000)});
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  EXPECT_EQ(Sql("SELECT count(*) FROM jobs"), "10");
  std::vector<JobUpdate> cancel;
  auto cancelled = [](api::JobRecord j) {
    j.state = api::JobState::kCancelled;
    return JobUpdate{j, {Time::FromMillis(2000), api::JobState::kPending, api::JobState::kCancelled, "cancelled"}};
  };
  for (const auto& out : *jobs) cancel.push_back(cancelled(out.jobs[0]));
  for (int i = 0; i < 30; ++i) cancel.push_back(cancelled((*array)[0].jobs[i]));
  ASSERT_TRUE((*store)->Update(cancel).ok());
  std::vector<JobMemoryRecord> memory;
  for (int i = 30; i < 40; ++i) {
    model::JobMemory m;
    m.attained_gpu_ms = 1000 * i;
    m.preemptions = i;
    m.queued_since = Time::FromMillis(10 * i);
    memory.push_back({(*array)[0].jobs[i].id, m});
  }
  ASSERT_TRUE((*store)->SaveJobMemory(memory).ok());
  EXPECT_EQ(Sql("SELECT state || ':' || count(*) FROM jobs GROUP BY state ORDER BY state"), "cancelled:40\npending:10");
  EXPECT_EQ(Sql("SELECT count(*) FROM transitions WHERE seq = 2 AND reason = 'cancelled'"), "40");
  EXPECT_EQ(Sql("SELECT count(*) FROM transitions WHERE seq = 1 AND reason = 'submitted'"), "50");
  EXPECT_EQ(Sql("SELECT with_row FROM job_arrays"), "40");
  auto stored = (*store)->ListJobMemory();
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(*stored, memory);
}

TEST_F(PostgresStoreTest, NulBytesAreStoredAsReplacementCharactersInsteadOfFailingTheBatch) {
  // Given a job whose failure reason holds NUL bytes (in its record and its transition), the same
  // step's audit record and a node record with one, expect the batch stored (PostgreSQL's text
  // and jsonb hold no NUL: a batch with one failed, and every later one with it), each NUL read
  // back as U+FFFD, the record readable as jsonb, and the ended cost summed.
  auto store = OpenPostgresStore(url_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto out = (*store)->Submit({MakeSubmission("r", 1, "nlp", 1234)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  api::JobRecord failed = (*out)[0].jobs[0];
  failed.state = api::JobState::kFailed;
  failed.cost_micros = 42;
  const std::string odd("exited with code 1 (a\0b \\u0000)", 31);
  const std::string shown("exited with code 1 (a\xEF\xBF\xBD" "b \\u0000)");
  failed.reason = odd;
  api::AuditRecord audit;
  audit.at = Time::FromMillis(2000);
  audit.verb = "job.fail";
  audit.object = "job 1";
  audit.outcome = "allowed";
  audit.reason = odd;
  (*store)->AttachAudit({audit});
  Status st = (*store)->Update({{failed, {Time::FromMillis(2000), api::JobState::kPending, api::JobState::kFailed, odd}}});
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto history = (*store)->History(failed.id);
  ASSERT_TRUE(history.ok()) << history.status().ToString();
  ASSERT_EQ(history->size(), 2u);
  EXPECT_EQ((*history)[1].reason, shown);
  auto job = (*store)->GetJob(failed.id);
  ASSERT_TRUE(job.ok() && job->has_value());
  EXPECT_EQ((**job).reason, shown);
  auto cost = (*store)->EndedCostByTeam();
  ASSERT_TRUE(cost.ok()) << cost.status().ToString();
  EXPECT_EQ(*cost, (std::map<std::string, int64_t>{{"nlp", 42}}));
  EXPECT_EQ(Sql("SELECT record::jsonb ->> 'reason' FROM jobs WHERE id = 1"), shown);
  auto log = (*store)->ListAudit({});
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  ASSERT_FALSE(log->empty());
  EXPECT_EQ(log->back().reason, shown);
  api::NodeRecord node;
  node.name = "n1";
  node.acceptance_reason = odd;
  auto id = (*store)->UpsertNode(node);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto nodes = (*store)->ListNodes();
  ASSERT_TRUE(nodes.ok() && nodes->size() == 1u);
  EXPECT_EQ(nodes->front().acceptance_reason, shown);
}

TEST_F(PostgresStoreTest, SchemaSevenWithoutArrayTablesMigratesToEightAndStoresArrays) {
  // Given a database at schema version 7 as the first PostgreSQL store of version 7 left it
  // (without the array tables, which came at 8) holding a job, expect opening it to add them:
  // version 8, the job still listed, and a 20-task array stored once and read back.
  {
    auto store = OpenPostgresStore(url_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->Submit({MakeSubmission("r", 1, "nlp", 1234)}).ok());
  }
  Sql("DROP TABLE job_array_tasks; DROP TABLE job_arrays; UPDATE meta SET value = '7' WHERE key = 'schema_version'");
  auto store = OpenPostgresStore(url_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(Sql("SELECT value FROM meta WHERE key = 'schema_version'"), "8");
  ASSERT_TRUE((*store)->Submit({MakeSubmission("sweep", 20, "nlp", 2000)}).ok());
  EXPECT_EQ(Sql("SELECT count(*) FROM job_arrays"), "1");
  auto jobs = (*store)->ListJobs({});
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  EXPECT_EQ(jobs->size(), 21u);
}

TEST_F(PostgresStoreTest, TheAuditLogIsAppendOnly) {
  // Given a stored audit record, expect plain SQL to be unable to change, delete or truncate it.
  {
    auto store = OpenPostgresStore(url_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->AppendAudit({Audit("a", "job.submit", 1)}).ok());
  }
  for (const std::string sql : {"DELETE FROM audit", "UPDATE audit SET subject = 'x'", "TRUNCATE audit"}) {
    auto r = server_->Psql("SET search_path = " + schema_ + "; " + sql);
    ASSERT_FALSE(r.ok()) << sql;
    EXPECT_TRUE(Contains(r.status().message(), "append-only")) << r.status().message();
  }
  EXPECT_EQ(Sql("SELECT subject FROM audit"), "a");
}

TEST_F(PostgresStoreTest, NewerSchemaVersionIsRefused) {
  // Given a database written by a newer gpufleet (schema version 9), expect opening it to fail
  // with FailedPrecondition naming both versions, and the database left as it was.
  { ASSERT_TRUE(OpenPostgresStore(url_).ok()); }
  Sql("UPDATE meta SET value = '9' WHERE key = 'schema_version'");
  auto store = OpenPostgresStore(url_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(store.status().message(), "schema version 9 is newer than this gpufleet knows (8)"))
      << store.status().message();
  EXPECT_EQ(Sql("SELECT value FROM meta WHERE key = 'schema_version'"), "9");
}

TEST_F(PostgresStoreTest, SchemaThreeMigratesToTheLatestAndItsJobsHaveNoMemory) {
  // Given a database at schema version 3 (before the scheduler's memory was stored) with a job,
  // expect opening it to migrate to version 8, the job to load unchanged with no memory, and
  // memory to be stored for it from then on.
  {
    auto store = OpenPostgresStore(url_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->Submit({MakeSubmission("r", 1, "nlp", 1234)}).ok());
  }
  // Version 3 is version 8 without the job_memory table, the leader's agent_url and the array
  // tables (5 -> 6 changes nothing in PostgreSQL).
  Sql("DROP TABLE job_memory; DROP TABLE job_array_tasks; DROP TABLE job_arrays; ALTER TABLE leader DROP COLUMN agent_url; "
      "UPDATE meta SET value = '3' WHERE key = 'schema_version'");
  auto store = OpenPostgresStore(url_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(Sql("SELECT value FROM meta WHERE key = 'schema_version'"), "8");
  auto jobs = (*store)->ListJobs({});
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].request.spec.team, "nlp");
  EXPECT_TRUE((*store)->ListJobMemory()->empty());
  model::JobMemory m;
  m.las_service_gpu_ms = 9'000'000;
  ASSERT_TRUE((*store)->SaveJobMemory({{JobId(1), m}}).ok());
  EXPECT_EQ(Sql("SELECT las_service_gpu_ms FROM job_memory WHERE job_id = 1"), "9000000");
}

TEST_F(PostgresStoreTest, UrlLibpqCannotParseIsInvalidArgument) {
  // Given a URL with a parameter libpq does not know, expect InvalidArgument with libpq's reason.
  auto store = OpenPostgresStore("postgresql:///postgres?no_such_setting=1");
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(store.status().message(), "no_such_setting")) << store.status().message();
}

TEST_F(PostgresStoreTest, ServerThatIsNotThereIsUnavailable) {
  // Given a socket directory where no server listens, expect Unavailable saying it cannot
  // connect, naming the server and libpq's reason.
  auto store = OpenPostgresStore("postgresql:///postgres?host=" + server_->dir() + "/nowhere&user=postgres");
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Contains(store.status().message(), "cannot connect")) << store.status().message();
  EXPECT_TRUE(Contains(store.status().message(), "/nowhere")) << store.status().message();
}

TEST_F(PostgresStoreTest, DamagedRecordIsReportedNotThrown) {
  // Given a job row whose JSON was damaged by hand, expect reads of it to fail with Internal
  // naming the job, and other jobs to stay readable.
  auto store = OpenPostgresStore(url_);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Submit({MakeSubmission("a"), MakeSubmission("b")}).ok());
  Sql("UPDATE jobs SET record = '{\"id\": 1' WHERE id = 1");
  auto bad = (*store)->GetJob(JobId(1));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInternal);
  EXPECT_TRUE(Contains(bad.status().message(), "job 1")) << bad.status().message();
  auto good = (*store)->GetJob(JobId(2));
  ASSERT_TRUE(good.ok());
  EXPECT_TRUE(good->has_value());
}

TEST_F(PostgresStoreTest, ServerCrashLosesNoCommitAndTheStoreReconnects) {
  // Given batches committed, then the server killed (immediate stop: no shutdown checkpoint) and
  // restarted between two calls, expect the next read to succeed on a new connection. Killed
  // again, expect writes and reads to fail with Unavailable while it is down; after it restarts,
  // expect the same store object to work again and to hold every committed job exactly once,
  // with ids going on from where they were.
  auto opened = OpenPostgresStore(url_);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<StateStore> store = std::move(opened).value();
  std::set<std::string> committed;
  for (int i = 0; i < 10; ++i) {
    const std::string id = std::to_string(i);
    auto out = store->Submit({MakeSubmission("single-" + id), MakeSubmission("array-" + id, 3)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    committed.insert("single-" + id);
    committed.insert("array-" + id);
  }
  ASSERT_TRUE(server_->Kill().ok());
  Status back = server_->Restart();
  ASSERT_TRUE(back.ok()) << back.ToString();
  auto read_after = store->GetJob(JobId(40));
  ASSERT_TRUE(read_after.ok()) << read_after.status().ToString();
  ASSERT_TRUE(read_after->has_value());
  EXPECT_EQ((*read_after)->request_id, "array-9");

  ASSERT_TRUE(server_->Kill().ok());
  auto down = store->Submit({MakeSubmission("while-down")});
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), StatusCode::kUnavailable) << down.status().ToString();
  auto read_down = store->GetJob(JobId(1));
  ASSERT_FALSE(read_down.ok());
  EXPECT_EQ(read_down.status().code(), StatusCode::kUnavailable) << read_down.status().ToString();
  Status restarted = server_->Restart();
  ASSERT_TRUE(restarted.ok()) << restarted.ToString();

  auto after = store->Submit({MakeSubmission("after")});
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(Ids((*after)[0].ids), (std::vector<int64_t>{41}));
  auto jobs = store->ListJobs({});
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  std::map<std::string, int> per_request;
  for (const auto& job : *jobs) ++per_request[job.request_id];
  for (const std::string& rid : committed) {
    EXPECT_EQ(per_request[rid], rid.rfind("array-", 0) == 0 ? 3 : 1) << "request " << rid;
  }
  EXPECT_EQ(per_request.count("while-down"), 0u);
  EXPECT_EQ(jobs->size(), 41u);
}

// The leader lease (issue scenario: a leader paused past its lease, e.g. by SIGSTOP, resumes and
// writes after a standby took over). Time is driven by SQL: a lease is made to lapse by setting
// its expiry into the past, by the database's clock, instead of waiting for it.
class PostgresLeaderTest : public PostgresStoreTest {
 protected:
  std::unique_ptr<StateStore> Open() {
    auto store = OpenPostgresStore(url_);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }
  Leadership Acquire(StateStore& store, const std::string& holder, Duration lease = Duration::Minutes(10)) {
    auto l = store.AcquireLeadership({holder, holder + "/agents"}, lease);
    EXPECT_TRUE(l.ok()) << holder << ": " << l.status().ToString();
    return l.ok() ? *l : Leadership{};
  }
  // The lease lapses now, as it would had its holder stopped renewing for its whole length.
  void Lapse() { Sql("UPDATE leader SET expires_at = now() - interval '1 millisecond'"); }
  // Everything a write can change, as plain SQL sees it.
  std::string Dump() {
    return Sql("SELECT (SELECT count(*) FROM jobs) || '/' || (SELECT count(*) FROM transitions) || '/' || "
               "(SELECT count(*) FROM requests) || '/' || (SELECT count(*) FROM nodes) || '/' || "
               "(SELECT count(*) FROM tokens) || '/' || (SELECT count(*) FROM meta) || '/' || "
               "(SELECT count(*) FROM audit) || '/' || (SELECT count(*) FROM job_memory) || '/' || "
               "(SELECT string_agg(state || ':' || updated_ms, ',' "
               "ORDER BY id) FROM jobs) || '/' || (SELECT string_agg(name || '=' || value, ',' ORDER BY name) FROM counters) || "
               "'/' || (SELECT string_agg(record, ',' ORDER BY hash) FROM tokens)");
  }
};

TEST_F(PostgresLeaderTest, OnlyOneOfTwoStoresHoldsTheLease) {
  // Given two stores on one database asking for the lease, expect the first to hold it with token
  // 1 and the second to be told who holds it, with the same token and a live lease; asked again,
  // expect the same answers. The lease is in the leader row, readable with SQL.
  auto a = Open();
  auto b = Open();
  ASSERT_TRUE(a && b);
  Leadership la = Acquire(*a, "http://127.0.0.1:8001");
  Leadership lb = Acquire(*b, "http://127.0.0.1:8002");
  EXPECT_TRUE(la.held);
  EXPECT_EQ(la.token, 1);
  EXPECT_FALSE(lb.held);
  EXPECT_EQ(lb.token, 1);
  EXPECT_EQ(lb.holder, "http://127.0.0.1:8001");
  EXPECT_GT(lb.expires_in, Duration::Minutes(9));
  EXPECT_TRUE(Acquire(*a, "http://127.0.0.1:8001").held);
  EXPECT_FALSE(Acquire(*b, "http://127.0.0.1:8002").held);
  EXPECT_EQ(Sql("SELECT holder || ',' || token || ',' || (expires_at > now()) FROM leader"),
            "http://127.0.0.1:8001,1,true");
}

TEST_F(PostgresLeaderTest, LapsedLeaseGoesToTheOtherWithALargerToken) {
  // Given A leading and then not renewing until its lease lapsed (by the database's clock), expect
  // B to take the lease with token 2, and A, asking afterwards, to be told B holds it.
  auto a = Open();
  auto b = Open();
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(Acquire(*a, "a").held);
  ASSERT_FALSE(Acquire(*b, "b").held);
  Lapse();
  Leadership lb = Acquire(*b, "b");
  EXPECT_TRUE(lb.held);
  EXPECT_EQ(lb.token, 2);
  Leadership la = Acquire(*a, "a");
  EXPECT_FALSE(la.held);
  EXPECT_EQ(la.token, 2);
  EXPECT_EQ(la.holder, "b");
  // A lapsed lease nobody took is renewed by its holder with the same token.
  Lapse();
  Leadership again = Acquire(*b, "b");
  EXPECT_TRUE(again.held);
  EXPECT_EQ(again.token, 2);
}

TEST_F(PostgresLeaderTest, ReleasedLeaseGoesToTheStandbyAtOnce) {
  // Given A leading with a long lease and B standing by, expect A's release to let B take the
  // lease at its next ask with token 2, advertising its agent URL and since when it leads; a
  // release by A afterwards changes nothing (B keeps its lease), and A's writes stay fenced.
  auto a = Open();
  auto b = Open();
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(Acquire(*a, "a").held);
  Leadership standby = Acquire(*b, "b");
  ASSERT_FALSE(standby.held);
  EXPECT_EQ(standby.agent_url, "a/agents");
  EXPECT_GT(standby.since, Time::Epoch());
  ASSERT_TRUE(a->ReleaseLeadership({"a", "a/agents"}).ok());
  Leadership lb = Acquire(*b, "b");
  EXPECT_TRUE(lb.held);
  EXPECT_EQ(lb.token, 2);
  EXPECT_EQ(lb.agent_url, "b/agents");
  EXPECT_GE(lb.since, standby.since);
  ASSERT_TRUE(a->ReleaseLeadership({"a", "a/agents"}).ok());
  EXPECT_EQ(Sql("SELECT holder || ',' || token || ',' || agent_url || ',' || (expires_at > now()) FROM leader"),
            "b,2,b/agents,true");
  EXPECT_EQ(a->SetMeta("k", "v").code(), StatusCode::kUnavailable);
}

TEST_F(PostgresLeaderTest, RenewalDoesNotWaitForTheStoresOtherCalls) {
  // Given a leader whose store is busy with a call that cannot finish (listing jobs while another
  // client holds the jobs table locked, as a rebuild reading every unfinished job keeps it busy
  // for seconds), expect the lease to be renewed meanwhile with the same token, the call still
  // waiting; and once the lock is gone, the call to finish and a write to pass the fence.
  auto a = Open();
  ASSERT_TRUE(a);
  ASSERT_TRUE(a->Submit({MakeSubmission("one")}).ok());
  Leadership first = Acquire(*a, "a");
  ASSERT_TRUE(first.held);
  PGconn* locker = PQconnectdb(url_.c_str());
  ASSERT_EQ(PQstatus(locker), CONNECTION_OK) << PQerrorMessage(locker);
  auto exec = [&](const std::string& sql) {
    PGresult* r = PQexec(locker, sql.c_str());
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    std::string first_value = ok && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
    EXPECT_TRUE(ok) << sql << ": " << PQresultErrorMessage(r);
    PQclear(r);
    return first_value;
  };
  // Were the renewal to wait for the listing, the server would end the lock after a while and the
  // checks below would fail rather than hang.
  exec("SET idle_in_transaction_session_timeout = '20s'");
  exec("BEGIN; LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE");
  std::atomic<bool> listed = false;
  Result<std::vector<api::JobRecord>> jobs = std::vector<api::JobRecord>{};
  std::thread lister([&] {
    jobs = a->ListJobs({});
    listed = true;
  });
  // The listing waits for the lock on the server (its backend waits on a lock of the jobs
  // table): asked a bounded number of times, each after the database itself waited.
  bool waiting = false;
  for (int i = 0; i < 3000 && !waiting; ++i) {
    waiting = exec("SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = '" + schema_ +
                   ".jobs'::regclass") != "0";
    if (!waiting) exec("SELECT pg_sleep(0.01)");
  }
  ASSERT_TRUE(waiting) << "the listing never waited for the lock";
  Leadership renewed = Acquire(*a, "a");
  EXPECT_TRUE(renewed.held);
  EXPECT_EQ(renewed.token, first.token);
  EXPECT_FALSE(listed) << "the listing finished while the table was locked";
  exec("COMMIT");
  lister.join();
  PQfinish(locker);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  EXPECT_EQ(jobs->size(), 1u);
  EXPECT_TRUE(a->SetMeta("k", "v").ok());
}

TEST_F(PostgresLeaderTest, ShortLeaseLapsesByTheDatabasesClock) {
  // Given A holding a 1 ms lease and not renewing, expect B to take it once the database's clock
  // has passed the expiry: B asks until it holds the lease, a bounded number of times, each after
  // the database itself waited (pg_sleep), so no clock of this process is involved.
  auto a = Open();
  auto b = Open();
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(Acquire(*a, "a", Duration::Millis(1)).held);
  bool taken = false;
  for (int i = 0; i < 100 && !taken; ++i) {
    Sql("SELECT pg_sleep(0.01)");
    taken = Acquire(*b, "b").held;
  }
  EXPECT_TRUE(taken);
  EXPECT_EQ(Sql("SELECT holder || ',' || token FROM leader"), "b,2");
}

TEST_F(PostgresLeaderTest, OldLeaderThatResumesAfterATakeoverCannotWrite) {
  // The scenario. Given A leading and writing (a job, a node, a token), then paused past
  // its lease while B took over, expect every write A attempts on resuming -- submit, update,
  // scheduler memory, node, token, touch, setting, audit -- to fail with Unavailable naming both
  // tokens, and the database to be exactly as B left it. B's writes succeed, and A, asking for
  // the lease, is told B holds it.
  auto a = Open();
  auto b = Open();
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(Acquire(*a, "a").held);
  auto submitted = a->Submit({MakeSubmission("before")});
  ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
  api::NodeRecord node;
  node.name = "node-a";
  ASSERT_TRUE(a->UpsertNode(node).ok());
  api::TokenRecord token{"aaaa", api::TokenKind::kAgent, "node-a", "agent", "", Time::FromMillis(2), false,
                         std::nullopt, std::nullopt, ""};
  ASSERT_TRUE(a->PutToken(token).ok());
  ASSERT_TRUE(a->TouchToken("aaaa", Time::FromMillis(5)).ok());

  Lapse();  // A is paused and does not renew
  ASSERT_TRUE(Acquire(*b, "b").held);
  auto b_submitted = b->Submit({MakeSubmission("by-b")});
  ASSERT_TRUE(b_submitted.ok()) << b_submitted.status().ToString();
  const std::string before = Dump();
  ASSERT_TRUE(Contains(before, "jobs=2,")) << before;

  // A resumes and writes as if it still led.
  api::JobRecord job = (*a->GetJob(JobId(1))).value();
  job.state = api::JobState::kCancelled;
  job.updated = Time::FromMillis(9999);
  std::vector<Status> refused;
  refused.push_back(a->Submit({MakeSubmission("after")}).status());
  refused.push_back(a->Update({{job, {Time::FromMillis(9999), api::JobState::kPending, api::JobState::kCancelled,
                                      "cancelled"}}}));
  api::JobRecord running = job;
  running.state = api::JobState::kRunning;
  JobUpdate with_memory{running, {Time::FromMillis(9999), api::JobState::kPending, api::JobState::kRunning, "ok"}};
  with_memory.memory = model::JobMemory{};
  refused.push_back(a->Update({with_memory}));
  refused.push_back(a->SaveJobMemory({{JobId(1), model::JobMemory{}}}));
  node.name = "node-b";
  refused.push_back(a->UpsertNode(node).status());
  token.revoked = true;
  refused.push_back(a->PutToken(token));
  refused.push_back(a->TouchToken("aaaa", Time::FromMillis(7777)));
  refused.push_back(a->SetMeta("cluster_id", "a"));
  refused.push_back(a->AppendAudit({Audit("a", "job.submit", 1)}));
  a->AttachAudit({Audit("a", "job.cancel", 2)});
  refused.push_back(a->Submit({MakeSubmission("after-with-audit")}).status());
  for (size_t i = 0; i < refused.size(); ++i) {
    EXPECT_EQ(refused[i].code(), StatusCode::kUnavailable) << "write " << i << ": " << refused[i].ToString();
    EXPECT_TRUE(Contains(refused[i].message(), "lost the leadership: token 1 superseded by 2"))
        << "write " << i << ": " << refused[i].message();
  }
  EXPECT_EQ(Dump(), before);
  // A may still read, and learns who leads.
  EXPECT_TRUE(a->GetJob(JobId(2)).ok());
  Leadership la = Acquire(*a, "a");
  EXPECT_FALSE(la.held);
  EXPECT_EQ(la.holder, "b");
  EXPECT_EQ(a->Submit({MakeSubmission("still-after")}).status().code(), StatusCode::kUnavailable);
  // B goes on writing.
  EXPECT_TRUE(b->SetMeta("cluster_id", "b").ok());
  EXPECT_EQ(Sql("SELECT value FROM meta WHERE key = 'cluster_id'"), "b");
}

}  // namespace
}  // namespace gpufleet::store
