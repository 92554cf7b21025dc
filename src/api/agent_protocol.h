// The controller <-> agent protocol (HTTP/JSON under /v1/agents, see docs/api.md).
//
// Agents pull: they register, long-poll for commands, and post heartbeats carrying telemetry,
// the parts they run, and events (started, exited, checkpointed) that they keep resending until
// the controller acknowledges them. Every message about a job names (job, attempt, part), so a
// report about an old attempt can never be mistaken for the current one, and every command is
// idempotent: an agent that sees a start twice starts once.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/records.h"
#include "common/ids.h"
#include "common/status.h"
#include "common/time.h"
#include "model/types.h"

namespace gpufleet::api {

// One part of one attempt of a job: the unit an agent runs.
struct PartKey {
  JobId job;
  int attempt = 0;
  int part = 0;  // node rank within the gang
  auto operator<=>(const PartKey&) const = default;
  std::string ToString() const;  // "job-42.a1.p0"
};

// Which of the limits jobs ask for (resources.memory, resources.cpus) a node enforces.
struct EnforcedLimits {
  bool memory = false;
  bool cpu = false;
  bool operator==(const EnforcedLimits&) const = default;
};

struct RegisterRequest {
  std::string name;
  std::string address;  // reachable by other nodes (MASTER_ADDR)
  model::NodeSpec spec;
  std::vector<GpuInfo> gpus;
  std::vector<PartKey> running;  // parts still running from before (agent restart or reconnect)
  std::string version;
  std::string driver_version;   // NVIDIA driver ("550.54.15"); empty: none
  std::string cuda_version;     // the highest CUDA the driver supports ("12.4")
  std::vector<std::string> environments_ready;  // prepared environments (warm starts)
  std::string storage_fault;  // as Heartbeat::storage_fault
  // How the node holds its parts (cgroups or process groups) and whether the memory and CPU
  // limits jobs ask for are enforced there, and why not ("cgroups unavailable (...): ...").
  // limits absent: an agent that does not say.
  std::string containment;
  std::optional<EnforcedLimits> limits;
};
struct RegisterReply {
  NodeId node;
  std::string token;  // the agent's own bearer token from now on
  std::string epoch;  // changes when the controller restarts: resend everything, re-poll from 0
  Duration heartbeat_interval = Duration::Seconds(5);
  Duration lost_after = Duration::Seconds(30);
  bool run_burn_in = false;  // run the acceptance burn-in now and report it (Heartbeat::burn_in)
  int64_t burn_in_request = 0;  // its id: the report carries it back (BurnInReport::request)
  // Where the controller puts jobs' checkpoint folders when a job names none: the agent may make
  // them there for the job's user (as below its working-directory roots). Empty: not said.
  std::string checkpoint_root;
};

struct GpuSampleReport {
  int util_pct = 0;
  int64_t mem_used_mib = 0;
  int temperature_c = 0;
  int power_w = 0;
};

// The room left on a file system the agent keeps files on (statvfs of the directory): the free
// bytes an unprivileged writer may use, and the file system's size.
struct DiskReport {
  std::string dir;   // "data" (the agent's data directory) or "environments"
  std::string path;  // the directory
  int64_t free_bytes = 0;
  int64_t size_bytes = 0;
  bool operator==(const DiskReport&) const = default;
};

enum class PartEventKind { kStarted, kExited, kCheckpointed };
const char* PartEventKindName(PartEventKind k);

struct PartEvent {
  int64_t seq = 0;  // agent-local, increasing; acknowledged by the controller
  PartKey key;
  PartEventKind kind = PartEventKind::kStarted;
  Time at;
  int exit_code = 0;  // kExited: the exit code, or 128 + signal
  int signal = 0;     // kExited: the signal that ended it, 0 if none
  // kStarted: how long preparing the part's environment took before its process started, and
  // whether it was ready already (a warm start). Absent for parts without an environment.
  std::optional<Duration> environment_took;
  bool environment_warm = false;
  bool stopped = false;  // kExited: after a stop the controller asked for
  // kExited: nothing ran: the node had run this part (its key) before and does not start it
  // twice. A controller whose state is older than the node's (restored from a backup) asked.
  bool already_ran = false;
  // kExited: nothing ran because the node cannot keep its own files (its data directory is full or
  // read-only; Heartbeat::storage_fault says why): the node's fault, not the job's.
  bool node_fault = false;
  std::string message;   // "exec python3: No such file or directory", ...
};

// The provider's notice that it takes the node back (a spot interruption; on AWS the
// `spot/instance-action` metadata document).
struct SpotNotice {
  std::string action;  // "terminate", "stop" or "hibernate"
  Time time;           // when the provider acts
};

// What a running part did lately, for the stalled-job watchdog: how long ago its log last grew,
// and its last progress report (the GPUFLEET_PROGRESS file: how long ago it was written, the step
// and loss in it). Ages, not times: the controller subtracts them from its own clock, so a node
// whose clock is off cannot make a job look stalled or alive.
struct PartActivity {
  PartKey key;
  std::optional<Duration> output_age;
  std::optional<Duration> progress_age;
  std::optional<int64_t> step;
  std::optional<double> loss;
};

struct Heartbeat {
  std::vector<GpuSampleReport> gpus;
  std::vector<PartActivity> activity;  // running parts with output or progress
  std::vector<PartEvent> events;  // not yet acknowledged, oldest first
  std::vector<PartKey> running;   // every part running now
  std::optional<SpotNotice> notice;  // absent: none (and from agents that do not poll for one)
  // Why the node cannot keep its own files now ("the node's data directory /var/lib/gpufleet
  // cannot be written: No space left on device"); empty when it can. The node takes no work
  // while it is set.
  std::string storage_fault;
  // The room left where the agent keeps its files (its data directory, its environments
  // directory), at this beat; empty from agents that do not say.
  std::vector<DiskReport> disks;
  std::optional<model::BurnInReport> burn_in;  // a finished burn-in, until acknowledged
  std::optional<std::vector<std::string>> environments_ready;  // when the prepared set changed
};
struct HeartbeatReply {
  int64_t acked = 0;  // events with seq <= acked are recorded; drop them
  std::string epoch;
  bool reregister = false;  // the controller does not know this node (restart, or it was lost)
  bool notice_acked = false;  // the heartbeat's notice is recorded
  bool burn_in_acked = false;  // the heartbeat's burn-in report is recorded
  bool run_burn_in = false;    // a burn-in is wanted (repeated until its report arrives)
  int64_t burn_in_request = 0;  // which one: the agent starts it unless it runs or holds this one
};

// A command to an agent.
struct StartPart {
  PartKey key;
  std::vector<std::string> argv;
  std::string workdir;  // empty: the agent picks one
  std::map<std::string, std::string> env;  // the complete gpufleet + user environment
  std::string user;
  std::vector<int> gpus;  // GPU indices on the node
  int processes = 1;      // > 1: one process per GPU; each gets RANK / LOCAL_RANK
  int rank_base = 0;      // RANK of the first process of this part
  int stop_signal = 15;
  Duration grace = Duration::Seconds(30);
  // What the part asked for on its node (resources.cpus / memory): its cgroup's limits where the
  // node can enforce them. 0: no limit.
  int64_t cpu_milli = 0;
  int64_t mem_mib = 0;
  // The environment (data/environments.yaml) to run in; the agent prepares it first unless it is
  // ready on the node (a warm start). Empty: the node's own software.
  std::string environment;
  // Run the all-reduce check between the gang's nodes (rank NODE_RANK of NNODES, at MASTER_ADDR
  // and MASTER_PORT) before the processes start.
  bool verify_network = false;
};
struct StopPart {
  PartKey key;
  int signal = 15;
  Duration grace = Duration::Seconds(30);
  std::string reason;
};
struct Command {
  int64_t seq = 0;
  std::optional<StartPart> start;
  std::optional<StopPart> stop;
};
struct CommandBatch {
  std::string epoch;
  std::vector<Command> commands;
};

nlohmann::json ToJson(const PartKey& k);
nlohmann::json ToJson(const RegisterRequest& r);
nlohmann::json ToJson(const RegisterReply& r);
nlohmann::json ToJson(const PartEvent& e);
nlohmann::json ToJson(const SpotNotice& n);
nlohmann::json ToJson(const Heartbeat& h);
nlohmann::json ToJson(const HeartbeatReply& r);
nlohmann::json ToJson(const Command& c);
nlohmann::json ToJson(const CommandBatch& b);
nlohmann::json ToJson(const model::BurnInReport& r);

Result<PartKey> PartKeyFromJson(const nlohmann::json& j);
Result<RegisterRequest> RegisterRequestFromJson(const nlohmann::json& j);
Result<RegisterReply> RegisterReplyFromJson(const nlohmann::json& j);
Result<PartEvent> PartEventFromJson(const nlohmann::json& j);
Result<SpotNotice> SpotNoticeFromJson(const nlohmann::json& j);
Result<Heartbeat> HeartbeatFromJson(const nlohmann::json& j);
Result<HeartbeatReply> HeartbeatReplyFromJson(const nlohmann::json& j);
Result<Command> CommandFromJson(const nlohmann::json& j);
Result<CommandBatch> CommandBatchFromJson(const nlohmann::json& j);
Result<model::BurnInReport> BurnInReportFromJson(const nlohmann::json& j);

}  // namespace gpufleet::api
