// PostgreSQL only: schema, refusals, errors, a server crash. The behaviour every store shares is
// in state_store_test.cc. All of these share the process's server (store_fixture_test.h).
#include <map>
#include <memory>
#include <set>
#include <string>
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
  // Given a new schema with one job, expect schema version 2 in meta, and the job's columns,
  // JSON record, request and transition readable with plain SQL.
  {
    auto store = OpenPostgresStore(url_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->Submit({MakeSubmission("r", 1, "nlp", 1234)}).ok());
  }
  EXPECT_EQ(Sql("SELECT value FROM meta WHERE key = 'schema_version'"), "2");
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
  // Given a database written by a newer gpufleet (schema version 3), expect opening it to fail
  // with FailedPrecondition naming both versions, and the database left as it was.
  { ASSERT_TRUE(OpenPostgresStore(url_).ok()); }
  Sql("UPDATE meta SET value = '3' WHERE key = 'schema_version'");
  auto store = OpenPostgresStore(url_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(store.status().message(), "schema version 3 is newer than this gpufleet knows (2)"))
      << store.status().message();
  EXPECT_EQ(Sql("SELECT value FROM meta WHERE key = 'schema_version'"), "3");
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

}  // namespace
}  // namespace gpufleet::store
