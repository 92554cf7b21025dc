// BackupStore: SQLite's online backup and pg_dump, each restored and read back as a store.
#include "store/backup.h"

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "common/process.h"
#include "store/state_store.h"
#include "store/store_fixture_test.h"

namespace gpufleet::store {
namespace {

namespace fs = std::filesystem;

class BackupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gf-backup-test-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST_F(BackupTest, SqliteCopyWhileOpenIsAConsistentStoreWithEveryJob) {
  // Given a SQLite store that is open (as a running controller holds it) with 21 jobs (an array
  // of 20 stored once, one of its tasks since changed, and a plain job), expect the backup to
  // report 21 jobs and schema version, and the copy to open as a store with the jobs.
  auto live = OpenSqliteStore(Path("state.db"));
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  auto submitted = (*live)->Submit({MakeSubmission("a", 20), MakeSubmission("b", 1)});
  ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
  api::JobRecord changed = (*submitted)[0].jobs[4];
  changed.state = api::JobState::kCancelled;
  ASSERT_TRUE(
      (*live)->Update({{changed, {Time::FromMillis(5), api::JobState::kPending, api::JobState::kCancelled, "x"}}}).ok());
  auto r = BackupStore({StoreLocation::Engine::kSqlite, Path("state.db")}, Path("copy.db"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->method, "SQLite online backup");
  EXPECT_EQ(r->jobs, 21);
  EXPECT_GT(r->schema_version, 0);
  EXPECT_GT(r->bytes, 0);
  EXPECT_EQ(r->bytes, static_cast<int64_t>(fs::file_size(Path("copy.db"))));
  // Private to its user, as the store is (it holds jobs' commands, environments, the audit log).
  EXPECT_EQ(fs::status(Path("copy.db")).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  auto copy = OpenSqliteStore(Path("copy.db"));
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  auto jobs = (*copy)->ListJobs({});
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(jobs->size(), 21u);
  // The live store goes on; the copy does not follow it.
  ASSERT_TRUE((*live)->Submit({MakeSubmission("c", 1)}).ok());
  EXPECT_EQ((*copy)->ListJobs({})->size(), 21u);
}

TEST_F(BackupTest, RefusesToOverwriteAndLeavesNothingWhenItFails) {
  // Given an existing destination, expect FailedPrecondition and the file untouched; given a
  // source that is missing or not a gpufleet store, expect an error naming it and no copy.
  { std::ofstream(Path("taken.db")) << "keep me"; }
  auto live = OpenSqliteStore(Path("state.db"));
  ASSERT_TRUE(live.ok());
  auto r = BackupStore({StoreLocation::Engine::kSqlite, Path("state.db")}, Path("taken.db"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("never overwrites"), std::string::npos) << r.status().message();
  std::ifstream in(Path("taken.db"));
  std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(kept, "keep me");

  r = BackupStore({StoreLocation::Engine::kSqlite, Path("missing.db")}, Path("out1.db"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("missing.db"), std::string::npos) << r.status().message();
  EXPECT_FALSE(fs::exists(Path("out1.db")));
  EXPECT_FALSE(fs::exists(Path("missing.db")));  // a backup creates no source

  { std::ofstream(Path("other.db")); }  // an empty file: SQLite opens it as an empty database
  r = BackupStore({StoreLocation::Engine::kSqlite, Path("other.db")}, Path("out2.db"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("holds no gpufleet state"), std::string::npos) << r.status().message();
  EXPECT_FALSE(fs::exists(Path("out2.db")));
}

TEST_F(BackupTest, TheCopyIsPutInPlaceOnlyOnceCheckedAndNeverBesideTheStore) {
  // Given a backup to a name whose partial file is left from an interrupted one, expect a refusal
  // saying so and nothing written under the final name; given SQLite's own files beside the store
  // or a directory, expect a refusal naming them; a good copy leaves no partial file.
  auto live = OpenSqliteStore(Path("state.db"));
  ASSERT_TRUE(live.ok());
  ASSERT_TRUE((*live)->Submit({MakeSubmission("a", 1)}).ok());
  const StoreLocation store{StoreLocation::Engine::kSqlite, Path("state.db")};
  { std::ofstream(Path("b1.db.partial")) << "half a copy"; }
  auto r = BackupStore(store, Path("b1.db"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("b1.db.partial exists: another backup to"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("or one was interrupted (remove it"), std::string::npos);
  EXPECT_FALSE(fs::exists(Path("b1.db")));
  fs::remove(Path("b1.db.partial"));
  r = BackupStore(store, Path("b1.db"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(fs::exists(Path("b1.db")));
  EXPECT_FALSE(fs::exists(Path("b1.db.partial")));
  EXPECT_FALSE(fs::exists(Path("b1.db.partial-journal")));
  EXPECT_GT(r->tables, 0);  // counted for a SQLite copy too

  for (const char* name : {"state.db-journal", "state.db-shm", "./state.db-wal"}) {
    fs::remove(Path("state.db-journal"));
    r = BackupStore(store, Path(name));
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << name;
    EXPECT_NE(r.status().message().find("give a file elsewhere"), std::string::npos) << r.status().message();
  }
  EXPECT_FALSE(fs::exists(Path("state.db-journal")));
  fs::create_directories(Path("backups"));
  r = BackupStore(store, Path("backups"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("backups is a directory; give a file in it"), std::string::npos)
      << r.status().message();
}

TEST_F(BackupTest, AStoreWithoutAReadableSchemaVersionIsNotCalledABackup) {
  // Given a store whose meta table lost its schema_version, or holds one that is not a number
  // (a controller refuses to open either), expect the backup to fail saying so and leave no file.
  {
    auto s = OpenSqliteStore(Path("state.db"));
    ASSERT_TRUE(s.ok());
  }
  auto set = [&](const char* sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(Path("state.db").c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  };
  const StoreLocation store{StoreLocation::Engine::kSqlite, Path("state.db")};
  set("UPDATE meta SET value = 'abc' WHERE key = 'schema_version'");
  auto r = BackupStore(store, Path("x.db"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("schema_version 'abc' is not a number"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("a controller would not open a copy of it"), std::string::npos);
  EXPECT_FALSE(fs::exists(Path("x.db")));
  EXPECT_FALSE(fs::exists(Path("x.db.partial")));
  set("DELETE FROM meta WHERE key = 'schema_version'");
  r = BackupStore(store, Path("x.db"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("has no schema_version in its meta table"), std::string::npos) << r.status().message();
  EXPECT_FALSE(fs::exists(Path("x.db")));
}

TEST_F(BackupTest, ARestoreChecksTheCopyBeforeTouchingTheStoreAndLeavesNothingBesideTheBackup) {
  // Given a backup of a store in WAL mode, expect the copy to be one file (no write-ahead-log
  // flag: opening it makes no -wal or -shm beside it), and a restore to read it from a folder it
  // may not write. Given a .partial left by an interrupted restore, expect a refusal naming it and
  // the store untouched; given a stray state.db-wal without a store, expect it set aside, not
  // left to be replayed over the restored file.
  {
    auto live = OpenSqliteStore(Path("state.db"));
    ASSERT_TRUE(live.ok());
    ASSERT_TRUE((*live)->Submit({MakeSubmission("a", 2)}).ok());
    ASSERT_TRUE(BackupStore({StoreLocation::Engine::kSqlite, Path("state.db")}, Path("ro/b.db")).status().code() ==
                StatusCode::kUnavailable);  // (no such folder yet)
    fs::create_directories(Path("ro"));
    auto made = BackupStore({StoreLocation::Engine::kSqlite, Path("state.db")}, Path("ro/b.db"));
    ASSERT_TRUE(made.ok()) << made.status().ToString();
  }
  std::ifstream header(Path("ro/b.db"), std::ios::binary);
  char h[20];
  ASSERT_TRUE(header.read(h, sizeof h));
  EXPECT_EQ(h[18], 1) << "the copy is still marked for write-ahead logging";
  fs::permissions(Path("ro"), fs::perms::owner_read | fs::perms::owner_exec);
  fs::create_directories(Path("d1"));
  { std::ofstream(Path("d1/state.db.partial")) << "half"; }
  auto r = RestoreSqliteStore(Path("ro/b.db"), Path("d1/state.db"), "T1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("state.db.partial exists: an earlier restore or backup there was interrupted"),
            std::string::npos)
      << r.status().message();
  EXPECT_FALSE(fs::exists(Path("d1/state.db")));
  fs::remove(Path("d1/state.db.partial"));
  { std::ofstream(Path("d1/state.db-wal")) << "an old log"; }
  r = RestoreSqliteStore(Path("ro/b.db"), Path("d1/state.db"), "T2");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->copy.jobs, 2);
  EXPECT_EQ(r->set_aside, Path("d1/state.db.before-restore-T2"));
  EXPECT_TRUE(fs::exists(Path("d1/state.db.before-restore-T2-wal")));
  EXPECT_FALSE(fs::exists(Path("d1/state.db-wal")));
  EXPECT_FALSE(fs::exists(Path("d1/state.db.partial")));
  EXPECT_FALSE(fs::exists(Path("ro/b.db-wal")));
  EXPECT_FALSE(fs::exists(Path("ro/b.db-shm")));
  fs::permissions(Path("ro"), fs::perms::owner_all);
  auto restored = OpenSqliteStore(Path("d1/state.db"));
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ((*restored)->ListJobs({})->size(), 2u);
}

class PostgresBackupTest : public BackupTest {};

TEST_F(PostgresBackupTest, DumpRestoresIntoANewDatabaseWithEveryJob) {
  // Given a PostgreSQL store with 3 jobs, expect pg_dump's copy to be listed back (its tables
  // counted), and, restored with pg_restore into a new database, to open as a store with the jobs.
  auto server = SharedPostgres();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto url = FreshPostgresSchema();
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  {
    auto live = OpenPostgresStore(*url);
    ASSERT_TRUE(live.ok()) << live.status().ToString();
    ASSERT_TRUE((*live)->Submit({MakeSubmission("a", 2), MakeSubmission("b", 1)}).ok());
  }
  auto r = BackupStore({StoreLocation::Engine::kPostgres, *url}, Path("state.dump"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->method, "pg_dump (custom format)");
  EXPECT_GT(r->tables, 3);
  EXPECT_GT(r->bytes, 0);

  // One statement a call: CREATE DATABASE may not run inside the transaction psql -c makes of several.
  ASSERT_TRUE((*server)->Psql("DROP DATABASE IF EXISTS restored").ok());
  auto created = (*server)->Psql("CREATE DATABASE restored");
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::string restored = *url;
  const std::string from = "///postgres?";
  ASSERT_NE(restored.find(from), std::string::npos) << restored;
  restored.replace(restored.find(from), from.size(), "///restored?");
  auto pg_restore = FindPostgresProgram("pg_restore");
  ASSERT_TRUE(pg_restore.ok()) << pg_restore.status().ToString();
  auto done = RunCommand({*pg_restore, "--no-owner", "--dbname=" + restored, Path("state.dump")}, {});
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  ASSERT_TRUE(done->ok()) << done->stderr_text;
  auto copy = OpenPostgresStore(restored);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  auto jobs = (*copy)->ListJobs({});
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  EXPECT_EQ(jobs->size(), 3u);
}

TEST_F(PostgresBackupTest, ADatabaseWithoutGpufleetStateIsRefusedAndLeavesNoFile) {
  // Given a database name that holds no gpufleet tables (a typo, another application's), expect
  // the dump refused as no gpufleet state, not reported as a checked backup, and no file left.
  auto server = SharedPostgres();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto url = FreshPostgresSchema();
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  ASSERT_TRUE((*server)->Psql("DROP DATABASE IF EXISTS emptydb").ok());
  ASSERT_TRUE((*server)->Psql("CREATE DATABASE emptydb").ok());
  std::string empty = *url;
  const std::string from = "///postgres?";
  ASSERT_NE(empty.find(from), std::string::npos) << empty;
  empty.replace(empty.find(from), from.size(), "///emptydb?");
  auto r = BackupStore({StoreLocation::Engine::kPostgres, empty}, Path("empty.dump"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("holds no gpufleet state"), std::string::npos) << r.status().message();
  EXPECT_FALSE(fs::exists(Path("empty.dump")));
}

TEST_F(PostgresBackupTest, AnUnreachableServerIsUnavailableAndLeavesNoFile) {
  auto r = BackupStore({StoreLocation::Engine::kPostgres, "postgresql:///postgres?host=" + Path("no-server")},
                       Path("none.dump"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("pg_dump"), std::string::npos) << r.status().message();
  EXPECT_FALSE(fs::exists(Path("none.dump")));
}

}  // namespace
}  // namespace gpufleet::store
