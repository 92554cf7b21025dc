#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
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
  // Given a new database with one job, expect the file in WAL mode, schema version 8 in meta, and
  // the job's columns and JSON record readable with plain SQL.
  {
    auto store = OpenSqliteStore(db_path());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->Submit({MakeSubmission("r", 1, "nlp", 1234)}).ok());
  }
  EXPECT_EQ(RawQuery("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(RawQuery("SELECT value FROM meta WHERE key = 'schema_version'"), "8");
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
  // Given a database written by a newer gpufleet (schema version 9), expect opening it to fail
  // with FailedPrecondition naming the path and both versions, and the file left as it was.
  { ASSERT_TRUE(OpenSqliteStore(db_path()).ok()); }
  RawExec("UPDATE meta SET value = '9' WHERE key = 'schema_version'");
  auto store = OpenSqliteStore(db_path());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  const std::string& msg = store.status().message();
  EXPECT_TRUE(Contains(msg, db_path())) << msg;
  EXPECT_TRUE(Contains(msg, "schema version 9 is newer than this gpufleet knows (8)")) << msg;
  EXPECT_EQ(RawQuery("SELECT value FROM meta WHERE key = 'schema_version'"), "9");
}

TEST_F(SqliteStoreTest, SchemaThreeMigratesToTheLatestAndItsJobsHaveNoMemory) {
  // Given a database at schema version 3 (before the scheduler's memory was stored) with a job,
  // expect opening it to migrate to version 8, the job to load unchanged with no memory, and
  // memory to be stored for it from then on.
  {
    auto store = OpenSqliteStore(db_path());
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Submit({MakeSubmission("r", 1, "nlp", 1234)}).ok());
  }
  // Version 3 is version 8 without the job_memory table and the array tables (4 -> 5 changes
  // nothing in SQLite, and 5 -> 6 rebuilds two tables whichever form they have).
  RawExec(
      "DROP TABLE job_memory; DROP TABLE job_array_tasks; DROP TABLE job_arrays; "
      "UPDATE meta SET value = '3' WHERE key = 'schema_version'");
  auto store = OpenSqliteStore(db_path());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(RawQuery("SELECT value FROM meta WHERE key = 'schema_version'"), "8");
  auto jobs = (*store)->ListJobs({});
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].request.spec.team, "nlp");
  EXPECT_TRUE((*store)->ListJobMemory()->empty());
  model::JobMemory m;
  m.las_service_gpu_ms = 9'000'000;
  ASSERT_TRUE((*store)->SaveJobMemory({{JobId(1), m}}).ok());
  EXPECT_EQ(RawQuery("SELECT las_service_gpu_ms FROM job_memory WHERE job_id = 1"), "9000000");
}

TEST_F(SqliteStoreTest, SchemaFiveMigratesToKeyOnlyTablesKeepingHistoryAndRequests) {
  // Given a database at schema version 5, whose transitions and requests are rowid tables, with
  // two requests and a job that changed state, expect opening it to migrate to version 8 with
  // both tables WITHOUT ROWID, every transition in order, a repeated request id answered with
  // its stored jobs, and new submits and transitions stored as before.
  {
    auto store = OpenSqliteStore(db_path());
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Submit({MakeSubmission("r1", 2, "nlp", 1000), MakeSubmission("r2", 1, "cv", 2000)}).ok());
    api::JobRecord job = MakeJob("nlp", 1000);
    job.id = JobId(1);
    job.request_id = "r1";
    job.array_index = 0;
    job.state = api::JobState::kRunning;
    job.updated = Time::FromMillis(3000);
    ASSERT_TRUE((*store)->Update({{job, {Time::FromMillis(3000), api::JobState::kPending, api::JobState::kRunning, "placed"}}}).ok());
  }
  // Version 5's tables, as its first migration created them.
  RawExec(
      "CREATE TABLE t5 (job_id INTEGER NOT NULL REFERENCES jobs (id), seq INTEGER NOT NULL, at_ms INTEGER NOT NULL, "
      "from_state TEXT NOT NULL, to_state TEXT NOT NULL, reason TEXT NOT NULL, PRIMARY KEY (job_id, seq));"
      "INSERT INTO t5 SELECT * FROM transitions; DROP TABLE transitions; ALTER TABLE t5 RENAME TO transitions;"
      "CREATE TABLE r5 (request_id TEXT PRIMARY KEY, job_ids TEXT NOT NULL);"
      "INSERT INTO r5 SELECT * FROM requests; DROP TABLE requests; ALTER TABLE r5 RENAME TO requests;"
      "DROP TABLE job_array_tasks; DROP TABLE job_arrays;"
      "UPDATE meta SET value = '5' WHERE key = 'schema_version'");
  ASSERT_EQ(RawQuery("SELECT count(*) FROM sqlite_master WHERE sql LIKE '%WITHOUT ROWID%'"), "0");

  auto store = OpenSqliteStore(db_path());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(RawQuery("SELECT value FROM meta WHERE key = 'schema_version'"), "8");
  EXPECT_EQ(RawQuery("SELECT group_concat(name, ',') FROM (SELECT name FROM sqlite_master WHERE type = 'table' "
                     "AND sql LIKE '%WITHOUT ROWID%' ORDER BY name)"),
            "job_array_tasks,requests,transitions");
  EXPECT_EQ(RawQuery("SELECT \"table\" || '.' || \"to\" FROM pragma_foreign_key_list('transitions')"), "jobs.id");
  auto history = (*store)->History(JobId(1));
  ASSERT_TRUE(history.ok()) << history.status().ToString();
  ASSERT_EQ(history->size(), 2u);
  EXPECT_EQ((*history)[0].reason, "submitted");
  EXPECT_EQ((*history)[1].reason, "placed");
  EXPECT_EQ((*history)[1].to, api::JobState::kRunning);

  auto again = (*store)->Submit({MakeSubmission("r1", 2, "nlp", 5000), MakeSubmission("r3", 1, "nlp", 5000)});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_EQ(again->size(), 2u);
  EXPECT_FALSE((*again)[0].created);
  EXPECT_EQ(Ids((*again)[0].ids), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE((*again)[1].created);
  EXPECT_EQ(Ids((*again)[1].ids), (std::vector<int64_t>{4}));
  EXPECT_EQ(RawQuery("SELECT count(*) FROM transitions"), "5");
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
  // It says what to do, and the file is left as it was.
  EXPECT_TRUE(Contains(store.status().message(), "restore a `gpufleet backup`")) << store.status().message();
  std::ifstream in(db_path(), std::ios::binary);
  std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(kept, std::string(8192, 'x'));
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

TEST_F(SqliteStoreTest, AnArrayIsStoredOnceUntilItsTasksChange) {
  // Given an array of 3,000 tasks, expect one row in job_arrays, three chunks of tasks, no row in
  // jobs and no transition, and the next submission (before any task has a row, and again after
  // a reopen) to get the ids after the array; once one task changes, expect its row, its two
  // transitions and the array's count of rows. A damaged task fails the reads of it with
  // Internal naming the job and the field, and leaves the other tasks readable.
  auto store = OpenSqliteStore(db_path());
  ASSERT_TRUE(store.ok());
  auto out = (*store)->Submit({MakeSubmission("sweep", 3000, "nlp", 1000)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(RawQuery("SELECT first_id || '-' || last_id || ',' || team || ',' || submitted_ms || ',' || with_row "
                     "FROM job_arrays"),
            "1-3000,nlp,1000,0");
  EXPECT_EQ(RawQuery("SELECT count(*) FROM job_array_tasks"), "3");
  EXPECT_EQ(RawQuery("SELECT count(*) FROM jobs"), "0");
  EXPECT_EQ(RawQuery("SELECT count(*) FROM transitions"), "0");
  auto next = (*store)->Submit({MakeSubmission("next")});
  ASSERT_TRUE(next.ok());
  EXPECT_EQ((*next)[0].ids[0], JobId(3001));
  auto array2 = (*store)->Submit({MakeSubmission("sweep2", 20, "nlp", 2000)});
  ASSERT_TRUE(array2.ok());
  EXPECT_EQ((*array2)[0].ids.front(), JobId(3002));
  store->reset();
  store = OpenSqliteStore(db_path());
  ASSERT_TRUE(store.ok());
  auto after = (*store)->Submit({MakeSubmission("after-reopen")});
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)[0].ids[0], JobId(3022));

  api::JobRecord task = (*out)[0].jobs[2999];
  task.state = api::JobState::kRunning;
  ASSERT_TRUE(
      (*store)->Update({{task, {Time::FromMillis(2000), api::JobState::kPending, api::JobState::kRunning, "ok"}}}).ok());
  EXPECT_EQ(RawQuery("SELECT id || ',' || state FROM jobs WHERE id = 3000"), "3000,running");
  EXPECT_EQ(RawQuery("SELECT group_concat(seq || ':' || reason, ' ') FROM transitions WHERE job_id = 3000"),
            "1:submitted 2:ok");
  EXPECT_EQ(RawQuery("SELECT with_row FROM job_arrays WHERE first_id = 1"), "1");

  RawExec("UPDATE job_array_tasks SET tasks = json_set(tasks, '$[475].name', 1) WHERE first_id = 1 AND chunk = 1");
  auto bad = (*store)->GetJob(JobId(1500));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInternal);
  EXPECT_TRUE(Contains(bad.status().message(), "job 1500")) << bad.status().message();
  EXPECT_TRUE(Contains(bad.status().message(), "task.name")) << bad.status().message();
  EXPECT_FALSE((*store)->ListJobs({}).ok());
  for (int64_t id : {1025, 1499, 1501, 2500}) {
    auto good = (*store)->GetJob(JobId(id));
    ASSERT_TRUE(good.ok()) << good.status().ToString();
    ASSERT_TRUE(good->has_value());
    EXPECT_EQ((*good)->array_index, id - 1);
  }
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

