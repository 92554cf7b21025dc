// StateStore: the controller's durable state. A call that returns Ok has committed: its data
// survives a kill -9 of the process (SQLite WAL with synchronous=FULL; PostgreSQL with fsync on and
// synchronous_commit on; the in-memory fake in src/testing/ for unit tests keeps nothing).
//
// Thread-safety: implementations are safe to call from several threads; writes are serialised.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/records.h"
#include "common/status.h"
#include "common/time.h"
#include "model/job_memory.h"

namespace gpufleet::store {

// One client submission: the jobs of one request id (one job, or the jobs of an array).
struct Submission {
  std::string request_id;          // non-empty; idempotency key
  std::vector<api::JobRecord> jobs;  // ids are assigned by the store
  // Written with the jobs, in their transaction, naming the ids they got ("job 4", "jobs 4,5");
  // not written when the request id was seen before (nothing is created then).
  std::optional<api::AuditRecord> audit;
  // Only a retry: when the request id was not seen before, store nothing and answer created=false
  // with no ids (the caller refuses the submission; a retry of one it took gets its jobs back).
  bool only_if_seen = false;
};
// InvalidArgument, naming the submission, when one has an empty request id or no jobs: what every
// StateStore refuses before it writes anything.
Status CheckSubmissions(const std::vector<Submission>& submissions);

struct SubmitOutcome {
  std::vector<JobId> ids;  // in the order of the submission's jobs
  bool created = true;     // false: the request id was seen before; ids are the earlier ones
  // The submission's records, handed back so that the caller keeps them without a copy: as
  // stored (id, request id and reason set) when created, as given otherwise.
  std::vector<api::JobRecord> jobs;
};

// A change to one job: its new record (state, attempt, placement, ...) plus the transition that
// led there, stored together.
struct JobUpdate {
  api::JobRecord job;
  api::Transition transition;
  // What the scheduler remembers of the job after this change, stored in the same transaction
  // (nullopt keeps what is stored). A job that reaches a terminal state loses its memory.
  std::optional<model::JobMemory> memory = std::nullopt;
};

// The scheduler's memory of one unfinished job (model::JobMemory), as stored.
struct JobMemoryRecord {
  JobId job;
  model::JobMemory memory;
  bool operator==(const JobMemoryRecord&) const = default;
};

// What a cancel of many jobs needs to know of a job it does not hold: whose and how it stands.
struct JobBrief {
  JobId id;
  std::string team;
  api::JobState state = api::JobState::kPending;
};

struct JobFilter {
  bool include_terminal = true;
  std::optional<std::string> team;
  std::optional<Time> since;  // submitted at or after
  int64_t limit = 0;          // 0: no limit; newest first when set
  std::optional<JobId> before;  // with a limit: only ids below this one (the next page)
};

// A filter's bounds as the stores bind them: milliseconds, an id value (nullopt: no bound).
std::optional<int64_t> SinceMillis(const JobFilter& filter);
std::optional<int64_t> BeforeId(const JobFilter& filter);

struct AuditFilter {
  std::optional<Time> since;            // at or after
  std::optional<std::string> subject;
  std::optional<std::string> verb;      // exact, or a prefix ending in '.' ("job.")
  int64_t after_seq = 0;                // the next page: records after this seq
  int64_t limit = 1000;
};

// How a controller names itself in the leader lease: the URLs clients and agents reach it at.
struct LeaderAddress {
  std::string url;        // the API's (people, scripts, the CLI)
  std::string agent_url;  // the agent listener's; empty: not advertised
};

// The leader lease, as AcquireLeadership found it.
struct Leadership {
  bool held = false;      // this store holds the lease now; its writes are fenced by `token`
  int64_t token = 0;      // the current fencing token (0: nobody has led yet)
  std::string holder;     // who holds (or last held) the lease, as its leader named itself (its URL)
  Duration expires_in;    // until the lease lapses, by the database's clock; zero when lapsed
  std::string agent_url;  // the holder's agent listener, as it advertised it (empty: unknown)
  Time since;             // when the holder took the lease, by the database's clock (zero: never)
};

class StateStore {
 public:
  virtual ~StateStore() = default;

  // The audit log (append-only). AttachAudit hands records to the next write call made by this
  // thread (Submit, Update, UpsertNode, PutToken, SetMeta), which stores them in its own
  // transaction: a change and its record commit together or not at all. AppendAudit stores
  // records alone (a refusal changes nothing else). ListAudit answers oldest first.
  virtual void AttachAudit(std::vector<api::AuditRecord> records) = 0;
  virtual Status AppendAudit(const std::vector<api::AuditRecord>& records) = 0;
  virtual Result<std::vector<api::AuditRecord>> ListAudit(const AuditFilter& filter) = 0;

  // All submissions in one transaction (group commit). Each one is all-or-nothing per request id;
  // a request id seen before yields its earlier ids and created=false. New jobs get the next ids
  // (ascending from 1, never reused) and a "submitted" transition at job.submitted; the stored
  // record has the id, the submission's request id and reason "submitted". A submission with an
  // empty request id or no jobs fails the whole batch (InvalidArgument) and nothing is stored.
  virtual Result<std::vector<SubmitOutcome>> Submit(std::vector<Submission> submissions) = 0;

  // Writes the new records and appends the transitions, all in one transaction. A job id that is
  // not stored fails the whole batch (NotFound) and nothing changes. A transition equal to the
  // job's last stored one (time, states, reason) is not appended again: the retry of an update
  // whose commit went unanswered after it had committed (PostgreSQL) changes nothing.
  virtual Status Update(const std::vector<JobUpdate>& updates) = 0;
  // The scheduler's memory of jobs whose records did not change (a checkpoint, a re-rank on a
  // timer), in one transaction; replaces what is stored. A job id that is not stored fails the
  // whole batch (NotFound) and nothing changes.
  virtual Status SaveJobMemory(const std::vector<JobMemoryRecord>& memory) = 0;
  // Every stored memory, by job id. A job without one (submitted and never changed since, or
  // stored before schema version 4) is absent: its record says all there is.
  virtual Result<std::vector<JobMemoryRecord>> ListJobMemory() = 0;

  virtual Result<std::optional<api::JobRecord>> GetJob(JobId id) = 0;
  // The team and state of each of `ids` that names a job (in the order of `ids`; ids of no job are
  // left out), without decoding records. This default reads each with GetJob; a store across a
  // network answers in a few statements.
  virtual Result<std::vector<JobBrief>> GetJobBriefs(const std::vector<JobId>& ids);
  // The matching jobs oldest first (by id) without a limit; with one, the newest `limit` of them,
  // newest first.
  virtual Result<std::vector<api::JobRecord>> ListJobs(const JobFilter& filter) = 0;
  // Every transition of the job, oldest first.
  virtual Result<std::vector<api::Transition>> History(JobId id) = 0;
  // What the jobs that ended (succeeded, failed, cancelled) cost, summed per team (teams whose
  // ended jobs cost nothing are absent): summed where the data lives, without reading the records
  // out, so that a store of millions of ended jobs answers at once.
  virtual Result<std::map<std::string, int64_t>> EndedCostByTeam() = 0;

  // Nodes: keyed by name; a new name gets the next id (ignored in `node.id`); an existing name
  // keeps its id. Returns the id.
  virtual Result<NodeId> UpsertNode(const api::NodeRecord& node) = 0;
  virtual Result<std::vector<api::NodeRecord>> ListNodes() = 0;  // by id

  // Tokens: by hash. PutToken replaces a token with the same hash.
  virtual Status PutToken(const api::TokenRecord& token) = 0;
  virtual Result<std::optional<api::TokenRecord>> FindToken(const std::string& hash) = 0;
  virtual Result<std::vector<api::TokenRecord>> ListTokens() = 0;  // by hash
  // Sets only the token's last-used time (a revocation written meanwhile stays). NotFound for an
  // unknown hash.
  virtual Status TouchToken(const std::string& hash, Time when) = 0;

  // Small settings (schema version, cluster id, next MASTER_PORT, ...). "schema_version" belongs
  // to the store: it can be read, and setting it is InvalidArgument.
  virtual Result<std::optional<std::string>> GetMeta(const std::string& key) = 0;
  virtual Status SetMeta(const std::string& key, const std::string& value) = 0;
  // Job ids handed out from now on are above `id` (ids already above it are left as they are):
  // ids that jobs had in a state this store was restored over are not given again, so a new job
  // finds no logs or checkpoints of an older one under its id.
  virtual Status SkipJobIdsThrough(int64_t id) = 0;

  // Leadership among controllers sharing one store. Takes the leader lease for `holder` (a name
  // the standbys can show, such as the leader's URL) when nobody holds it or it has lapsed, or
  // renews it when this store holds it; either way it then runs until `lease` from now by the
  // database's clock (never the controllers'). Each change of holder increments the fencing
  // token. A renewal keeps the token, even after the lease lapsed if nobody took it meanwhile.
  // When another holds a live lease, answers held=false with that holder.
  //
  // Fencing: once this store has held a token, every write (Submit, Update, SaveJobMemory,
  // UpsertNode, PutToken, TouchToken, SetMeta, AppendAudit) checks, inside its own transaction, that the token is still
  // the current one, and otherwise fails with Unavailable ("lost the leadership: token N superseded
  // by M") and changes nothing. A store that never asked writes unfenced.
  //
  // Stores with one controller (SQLite, the in-memory fake) always lead: held, token 1.
  // InvalidArgument when `lease` is not positive.
  virtual Result<Leadership> AcquireLeadership(const LeaderAddress& self, Duration lease) = 0;

  // Gives the lease up at once (a leader stopping cleanly), so that a standby takes it at its
  // next ask instead of waiting the lease out: expires it only while this store still holds it
  // under its token and as `self`, in one conditional statement. The fencing token is kept, so
  // that writes after the release still check it. Ok, changing nothing, when this store does not
  // hold the lease (never took it, or another took it meanwhile).
  virtual Status ReleaseLeadership(const LeaderAddress& self) = 0;
};

// Opens (creating if needed) a SQLite database at `path` in WAL mode with synchronous=FULL and
// migrates its schema. The error names the path and what went wrong.
Result<std::unique_ptr<StateStore>> OpenSqliteStore(const std::string& path);

// Connects to PostgreSQL with a libpq URL (postgresql://USER:PASSWORD@HOST:PORT/DB?sslmode=...,
// or postgresql:///DB?host=/socket/dir) and migrates the schema (tables in the first schema of
// the search path). A URL libpq cannot parse is InvalidArgument; a server that cannot be reached
// is Unavailable; a server with fsync off is FailedPrecondition. Messages never show the password.
// Rows go to the server as JSON documents of at most `max_document_bytes` each (PostgreSQL takes
// a jsonb value of up to 256 MiB; tests pass less to see a batch go in pieces).
inline constexpr size_t kPostgresDocumentBytes = size_t{64} << 20;
Result<std::unique_ptr<StateStore>> OpenPostgresStore(const std::string& url,
                                                      size_t max_document_bytes = kPostgresDocumentBytes);

// Where the state lives, as `gpufleet server --store` names it: "sqlite:PATH" or a PostgreSQL URL
// ("postgresql://..." or "postgres://...").
struct StoreLocation {
  enum class Engine { kSqlite, kPostgres };
  Engine engine = Engine::kSqlite;
  std::string target;  // the SQLite path, or the whole URL
};
// InvalidArgument, saying what is accepted, for anything else (the caller names the flag).
Result<StoreLocation> ParseStoreLocation(const std::string& text);
// The location fit to print: a URL's password is replaced by "***".
std::string Redacted(const StoreLocation& where);
Result<std::unique_ptr<StateStore>> OpenStore(const StoreLocation& where);

}  // namespace gpufleet::store
