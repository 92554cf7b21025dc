// Records: the controller's durable state, as stored by StateStore (src/store/) and shown by the
// API. Plain values.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/job_request.h"
#include "common/ids.h"
#include "common/status.h"
#include "common/time.h"
#include "model/burn_in.h"
#include "model/types.h"

namespace gpufleet::api {

// A job's lifecycle:
//   pending → starting → running → succeeded | failed | cancelled
//                      ↘ stopping → preempted → pending (requeued) …
// starting: the controller sent the start to the agents; running: every part's process started.
// stopping: asked to stop (cancel, preemption, node loss), waiting for the processes to exit.
enum class JobState { kPending, kStarting, kRunning, kStopping, kSucceeded, kFailed, kCancelled, kPreempted };
const char* JobStateName(JobState s);
Result<JobState> ParseJobState(const std::string& s);
bool IsTerminal(JobState s);  // succeeded, failed, cancelled

struct Transition {
  Time at;
  JobState from = JobState::kPending;
  JobState to = JobState::kPending;
  std::string reason;  // "submitted", "placed on node-a gpus 0-3", "exit code 1", ...
};

struct JobRecord {
  JobId id;
  std::string request_id;  // the client's idempotency key; jobs of one request share it
  int array_index = -1;    // index within an array (sweep) submission; -1 when not an array
  JobRequest request;
  JobState state = JobState::kPending;
  std::string reason;      // of the last transition
  Time submitted;
  Time updated;
  int attempt = 0;         // starts so far; the current/last run is attempt `attempt`
  int error_restarts = 0;  // requeues after errors, counted against max_restarts_on_errors
  std::optional<model::Placement> placement;  // current or last placement
  std::optional<int> exit_code;               // of the last run that ended
  int64_t cost_micros = 0;  // its share of its nodes' prices so far, all runs (micro-dollars)
  // While `stopping`: what the stop is for, so that a restarted controller ends it as it was
  // meant to end. A preemption reason's name ("priority", "cancelled", "max-cost", "budget",
  // "node-failure", ...: sched::PreemptReasonName), "failing" (a part failed; the others are
  // being stopped) or "restart" (the watchdog restarts it). Empty in every other state.
  std::string stop_intent;

  bool operator==(const JobRecord&) const = default;
};

// What an array (sweep) submission gives each of its tasks (api::ParseJobs fills these in per
// element): the id, the index, the name, and the command, directory and environment with the
// element's parameters substituted. The tasks of one array share everything else, which lets the
// stores keep an array's tasks once (docs/operations.md, "Arrays stored once").
struct ArrayTaskFields {
  JobId id;
  int array_index = -1;
  std::string name;
  std::vector<std::string> argv;
  std::string workdir;
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> array_params;
};
// Moves the fields out of `job`, leaving each at its default; PutArrayTaskFields puts them back.
ArrayTaskFields TakeArrayTaskFields(JobRecord& job);
void PutArrayTaskFields(JobRecord& job, ArrayTaskFields fields);
// Whether the jobs differ in nothing but their ArrayTaskFields. The jobs are changed while this
// runs (each one's fields are moved out and back, without copying) and come back as they were.
bool ShareAllButArrayTaskFields(std::vector<JobRecord>& jobs);

enum class NodeState { kUp, kDraining, kLost, kGone };
const char* NodeStateName(NodeState s);
Result<NodeState> ParseNodeState(const std::string& s);

struct GpuInfo {
  int index = 0;
  std::string uuid;
  std::string name;     // as the driver reports it
  int64_t memory_mib = 0;
  std::string compute_capability{};  // "9.0"; empty when unknown
};

struct NodeRecord {
  NodeId id;
  std::string name;     // unique; an agent that re-registers under its name keeps its id
  model::NodeSpec spec;
  std::vector<GpuInfo> gpus;
  std::string address;  // how other nodes reach it (MASTER_ADDR for gangs)
  NodeState state = NodeState::kUp;
  // An operator drained it (gpufleet drain): it comes back drained after a loss or an agent
  // restart, until undrained. (A spot notice drains a node without this.)
  bool drained = false;
  Time registered;
  Time last_heartbeat;
  // What the agent reports about its software (docs/nodes.md): the NVIDIA driver, the highest
  // CUDA it supports, and the environments (data/environments.yaml) prepared on the node.
  std::string driver_version;
  std::string cuda_version;
  std::vector<std::string> environments_ready;
  // Acceptance: "" (no burn-in asked), "checking" (takes no work until its burn-in is judged),
  // "passed", or "quarantined" (failed; takes no work; `reason` says why).
  std::string acceptance;
  std::string acceptance_reason;
  std::optional<model::BurnInReport> burn_in;  // the last check's report, judged
};

// The audit object of a submit: "job 7", or the ids with runs of three or more as ranges and the
// count, "jobs 3-10102 (10100)", so that an array of 100,000 tasks is one short record.
std::string JobsAuditObject(const std::vector<int64_t>& ids);

// One entry of the audit log: who asked for which change, from where, and what came of it.
// Written in the same store transaction as the change it records (or alone for a refusal).
struct AuditRecord {
  int64_t seq = 0;       // assigned by the store, ascending
  Time at;
  std::string subject;   // the token's subject ("" for a request without a valid token)
  std::string role;      // admin, team-admin, user, ..., agent, join, or "" when unauthenticated
  std::string team;
  std::string source;    // the client's address
  std::string verb;      // job.submit, job.cancel, budget.set, token.create, node.drain, auth.login, ...
  std::string object;    // what it acted on: "job 12", "team vision", "token 4f9c0d2e8a7b", "node n1"
  std::string outcome;   // allowed | denied | failed
  std::string reason;    // why it was denied or failed; what happened when allowed
  std::string request_id;
};

enum class TokenKind { kUser, kJoin, kAgent };
const char* TokenKindName(TokenKind k);
Result<TokenKind> ParseTokenKind(const std::string& s);

// A bearer token, stored only as the SHA-256 of its secret.
struct TokenRecord {
  std::string hash;     // hex SHA-256 of the secret
  TokenKind kind = TokenKind::kUser;
  std::string subject;  // user name, or node name for agent tokens
  std::string role;     // "admin", "user"; agents: "agent"
  std::string team;     // the team a user token acts for (empty: "default"; admins: any)
  Time created;
  bool revoked = false;
  std::optional<Time> expires;    // none: never
  std::optional<Time> last_used;  // recorded at most once a minute
  // The id of the token that made it through the API (empty: made at a start, or before this was
  // kept). Revoking a team-admin token revokes what it made, and what those made in turn.
  std::string made_by;
  // A short public name for lists and revocation: the first 12 hex digits of the hash.
  std::string Id() const { return hash.substr(0, 12); }
};

}  // namespace gpufleet::api
