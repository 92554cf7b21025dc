// StateStore on SQLite.
//
// Durability: WAL journal with synchronous=FULL, so a transaction that COMMIT reported done is on
// disk before the call returns. Submissions are batched into one transaction by the caller
// (group commit): one fsync for many jobs.
//
// Layout: the columns the store filters or joins on (team, state, times, request id) sit beside
// the record's JSON (api/codec.h) in the `record` column; the column `id` is the truth for a
// record's id. Ids come from AUTOINCREMENT tables, so an id is never handed out twice, even if
// rows are someday deleted.
//
// Arrays stored once (store/stored_arrays.h): a submission of at least kMinStoredArray jobs that
// differ only in what an array gives each task is written as one row of `job_arrays` and its
// tasks' own fields in chunks (`job_array_tasks`), instead of a row, three index entries and a
// transition per task. A task stays there until its first change (Update, SaveJobMemory), which
// writes its row in `jobs` and its "submitted" transition; from then on the row is the truth.
// Every read answers as if each task had had its row from the start (the row wins).
//
// Thread-safety: one connection, one mutex (mu_) around every call. Audit records attached for a
// thread's next write wait under attach_mu_, a leaf lock taken before mu_, never under it.
#include <sqlite3.h>

#include <cstdlib>
#include <iterator>
#include <memory>
#include <optional>
#include <map>
#include <thread>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "api/codec.h"
#include "common/mutex.h"
#include "store/schema_version.h"
#include "store/state_store.h"
#include "store/stored_arrays.h"

namespace gpufleet::store {
namespace {

using json = nlohmann::json;

constexpr int kSchemaVersion = kCurrentSchemaVersion;
constexpr int kBusyTimeoutMs = 5000;
constexpr const char* kSchemaVersionKey = "schema_version";

// Migrations: kMigrations[v] takes a database at schema version v to v + 1.
constexpr const char* kMigrations[] = {
    // 0 -> 1: the first schema.
    R"sql(
CREATE TABLE IF NOT EXISTS meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE jobs (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  request_id   TEXT NOT NULL,
  array_index  INTEGER NOT NULL,
  team         TEXT NOT NULL,
  state        TEXT NOT NULL,
  submitted_ms INTEGER NOT NULL,
  updated_ms   INTEGER NOT NULL,
  record       TEXT NOT NULL
);
CREATE INDEX jobs_by_team ON jobs (team, id);
CREATE INDEX jobs_by_state ON jobs (state, id);
CREATE INDEX jobs_by_submitted ON jobs (submitted_ms);
CREATE TABLE requests (
  request_id TEXT PRIMARY KEY,
  job_ids    TEXT NOT NULL  -- JSON array of the request's job ids, in submission order
);
CREATE TABLE transitions (
  job_id     INTEGER NOT NULL REFERENCES jobs (id),
  seq        INTEGER NOT NULL,
  at_ms      INTEGER NOT NULL,
  from_state TEXT NOT NULL,
  to_state   TEXT NOT NULL,
  reason     TEXT NOT NULL,
  PRIMARY KEY (job_id, seq)
);
CREATE TABLE nodes (
  id     INTEGER PRIMARY KEY AUTOINCREMENT,
  name   TEXT NOT NULL UNIQUE,
  record TEXT NOT NULL
);
CREATE TABLE tokens (
  hash   TEXT PRIMARY KEY,
  record TEXT NOT NULL
);
)sql",
    // 1 -> 2: the audit log, append-only.
    R"sql(
CREATE TABLE audit (
  seq     INTEGER PRIMARY KEY AUTOINCREMENT,
  at_ms   INTEGER NOT NULL,
  subject TEXT NOT NULL,
  verb    TEXT NOT NULL,
  record  TEXT NOT NULL
);
CREATE INDEX audit_by_time ON audit (at_ms);
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
)sql",
    // 2 -> 3: the leader lease, a table in PostgreSQL. A SQLite database has one controller, which
    // always leads: nothing to store (the version moves so that both engines keep one numbering).
    R"sql(
SELECT 1;
)sql",
    // 3 -> 4: the scheduler's memory of each unfinished job (model::JobMemory), so that a
    // restarted controller ranks the queue as the one before it. Jobs stored before have none.
    R"sql(
CREATE TABLE job_memory (
  job_id              INTEGER PRIMARY KEY REFERENCES jobs (id),
  attained_gpu_ms     INTEGER NOT NULL,
  las_service_gpu_ms  INTEGER NOT NULL,
  run_time_ms         INTEGER NOT NULL,
  last_run_ms         INTEGER NOT NULL,
  preemptions         INTEGER NOT NULL,
  spot_reclaims       INTEGER NOT NULL,
  queued_since_ms     INTEGER NOT NULL,
  rank_class_since_ms INTEGER NOT NULL,
  rank_class          INTEGER NOT NULL,
  run_started_ms      INTEGER NOT NULL,
  last_checkpoint_ms  INTEGER NOT NULL,
  accrued_micros      INTEGER NOT NULL
);
)sql",
    // 4 -> 5: the leader's agent URL, a column of PostgreSQL's leader table; nothing here.
    R"sql(
SELECT 1;
)sql",
    // 5 -> 6: transitions and requests keyed by their primary key alone (WITHOUT ROWID). A rowid
    // table with a non-integer or composite key writes each row twice, into the table and into
    // the key's index: two B-tree pages more in every submit's commit (9 instead of 11), where
    // each page is a WAL frame written and flushed before the submit is answered.
    R"sql(
CREATE TABLE transitions_v6 (
  job_id     INTEGER NOT NULL REFERENCES jobs (id),
  seq        INTEGER NOT NULL,
  at_ms      INTEGER NOT NULL,
  from_state TEXT NOT NULL,
  to_state   TEXT NOT NULL,
  reason     TEXT NOT NULL,
  PRIMARY KEY (job_id, seq)
) WITHOUT ROWID;
INSERT INTO transitions_v6 (job_id, seq, at_ms, from_state, to_state, reason)
  SELECT job_id, seq, at_ms, from_state, to_state, reason FROM transitions;
DROP TABLE transitions;
ALTER TABLE transitions_v6 RENAME TO transitions;
CREATE TABLE requests_v6 (
  request_id TEXT PRIMARY KEY,
  job_ids    TEXT NOT NULL  -- JSON array of the request's job ids, in submission order
) WITHOUT ROWID;
INSERT INTO requests_v6 (request_id, job_ids) SELECT request_id, job_ids FROM requests;
DROP TABLE requests;
ALTER TABLE requests_v6 RENAME TO requests;
)sql",
    // 6 -> 7: arrays stored once (see the top of this file).
    R"sql(
CREATE TABLE job_arrays (
  first_id     INTEGER PRIMARY KEY,
  last_id      INTEGER NOT NULL,
  team         TEXT NOT NULL,
  submitted_ms INTEGER NOT NULL,
  record       TEXT NOT NULL,  -- the first task's record: every task's, but for its own fields
  with_row     INTEGER NOT NULL DEFAULT 0  -- tasks that have their own row in jobs by now
);
CREATE TABLE job_array_tasks (
  first_id INTEGER NOT NULL REFERENCES job_arrays (first_id),
  chunk    INTEGER NOT NULL,  -- tasks first_id + chunk * 1024 and on
  tasks    TEXT NOT NULL,     -- JSON array: each task's own fields (api::DumpArrayTasks)
  PRIMARY KEY (first_id, chunk)
) WITHOUT ROWID;
)sql",
    // 7 -> 8: PostgreSQL's arrays stored once; SQLite has had them since 7: nothing here.
    R"sql(
SELECT 1;
)sql",
};
static_assert(std::size(kMigrations) == kSchemaVersion, "one migration per schema version");

// A cached prepared statement in use: binds by position, steps, and resets on scope exit so the
// next user finds it clean.
class Stmt {
 public:
  // `s` null: the statement failed to prepare with `rc`, which Step() reports.
  Stmt(sqlite3_stmt* s, int rc) : s_(s), rc_(rc) {}
  ~Stmt() {
    if (s_ == nullptr) return;
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& Bind(int i, int64_t v) {
    if (rc_ == SQLITE_OK) rc_ = sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt& Bind(int i, const std::string& v) {
    if (rc_ == SQLITE_OK) rc_ = sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& BindNull(int i) {
    if (rc_ == SQLITE_OK) rc_ = sqlite3_bind_null(s_, i);
    return *this;
  }
  template <typename T>
  Stmt& BindOptional(int i, const std::optional<T>& v) {
    return v ? Bind(i, *v) : BindNull(i);
  }
  // SQLITE_ROW, SQLITE_DONE or an error code (of the prepare or the first failed bind, if any).
  int Step() { return rc_ != SQLITE_OK ? rc_ : sqlite3_step(s_); }

  int64_t Int(int col) const { return sqlite3_column_int64(s_, col); }
  std::string Text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, col));
    return p == nullptr ? std::string() : std::string(p, sqlite3_column_bytes(s_, col));
  }

 private:
  sqlite3_stmt* s_;
  int rc_;
};

class SqliteStore : public StateStore {
 public:
  SqliteStore(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}
  ~SqliteStore() override {
    for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
    sqlite3_close(db_);
  }

  // Pragmas, then the schema migrations.
  Status Init() {
    MutexLock lock(mu_);
    if (int rc = sqlite3_busy_timeout(db_, kBusyTimeoutMs); rc != SQLITE_OK) return Error("busy_timeout", rc);
    // journal_mode answers with the mode in force; anything but wal (a read-only directory, a
    // file system without shared memory) would lose the durability we promise.
    {
      GF_ASSIGN_OR_RETURN(std::string mode, QueryText("PRAGMA journal_mode=WAL"));
      if (mode != "wal") {
        return Status::FailedPrecondition(path_ + ": cannot use WAL journal mode (got '" + mode + "')");
      }
    }
    GF_RETURN_IF_ERROR(Exec("PRAGMA synchronous=FULL"));
    GF_RETURN_IF_ERROR(Exec("PRAGMA foreign_keys=ON"));
    return Migrate();
  }

  Result<std::vector<SubmitOutcome>> Submit(std::vector<Submission> submissions) override {
    std::vector<api::AuditRecord> audit = TakeAttached();  // dropped if this write fails
    GF_RETURN_IF_ERROR(CheckSubmissions(submissions));
    MutexLock lock(mu_);
    std::vector<SubmitOutcome> outcomes;
    Status s = InTransaction([&]() -> Status {
      mu_.AssertHeld();  // InTransaction runs it with mu_ held
      outcomes.clear();
      GF_ASSIGN_OR_RETURN(int64_t next_id, NextId("jobs"));
      bool stored_array = false;
      for (Submission& sub : submissions) {
        GF_ASSIGN_OR_RETURN(std::optional<std::vector<JobId>> earlier, FindRequest(sub.request_id));
        if (earlier || sub.only_if_seen) {
          outcomes.push_back({earlier ? std::move(*earlier) : std::vector<JobId>{}, false, {}});
          continue;
        }
        SubmitOutcome out;
        json ids = json::array();
        for (api::JobRecord& job : sub.jobs) {
          job.id = JobId(next_id++);
          job.request_id = sub.request_id;
          job.reason = "submitted";
          out.ids.push_back(job.id);
          ids.push_back(job.id.value());
        }
        if (StoreAsArray(sub.jobs)) {
          array_cache_.Forget();
          GF_RETURN_IF_ERROR(InsertArray(sub.jobs));
          stored_array = true;
        } else {
          for (const api::JobRecord& job : sub.jobs) {
            GF_RETURN_IF_ERROR(InsertJob(job));
            GF_RETURN_IF_ERROR(InsertSubmittedTransition(job.id, job.submitted));
          }
        }
        if (sub.audit) {
          std::vector<int64_t> audit_ids;
          audit_ids.reserve(out.ids.size());
          for (const JobId& id : out.ids) audit_ids.push_back(id.value());
          sub.audit->object = api::JobsAuditObject(audit_ids);
          audit.push_back(*sub.audit);
        }
        GF_RETURN_IF_ERROR(Run(Prepare("INSERT INTO requests (request_id, job_ids) VALUES (?1, ?2)")
                                   .Bind(1, sub.request_id)
                                   .Bind(2, api::DumpJson(ids)),
                               "insert request " + sub.request_id));
        outcomes.push_back(std::move(out));
      }
      // An array's ids are in no row of jobs: the id sequence learns them here.
      if (stored_array) GF_RETURN_IF_ERROR(SetNextId("jobs", next_id));
      return Status::Ok();
    }, audit);
    if (!s.ok()) return s;
    for (size_t i = 0; i < outcomes.size(); ++i) outcomes[i].jobs = std::move(submissions[i].jobs);
    return outcomes;
  }

  Status Update(const std::vector<JobUpdate>& updates) override {
    std::vector<api::AuditRecord> audit = TakeAttached();  // dropped if this write fails
    MutexLock lock(mu_);
    return InTransaction([&]() -> Status {
      mu_.AssertHeld();  // InTransaction runs it with mu_ held
      std::map<int64_t, int64_t> given;  // rows given to arrays' tasks, per array
      for (const JobUpdate& u : updates) {
        const api::JobRecord& job = u.job;
        Stmt st = Prepare(
            "UPDATE jobs SET request_id = ?2, array_index = ?3, team = ?4, state = ?5, submitted_ms = ?6, "
            "updated_ms = ?7, record = ?8 WHERE id = ?1");
        st.Bind(1, job.id.value())
            .Bind(2, job.request_id)
            .Bind(3, job.array_index)
            .Bind(4, job.request.spec.team)
            .Bind(5, std::string(api::JobStateName(job.state)))
            .Bind(6, job.submitted.millis())
            .Bind(7, job.updated.millis())
            .Bind(8, api::DumpJobRecord(job));
        GF_RETURN_IF_ERROR(Run(st, "update job " + std::to_string(job.id.value())));
        if (sqlite3_changes(db_) == 0) {
          // A task still stored in its array gets its row now.
          GF_ASSIGN_OR_RETURN(std::optional<StoredArray> array, ArrayOf(job.id));
          if (!array) return Status::NotFound("update: no job " + std::to_string(job.id.value()));
          GF_RETURN_IF_ERROR(GiveRow(job, *array, given));
        }
        GF_RETURN_IF_ERROR(AppendTransition(job.id, u.transition));
        if (api::IsTerminal(job.state)) {
          Stmt del = Prepare("DELETE FROM job_memory WHERE job_id = ?1");
          del.Bind(1, job.id.value());
          GF_RETURN_IF_ERROR(Run(del, "forget the memory of job " + std::to_string(job.id.value())));
        } else if (u.memory) {
          GF_RETURN_IF_ERROR(PutMemory({job.id, *u.memory}));
        }
      }
      return CountRowsGiven(given);
    }, audit);
  }

  Status SaveJobMemory(const std::vector<JobMemoryRecord>& memory) override {
    MutexLock lock(mu_);
    return InTransaction([&]() -> Status {
      mu_.AssertHeld();  // InTransaction runs it with mu_ held
      std::map<int64_t, int64_t> given;  // rows given to arrays' tasks, per array
      for (const JobMemoryRecord& m : memory) {
        Stmt find = Prepare("SELECT 1 FROM jobs WHERE id = ?1");
        find.Bind(1, m.job.value());
        int rc = find.Step();
        if (rc != SQLITE_DONE && rc != SQLITE_ROW) return Error("find job " + std::to_string(m.job.value()), rc);
        if (rc == SQLITE_DONE) {
          // A task still stored in its array gets its row first (the memory refers to it).
          GF_ASSIGN_OR_RETURN(std::optional<StoredArray> array, ArrayOf(m.job));
          if (!array) return Status::NotFound("save memory: no job " + std::to_string(m.job.value()));
          GF_ASSIGN_OR_RETURN(api::JobRecord task, ArrayTask(array->first_id, m.job));
          GF_RETURN_IF_ERROR(GiveRow(task, *array, given));
        }
        GF_RETURN_IF_ERROR(PutMemory(m));
      }
      return CountRowsGiven(given);
    });
  }

  Result<std::vector<JobMemoryRecord>> ListJobMemory() override {
    MutexLock lock(mu_);
    Stmt st = Prepare(
        "SELECT job_id, attained_gpu_ms, las_service_gpu_ms, run_time_ms, last_run_ms, preemptions, spot_reclaims, "
        "queued_since_ms, rank_class_since_ms, rank_class, run_started_ms, last_checkpoint_ms, accrued_micros "
        "FROM job_memory ORDER BY job_id");
    std::vector<JobMemoryRecord> out;
    int rc;
    while ((rc = st.Step()) == SQLITE_ROW) {
      JobMemoryRecord r;
      r.job = JobId(st.Int(0));
      model::JobMemory& m = r.memory;
      m.attained_gpu_ms = st.Int(1);
      m.las_service_gpu_ms = st.Int(2);
      m.run_time = Duration::Millis(st.Int(3));
      m.last_run = Duration::Millis(st.Int(4));
      m.preemptions = st.Int(5);
      m.spot_reclaims = st.Int(6);
      m.queued_since = Time::FromMillis(st.Int(7));
      m.rank_class_since = Time::FromMillis(st.Int(8));
      m.rank_class = st.Int(9);
      m.run_started_at = Time::FromMillis(st.Int(10));
      m.last_checkpoint = Time::FromMillis(st.Int(11));
      m.accrued_micros = st.Int(12);
      out.push_back(r);
    }
    if (rc != SQLITE_DONE) return Error("list job memory", rc);
    return out;
  }

  // A job's row when it has one; a task without one is pending, of its array's team.
  Result<std::vector<JobBrief>> GetJobBriefs(const std::vector<JobId>& ids) override {
    MutexLock lock(mu_);
    std::vector<JobBrief> out;
    for (JobId id : ids) {
      {
        Stmt st = Prepare("SELECT team, state FROM jobs WHERE id = ?1");
        st.Bind(1, id.value());
        int rc = st.Step();
        if (rc == SQLITE_ROW) {
          GF_ASSIGN_OR_RETURN(api::JobState state, api::ParseJobState(st.Text(1)));
          out.push_back({id, st.Text(0), state});
          continue;
        }
        if (rc != SQLITE_DONE) return Error("read the team and state of job " + std::to_string(id.value()), rc);
      }
      GF_ASSIGN_OR_RETURN(std::optional<StoredArray> array, ArrayOf(id));
      if (!array) continue;
      Stmt team_of = Prepare("SELECT team FROM job_arrays WHERE first_id = ?1");
      team_of.Bind(1, array->first_id);
      if (int rc = team_of.Step(); rc != SQLITE_ROW) {
        return Error("read the team of array " + std::to_string(array->first_id), rc);
      }
      out.push_back({id, team_of.Text(0), api::JobState::kPending});
    }
    return out;
  }

  Result<std::optional<api::JobRecord>> GetJob(JobId id) override {
    MutexLock lock(mu_);
    Stmt st = Prepare("SELECT id, record FROM jobs WHERE id = ?1");
    st.Bind(1, id.value());
    int rc = st.Step();
    if (rc == SQLITE_DONE) {
      GF_ASSIGN_OR_RETURN(std::optional<StoredArray> array, ArrayOf(id));
      if (!array) return std::optional<api::JobRecord>();
      GF_ASSIGN_OR_RETURN(api::JobRecord task, ArrayTask(array->first_id, id));
      return std::optional<api::JobRecord>(std::move(task));
    }
    if (rc != SQLITE_ROW) return Error("get job " + std::to_string(id.value()), rc);
    GF_ASSIGN_OR_RETURN(api::JobRecord job, JobFromRow(st));
    return std::optional<api::JobRecord>(std::move(job));
  }

  Result<std::vector<api::JobRecord>> ListJobs(const JobFilter& filter) override {
    MutexLock lock(mu_);
    // One statement per ordering; unset filters are bound as NULL and match everything.
    constexpr const char* kWhere =
        "SELECT id, record FROM jobs WHERE (?1 IS NULL OR team = ?1) AND (?2 IS NULL OR submitted_ms >= ?2) "
        "AND (?3 OR state NOT IN (?4, ?5, ?6)) AND (?8 IS NULL OR id < ?8) ";
    Stmt st = filter.limit > 0 ? Prepare(std::string(kWhere) + "ORDER BY id DESC LIMIT ?7")
                               : Prepare(std::string(kWhere) + "ORDER BY id ASC");
    st.BindOptional(1, filter.team).BindOptional(2, SinceMillis(filter));
    st.Bind(3, filter.include_terminal ? 1 : 0)
        .Bind(4, std::string(api::JobStateName(api::JobState::kSucceeded)))
        .Bind(5, std::string(api::JobStateName(api::JobState::kFailed)))
        .Bind(6, std::string(api::JobStateName(api::JobState::kCancelled)));
    if (filter.limit > 0) st.Bind(7, filter.limit);
    st.BindOptional(8, BeforeId(filter));
    std::vector<api::JobRecord> jobs;
    int rc;
    while ((rc = st.Step()) == SQLITE_ROW) {
      GF_ASSIGN_OR_RETURN(api::JobRecord job, JobFromRow(st));
      jobs.push_back(std::move(job));
    }
    if (rc != SQLITE_DONE) return Error("list jobs", rc);
    return WithArrayTasks(filter, std::move(jobs));
  }

  Result<std::map<std::string, int64_t>> EndedCostByTeam() override {
    MutexLock lock(mu_);
    Stmt st = Prepare(
        "SELECT team, total FROM (SELECT team, SUM(json_extract(record, '$.cost_micros')) AS total FROM jobs "
        "WHERE state IN (?1, ?2, ?3) GROUP BY team) WHERE total != 0 ORDER BY team");
    st.Bind(1, std::string(api::JobStateName(api::JobState::kSucceeded)))
        .Bind(2, std::string(api::JobStateName(api::JobState::kFailed)))
        .Bind(3, std::string(api::JobStateName(api::JobState::kCancelled)));
    std::map<std::string, int64_t> out;
    int rc;
    while ((rc = st.Step()) == SQLITE_ROW) out[st.Text(0)] = st.Int(1);
    if (rc != SQLITE_DONE) return Error("sum the cost of ended jobs", rc);
    return out;
  }

  Result<std::vector<api::Transition>> History(JobId id) override {
    MutexLock lock(mu_);
    Stmt st = Prepare(
        "SELECT at_ms, from_state, to_state, reason FROM transitions WHERE job_id = ?1 ORDER BY seq");
    st.Bind(1, id.value());
    std::vector<api::Transition> out;
    int rc;
    while ((rc = st.Step()) == SQLITE_ROW) {
      const std::string where = path_ + ": job " + std::to_string(id.value()) + " transition";
      api::Transition t;
      t.at = Time::FromMillis(st.Int(0));
      auto from = api::ParseJobState(st.Text(1));
      if (!from.ok()) return Status::Internal(where + ": " + from.status().message());
      auto to = api::ParseJobState(st.Text(2));
      if (!to.ok()) return Status::Internal(where + ": " + to.status().message());
      t.from = *from;
      t.to = *to;
      t.reason = st.Text(3);
      out.push_back(std::move(t));
    }
    if (rc != SQLITE_DONE) return Error("history of job " + std::to_string(id.value()), rc);
    if (out.empty()) {
      // A task still stored in its array has had one transition: its submission.
      GF_ASSIGN_OR_RETURN(std::optional<StoredArray> array, ArrayOf(id));
      if (array) out.push_back(SubmittedTransition(array->submitted_ms));
    }
    return out;
  }

  Result<NodeId> UpsertNode(const api::NodeRecord& node) override {
    std::vector<api::AuditRecord> audit = TakeAttached();  // dropped if this write fails
    if (node.name.empty()) return Status::InvalidArgument("node name must not be empty");
    MutexLock lock(mu_);
    NodeId id;
    Status s = InTransaction([&]() -> Status {
      mu_.AssertHeld();  // InTransaction runs it with mu_ held
      Stmt find = Prepare("SELECT id FROM nodes WHERE name = ?1");
      find.Bind(1, node.name);
      int rc = find.Step();
      api::NodeRecord stored = node;
      if (rc == SQLITE_ROW) {
        stored.id = NodeId(find.Int(0));
        Stmt st = Prepare("UPDATE nodes SET record = ?2 WHERE id = ?1");
        st.Bind(1, stored.id.value()).Bind(2, api::DumpJson(api::ToJson(stored)));
        GF_RETURN_IF_ERROR(Run(st, "update node " + node.name));
      } else if (rc == SQLITE_DONE) {
        GF_ASSIGN_OR_RETURN(int64_t next, NextId("nodes"));
        stored.id = NodeId(next);
        Stmt st = Prepare("INSERT INTO nodes (id, name, record) VALUES (?1, ?2, ?3)");
        st.Bind(1, stored.id.value()).Bind(2, node.name).Bind(3, api::DumpJson(api::ToJson(stored)));
        GF_RETURN_IF_ERROR(Run(st, "insert node " + node.name));
      } else {
        return Error("find node " + node.name, rc);
      }
      id = stored.id;
      return Status::Ok();
    }, audit);
    if (!s.ok()) return s;
    return id;
  }

  Result<std::vector<api::NodeRecord>> ListNodes() override {
    MutexLock lock(mu_);
    Stmt st = Prepare("SELECT id, record FROM nodes ORDER BY id");
    std::vector<api::NodeRecord> out;
    int rc;
    while ((rc = st.Step()) == SQLITE_ROW) {
      const std::string where = "node " + std::to_string(st.Int(0));
      GF_ASSIGN_OR_RETURN(json j, ParseColumn(st.Text(1), where));
      auto node = api::NodeRecordFromJson(j);
      if (!node.ok()) return Corrupt(where, node.status());
      node->id = NodeId(st.Int(0));
      out.push_back(std::move(node).value());
    }
    if (rc != SQLITE_DONE) return Error("list nodes", rc);
    return out;
  }

  Status PutToken(const api::TokenRecord& token) override {
    std::vector<api::AuditRecord> audit = TakeAttached();  // dropped if this write fails
    if (token.hash.empty()) return Status::InvalidArgument("token hash must not be empty");
    MutexLock lock(mu_);
    return InTransaction([&]() -> Status {
      mu_.AssertHeld();  // InTransaction runs it with mu_ held
      Stmt st = Prepare("INSERT OR REPLACE INTO tokens (hash, record) VALUES (?1, ?2)");
      st.Bind(1, token.hash).Bind(2, api::DumpJson(api::ToJson(token)));
      return Run(st, "put token");
    }, audit);
  }

  void AttachAudit(std::vector<api::AuditRecord> records) override {
    MutexLock lock(attach_mu_);
    auto& mine = attached_[std::this_thread::get_id()];
    for (auto& r : records) mine.push_back(std::move(r));
  }

  Status AppendAudit(const std::vector<api::AuditRecord>& records) override {
    std::vector<api::AuditRecord> audit = TakeAttached();  // dropped if this write fails
    MutexLock lock(mu_);
    std::vector<api::AuditRecord> all = std::move(audit);
    all.insert(all.end(), records.begin(), records.end());
    return InTransaction([&]() -> Status { return Status::Ok(); }, all);
  }

  Result<std::vector<api::AuditRecord>> ListAudit(const AuditFilter& filter) override {
    MutexLock lock(mu_);
    Stmt st = Prepare(
        "SELECT seq, record FROM audit WHERE seq > ?1 AND (?2 IS NULL OR at_ms >= ?2) AND (?3 IS NULL OR subject = ?3) "
        "AND (?4 IS NULL OR verb = ?4 OR (substr(?4, -1) = '.' AND substr(verb, 1, length(?4)) = ?4)) "
        "ORDER BY seq LIMIT ?5");
    st.Bind(1, filter.after_seq);
    if (filter.since) {
      st.Bind(2, filter.since->millis());
    } else {
      st.BindNull(2);
    }
    if (filter.subject) {
      st.Bind(3, *filter.subject);
    } else {
      st.BindNull(3);
    }
    if (filter.verb) {
      st.Bind(4, *filter.verb);
    } else {
      st.BindNull(4);
    }
    st.Bind(5, filter.limit > 0 ? filter.limit : int64_t{1} << 62);
    std::vector<api::AuditRecord> out;
    int rc;
    while ((rc = st.Step()) == SQLITE_ROW) {
      const std::string where = "audit record " + std::to_string(st.Int(0));
      GF_ASSIGN_OR_RETURN(json j, ParseColumn(st.Text(1), where));
      auto a = api::AuditRecordFromJson(j);
      if (!a.ok()) return Corrupt(where, a.status());
      a->seq = st.Int(0);
      out.push_back(std::move(a).value());
    }
    if (rc != SQLITE_DONE) return Error("list audit records", rc);
    return out;
  }

  Result<std::optional<api::TokenRecord>> FindToken(const std::string& hash) override {
    MutexLock lock(mu_);
    Stmt st = Prepare("SELECT record FROM tokens WHERE hash = ?1");
    st.Bind(1, hash);
    int rc = st.Step();
    if (rc == SQLITE_DONE) return std::optional<api::TokenRecord>();
    if (rc != SQLITE_ROW) return Error("find token", rc);
    GF_ASSIGN_OR_RETURN(api::TokenRecord token, TokenFromText(st.Text(0)));
    return std::optional<api::TokenRecord>(std::move(token));
  }

  Status TouchToken(const std::string& hash, Time when) override {
    MutexLock lock(mu_);
    Stmt st = Prepare("UPDATE tokens SET record = json_set(record, '$.last_used_ms', ?2) WHERE hash = ?1");
    st.Bind(1, hash).Bind(2, when.millis());
    GF_RETURN_IF_ERROR(Run(st, "touch token"));
    if (sqlite3_changes(db_) == 0) return Status::NotFound("no token " + hash.substr(0, 12));
    return Status::Ok();
  }

  Result<std::vector<api::TokenRecord>> ListTokens() override {
    MutexLock lock(mu_);
    Stmt st = Prepare("SELECT record FROM tokens ORDER BY hash");
    std::vector<api::TokenRecord> out;
    int rc;
    while ((rc = st.Step()) == SQLITE_ROW) {
      GF_ASSIGN_OR_RETURN(api::TokenRecord token, TokenFromText(st.Text(0)));
      out.push_back(std::move(token));
    }
    if (rc != SQLITE_DONE) return Error("list tokens", rc);
    return out;
  }

  Result<std::optional<std::string>> GetMeta(const std::string& key) override {
    MutexLock lock(mu_);
    return GetMetaLocked(key);
  }

  // One controller on one file: it always leads, and its writes need no fencing.
  Result<Leadership> AcquireLeadership(const LeaderAddress& self, Duration lease) override {
    if (lease <= Duration::Zero()) return Status::InvalidArgument("leader lease must be positive");
    return Leadership{true, 1, self.url, lease, self.agent_url, Time()};
  }
  Status ReleaseLeadership(const LeaderAddress&) override { return Status::Ok(); }

  Status SkipJobIdsThrough(int64_t id) override {
    MutexLock lock(mu_);
    return InTransaction(
        [&]() -> Status {
          mu_.AssertHeld();  // InTransaction runs it with mu_ held
          return SetNextId("jobs", id + 1);
        },
        {});
  }

  Status SetMeta(const std::string& key, const std::string& value) override {
    std::vector<api::AuditRecord> audit = TakeAttached();  // dropped if this write fails
    if (key == kSchemaVersionKey) {
      return Status::InvalidArgument("meta key schema_version is managed by the store");
    }
    MutexLock lock(mu_);
    return InTransaction(
        [&]() -> Status {
          mu_.AssertHeld();  // InTransaction runs it with mu_ held
          return SetMetaLocked(key, value);
        },
        audit);
  }

 private:
  // Errors: the path, what we were doing, and SQLite's words. Busy, full or unreadable files may
  // pass (Unavailable); a damaged file will not (Internal).
  Status Error(const std::string& what, int rc) const GF_REQUIRES(mu_) {
    std::string msg = path_ + ": " + what + ": " + sqlite3_errstr(rc);
    const char* detail = sqlite3_errmsg(db_);
    if (detail != nullptr && std::string(detail) != sqlite3_errstr(rc)) msg += " (" + std::string(detail) + ")";
    switch (rc & 0xff) {
      case SQLITE_CORRUPT:
      case SQLITE_NOTADB:
      case SQLITE_FORMAT:
      case SQLITE_CONSTRAINT:
      case SQLITE_MISMATCH:
      case SQLITE_ERROR:
        return Status::Internal(msg);
      default:  // busy, locked, read-only, I/O error, disk full, cannot open, ...
        return Status::Unavailable(msg);
    }
  }
  Status Corrupt(const std::string& where, const Status& s) const {
    return Status::Internal(path_ + ": stored " + where + " does not decode: " + s.message());
  }

  // The statement for `sql`, prepared once per connection. A statement that fails to prepare (a
  // busy or damaged file) is returned empty and reports the error from Step().
  Stmt Prepare(const std::string& sql) GF_REQUIRES(mu_) {
    auto it = cache_.find(sql);
    if (it == cache_.end()) {
      sqlite3_stmt* stmt = nullptr;
      int rc = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                                  &stmt, nullptr);
      if (rc != SQLITE_OK || stmt == nullptr) {
        sqlite3_finalize(stmt);
        return Stmt(nullptr, rc == SQLITE_OK ? SQLITE_INTERNAL : rc);
      }
      it = cache_.emplace(sql, stmt).first;
    }
    return Stmt(it->second, SQLITE_OK);
  }

  // Runs a statement that returns no rows.
  Status Run(Stmt& st, const std::string& what) GF_REQUIRES(mu_) {
    int rc = st.Step();
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) return Error(what, rc);
    return Status::Ok();
  }

  // Runs statements without parameters (pragmas, DDL, BEGIN/COMMIT); `what` names them in errors.
  Status Exec(const std::string& sql, const std::string& what = "") GF_REQUIRES(mu_) {
    char* err = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    sqlite3_free(err);  // sqlite3_errmsg has the same text
    if (rc == SQLITE_OK) return Status::Ok();
    return Error(what.empty() ? sql : what, rc);
  }

  // The single text value of a one-row query.
  Result<std::string> QueryText(const std::string& sql) GF_REQUIRES(mu_) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr);
    if (rc != SQLITE_OK) return Error(sql, rc);
    std::string out;
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
      const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
      out = p == nullptr ? "" : p;
      rc = SQLITE_DONE;
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) return Error(sql, rc);
    return out;
  }

  // Runs `body` inside BEGIN IMMEDIATE ... COMMIT (the write lock is taken up front, so the
  // transaction cannot fail half-way on a lock upgrade); rolls back when it fails.
  // `audit`: records written in the same transaction (the writer's attached ones).
  template <typename F>
  Status InTransaction(F body, const std::vector<api::AuditRecord>& audit = {}) GF_REQUIRES(mu_) {
    GF_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
    Status s = body();
    if (s.ok() && !audit.empty()) s = InsertAudit(audit);
    if (s.ok()) s = Exec("COMMIT");
    if (!s.ok() && !sqlite3_get_autocommit(db_)) (void)Exec("ROLLBACK");
    return s;
  }

  Status Migrate() GF_REQUIRES(mu_) {
    // Version 0 is a database without the meta table (a new file).
    GF_ASSIGN_OR_RETURN(std::string has_meta,
                        QueryText("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'"));
    return InTransaction([&]() -> Status {
      mu_.AssertHeld();  // InTransaction runs it with mu_ held
      int version = 0;
      if (has_meta != "0") {
        GF_ASSIGN_OR_RETURN(std::optional<std::string> v, GetMetaLocked(kSchemaVersionKey));
        GF_ASSIGN_OR_RETURN(version, ParseSchemaVersion(v, path_));
      }
      GF_RETURN_IF_ERROR(CheckSchemaVersion(version, kSchemaVersion, path_));
      for (int v = version; v < kSchemaVersion; ++v) {
        GF_RETURN_IF_ERROR(Exec(kMigrations[v], "migrate schema to version " + std::to_string(v + 1)));
        GF_RETURN_IF_ERROR(SetMetaLocked(kSchemaVersionKey, std::to_string(v + 1)));
      }
      return Status::Ok();
    });
  }

  Result<std::optional<std::string>> GetMetaLocked(const std::string& key) GF_REQUIRES(mu_) {
    Stmt st = Prepare("SELECT value FROM meta WHERE key = ?1");
    st.Bind(1, key);
    int rc = st.Step();
    if (rc == SQLITE_DONE) return std::optional<std::string>();
    if (rc != SQLITE_ROW) return Error("get meta " + key, rc);
    return std::optional<std::string>(st.Text(0));
  }
  std::vector<api::AuditRecord> TakeAttached() GF_EXCLUDES(attach_mu_, mu_) {
    MutexLock lock(attach_mu_);
    auto it = attached_.find(std::this_thread::get_id());
    if (it == attached_.end()) return {};
    std::vector<api::AuditRecord> out = std::move(it->second);
    attached_.erase(it);
    return out;
  }

  Status InsertAudit(const std::vector<api::AuditRecord>& records) GF_REQUIRES(mu_) {
    for (const api::AuditRecord& a : records) {
      Stmt st = Prepare("INSERT INTO audit (at_ms, subject, verb, record) VALUES (?1, ?2, ?3, ?4)");
      st.Bind(1, a.at.millis()).Bind(2, a.subject).Bind(3, a.verb).Bind(4, api::DumpJson(api::ToJson(a)));
      GF_RETURN_IF_ERROR(Run(st, "append audit record " + a.verb));
    }
    return Status::Ok();
  }

  Status SetMetaLocked(const std::string& key, const std::string& value) GF_REQUIRES(mu_) {
    Stmt st = Prepare("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)");
    st.Bind(1, key).Bind(2, value);
    return Run(st, "set meta " + key);
  }

  // The next id of an AUTOINCREMENT table: one past the largest ever used.
  Result<int64_t> NextId(const std::string& table) GF_REQUIRES(mu_) {
    Stmt st = Prepare("SELECT seq FROM sqlite_sequence WHERE name = ?1");
    st.Bind(1, table);
    int rc = st.Step();
    if (rc == SQLITE_DONE) return int64_t{1};
    if (rc != SQLITE_ROW) return Error("next id of " + table, rc);
    return st.Int(0) + 1;
  }

  // The ids an earlier submission of `request_id` got, if any.
  Result<std::optional<std::vector<JobId>>> FindRequest(const std::string& request_id) GF_REQUIRES(mu_) {
    Stmt st = Prepare("SELECT job_ids FROM requests WHERE request_id = ?1");
    st.Bind(1, request_id);
    int rc = st.Step();
    if (rc == SQLITE_DONE) return std::optional<std::vector<JobId>>();
    if (rc != SQLITE_ROW) return Error("find request " + request_id, rc);
    const std::string where = "request " + request_id;
    GF_ASSIGN_OR_RETURN(json ids, ParseColumn(st.Text(0), where));
    std::vector<JobId> out;
    if (!ids.is_array()) return Status::Internal(path_ + ": " + where + ": job ids are not an array");
    for (const json& id : ids) {
      if (!id.is_number_integer()) return Status::Internal(path_ + ": " + where + ": job id is not an integer");
      out.push_back(JobId(id.get<int64_t>()));
    }
    return std::optional<std::vector<JobId>>(std::move(out));
  }

  Status InsertJob(const api::JobRecord& job) GF_REQUIRES(mu_) {
    Stmt st = Prepare(
        "INSERT INTO jobs (id, request_id, array_index, team, state, submitted_ms, updated_ms, record) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    st.Bind(1, job.id.value())
        .Bind(2, job.request_id)
        .Bind(3, job.array_index)
        .Bind(4, job.request.spec.team)
        .Bind(5, std::string(api::JobStateName(job.state)))
        .Bind(6, job.submitted.millis())
        .Bind(7, job.updated.millis())
        .Bind(8, api::DumpJobRecord(job));
    return Run(st, "insert job " + std::to_string(job.id.value()));
  }

  // Not again when the job's last transition is this one (StateStore::Update).
  Status AppendTransition(JobId id, const api::Transition& t) GF_REQUIRES(mu_) {
    Stmt st = Prepare(
        "INSERT INTO transitions (job_id, seq, at_ms, from_state, to_state, reason) "
        "SELECT ?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM transitions WHERE job_id = ?1), ?2, ?3, ?4, ?5 "
        "WHERE NOT EXISTS (SELECT 1 FROM (SELECT at_ms, from_state, to_state, reason FROM transitions "
        "WHERE job_id = ?1 ORDER BY seq DESC LIMIT 1) AS last WHERE last.at_ms = ?2 AND last.from_state = ?3 "
        "AND last.to_state = ?4 AND last.reason = ?5)");
    st.Bind(1, id.value())
        .Bind(2, t.at.millis())
        .Bind(3, std::string(api::JobStateName(t.from)))
        .Bind(4, std::string(api::JobStateName(t.to)))
        .Bind(5, t.reason);
    return Run(st, "append transition of job " + std::to_string(id.value()));
  }

  // A new job's first transition: seq 1 without looking for earlier ones (its id is new), as the
  // PostgreSQL store writes it.
  Status InsertSubmittedTransition(JobId id, Time submitted) GF_REQUIRES(mu_) {
    Stmt st = Prepare(
        "INSERT INTO transitions (job_id, seq, at_ms, from_state, to_state, reason) VALUES (?1, 1, ?2, ?3, ?3, ?4)");
    st.Bind(1, id.value())
        .Bind(2, submitted.millis())
        .Bind(3, std::string(api::JobStateName(api::JobState::kPending)))
        .Bind(4, std::string("submitted"));
    return Run(st, "append the submitted transition of job " + std::to_string(id.value()));
  }

  // Raises the id sequence of an AUTOINCREMENT table so that `next` is the next id it hands out.
  Status SetNextId(const std::string& table, int64_t next) GF_REQUIRES(mu_) {
    Stmt up = Prepare("UPDATE sqlite_sequence SET seq = ?2 WHERE name = ?1 AND seq < ?2");
    up.Bind(1, table).Bind(2, next - 1);
    GF_RETURN_IF_ERROR(Run(up, "advance the ids of " + table));
    Stmt add = Prepare(
        "INSERT INTO sqlite_sequence (name, seq) SELECT ?1, ?2 WHERE NOT EXISTS "
        "(SELECT 1 FROM sqlite_sequence WHERE name = ?1)");
    add.Bind(1, table).Bind(2, next - 1);
    return Run(add, "advance the ids of " + table);
  }

  // An array's row and its tasks' own fields. The jobs have their ids, in a row from the first.
  Status InsertArray(const std::vector<api::JobRecord>& jobs) GF_REQUIRES(mu_) {
    const api::JobRecord& first = jobs.front();
    const std::string what = "insert the array of jobs " + std::to_string(first.id.value()) + "-" +
                             std::to_string(jobs.back().id.value());
    Stmt st = Prepare(
        "INSERT INTO job_arrays (first_id, last_id, team, submitted_ms, record) VALUES (?1, ?2, ?3, ?4, ?5)");
    st.Bind(1, first.id.value())
        .Bind(2, jobs.back().id.value())
        .Bind(3, first.request.spec.team)
        .Bind(4, first.submitted.millis())
        .Bind(5, api::DumpJobRecord(first));
    GF_RETURN_IF_ERROR(Run(st, what));
    for (int64_t chunk = 0; chunk < ArrayChunks(jobs.size()); ++chunk) {
      Stmt t = Prepare("INSERT INTO job_array_tasks (first_id, chunk, tasks) VALUES (?1, ?2, ?3)");
      t.Bind(1, first.id.value()).Bind(2, chunk).Bind(3, ArrayChunkText(jobs, chunk));
      GF_RETURN_IF_ERROR(Run(t, what));
    }
    return Status::Ok();
  }

  struct StoredArray {
    int64_t first_id = 0;
    int64_t last_id = 0;
    int64_t submitted_ms = 0;
  };
  // The stored array whose id range holds `id`, if any. (Whether the task has its own row by now
  // is the caller's to know.)
  Result<std::optional<StoredArray>> ArrayOf(JobId id) GF_REQUIRES(mu_) {
    Stmt st = Prepare(
        "SELECT first_id, last_id, submitted_ms FROM job_arrays WHERE first_id <= ?1 ORDER BY first_id DESC LIMIT 1");
    st.Bind(1, id.value());
    int rc = st.Step();
    if (rc == SQLITE_DONE) return std::optional<StoredArray>();
    if (rc != SQLITE_ROW) return Error("find the array of job " + std::to_string(id.value()), rc);
    StoredArray a{st.Int(0), st.Int(1), st.Int(2)};
    if (id.value() > a.last_id) return std::optional<StoredArray>();
    return std::optional<StoredArray>(a);
  }

  // Writes the row and the "submitted" transition of a task of `array` that has none yet, and
  // counts it in the array (an array whose tasks all have rows is skipped by listings).
  // `given` counts the rows given per array (first id); CountRowsGiven writes the counts once
  // the transaction's rows are in (one UPDATE per array, not one per task).
  Status GiveRow(const api::JobRecord& task, const StoredArray& array, std::map<int64_t, int64_t>& given)
      GF_REQUIRES(mu_) {
    GF_RETURN_IF_ERROR(InsertJob(task));
    GF_RETURN_IF_ERROR(InsertSubmittedTransition(task.id, Time::FromMillis(array.submitted_ms)));
    ++given[array.first_id];
    return Status::Ok();
  }
  Status CountRowsGiven(const std::map<int64_t, int64_t>& given) GF_REQUIRES(mu_) {
    for (const auto& [first_id, n] : given) {
      Stmt st = Prepare("UPDATE job_arrays SET with_row = with_row + ?2 WHERE first_id = ?1");
      st.Bind(1, first_id).Bind(2, n);
      GF_RETURN_IF_ERROR(Run(st, "count the rows of array " + std::to_string(first_id)));
    }
    return Status::Ok();
  }

  static std::string ReadWhat(int64_t first_id, JobId id) {
    return "read job " + std::to_string(id.value()) + " (array " + std::to_string(first_id) + ")";
  }

  // The record of task `id` of the array starting at `first_id`, as it was submitted.
  Result<api::JobRecord> ArrayTask(int64_t first_id, JobId id) GF_REQUIRES(mu_) {
    // Read only when the cache lacks the record or the chunk: the words are built then.
    auto read_record = [&]() -> Result<std::string> {
      mu_.AssertHeld();  // called by this function, under its lock
      const std::string what = ReadWhat(first_id, id);
      Stmt st = Prepare("SELECT record FROM job_arrays WHERE first_id = ?1");
      st.Bind(1, first_id);
      int rc = st.Step();
      if (rc == SQLITE_DONE) return Status::Internal(path_ + ": " + what + ": the array is not stored");
      if (rc != SQLITE_ROW) return Error(what, rc);
      return st.Text(0);
    };
    auto read_chunk = [&](int64_t chunk) -> Result<std::string> {
      mu_.AssertHeld();  // called by this function, under its lock
      const std::string what = ReadWhat(first_id, id);
      Stmt st = Prepare("SELECT tasks FROM job_array_tasks WHERE first_id = ?1 AND chunk = ?2");
      st.Bind(1, first_id).Bind(2, chunk);
      int rc = st.Step();
      if (rc == SQLITE_DONE) return Status::Internal(path_ + ": " + what + ": its chunk of tasks is not stored");
      if (rc != SQLITE_ROW) return Error(what, rc);
      return st.Text(0);
    };
    return array_cache_.Task(first_id, id, path_, read_record, read_chunk);
  }

  // `jobs` (a ListJobs answer from the jobs table) with the tasks still stored in arrays that
  // match the filter, in the same order and under the same limit.
  Result<std::vector<api::JobRecord>> WithArrayTasks(const JobFilter& filter, std::vector<api::JobRecord> jobs)
      GF_REQUIRES(mu_) {
    const bool newest_first = filter.limit > 0;
    // Arrays whose tasks all have rows, and with a full page of rows those below it, are skipped.
    Stmt arrays = Prepare(std::string(
        "SELECT first_id, last_id FROM job_arrays WHERE (?1 IS NULL OR team = ?1) AND (?2 IS NULL OR submitted_ms >= ?2) "
        "AND (?3 IS NULL OR first_id < ?3) AND last_id >= ?4 AND with_row <= last_id - first_id "
        "ORDER BY first_id ") + (newest_first ? "DESC" : "ASC"));
    arrays.BindOptional(1, filter.team).BindOptional(2, SinceMillis(filter)).BindOptional(3, BeforeId(filter));
    const int64_t floor_id = ArrayListingFloor(filter, jobs.size(), jobs.empty() ? 0 : jobs.back().id.value());
    arrays.Bind(4, floor_id);
    std::vector<ArraySpan> spans;
    int rc;
    while ((rc = arrays.Step()) == SQLITE_ROW) spans.push_back({arrays.Int(0), arrays.Int(1)});
    if (rc != SQLITE_DONE) return Error("list arrays", rc);
    if (spans.empty()) return jobs;
    auto ids_with_rows = [&](int64_t lo, int64_t hi, int64_t max) -> Result<std::vector<int64_t>> {
      mu_.AssertHeld();  // called by this function, under its lock
      Stmt rows = Prepare(std::string("SELECT id FROM jobs WHERE id BETWEEN ?1 AND ?2 ORDER BY id ") +
                          (newest_first ? "DESC" : "ASC") + " LIMIT ?3");
      rows.Bind(1, lo).Bind(2, hi).Bind(3, max > 0 ? max : int64_t{-1});  // -1: no limit
      std::vector<int64_t> ids;
      int step;
      while ((step = rows.Step()) == SQLITE_ROW) ids.push_back(rows.Int(0));
      if (step != SQLITE_DONE) return Error("list the tasks of an array", step);
      return ids;
    };
    GF_ASSIGN_OR_RETURN(std::vector<ArrayTaskRef> tasks, ArrayTasksToList(filter, floor_id, spans, ids_with_rows));
    return MergeArrayTasks(filter, std::move(jobs), tasks, [&](const ArrayTaskRef& t) {
      mu_.AssertHeld();  // called by this function, under its lock
      return ArrayTask(t.first_id, JobId(t.id));
    });
  }

  Status PutMemory(const JobMemoryRecord& r) GF_REQUIRES(mu_) {
    const model::JobMemory& m = r.memory;
    Stmt st = Prepare(
        "INSERT OR REPLACE INTO job_memory (job_id, attained_gpu_ms, las_service_gpu_ms, run_time_ms, last_run_ms, "
        "preemptions, spot_reclaims, queued_since_ms, rank_class_since_ms, rank_class, run_started_ms, "
        "last_checkpoint_ms, accrued_micros) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)");
    st.Bind(1, r.job.value())
        .Bind(2, m.attained_gpu_ms)
        .Bind(3, m.las_service_gpu_ms)
        .Bind(4, m.run_time.millis())
        .Bind(5, m.last_run.millis())
        .Bind(6, m.preemptions)
        .Bind(7, m.spot_reclaims)
        .Bind(8, m.queued_since.millis())
        .Bind(9, m.rank_class_since.millis())
        .Bind(10, m.rank_class)
        .Bind(11, m.run_started_at.millis())
        .Bind(12, m.last_checkpoint.millis())
        .Bind(13, m.accrued_micros);
    return Run(st, "save the memory of job " + std::to_string(r.job.value()));
  }

  Result<json> ParseColumn(const std::string& text, const std::string& where) {
    auto j = api::ParseJson(text);
    if (!j.ok()) return Corrupt(where, j.status());
    return std::move(j).value();
  }

  // A job from a row of (id, record).
  Result<api::JobRecord> JobFromRow(Stmt& st) {
    const std::string where = "job " + std::to_string(st.Int(0));
    GF_ASSIGN_OR_RETURN(json j, ParseColumn(st.Text(1), where));
    auto job = api::JobRecordFromJson(j);
    if (!job.ok()) return Corrupt(where, job.status());
    job->id = JobId(st.Int(0));
    return std::move(job).value();
  }

  Result<api::TokenRecord> TokenFromText(const std::string& text) {
    GF_ASSIGN_OR_RETURN(json j, ParseColumn(text, "token"));
    auto token = api::TokenRecordFromJson(j);
    if (!token.ok()) return Corrupt("token", token.status());
    return std::move(token).value();
  }

  const std::string path_;
  sqlite3* const db_;  // the connection: used only with mu_ held
  Mutex mu_;
  Mutex attach_mu_;
  std::map<std::thread::id, std::vector<api::AuditRecord>> attached_ GF_GUARDED_BY(attach_mu_);
  std::unordered_map<std::string, sqlite3_stmt*> cache_ GF_GUARDED_BY(mu_);  // prepared statements of the connection
  ArrayTaskCache array_cache_ GF_GUARDED_BY(mu_);  // the last array record and chunk read
};

}  // namespace

Result<std::unique_ptr<StateStore>> OpenSqliteStore(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = path + ": cannot open database: " + (db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close(db);
    return Status::Unavailable(msg);
  }
  sqlite3_extended_result_codes(db, 1);
  auto store = std::make_unique<SqliteStore>(path, db);
  if (Status st = store->Init(); !st.ok()) {
    // A damaged file ("database disk image is malformed", "file is not a database") or a schema
    // that cannot be brought up to date: nothing was changed; say what to do.
    const std::string& m = st.message();
    // (Only for what a damaged file gives, not for a full disk, a lock or a read-only file.)
    if (st.code() == StatusCode::kInternal &&
        (m.find("malformed") != std::string::npos || m.find("not a database") != std::string::npos ||
         m.find("migrate schema") != std::string::npos)) {
      return Status::Internal(m + "; the file is damaged or not a gpufleet store, and was left as it is: restore a "
                                  "`gpufleet backup` of it (docs/operations.md, \"Backup and restore\"), or use "
                                  "another store");
    }
    return st;
  }
  return std::unique_ptr<StateStore>(std::move(store));
}

}  // namespace gpufleet::store
