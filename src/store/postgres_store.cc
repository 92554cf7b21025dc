// StateStore on PostgreSQL (libpq).
//
// Durability: every write is one transaction, and a call returns Ok only after COMMIT succeeded
// with synchronous_commit at least `on` (the session raises it from `off`) on a server that runs
// with fsync on (a server with fsync=off is refused at open): the same promise as the SQLite
// store's WAL with synchronous=FULL. Submissions are batched into one transaction by the caller
// (group commit), and a batch costs a fixed number of round trips, whatever its size (plus one
// per 32,768 tasks of an array stored once).
//
// Layout: the same tables and columns as the SQLite store (records as JSON text beside the
// columns the store filters on). Ids come from the `counters` table, updated in the writing
// transaction, so a rolled-back write spends no id (a sequence would) and ids stay dense and
// ascending as in SQLite.
//
// Connections: one connection, one mutex (mu_) around every call, as in the SQLite store; the
// leader lease alone has a second connection (see AcquireLeadership). A
// connection the server dropped (a restart, a terminated backend) is re-established at the start
// of the next call; a call that meets a dropped connection fails with Unavailable, and a commit
// whose answer was lost is reported as Unavailable too (the caller retries; submissions are
// idempotent by request id).
//
// Leadership: the `leader` row holds the lease (holder, fencing token, expiry by the server's
// now()). Taking and renewing are one conditional UPDATE each, so two controllers racing for a
// lapsed lease cannot both win. A store that has held a token locks the row FOR SHARE in every
// write transaction, in BEGIN's round trip, and compares the token: a standby's UPDATE that takes
// the lease waits for that transaction, and a write that starts after it sees the new token.
//
// Thread-safety: audit records attached for a thread's next write wait under attach_mu_, a leaf
// lock taken before mu_, never under it.
#include <libpq-fe.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
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
constexpr const char* kSchemaVersionKey = "schema_version";
// Taken for the migration's transaction, so that two controllers starting on one empty database
// do not both create the schema.
constexpr const char* kMigrationLockKey = "7405061288415019";

// Migrations: kMigrations[v] takes a database at schema version v to v + 1. The versions are the
// SQLite store's: the same tables at the same version, in each engine's SQL.
constexpr const char* kMigrations[] = {
    // 0 -> 1: the first schema.
    R"sql(
CREATE TABLE IF NOT EXISTS meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
-- The last id handed out, per table (jobs, nodes, audit).
CREATE TABLE counters (
  name  TEXT PRIMARY KEY,
  value BIGINT NOT NULL
);
INSERT INTO counters (name, value) VALUES ('jobs', 0), ('nodes', 0);
CREATE TABLE jobs (
  id           BIGINT PRIMARY KEY,
  request_id   TEXT NOT NULL,
  array_index  INTEGER NOT NULL,
  team         TEXT NOT NULL,
  state        TEXT NOT NULL,
  submitted_ms BIGINT NOT NULL,
  updated_ms   BIGINT NOT NULL,
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
  job_id     BIGINT NOT NULL REFERENCES jobs (id),
  seq        INTEGER NOT NULL,
  at_ms      BIGINT NOT NULL,
  from_state TEXT NOT NULL,
  to_state   TEXT NOT NULL,
  reason     TEXT NOT NULL,
  PRIMARY KEY (job_id, seq)
);
CREATE TABLE nodes (
  id     BIGINT PRIMARY KEY,
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
INSERT INTO counters (name, value) VALUES ('audit', 0);
CREATE TABLE audit (
  seq     BIGINT PRIMARY KEY,
  at_ms   BIGINT NOT NULL,
  subject TEXT NOT NULL,
  verb    TEXT NOT NULL,
  record  TEXT NOT NULL
);
CREATE INDEX audit_by_time ON audit (at_ms);
CREATE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS
  $$ BEGIN RAISE EXCEPTION 'the audit log is append-only'; END $$;
CREATE TRIGGER audit_no_change BEFORE UPDATE OR DELETE ON audit
  FOR EACH ROW EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit
  FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();
)sql",
    // 2 -> 3: the leader lease. One row: who holds it, the fencing token (incremented at each
    // change of holder), since when and until when, by the database's clock.
    R"sql(
CREATE TABLE leader (
  id         INTEGER PRIMARY KEY CHECK (id = 1),
  holder     TEXT NOT NULL,
  token      BIGINT NOT NULL,
  since      TIMESTAMPTZ NOT NULL,
  expires_at TIMESTAMPTZ NOT NULL
);
INSERT INTO leader (id, holder, token, since, expires_at) VALUES (1, '', 0, '-infinity', '-infinity');
)sql",
    // 3 -> 4: the scheduler's memory of each unfinished job (model::JobMemory), so that a
    // controller that takes over ranks the queue as the one before it. Jobs stored before have none.
    R"sql(
CREATE TABLE job_memory (
  job_id              BIGINT PRIMARY KEY REFERENCES jobs (id),
  attained_gpu_ms     BIGINT NOT NULL,
  las_service_gpu_ms  BIGINT NOT NULL,
  run_time_ms         BIGINT NOT NULL,
  last_run_ms         BIGINT NOT NULL,
  preemptions         BIGINT NOT NULL,
  spot_reclaims       BIGINT NOT NULL,
  queued_since_ms     BIGINT NOT NULL,
  rank_class_since_ms BIGINT NOT NULL,
  rank_class          BIGINT NOT NULL,
  run_started_ms      BIGINT NOT NULL,
  last_checkpoint_ms  BIGINT NOT NULL,
  accrued_micros      BIGINT NOT NULL
);
)sql",
    // 4 -> 5: the leader's agent listener, so that a standby can point agents at it.
    R"sql(
ALTER TABLE leader ADD COLUMN agent_url TEXT NOT NULL DEFAULT '';
)sql",
    // 5 -> 6: SQLite's transitions and requests become WITHOUT ROWID tables; PostgreSQL's tables
    // have no rowid: nothing here.
    R"sql(
SELECT 1;
)sql",
    // 6 -> 7: nothing here (SQLite's arrays stored once came first; PostgreSQL got its tables at 8).
    R"sql(
SELECT 1;
)sql",
    // 7 -> 8: arrays stored once (store/stored_arrays.h): an array's record and its tasks' own
    // fields, until each task gets its row in jobs at its first change.
    R"sql(
CREATE TABLE job_arrays (
  first_id     BIGINT PRIMARY KEY,
  last_id      BIGINT NOT NULL,
  team         TEXT NOT NULL,
  submitted_ms BIGINT NOT NULL,
  record       TEXT NOT NULL,  -- the first task's record: every task's, but for its own fields
  with_row     BIGINT NOT NULL DEFAULT 0  -- tasks that have their own row in jobs by now
);
CREATE TABLE job_array_tasks (
  first_id BIGINT NOT NULL REFERENCES job_arrays (first_id),
  chunk    BIGINT NOT NULL,  -- tasks first_id + chunk * 1024 and on
  tasks    TEXT NOT NULL,    -- JSON array: each task's own fields (api::DumpArrayTasks)
  PRIMARY KEY (first_id, chunk)
);
)sql",
};
static_assert(std::size(kMigrations) == kSchemaVersion, "one migration per schema version");

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, ResultDeleter>;

// Statement parameters, sent as text; nullopt is SQL NULL.
// JSON text for PostgreSQL: neither its text nor its jsonb holds a NUL byte ("\u0000" in a
// jsonb document is an error, and a record stored as text with one could not be read as jsonb),
// so U+FFFD takes its place (api::WithoutNulEscapes). Every JSON text this store writes goes
// through here, innermost first: a record's text before the document that carries it.
std::string PgJson(const json& j) { return api::WithoutNulEscapes(api::DumpJson(j)); }
std::string PgRecord(const api::JobRecord& job) { return api::WithoutNulEscapes(api::DumpJobRecord(job)); }

class Params {
 public:
  Params& Add(int64_t v) {
    values_.push_back(std::to_string(v));
    return *this;
  }
  // PostgreSQL's text cannot hold a NUL byte (libpq would end the value there): U+FFFD takes
  // its place, as in the JSON this store writes (PgJson).
  Params& Add(std::string v) {
    api::ReplaceNul(v);
    values_.push_back(std::move(v));
    return *this;
  }
  Params& Add(const char* v) { return Add(std::string(v)); }
  Params& Add(bool v) { return Add(std::string(v ? "true" : "false")); }
  Params& AddNull() {
    values_.push_back(std::nullopt);
    return *this;
  }
  template <typename T>
  Params& AddOptional(const std::optional<T>& v) {
    return v ? Add(*v) : AddNull();
  }

  int size() const { return static_cast<int>(values_.size()); }
  // Pointers into this object, valid while it lives and is not changed.
  std::vector<const char*> Pointers() const {
    std::vector<const char*> out;
    for (const auto& v : values_) out.push_back(v ? v->c_str() : nullptr);
    return out;
  }

 private:
  std::vector<std::optional<std::string>> values_;
};

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// What to call the server in messages: user@host:port/database, never the password.
std::string Describe(PGconn* conn) {
  std::string host = PQhost(conn) != nullptr ? PQhost(conn) : "";
  std::string out = std::string(PQuser(conn) != nullptr ? PQuser(conn) : "") + "@" +
                    (host.empty() ? "localhost" : host) + ":" + (PQport(conn) != nullptr ? PQport(conn) : "") + "/" +
                    (PQdb(conn) != nullptr ? PQdb(conn) : "");
  return "PostgreSQL " + out;
}

// A new connection to `url`, its URL checked first.
Result<PGconn*> ConnectPostgres(const std::string& url);

class PostgresStore : public StateStore {
 public:
  PostgresStore(PGconn* conn, std::string url, size_t max_document_bytes)
      : url_(std::move(url)), where_(Describe(conn)), conn_(conn), max_document_bytes_(max_document_bytes) {}
  ~PostgresStore() override { PQfinish(conn_); }

  // Session settings and the server's durability.
  Status SetUp() {
    MutexLock lock(mu_);
    return SetUpSession();
  }

  // Session settings and the server's durability, then the schema migrations.
  Status Init() {
    GF_RETURN_IF_ERROR(SetUp());
    MutexLock lock(mu_);
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
      std::vector<api::AuditRecord> all_audit = audit;
      // The request ids stored before this batch, in one query.
      json asked = json::array();
      for (const Submission& sub : submissions) asked.push_back(sub.request_id);
      GF_ASSIGN_OR_RETURN(
          PgResult found,
          Query("SELECT request_id, job_ids FROM requests WHERE request_id IN "
                "(SELECT jsonb_array_elements_text($1::jsonb))",
                Params().Add(PgJson(asked)), "find request ids"));
      std::map<std::string, std::vector<JobId>> known;
      for (int row = 0; row < PQntuples(found.get()); ++row) {
        GF_ASSIGN_OR_RETURN(std::vector<JobId> ids, DecodeIds(Text(found, row, 0), Text(found, row, 1)));
        known[Text(found, row, 0)] = std::move(ids);
      }
      // Ids for the new jobs, taken in one step.
      int64_t new_jobs = 0;
      {
        std::map<std::string, bool> seen;
        for (const Submission& sub : submissions) {
          if (known.count(sub.request_id) != 0 || seen[sub.request_id] || sub.only_if_seen) continue;
          seen[sub.request_id] = true;
          new_jobs += static_cast<int64_t>(sub.jobs.size());
        }
      }
      int64_t next_id = 0;
      if (new_jobs > 0) {
        GF_ASSIGN_OR_RETURN(next_id, TakeIds("jobs", new_jobs));
      }
      json job_rows = json::array();
      json transition_rows = json::array();
      json request_rows = json::array();
      for (Submission& sub : submissions) {
        if (auto it = known.find(sub.request_id); it != known.end()) {
          outcomes.push_back({it->second, false, {}});
          continue;
        }
        if (sub.only_if_seen) {
          outcomes.push_back({{}, false, {}});
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
        } else {
          for (const api::JobRecord& job : sub.jobs) {
            job_rows.push_back(JobRow(job));
            transition_rows.push_back(SubmittedTransitionRow(job.id, job.submitted.millis()));
          }
        }
        if (sub.audit) {
          std::vector<int64_t> audit_ids;
          audit_ids.reserve(out.ids.size());
          for (const JobId& id : out.ids) audit_ids.push_back(id.value());
          sub.audit->object = api::JobsAuditObject(audit_ids);
          all_audit.push_back(*sub.audit);
        }
        request_rows.push_back({{"request_id", sub.request_id}, {"job_ids", PgJson(ids)}});
        known[sub.request_id] = out.ids;
        outcomes.push_back(std::move(out));
      }
      GF_RETURN_IF_ERROR(InsertJobRows(job_rows, transition_rows));
      if (!request_rows.empty()) {
        GF_RETURN_IF_ERROR(Run("INSERT INTO requests (request_id, job_ids) SELECT request_id, job_ids "
                               "FROM jsonb_to_recordset($1::jsonb) AS r(request_id TEXT, job_ids TEXT)",
                               Params().Add(PgJson(request_rows)), "insert request ids"));
      }
      return InsertAudit(all_audit);
    });
    if (!s.ok()) return s;
    for (size_t i = 0; i < outcomes.size(); ++i) outcomes[i].jobs = std::move(submissions[i].jobs);
    return outcomes;
  }

  // A few statements per batch, not per job: the updates go to the server as JSON documents, in
  // rounds that hold each job once (the k-th update of each job in round k), so that each
  // statement sees a job once and a later update of a job sees the earlier one. (A statement per
  // job made cancelling 100,000 tasks take minutes: a round trip or more per statement.)
  Status Update(const std::vector<JobUpdate>& updates) override {
    std::vector<api::AuditRecord> audit = TakeAttached();  // dropped if this write fails
    MutexLock lock(mu_);
    return InTransaction([&]() -> Status {
      mu_.AssertHeld();  // InTransaction runs it with mu_ held
      std::vector<std::vector<const JobUpdate*>> rounds;
      std::unordered_map<int64_t, size_t> seen;  // job id -> updates of it so far
      for (const JobUpdate& u : updates) {
        const size_t k = seen[u.job.id.value()]++;
        if (rounds.size() <= k) rounds.emplace_back();
        rounds[k].push_back(&u);
      }
      if (rounds.empty()) return InsertAudit(audit);
      // The tasks given their rows here get them as the first round writes them: that round
      // leaves them out of its UPDATE.
      std::vector<JobId> first_ids;
      std::unordered_map<int64_t, const api::JobRecord*> first_record;
      for (const JobUpdate* u : rounds[0]) {
        first_ids.push_back(u->job.id);
        first_record[u->job.id.value()] = &u->job;
      }
      GF_ASSIGN_OR_RETURN(std::unordered_set<int64_t> given_rows,
                          GiveRowsTo(first_ids, "update", [&](JobId id, const StoredArray&) -> Result<api::JobRecord> {
                            return *first_record.at(id.value());
                          }));
      for (size_t k = 0; k < rounds.size(); ++k) {
        const auto& round = rounds[k];
        json rows = json::array(), transitions = json::array(), memory = json::array();
        std::vector<JobId> forget;  // the jobs that ended
        for (const JobUpdate* u : round) {
          const api::JobRecord& job = u->job;
          if (k > 0 || !given_rows.count(job.id.value())) rows.push_back(JobRow(job));
          transitions.push_back({{"job_id", job.id.value()},
                                 {"at_ms", u->transition.at.millis()},
                                 {"from_state", api::JobStateName(u->transition.from)},
                                 {"to_state", api::JobStateName(u->transition.to)},
                                 {"reason", u->transition.reason}});
          if (api::IsTerminal(job.state)) {
            forget.push_back(job.id);
          } else if (u->memory) {
            memory.push_back(MemoryRow({job.id, *u->memory}));
          }
        }
        if (!rows.empty()) GF_RETURN_IF_ERROR(
            RunOverRows("UPDATE jobs AS j SET request_id = r.request_id, array_index = r.array_index, team = r.team, "
                "state = r.state, submitted_ms = r.submitted_ms, updated_ms = r.updated_ms, record = r.record "
                "FROM jsonb_to_recordset($1::jsonb) AS r(id BIGINT, request_id TEXT, array_index INTEGER, team TEXT, "
                "state TEXT, submitted_ms BIGINT, updated_ms BIGINT, record TEXT) WHERE j.id = r.id",
                rows, "update " + JobsWhat(round)));
        // Not again when the job's last transition is this one: a retry of an update whose COMMIT
        // got no answer (the server crashed after committing it) would otherwise append it twice.
        GF_RETURN_IF_ERROR(RunOverRows(
            "INSERT INTO transitions (job_id, seq, at_ms, from_state, to_state, reason) "
            "SELECT r.job_id, (SELECT COALESCE(MAX(t.seq), 0) + 1 FROM transitions AS t WHERE t.job_id = r.job_id), "
            "r.at_ms, r.from_state, r.to_state, r.reason "
            "FROM jsonb_to_recordset($1::jsonb) AS r(job_id BIGINT, at_ms BIGINT, from_state TEXT, to_state TEXT, "
            "reason TEXT) WHERE NOT EXISTS (SELECT 1 FROM (SELECT t.at_ms, t.from_state, t.to_state, t.reason "
            "FROM transitions AS t WHERE t.job_id = r.job_id ORDER BY t.seq DESC LIMIT 1) AS last WHERE "
            "last.at_ms = r.at_ms AND last.from_state = r.from_state AND last.to_state = r.to_state AND "
            "last.reason = r.reason)",
            transitions, "append the transitions of " + JobsWhat(round)));
        if (!forget.empty()) {
          GF_RETURN_IF_ERROR(Run("DELETE FROM job_memory WHERE job_id = ANY($1::bigint[])",
                                 Params().Add(BigintArray(forget)), "forget the memory of jobs that ended"));
        }
        if (!memory.empty()) GF_RETURN_IF_ERROR(PutMemoryRows(memory));
      }
      return InsertAudit(audit);
    });
  }

  Status SaveJobMemory(const std::vector<JobMemoryRecord>& memory) override {
    MutexLock lock(mu_);
    return InTransaction([&]() -> Status {
      mu_.AssertHeld();  // InTransaction runs it with mu_ held
      // Each job once, its last memory (what one statement per memory would have left).
      std::unordered_map<int64_t, size_t> last;
      for (size_t i = 0; i < memory.size(); ++i) last[memory[i].job.value()] = i;
      std::vector<JobId> ids;
      json rows = json::array();
      for (size_t i = 0; i < memory.size(); ++i) {
        if (last[memory[i].job.value()] != i) continue;
        ids.push_back(memory[i].job);
        rows.push_back(MemoryRow(memory[i]));
      }
      if (ids.empty()) return Status::Ok();
      // A task still stored in its array gets its row first (the memory refers to it).
      GF_ASSIGN_OR_RETURN(std::unordered_set<int64_t> given,
                          GiveRowsTo(ids, "save memory", [&](JobId id, const StoredArray& array) -> Result<api::JobRecord> {
                            mu_.AssertHeld();  // called by GiveRowsTo, under the lock
                            return ArrayTask(array.first_id, id);
                          }));
      return PutMemoryRows(rows);
    });
  }

  Result<std::vector<JobMemoryRecord>> ListJobMemory() override {
    MutexLock lock(mu_);
    GF_ASSIGN_OR_RETURN(
        PgResult r,
        Query("SELECT job_id, attained_gpu_ms, las_service_gpu_ms, run_time_ms, last_run_ms, preemptions, "
              "spot_reclaims, queued_since_ms, rank_class_since_ms, rank_class, run_started_ms, last_checkpoint_ms, "
              "accrued_micros FROM job_memory ORDER BY job_id",
              Params(), "list job memory"));
    std::vector<JobMemoryRecord> out;
    for (int row = 0; row < PQntuples(r.get()); ++row) {
      JobMemoryRecord rec;
      rec.job = JobId(Int(r, row, 0));
      model::JobMemory& m = rec.memory;
      m.attained_gpu_ms = Int(r, row, 1);
      m.las_service_gpu_ms = Int(r, row, 2);
      m.run_time = Duration::Millis(Int(r, row, 3));
      m.last_run = Duration::Millis(Int(r, row, 4));
      m.preemptions = Int(r, row, 5);
      m.spot_reclaims = Int(r, row, 6);
      m.queued_since = Time::FromMillis(Int(r, row, 7));
      m.rank_class_since = Time::FromMillis(Int(r, row, 8));
      m.rank_class = Int(r, row, 9);
      m.run_started_at = Time::FromMillis(Int(r, row, 10));
      m.last_checkpoint = Time::FromMillis(Int(r, row, 11));
      m.accrued_micros = Int(r, row, 12);
      out.push_back(rec);
    }
    return out;
  }

  // Two statements: the rows of `ids`, then the arrays whose tasks without rows are among them
  // (such a task is pending, of its array's team).
  Result<std::vector<JobBrief>> GetJobBriefs(const std::vector<JobId>& ids) override {
    if (ids.empty()) return std::vector<JobBrief>{};
    MutexLock lock(mu_);
    int64_t lo = ids.front().value(), hi = lo;
    for (JobId id : ids) {
      lo = std::min(lo, id.value());
      hi = std::max(hi, id.value());
    }
    GF_ASSIGN_OR_RETURN(PgResult rows, Query("SELECT id, team, state FROM jobs WHERE id = ANY($1::bigint[])",
                                             Params().Add(BigintArray(ids)), "read the teams and states of jobs"));
    std::unordered_map<int64_t, std::pair<std::string, api::JobState>> found;
    for (int row = 0; row < PQntuples(rows.get()); ++row) {
      GF_ASSIGN_OR_RETURN(api::JobState state, api::ParseJobState(Text(rows, row, 2)));
      found[Int(rows, row, 0)] = {Text(rows, row, 1), state};
    }
    std::vector<std::tuple<int64_t, int64_t, std::string>> arrays;  // (first, last, team)
    if (found.size() < ids.size()) {
      GF_ASSIGN_OR_RETURN(PgResult r, Query("SELECT first_id, last_id, team FROM job_arrays WHERE first_id <= $2 AND "
                                            "last_id >= $1 ORDER BY first_id",
                                            Params().Add(lo).Add(hi), "read the arrays of jobs"));
      for (int row = 0; row < PQntuples(r.get()); ++row) arrays.emplace_back(Int(r, row, 0), Int(r, row, 1), Text(r, row, 2));
    }
    std::vector<JobBrief> out;
    for (JobId id : ids) {
      if (auto it = found.find(id.value()); it != found.end()) {
        out.push_back({id, it->second.first, it->second.second});
        continue;
      }
      auto a = std::upper_bound(arrays.begin(), arrays.end(), id.value(),
                                [](int64_t v, const auto& e) { return v < std::get<0>(e); });
      if (a != arrays.begin() && id.value() <= std::get<1>(*std::prev(a))) {
        out.push_back({id, std::get<2>(*std::prev(a)), api::JobState::kPending});
      }
    }
    return out;
  }

  Result<std::optional<api::JobRecord>> GetJob(JobId id) override {
    MutexLock lock(mu_);
    GF_ASSIGN_OR_RETURN(PgResult r, Query("SELECT id, record FROM jobs WHERE id = $1", Params().Add(id.value()),
                                          "get job " + std::to_string(id.value())));
    if (PQntuples(r.get()) == 0) {
      GF_ASSIGN_OR_RETURN(std::optional<StoredArray> array, ArrayOf(id));
      if (!array) return std::optional<api::JobRecord>();
      GF_ASSIGN_OR_RETURN(api::JobRecord task, ArrayTask(array->first_id, id));
      return std::optional<api::JobRecord>(std::move(task));
    }
    GF_ASSIGN_OR_RETURN(api::JobRecord job, JobFromRow(r, 0));
    return std::optional<api::JobRecord>(std::move(job));
  }

  Result<std::vector<api::JobRecord>> ListJobs(const JobFilter& filter) override {
    // One statement per ordering; unset filters are bound as NULL and match everything.
    constexpr const char* kWhere =
        "SELECT id, record FROM jobs WHERE ($1::text IS NULL OR team = $1) "
        "AND ($2::bigint IS NULL OR submitted_ms >= $2) AND ($3::boolean OR state NOT IN ($4, $5, $6)) "
        "AND ($8::bigint IS NULL OR id < $8) ";
    const std::string sql = std::string(kWhere) + (filter.limit > 0 ? "ORDER BY id DESC LIMIT $7::bigint"
                                                                    : "AND $7::bigint IS NULL ORDER BY id ASC");
    Params p;
    p.AddOptional(filter.team).AddOptional(SinceMillis(filter));
    p.Add(filter.include_terminal)
        .Add(std::string(api::JobStateName(api::JobState::kSucceeded)))
        .Add(std::string(api::JobStateName(api::JobState::kFailed)))
        .Add(std::string(api::JobStateName(api::JobState::kCancelled)));
    if (filter.limit > 0) {
      p.Add(filter.limit);
    } else {
      p.AddNull();
    }
    p.AddOptional(BeforeId(filter));
    // The rows are decoded after the connection is free again: tens of thousands of records take
    // seconds, and other calls wait meanwhile. The tasks still stored in arrays are picked under
    // the same lock as the rows (no task gets its row in between: this controller is the only
    // writer, the leader lease fences any other), with the texts of their arrays' records and
    // chunks, and decoded outside it too.
    PgResult r;
    std::vector<ArrayTaskRef> tasks;
    std::map<int64_t, std::string> records;                      // by first id
    std::map<std::pair<int64_t, int64_t>, std::string> chunks;  // by (first id, chunk)
    {
      MutexLock lock(mu_);
      GF_ASSIGN_OR_RETURN(r, Query(sql, p, "list jobs"));
      const int rows = PQntuples(r.get());
      const int64_t floor_id = ArrayListingFloor(filter, static_cast<size_t>(rows), rows > 0 ? Int(r, rows - 1, 0) : 0);
      GF_ASSIGN_OR_RETURN(tasks, ArrayTasksFor(filter, floor_id));
      for (const ArrayTaskRef& t : tasks) {
        if (!records.count(t.first_id)) {
          GF_ASSIGN_OR_RETURN(records[t.first_id], ArrayRecordText(t.first_id, JobId(t.id)));
        }
        const std::pair<int64_t, int64_t> key{t.first_id, (t.id - t.first_id) / kArrayChunk};
        if (!chunks.count(key)) {
          GF_ASSIGN_OR_RETURN(chunks[key], ArrayChunkTextOf(key.first, key.second, JobId(t.id)));
        }
      }
    }
    std::vector<api::JobRecord> jobs;
    jobs.reserve(static_cast<size_t>(PQntuples(r.get())));
    for (int row = 0; row < PQntuples(r.get()); ++row) {
      GF_ASSIGN_OR_RETURN(api::JobRecord job, JobFromRow(r, row));
      jobs.push_back(std::move(job));
    }
    if (tasks.empty()) return jobs;
    ArrayTaskCache decoded;
    return MergeArrayTasks(filter, std::move(jobs), tasks, [&](const ArrayTaskRef& t) {
      return decoded.Task(
          t.first_id, JobId(t.id), where_, [&]() -> Result<std::string> { return records.at(t.first_id); },
          [&](int64_t chunk) -> Result<std::string> { return chunks.at({t.first_id, chunk}); });
    });
  }

  Result<std::map<std::string, int64_t>> EndedCostByTeam() override {
    MutexLock lock(mu_);
    GF_ASSIGN_OR_RETURN(
        PgResult r,
        Query("SELECT team, total FROM (SELECT team, SUM((record::jsonb ->> 'cost_micros')::bigint) AS total "
              "FROM jobs WHERE state IN ($1, $2, $3) GROUP BY team) AS t WHERE total != 0 ORDER BY team",
              Params()
                  .Add(std::string(api::JobStateName(api::JobState::kSucceeded)))
                  .Add(std::string(api::JobStateName(api::JobState::kFailed)))
                  .Add(std::string(api::JobStateName(api::JobState::kCancelled))),
              "sum the cost of ended jobs"));
    std::map<std::string, int64_t> out;
    for (int row = 0; row < PQntuples(r.get()); ++row) out[Text(r, row, 0)] = Int(r, row, 1);
    return out;
  }

  Result<std::vector<api::Transition>> History(JobId id) override {
    MutexLock lock(mu_);
    GF_ASSIGN_OR_RETURN(
        PgResult r,
        Query("SELECT at_ms, from_state, to_state, reason FROM transitions WHERE job_id = $1 ORDER BY seq",
              Params().Add(id.value()), "history of job " + std::to_string(id.value())));
    std::vector<api::Transition> out;
    for (int row = 0; row < PQntuples(r.get()); ++row) {
      const std::string where = where_ + ": job " + std::to_string(id.value()) + " transition";
      api::Transition t;
      t.at = Time::FromMillis(Int(r, row, 0));
      auto from = api::ParseJobState(Text(r, row, 1));
      if (!from.ok()) return Status::Internal(where + ": " + from.status().message());
      auto to = api::ParseJobState(Text(r, row, 2));
      if (!to.ok()) return Status::Internal(where + ": " + to.status().message());
      t.from = *from;
      t.to = *to;
      t.reason = Text(r, row, 3);
      out.push_back(std::move(t));
    }
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
      GF_ASSIGN_OR_RETURN(PgResult found, Query("SELECT id FROM nodes WHERE name = $1 FOR UPDATE",
                                                Params().Add(node.name), "find node " + node.name));
      api::NodeRecord stored = node;
      if (PQntuples(found.get()) > 0) {
        stored.id = NodeId(Int(found, 0, 0));
        GF_RETURN_IF_ERROR(Run("UPDATE nodes SET record = $2 WHERE id = $1",
                               Params().Add(stored.id.value()).Add(PgJson(api::ToJson(stored))),
                               "update node " + node.name));
      } else {
        GF_ASSIGN_OR_RETURN(int64_t next, TakeIds("nodes", 1));
        stored.id = NodeId(next);
        GF_RETURN_IF_ERROR(
            Run("INSERT INTO nodes (id, name, record) VALUES ($1, $2, $3)",
                Params().Add(stored.id.value()).Add(node.name).Add(PgJson(api::ToJson(stored))),
                "insert node " + node.name));
      }
      id = stored.id;
      return InsertAudit(audit);
    });
    if (!s.ok()) return s;
    return id;
  }

  Result<std::vector<api::NodeRecord>> ListNodes() override {
    MutexLock lock(mu_);
    GF_ASSIGN_OR_RETURN(PgResult r, Query("SELECT id, record FROM nodes ORDER BY id", Params(), "list nodes"));
    std::vector<api::NodeRecord> out;
    for (int row = 0; row < PQntuples(r.get()); ++row) {
      const std::string where = "node " + std::to_string(Int(r, row, 0));
      GF_ASSIGN_OR_RETURN(json j, ParseColumn(Text(r, row, 1), where));
      auto node = api::NodeRecordFromJson(j);
      if (!node.ok()) return Corrupt(where, node.status());
      node->id = NodeId(Int(r, row, 0));
      out.push_back(std::move(node).value());
    }
    return out;
  }

  Status PutToken(const api::TokenRecord& token) override {
    std::vector<api::AuditRecord> audit = TakeAttached();  // dropped if this write fails
    if (token.hash.empty()) return Status::InvalidArgument("token hash must not be empty");
    MutexLock lock(mu_);
    return InTransaction([&]() -> Status {
      mu_.AssertHeld();  // InTransaction runs it with mu_ held
      GF_RETURN_IF_ERROR(Run("INSERT INTO tokens (hash, record) VALUES ($1, $2) "
                             "ON CONFLICT (hash) DO UPDATE SET record = EXCLUDED.record",
                             Params().Add(token.hash).Add(PgJson(api::ToJson(token))), "put token"));
      return InsertAudit(audit);
    });
  }

  Result<std::optional<api::TokenRecord>> FindToken(const std::string& hash) override {
    MutexLock lock(mu_);
    GF_ASSIGN_OR_RETURN(PgResult r, Query("SELECT record FROM tokens WHERE hash = $1", Params().Add(hash),
                                          "find token"));
    if (PQntuples(r.get()) == 0) return std::optional<api::TokenRecord>();
    GF_ASSIGN_OR_RETURN(api::TokenRecord token, TokenFromText(Text(r, 0, 0)));
    return std::optional<api::TokenRecord>(std::move(token));
  }

  Status TouchToken(const std::string& hash, Time when) override {
    MutexLock lock(mu_);
    auto touch = [&]() -> Status {
      mu_.AssertHeld();  // run with mu_ held
      GF_ASSIGN_OR_RETURN(
          PgResult r,
          Query("UPDATE tokens SET record = jsonb_set(record::jsonb, '{last_used_ms}', to_jsonb($2::bigint))::text "
                "WHERE hash = $1",
                Params().Add(hash).Add(when.millis()), "touch token"));
      if (std::string(PQcmdTuples(r.get())) == "0") return Status::NotFound("no token " + hash.substr(0, 12));
      return Status::Ok();
    };
    // A fenced store checks its token in a transaction; an unfenced one needs no transaction.
    return fence_.load() != 0 ? InTransaction(touch) : touch();
  }

  Result<std::vector<api::TokenRecord>> ListTokens() override {
    MutexLock lock(mu_);
    // COLLATE "C": byte order, as SQLite's, whatever the database's locale.
    GF_ASSIGN_OR_RETURN(PgResult r,
                        Query("SELECT record FROM tokens ORDER BY hash COLLATE \"C\"", Params(), "list tokens"));
    std::vector<api::TokenRecord> out;
    for (int row = 0; row < PQntuples(r.get()); ++row) {
      GF_ASSIGN_OR_RETURN(api::TokenRecord token, TokenFromText(Text(r, row, 0)));
      out.push_back(std::move(token));
    }
    return out;
  }

  Result<std::optional<std::string>> GetMeta(const std::string& key) override {
    MutexLock lock(mu_);
    return GetMetaLocked(key);
  }

  Status SkipJobIdsThrough(int64_t id) override {
    MutexLock lock(mu_);
    return InTransaction([&]() -> Status {
      mu_.AssertHeld();  // InTransaction runs it with mu_ held
      return Run("UPDATE counters SET value = GREATEST(value, $1) WHERE name = 'jobs'", Params().Add(id),
                 "skip job ids through " + std::to_string(id));
    });
  }

  Status SetMeta(const std::string& key, const std::string& value) override {
    std::vector<api::AuditRecord> audit = TakeAttached();  // dropped if this write fails
    if (key == kSchemaVersionKey) {
      return Status::InvalidArgument("meta key schema_version is managed by the store");
    }
    MutexLock lock(mu_);
    return InTransaction([&]() -> Status {
      mu_.AssertHeld();  // InTransaction runs it with mu_ held
      GF_RETURN_IF_ERROR(SetMetaLocked(key, value));
      return InsertAudit(audit);
    });
  }

  // The lease is taken and renewed on a connection of its own, so that a renewal never waits for
  // the store's other calls (a rebuild reading every unfinished job, a large group commit): a
  // leader whose renewal queued behind them for a whole lease would lose it to a standby that
  // rebuilds in turn, and so on for ever.
  Result<Leadership> AcquireLeadership(const LeaderAddress& self, Duration lease) override {
    if (lease <= Duration::Zero()) return Status::InvalidArgument("leader lease must be positive");
    MutexLock lock(lease_mu_);
    if (lease_session_ == nullptr) {
      GF_ASSIGN_OR_RETURN(PGconn * conn, ConnectPostgres(url_));
      auto session = std::make_unique<PostgresStore>(conn, url_, max_document_bytes_);
      GF_RETURN_IF_ERROR(session->SetUp());
      lease_session_ = std::move(session);
    }
    GF_ASSIGN_OR_RETURN(Leadership l, lease_session_->AcquireOnThisConnection(self, lease));
    // The token this store's writes check: the last one taken, kept when another takes the lease,
    // so that they keep failing.
    fence_.store(lease_session_->fence_.load());
    return l;
  }

  Status ReleaseLeadership(const LeaderAddress& self) override {
    MutexLock lock(lease_mu_);
    if (lease_session_ == nullptr) return Status::Ok();
    return lease_session_->ReleaseOnThisConnection(self);
  }

 private:
  Result<Leadership> AcquireOnThisConnection(const LeaderAddress& self, Duration lease) {
    // Milliseconds left, never negative (a lapsed lease, or the '-infinity' of a new database);
    // since as Unix milliseconds, 0 before anyone led.
    constexpr const char* kColumns =
        " token, holder, (extract(epoch FROM GREATEST(expires_at, now()) - now()) * 1000)::bigint, agent_url, "
        "(extract(epoch FROM GREATEST(since, 'epoch'::timestamptz)) * 1000)::bigint";
    MutexLock lock(mu_);
    auto answer = [](const PgResult& r, bool held) {
      return Leadership{held, Int(r, 0, 0), Text(r, 0, 1), Duration::Millis(Int(r, 0, 2)), Text(r, 0, 3),
                        Time::FromMillis(Int(r, 0, 4))};
    };
    if (const int64_t token = fence_.load(); token != 0) {
      // Renew: only while the token is still ours.
      GF_ASSIGN_OR_RETURN(
          PgResult renewed,
          Query(std::string("UPDATE leader SET holder = $2, agent_url = $4, "
                            "expires_at = now() + $3::bigint * interval '1 millisecond' "
                            "WHERE id = 1 AND token = $1 RETURNING") +
                    kColumns,
                Params().Add(token).Add(self.url).Add(lease.millis()).Add(self.agent_url),
                "renew the leader lease"));
      if (PQntuples(renewed.get()) == 1) return answer(renewed, true);
    }
    // Take: only a lapsed lease, with the next token.
    GF_ASSIGN_OR_RETURN(
        PgResult taken,
        Query(std::string("UPDATE leader SET token = token + 1, holder = $1, agent_url = $3, since = now(), "
                          "expires_at = now() + $2::bigint * interval '1 millisecond' "
                          "WHERE id = 1 AND expires_at <= now() RETURNING") +
                  kColumns,
              Params().Add(self.url).Add(lease.millis()).Add(self.agent_url), "take the leader lease"));
    if (PQntuples(taken.get()) == 1) {
      fence_.store(Int(taken, 0, 0));
      return answer(taken, true);
    }
    // Another holds a live lease. A token this store held stays, so that its writes keep failing.
    GF_ASSIGN_OR_RETURN(PgResult current, Query(std::string("SELECT") + kColumns + " FROM leader WHERE id = 1",
                                                Params(), "read the leader lease"));
    if (PQntuples(current.get()) != 1) return Status::Internal(where_ + ": the leader table has no row");
    return answer(current, false);
  }

  Status ReleaseOnThisConnection(const LeaderAddress& self) {
    MutexLock lock(mu_);
    const int64_t token = fence_.load();
    if (token == 0) return Status::Ok();
    // One statement: a standby that takes the lease meanwhile gets a new token, and this matches
    // no row.
    GF_ASSIGN_OR_RETURN(PgResult released,
                        Query("UPDATE leader SET expires_at = '-infinity' "
                              "WHERE id = 1 AND token = $1 AND holder = $2 AND expires_at > now() RETURNING token",
                              Params().Add(token).Add(self.url), "release the leader lease"));
    (void)released;
    return Status::Ok();
  }

 public:

  void AttachAudit(std::vector<api::AuditRecord> records) override {
    MutexLock lock(attach_mu_);
    auto& mine = attached_[std::this_thread::get_id()];
    for (auto& r : records) mine.push_back(std::move(r));
  }

  Status AppendAudit(const std::vector<api::AuditRecord>& records) override {
    std::vector<api::AuditRecord> all = TakeAttached();  // dropped if this write fails
    all.insert(all.end(), records.begin(), records.end());
    MutexLock lock(mu_);
    return InTransaction([&]() -> Status {
      mu_.AssertHeld();  // InTransaction runs it with mu_ held
      return InsertAudit(all);
    });
  }

  Result<std::vector<api::AuditRecord>> ListAudit(const AuditFilter& filter) override {
    MutexLock lock(mu_);
    Params p;
    p.Add(filter.after_seq);
    if (filter.since) {
      p.Add(filter.since->millis());
    } else {
      p.AddNull();
    }
    p.AddOptional(filter.subject).AddOptional(filter.verb).Add(filter.limit > 0 ? filter.limit : int64_t{1} << 62);
    GF_ASSIGN_OR_RETURN(
        PgResult r,
        Query("SELECT seq, record FROM audit WHERE seq > $1 AND ($2::bigint IS NULL OR at_ms >= $2) "
              "AND ($3::text IS NULL OR subject = $3) "
              "AND ($4::text IS NULL OR verb = $4 OR (right($4, 1) = '.' AND left(verb, length($4)) = $4)) "
              "ORDER BY seq LIMIT $5::bigint",
              p, "list audit records"));
    std::vector<api::AuditRecord> out;
    for (int row = 0; row < PQntuples(r.get()); ++row) {
      const std::string where = "audit record " + std::to_string(Int(r, row, 0));
      GF_ASSIGN_OR_RETURN(json j, ParseColumn(Text(r, row, 1), where));
      auto a = api::AuditRecordFromJson(j);
      if (!a.ok()) return Corrupt(where, a.status());
      a->seq = Int(r, row, 0);
      out.push_back(std::move(a).value());
    }
    return out;
  }

 private:
  // Errors: the server, what we were doing, and PostgreSQL's words. A lost connection, a server
  // shutting down or out of resources, a lock timeout or a serialization failure may pass
  // (Unavailable); anything else will not (Internal).
  Status Error(const std::string& what, const PGresult* r) const GF_REQUIRES(mu_) {
    std::string detail = r != nullptr ? Trim(PQresultErrorMessage(r)) : "";
    if (detail.empty()) detail = Trim(PQerrorMessage(conn_));
    const std::string msg = where_ + ": " + what + ": " + detail;
    const char* state = r != nullptr ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
    if (PQstatus(conn_) != CONNECTION_OK || state == nullptr) return Status::Unavailable(msg);
    const std::string cls = std::string(state).substr(0, 2);
    // 08 connection exception, 40 transaction rollback (serialization, deadlock), 53 insufficient
    // resources, 55 lock not available, 57 operator intervention (shutdown, cancel), 58 I/O.
    if (cls == "08" || cls == "40" || cls == "53" || cls == "55" || cls == "57" || cls == "58") {
      return Status::Unavailable(msg);
    }
    return Status::Internal(msg);
  }
  Status Corrupt(const std::string& where, const Status& s) const {
    return Status::Internal(where_ + ": stored " + where + " does not decode: " + s.message());
  }

  // Whether a failed statement failed because the connection is gone. libpq may still call the
  // connection OK after the server closed it (a restart): an error of libpq's own (no SQLSTATE)
  // or a connection or shutdown SQLSTATE says so too.
  bool ConnectionLost(const PGresult* r) const GF_REQUIRES(mu_) {
    if (PQstatus(conn_) != CONNECTION_OK) return true;
    const char* state = r != nullptr ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
    if (state == nullptr) return true;
    const std::string code = state;
    return code.rfind("08", 0) == 0 || code == "57P01" || code == "57P02" || code == "57P03";
  }

  // The connection, re-established if the server dropped it.
  Status Connected() GF_REQUIRES(mu_) {
    if (PQstatus(conn_) == CONNECTION_OK) return Status::Ok();
    return Reconnect();
  }

  Status Reconnect() GF_REQUIRES(mu_) {
    PQreset(conn_);
    prepared_.clear();
    if (PQstatus(conn_) != CONNECTION_OK) {
      return Status::Unavailable(where_ + ": connection lost and not re-established: " + Trim(PQerrorMessage(conn_)));
    }
    // A connection lost again during the setup is reported, not chased.
    in_transaction_ = true;
    Status s = SetUpSession();
    in_transaction_ = false;
    return s;
  }

  // Durability settings of a new connection. synchronous_commit `off` would answer before the
  // commit is on disk; the other levels (local, remote_write, on, remote_apply) all flush locally
  // first, so an operator's choice among them stays.
  Status SetUpSession() GF_REQUIRES(mu_) {
    GF_ASSIGN_OR_RETURN(PgResult fsync, Simple("SHOW fsync", "read the fsync setting"));
    if (Text(fsync, 0, 0) != "on") {
      return Status::FailedPrecondition(where_ + ": the server runs with fsync = " + Text(fsync, 0, 0) +
                                        ", so a commit it reports may be lost in a crash; set fsync = on in "
                                        "postgresql.conf");
    }
    GF_ASSIGN_OR_RETURN(PgResult sync, Simple("SHOW synchronous_commit", "read synchronous_commit"));
    if (Text(sync, 0, 0) == "off") GF_RETURN_IF_ERROR(Exec("SET synchronous_commit = on", "set synchronous_commit"));
    // A transaction of this store sends its statements back to back. One left open by a client
    // that stopped (a leader paused by SIGSTOP in the middle of a write) would hold the leader
    // row's lock and keep a standby from taking the lapsed lease; the server ends it instead.
    return Exec("SET idle_in_transaction_session_timeout = '5s'", "set idle_in_transaction_session_timeout");
  }

  // Runs `exec` (one round trip) and checks its result. Outside a transaction a statement that
  // found the connection dropped (the server restarted since the last call) is sent once more on a
  // new connection: nothing of it ran. Inside one it is not: the transaction is gone with the
  // connection, and the caller must start over.
  template <typename F>
  Result<PgResult> Execute(F exec, const std::string& what) GF_REQUIRES(mu_) {
    if (!in_transaction_) GF_RETURN_IF_ERROR(Connected());
    for (int attempt = 0;; ++attempt) {
      PgResult r = exec();
      ExecStatusType st = r != nullptr ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
      if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return r;
      if (attempt == 0 && !in_transaction_ && ConnectionLost(r.get())) {
        GF_RETURN_IF_ERROR(Reconnect());
        continue;
      }
      return Error(what, r.get());
    }
  }

  // A statement without parameters through the simple protocol (several statements allowed:
  // migrations, BEGIN/COMMIT).
  Result<PgResult> Simple(const std::string& sql, const std::string& what) GF_REQUIRES(mu_) {
    return Execute(
        [&]() {
          mu_.AssertHeld();  // Execute runs it with mu_ held
          return PgResult(PQexec(conn_, sql.c_str()));
        },
        what);
  }

  Status Exec(const std::string& sql, const std::string& what) GF_REQUIRES(mu_) {
    GF_ASSIGN_OR_RETURN(PgResult r, Simple(sql, what));
    return Status::Ok();
  }

  // A statement with parameters, prepared once per connection.
  Result<PgResult> Query(const std::string& sql, const Params& params, const std::string& what) GF_REQUIRES(mu_) {
    const std::vector<const char*> values = params.Pointers();
    return Execute(
        [&]() {
          mu_.AssertHeld();  // Execute runs it with mu_ held
          auto it = prepared_.find(sql);
          if (it == prepared_.end()) {
            const std::string name = "gf" + std::to_string(prepared_.size() + 1);
            PgResult r(PQprepare(conn_, name.c_str(), sql.c_str(), params.size(), nullptr));
            if (r == nullptr || PQresultStatus(r.get()) != PGRES_COMMAND_OK) return r;
            it = prepared_.emplace(sql, name).first;
          }
          return PgResult(
              PQexecPrepared(conn_, it->second.c_str(), params.size(), values.data(), nullptr, nullptr, 0));
        },
        what);
  }

  // A statement whose rows, if any, are not needed.
  Status Run(const std::string& sql, const Params& params, const std::string& what) GF_REQUIRES(mu_) {
    GF_ASSIGN_OR_RETURN(PgResult r, Query(sql, params, what));
    return Status::Ok();
  }

  static std::string Text(const PgResult& r, int row, int col) {
    return std::string(PQgetvalue(r.get(), row, col), static_cast<size_t>(PQgetlength(r.get(), row, col)));
  }
  static int64_t Int(const PgResult& r, int row, int col) { return std::strtoll(PQgetvalue(r.get(), row, col), nullptr, 10); }

  // Runs `body` between BEGIN and COMMIT, rolling back when it fails. A COMMIT that gets no answer
  // leaves the outcome unknown: that is Unavailable, and the caller retries.
  //
  // A fenced store (one that has held a leader token) locks the leader row FOR SHARE in BEGIN's
  // round trip and fails with Unavailable, before `body` runs, when its token was superseded.
  template <typename F>
  Status InTransaction(F body) GF_REQUIRES(mu_) {
    Status s = Status::Ok();
    const int64_t fence = fence_.load();
    if (fence == 0) {
      GF_RETURN_IF_ERROR(Exec("BEGIN", "begin a transaction"));
      in_transaction_ = true;
    } else {
      auto begun = Simple("BEGIN; SELECT token FROM leader WHERE id = 1 FOR SHARE",
                          "begin a transaction and check the leader token");
      in_transaction_ = true;
      if (!begun.ok()) {
        s = begun.status();
      } else if (PQntuples(begun->get()) != 1) {
        s = Status::Internal(where_ + ": the leader table has no row");
      } else if (const int64_t current = Int(*begun, 0, 0); current != fence) {
        s = Status::Unavailable(where_ + ": lost the leadership: token " + std::to_string(fence) +
                                " superseded by " + std::to_string(current) + "; this controller may not write");
      }
    }
    if (s.ok()) s = body();
    if (s.ok()) {
      auto commit = Simple("COMMIT", "commit");
      if (!commit.ok()) {
        s = commit.status();
      } else if (std::string(PQcmdStatus(commit->get())) != "COMMIT") {
        // The server answers ROLLBACK to the COMMIT of a transaction that had failed.
        s = Status::Internal(where_ + ": commit: the transaction was rolled back");
      }
    }
    if (!s.ok() && PQstatus(conn_) == CONNECTION_OK && PQtransactionStatus(conn_) != PQTRANS_IDLE) {
      (void)Simple("ROLLBACK", "roll back");
    }
    in_transaction_ = false;
    return s;
  }

  Status Migrate() GF_REQUIRES(mu_) {
    return InTransaction([&]() -> Status {
      mu_.AssertHeld();  // InTransaction runs it with mu_ held
      GF_RETURN_IF_ERROR(Run("SELECT pg_advisory_xact_lock($1::bigint)", Params().Add(kMigrationLockKey),
                             "take the migration lock"));
      // Version 0 is a database without the meta table (a new database).
      GF_ASSIGN_OR_RETURN(PgResult has_meta,
                          Query("SELECT to_regclass('meta') IS NOT NULL", Params(), "look for the meta table"));
      int version = 0;
      if (Text(has_meta, 0, 0) == "t") {
        GF_ASSIGN_OR_RETURN(std::optional<std::string> v, GetMetaLocked(kSchemaVersionKey));
        GF_ASSIGN_OR_RETURN(version, ParseSchemaVersion(v, where_));
      }
      GF_RETURN_IF_ERROR(CheckSchemaVersion(version, kSchemaVersion, where_));
      for (int v = version; v < kSchemaVersion; ++v) {
        GF_RETURN_IF_ERROR(Exec(kMigrations[v], "migrate schema to version " + std::to_string(v + 1)));
        GF_RETURN_IF_ERROR(SetMetaLocked(kSchemaVersionKey, std::to_string(v + 1)));
      }
      return Status::Ok();
    });
  }

  Result<std::optional<std::string>> GetMetaLocked(const std::string& key) GF_REQUIRES(mu_) {
    GF_ASSIGN_OR_RETURN(PgResult r, Query("SELECT value FROM meta WHERE key = $1", Params().Add(key), "get meta " + key));
    if (PQntuples(r.get()) == 0) return std::optional<std::string>();
    return std::optional<std::string>(Text(r, 0, 0));
  }

  Status SetMetaLocked(const std::string& key, const std::string& value) GF_REQUIRES(mu_) {
    return Run("INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
               Params().Add(key).Add(value), "set meta " + key);
  }

  // Takes `count` ids of a table's counter in the current transaction; returns the first.
  Result<int64_t> TakeIds(const std::string& table, int64_t count) GF_REQUIRES(mu_) {
    GF_ASSIGN_OR_RETURN(PgResult r, Query("UPDATE counters SET value = value + $2 WHERE name = $1 RETURNING value",
                                          Params().Add(table).Add(count), "take ids of " + table));
    if (PQntuples(r.get()) != 1) return Status::Internal(where_ + ": no id counter for " + table);
    return Int(r, 0, 0) - count + 1;
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
    if (records.empty()) return Status::Ok();
    GF_ASSIGN_OR_RETURN(int64_t seq, TakeIds("audit", static_cast<int64_t>(records.size())));
    json rows = json::array();
    for (const api::AuditRecord& a : records) {
      rows.push_back({{"seq", seq++},
                      {"at_ms", a.at.millis()},
                      {"subject", a.subject},
                      {"verb", a.verb},
                      {"record", PgJson(api::ToJson(a))}});
    }
    return Run("INSERT INTO audit (seq, at_ms, subject, verb, record) SELECT seq, at_ms, subject, verb, record "
               "FROM jsonb_to_recordset($1::jsonb) AS r(seq BIGINT, at_ms BIGINT, subject TEXT, verb TEXT, record TEXT)",
               Params().Add(PgJson(rows)), "append audit records");
  }

  static json SubmittedTransitionRow(JobId id, int64_t at_ms) {
    return {{"job_id", id.value()},
            {"at_ms", at_ms},
            {"from_state", api::JobStateName(api::JobState::kPending)},
            {"to_state", api::JobStateName(api::JobState::kPending)},
            {"reason", "submitted"}};
  }

  // Runs `sql`, whose $1 is a JSON array of rows, over `rows` in pieces of at most
  // max_document_bytes_ of JSON (PostgreSQL refuses a jsonb value over 256 MiB: the records of
  // 100,000 tasks with long commands are more). Each row goes in one piece; a statement's rows
  // must be independent.
  Status RunOverRows(const std::string& sql, const json& rows, const std::string& what) GF_REQUIRES(mu_) {
    const size_t kMaxDocumentBytes = max_document_bytes_;
    std::string doc = "[";
    for (const json& row : rows) {
      std::string text = PgJson(row);
      if (doc.size() > 1 && doc.size() + text.size() + 2 > kMaxDocumentBytes) {
        doc += ']';
        GF_RETURN_IF_ERROR(Run(sql, Params().Add(std::move(doc)), what));
        doc = "[";
      }
      if (doc.size() > 1) doc += ',';
      doc += text;
    }
    if (doc.size() == 1) return Status::Ok();
    doc += ']';
    return Run(sql, Params().Add(std::move(doc)), what);
  }

  // Job rows (JobRow) and their first transitions (SubmittedTransitionRow), two statements.
  Status InsertJobRows(const json& job_rows, const json& transition_rows) GF_REQUIRES(mu_) {
    if (job_rows.empty()) return Status::Ok();
    GF_RETURN_IF_ERROR(
        RunOverRows("INSERT INTO jobs (id, request_id, array_index, team, state, submitted_ms, updated_ms, record) "
            "SELECT id, request_id, array_index, team, state, submitted_ms, updated_ms, record "
            "FROM jsonb_to_recordset($1::jsonb) AS r(id BIGINT, request_id TEXT, array_index INTEGER, team TEXT, "
            "state TEXT, submitted_ms BIGINT, updated_ms BIGINT, record TEXT)",
            job_rows, "insert jobs"));
    return RunOverRows("INSERT INTO transitions (job_id, seq, at_ms, from_state, to_state, reason) "
               "SELECT job_id, 1, at_ms, from_state, to_state, reason FROM jsonb_to_recordset($1::jsonb) "
               "AS r(job_id BIGINT, at_ms BIGINT, from_state TEXT, to_state TEXT, reason TEXT)",
               transition_rows, "insert submitted transitions");
  }

  // An array's row and its tasks' own fields. The jobs have their ids, in a row from the first.
  Status InsertArray(const std::vector<api::JobRecord>& jobs) GF_REQUIRES(mu_) {
    const api::JobRecord& first = jobs.front();
    const std::string what = "insert the array of jobs " + std::to_string(first.id.value()) + "-" +
                             std::to_string(jobs.back().id.value());
    GF_RETURN_IF_ERROR(Run("INSERT INTO job_arrays (first_id, last_id, team, submitted_ms, record) "
                           "VALUES ($1, $2, $3, $4, $5)",
                           Params()
                               .Add(first.id.value())
                               .Add(jobs.back().id.value())
                               .Add(first.request.spec.team)
                               .Add(first.submitted.millis())
                               .Add(PgRecord(first)),
                           what));
    // Up to 32 chunks per statement (32,768 tasks), so that a large array adds few round trips.
    // (One JSON document of every chunk's text, escaped once more, was slower on a local server.)
    constexpr int64_t kChunksPerStatement = 32;
    const int64_t chunks = ArrayChunks(jobs.size());
    for (int64_t begin = 0; begin < chunks; begin += kChunksPerStatement) {
      const int64_t end = std::min(chunks, begin + kChunksPerStatement);
      std::string sql = "INSERT INTO job_array_tasks (first_id, chunk, tasks) VALUES ";
      Params p;
      p.Add(first.id.value());
      for (int64_t c = begin; c < end; ++c) {
        const int64_t n = 2 * (c - begin) + 2;  // the chunk's two parameters: $n and $n+1
        sql += (c == begin ? "($1, $" : ", ($1, $") + std::to_string(n) + ", $" + std::to_string(n + 1) + ")";
        p.Add(c).Add(api::WithoutNulEscapes(ArrayChunkText(jobs, c)));
      }
      GF_RETURN_IF_ERROR(Run(sql, p, what));
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
    GF_ASSIGN_OR_RETURN(PgResult r, Query("SELECT first_id, last_id, submitted_ms FROM job_arrays WHERE first_id <= $1 "
                                          "ORDER BY first_id DESC LIMIT 1",
                                          Params().Add(id.value()),
                                          "find the array of job " + std::to_string(id.value())));
    if (PQntuples(r.get()) == 0) return std::optional<StoredArray>();
    StoredArray a{Int(r, 0, 0), Int(r, 0, 1), Int(r, 0, 2)};
    if (id.value() > a.last_id) return std::optional<StoredArray>();
    return std::optional<StoredArray>(a);
  }

  // Writes the rows given per array (first id) to the arrays' counts: one UPDATE per array
  // (PostgreSQL walks every earlier version of a row that one transaction updates again and again,
  // so a count per task made cancelling 100,000 tasks take minutes).
  Status CountRowsGiven(const std::map<int64_t, int64_t>& given) GF_REQUIRES(mu_) {
    for (const auto& [first_id, n] : given) {
      GF_RETURN_IF_ERROR(Run("UPDATE job_arrays SET with_row = with_row + $2 WHERE first_id = $1",
                             Params().Add(first_id).Add(n), "count the rows of array " + std::to_string(first_id)));
    }
    return Status::Ok();
  }

  // The stored texts of an array's record and of one chunk of its tasks; `id` names the task read.
  Result<std::string> ArrayRecordText(int64_t first_id, JobId id) GF_REQUIRES(mu_) {
    const std::string what = "read job " + std::to_string(id.value()) + " (array " + std::to_string(first_id) + ")";
    GF_ASSIGN_OR_RETURN(PgResult r, Query("SELECT record FROM job_arrays WHERE first_id = $1", Params().Add(first_id),
                                          what));
    if (PQntuples(r.get()) == 0) return Status::Internal(where_ + ": " + what + ": the array is not stored");
    return Text(r, 0, 0);
  }
  Result<std::string> ArrayChunkTextOf(int64_t first_id, int64_t chunk, JobId id) GF_REQUIRES(mu_) {
    const std::string what = "read job " + std::to_string(id.value()) + " (array " + std::to_string(first_id) + ")";
    GF_ASSIGN_OR_RETURN(PgResult r, Query("SELECT tasks FROM job_array_tasks WHERE first_id = $1 AND chunk = $2",
                                          Params().Add(first_id).Add(chunk), what));
    if (PQntuples(r.get()) == 0) return Status::Internal(where_ + ": " + what + ": its chunk of tasks is not stored");
    return Text(r, 0, 0);
  }

  // The record of task `id` of the array starting at `first_id`, as it was submitted.
  Result<api::JobRecord> ArrayTask(int64_t first_id, JobId id) GF_REQUIRES(mu_) {
    auto read_record = [&]() -> Result<std::string> {
      mu_.AssertHeld();  // called by this function, under its lock
      return ArrayRecordText(first_id, id);
    };
    auto read_chunk = [&](int64_t chunk) -> Result<std::string> {
      mu_.AssertHeld();  // called by this function, under its lock
      return ArrayChunkTextOf(first_id, chunk, id);
    };
    return array_cache_.Task(first_id, id, where_, read_record, read_chunk);
  }

  // The tasks still stored in arrays that a listing by `filter` shows beside its job rows, in its
  // order (ArrayTasksToList); `floor_id` from ArrayListingFloor.
  Result<std::vector<ArrayTaskRef>> ArrayTasksFor(const JobFilter& filter, int64_t floor_id) GF_REQUIRES(mu_) {
    const bool newest_first = filter.limit > 0;
    // Arrays whose tasks all have rows, and with a full page of rows those below it, are skipped.
    Params p;
    p.AddOptional(filter.team).AddOptional(SinceMillis(filter)).AddOptional(BeforeId(filter)).Add(floor_id);
    GF_ASSIGN_OR_RETURN(
        PgResult r,
        Query(std::string("SELECT first_id, last_id FROM job_arrays WHERE ($1::text IS NULL OR team = $1) "
                          "AND ($2::bigint IS NULL OR submitted_ms >= $2) AND ($3::bigint IS NULL OR first_id < $3) "
                          "AND last_id >= $4 AND with_row <= last_id - first_id ORDER BY first_id ") +
                  (newest_first ? "DESC" : "ASC"),
              p, "list arrays"));
    std::vector<ArraySpan> spans;
    for (int row = 0; row < PQntuples(r.get()); ++row) spans.push_back({Int(r, row, 0), Int(r, row, 1)});
    if (spans.empty()) return std::vector<ArrayTaskRef>();
    auto ids_with_rows = [&](int64_t lo, int64_t hi, int64_t max) -> Result<std::vector<int64_t>> {
      mu_.AssertHeld();  // called by this function, under its lock
      GF_ASSIGN_OR_RETURN(PgResult rows,
                          Query(std::string("SELECT id FROM jobs WHERE id BETWEEN $1 AND $2 ORDER BY id ") +
                                    (newest_first ? "DESC" : "ASC") + " LIMIT $3::bigint",
                                Params().Add(lo).Add(hi).AddOptional(max > 0 ? std::optional<int64_t>(max) : std::nullopt),
                                "list the tasks of an array"));
      std::vector<int64_t> ids;
      for (int row = 0; row < PQntuples(rows.get()); ++row) ids.push_back(Int(rows, row, 0));
      return ids;
    };
    return ArrayTasksToList(filter, floor_id, spans, ids_with_rows);
  }

  static json JobRow(const api::JobRecord& job) {
    return {{"id", job.id.value()},
            {"request_id", job.request_id},
            {"array_index", job.array_index},
            {"team", job.request.spec.team},
            {"state", api::JobStateName(job.state)},
            {"submitted_ms", job.submitted.millis()},
            {"updated_ms", job.updated.millis()},
            {"record", PgRecord(job)}};
  }

  static json MemoryRow(const JobMemoryRecord& r) {
    const model::JobMemory& m = r.memory;
    return {{"job_id", r.job.value()},
            {"attained_gpu_ms", m.attained_gpu_ms},
            {"las_service_gpu_ms", m.las_service_gpu_ms},
            {"run_time_ms", m.run_time.millis()},
            {"last_run_ms", m.last_run.millis()},
            {"preemptions", m.preemptions},
            {"spot_reclaims", m.spot_reclaims},
            {"queued_since_ms", m.queued_since.millis()},
            {"rank_class_since_ms", m.rank_class_since.millis()},
            {"rank_class", m.rank_class},
            {"run_started_ms", m.run_started_at.millis()},
            {"last_checkpoint_ms", m.last_checkpoint.millis()},
            {"accrued_micros", m.accrued_micros}};
  }
  // Stores the memories (MemoryRow), each job once, replacing what is stored.
  Status PutMemoryRows(const json& rows) GF_REQUIRES(mu_) {
    return RunOverRows(
        "INSERT INTO job_memory (job_id, attained_gpu_ms, las_service_gpu_ms, run_time_ms, last_run_ms, preemptions, "
        "spot_reclaims, queued_since_ms, rank_class_since_ms, rank_class, run_started_ms, last_checkpoint_ms, "
        "accrued_micros) SELECT job_id, attained_gpu_ms, las_service_gpu_ms, run_time_ms, last_run_ms, preemptions, "
        "spot_reclaims, queued_since_ms, rank_class_since_ms, rank_class, run_started_ms, last_checkpoint_ms, "
        "accrued_micros FROM jsonb_to_recordset($1::jsonb) AS r(job_id BIGINT, attained_gpu_ms BIGINT, "
        "las_service_gpu_ms BIGINT, run_time_ms BIGINT, last_run_ms BIGINT, preemptions BIGINT, spot_reclaims BIGINT, "
        "queued_since_ms BIGINT, rank_class_since_ms BIGINT, rank_class BIGINT, run_started_ms BIGINT, "
        "last_checkpoint_ms BIGINT, accrued_micros BIGINT) "
        "ON CONFLICT (job_id) DO UPDATE SET attained_gpu_ms = EXCLUDED.attained_gpu_ms, "
        "las_service_gpu_ms = EXCLUDED.las_service_gpu_ms, run_time_ms = EXCLUDED.run_time_ms, "
        "last_run_ms = EXCLUDED.last_run_ms, preemptions = EXCLUDED.preemptions, "
        "spot_reclaims = EXCLUDED.spot_reclaims, queued_since_ms = EXCLUDED.queued_since_ms, "
        "rank_class_since_ms = EXCLUDED.rank_class_since_ms, rank_class = EXCLUDED.rank_class, "
        "run_started_ms = EXCLUDED.run_started_ms, last_checkpoint_ms = EXCLUDED.last_checkpoint_ms, "
        "accrued_micros = EXCLUDED.accrued_micros",
        rows, "save the memory of " + std::to_string(rows.size()) + " job(s)");
  }
  Status PutMemory(const JobMemoryRecord& r) GF_REQUIRES(mu_) { return PutMemoryRows(json::array({MemoryRow(r)})); }

  // The ids as a PostgreSQL bigint[] literal ("{4,5,6}"), for "= ANY($1::bigint[])".
  static std::string BigintArray(const std::vector<JobId>& ids) {
    std::string out = "{";
    for (JobId id : ids) out += (out.size() > 1 ? "," : "") + std::to_string(id.value());
    return out + "}";
  }

  // "job 4", "jobs 4,5", "jobs 4-100003 (100000)": what a statement over these updates wrote.
  static std::string JobsWhat(const std::vector<const JobUpdate*>& round) {
    std::vector<int64_t> ids;
    ids.reserve(round.size());
    for (const JobUpdate* u : round) ids.push_back(u->job.id.value());
    std::sort(ids.begin(), ids.end());
    return api::JobsAuditObject(ids);
  }

  // The jobs `ids` (each once) that are tasks still stored in their arrays get their rows, with
  // the records record_of(id, array) gives, and "submitted" transitions: a statement finds them,
  // one more writes each table. A job that is neither stored nor a task fails the batch
  // (NotFound, "`what`: no job N"). Returns the ids of the tasks given rows.
  template <typename RecordOf>
  Result<std::unordered_set<int64_t>> GiveRowsTo(const std::vector<JobId>& ids, const std::string& what,
                                                 RecordOf record_of) GF_REQUIRES(mu_) {
    GF_ASSIGN_OR_RETURN(PgResult r, Query("SELECT id FROM jobs WHERE id = ANY($1::bigint[])",
                                          Params().Add(BigintArray(ids)), what + ": find the jobs"));
    std::unordered_set<int64_t> stored, given_rows;
    for (int row = 0; row < PQntuples(r.get()); ++row) stored.insert(Int(r, row, 0));
    if (stored.size() == ids.size()) return given_rows;
    json rows = json::array(), transitions = json::array();
    std::map<int64_t, int64_t> given;
    std::optional<StoredArray> array;  // the last one found: an array's tasks come together
    for (JobId id : ids) {
      if (stored.count(id.value())) continue;
      if (!array || id.value() < array->first_id || id.value() > array->last_id) {
        GF_ASSIGN_OR_RETURN(array, ArrayOf(id));
        if (!array) return Status::NotFound(what + ": no job " + std::to_string(id.value()));
      }
      GF_ASSIGN_OR_RETURN(api::JobRecord task, record_of(id, *array));
      rows.push_back(JobRow(task));
      transitions.push_back(SubmittedTransitionRow(id, array->submitted_ms));
      ++given[array->first_id];
      given_rows.insert(id.value());
    }
    GF_RETURN_IF_ERROR(InsertJobRows(rows, transitions));
    GF_RETURN_IF_ERROR(CountRowsGiven(given));
    return given_rows;
  }

  Result<json> ParseColumn(const std::string& text, const std::string& where) const {
    auto j = api::ParseJson(text);
    if (!j.ok()) return Corrupt(where, j.status());
    return std::move(j).value();
  }

  // The job ids stored with a request id.
  Result<std::vector<JobId>> DecodeIds(const std::string& request_id, const std::string& text) const {
    const std::string where = "request " + request_id;
    GF_ASSIGN_OR_RETURN(json ids, ParseColumn(text, where));
    std::vector<JobId> out;
    if (!ids.is_array()) return Status::Internal(where_ + ": " + where + ": job ids are not an array");
    for (const json& id : ids) {
      if (!id.is_number_integer()) return Status::Internal(where_ + ": " + where + ": job id is not an integer");
      out.push_back(JobId(id.get<int64_t>()));
    }
    return out;
  }

  // A job from a row of (id, record).
  Result<api::JobRecord> JobFromRow(const PgResult& r, int row) const {
    const std::string where = "job " + std::to_string(Int(r, row, 0));
    GF_ASSIGN_OR_RETURN(json j, ParseColumn(Text(r, row, 1), where));
    auto job = api::JobRecordFromJson(j);
    if (!job.ok()) return Corrupt(where, job.status());
    job->id = JobId(Int(r, row, 0));
    return std::move(job).value();
  }

  Result<api::TokenRecord> TokenFromText(const std::string& text) const {
    GF_ASSIGN_OR_RETURN(json j, ParseColumn(text, "token"));
    auto token = api::TokenRecordFromJson(j);
    if (!token.ok()) return Corrupt("token", token.status());
    return std::move(token).value();
  }

  const std::string url_;    // to open the lease's own connection
  const std::string where_;  // "PostgreSQL user@host:port/db", for messages
  PGconn* const conn_;       // the connection: used only with mu_ held
  const size_t max_document_bytes_;  // the most JSON one statement's document holds (RunOverRows)
  ArrayTaskCache array_cache_ GF_GUARDED_BY(mu_);  // the last array record and chunk read
  Mutex mu_;
  Mutex attach_mu_;
  std::map<std::thread::id, std::vector<api::AuditRecord>> attached_ GF_GUARDED_BY(attach_mu_);
  std::unordered_map<std::string, std::string> prepared_ GF_GUARDED_BY(mu_);  // SQL -> statement name
  // Between BEGIN and COMMIT/ROLLBACK (or setting up a new connection): a lost connection is not
  // replaced behind the caller's back.
  bool in_transaction_ GF_GUARDED_BY(mu_) = false;
  // The leader token this store took last (0: none): from then on every write checks it. Set by
  // the lease's session and read by writes, which hold different locks.
  std::atomic<int64_t> fence_{0};
  // The connection that takes and renews the lease, opened at the first ask.
  Mutex lease_mu_;
  std::unique_ptr<PostgresStore> lease_session_ GF_GUARDED_BY(lease_mu_);
};

Result<PGconn*> ConnectPostgres(const std::string& url) {
  // Check the URL first, so that a typo is told apart from a server that cannot be reached.
  char* parse_error = nullptr;
  PQconninfoOption* options = PQconninfoParse(url.c_str(), &parse_error);
  if (options == nullptr) {
    std::string msg = parse_error != nullptr ? Trim(parse_error) : "out of memory";
    PQfreemem(parse_error);
    return Status::InvalidArgument("not a PostgreSQL connection URL: " + msg);
  }
  PQconninfoFree(options);
  // Defaults first: what the URL says wins. Without a connect timeout libpq would wait forever for
  // a host that drops packets.
  const char* keys[] = {"connect_timeout", "fallback_application_name", "dbname", nullptr};
  const char* values[] = {"10", "gpufleet", url.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (conn == nullptr) return Status::Unavailable("cannot connect to PostgreSQL: out of memory");
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string msg = Describe(conn) + ": cannot connect: " + Trim(PQerrorMessage(conn));
    PQfinish(conn);
    return Status::Unavailable(msg);
  }
  return conn;
}

}  // namespace

Result<std::unique_ptr<StateStore>> OpenPostgresStore(const std::string& url, size_t max_document_bytes) {
  GF_ASSIGN_OR_RETURN(PGconn * conn, ConnectPostgres(url));
  auto store = std::make_unique<PostgresStore>(conn, url, max_document_bytes);
  GF_RETURN_IF_ERROR(store->Init());
  return std::unique_ptr<StateStore>(std::move(store));
}

}  // namespace gpufleet::store
