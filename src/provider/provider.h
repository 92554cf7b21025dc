// Providers: the hands of the autoscaler. sched::Autoscaler decides what to rent and release;
// a Provider carries the decisions out on some cloud and says what really exists.
//
//   GF_ASSIGN_OR_RETURN(ProviderConfig config, ParseProviderConfig(yaml["provider"], "cluster.yaml",
//                                                                  "provider."));
//   GF_ASSIGN_OR_RETURN(std::unique_ptr<Provider> p, MakeProvider(config));
//   GF_ASSIGN_OR_RETURN(Instance i, p->Create(request, now));   // i.state == "booting"
//   for (const ProviderEvent& e : p->Poll(now)) ...              // on every tick of the loop
//   GF_ASSIGN_OR_RETURN(std::vector<Instance> truth, p->List()); // reconcile against it
//   GF_RETURN_IF_ERROR(p->Delete(i.id, now));
//
// Kinds (docs/providers.md has the configuration of each):
//   static  no renting: the pool is hand-registered agents. Create fails; List is empty.
//   local   an emulated cloud on this machine: instances are agent processes, spot
//           interruptions are emulated with an AWS-style notice endpoint (local_provider.h).
//   exec    three user scripts (create, delete, list) that talk to a real cloud's CLI
//           (exec_provider.h).
//
// An instance's `name` is the node name its agent registers with, which is how the controller
// ties a node to the instance it rented.
//
// Time: every call that changes state takes `now`; providers read no clock in their decisions,
// so tests drive them with invented times. (Waiting for a script is real time: exec's timeout.)
//
// Thread-safety: none. One thread owns a Provider and makes all calls. The local provider's
// notice endpoint serves HTTP from its own thread, behind its own lock.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace YAML {
class Node;
}

namespace gpufleet::provider {

// What the autoscaler rents: one node of one offer.
struct InstanceRequest {
  std::string name;       // unique among live instances; the node name the agent registers with
  std::string offer;      // sched::RentableOffer::name it was chosen from
  std::string gpu_model;  // canonical catalog name
  int gpus = 0;
  std::string market = "on-demand";  // on-demand | spot | reserved
  int64_t price_micros_per_hour = 0;
  std::string zone;
  std::map<std::string, std::string> labels;
};

// Instance states, in the order an instance goes through them.
inline constexpr const char* kBooting = "booting";          // rented, not up yet
inline constexpr const char* kRunning = "running";          // the machine (agent) is up
inline constexpr const char* kTerminating = "terminating";  // Delete asked; going away
inline constexpr const char* kTerminated = "terminated";    // gone (see end_reason)

// One rented machine as the provider sees it.
struct Instance {
  std::string id;  // the provider's id ("i-0000002a"); Delete takes it
  std::string name;
  std::string offer;
  std::string gpu_model;
  int gpus = 0;
  std::string market;
  int64_t price_micros_per_hour = 0;
  std::string zone;
  std::map<std::string, std::string> labels;
  std::string state;  // kBooting, kRunning, kTerminating or kTerminated
  Time created;       // Time::Epoch() when the provider does not say
  std::optional<Time> started;
  std::optional<Time> ended;
  std::string end_reason;  // kTerminated: "deleted", "spot interruption", "process exited: ..."
  std::string notice_url;  // where spot notices for it appear; empty when unknown
};

enum class ProviderEventKind {
  kStarted,      // booting -> running
  kSpotNotice,   // a spot interruption notice was published; the instance goes at `deadline`
  kInterrupted,  // the spot instance was taken away
  kTerminated,   // a Delete finished
  kDied,         // the instance ended without being asked (its process exited, or it failed to boot)
};
const char* ProviderEventKindName(ProviderEventKind kind);

struct ProviderEvent {
  ProviderEventKind kind = ProviderEventKind::kStarted;
  std::string instance_id;
  std::string name;
  Time at;                      // the `now` of the Poll that saw it
  std::optional<Time> deadline; // kSpotNotice: when the instance will be taken
  std::string detail;           // human-readable: an exit status, an error
};

class Provider {
 public:
  virtual ~Provider() = default;
  virtual std::string Kind() const = 0;
  // Rents one instance. Returns it as the provider sees it (usually kBooting). The name must not
  // belong to a live instance of this provider.
  virtual Result<Instance> Create(const InstanceRequest& request, Time now) = 0;
  // Releases an instance. Idempotent: an unknown or gone id is OK. May return before the
  // instance is gone; List and Poll tell when it is.
  virtual Status Delete(const std::string& id, Time now) = 0;
  // What exists now, the truth that reconciliation trusts. Instances that ended without a Delete
  // (interrupted, died) stay listed as kTerminated until Deleted, so that their end is seen even
  // across a restart of the controller.
  virtual Result<std::vector<Instance>> List() = 0;
  // Time-driven work: boots that are due, interruptions, reaping. Call it often (every second or
  // so); events come out in instance creation order.
  virtual std::vector<ProviderEvent> Poll(Time now) { return {}; }
};

// --- configuration ---------------------------------------------------------------------------

// A spot interruption replayed at a set time: `after` the instance started running. `instance`
// names an instance, or is a 0-based index into the spot instances in creation order ("0" is
// the first spot instance this state directory ever created).
struct ScheduledInterruption {
  Duration after;
  std::string instance;
};

struct LocalConfig {
  std::string state_dir;                   // records, logs; survives restarts
  std::vector<std::string> agent_command;  // argv template with {placeholders}
  Duration boot_delay = Duration::Seconds(5);
  Duration stop_grace = Duration::Seconds(10);  // SIGTERM to SIGKILL on Delete
  int notice_port = 0;                          // 0: ephemeral (notice URLs change on restart)
  Duration notice_lead = Duration::Seconds(120);
  double interruptions_per_hour = 0;  // per running spot instance; 0: none by hazard
  uint64_t seed = 1;
  std::vector<ScheduledInterruption> schedule;
  // Emulated spot capacity (model::CapacityProcess per offer, seeded by `seed` and the offer's
  // name): a spot create while the offer has none fails with ResourceExhausted, as a cloud's
  // "insufficient capacity" does. Zero: spot capacity is always there.
  Duration capacity_available = Duration::Zero();
  Duration capacity_outage = Duration::Zero();
};

struct ExecConfig {
  std::vector<std::string> create, del, list;  // argv of each script
  Duration timeout = Duration::Seconds(120);
  std::map<std::string, std::string> env;  // added to the scripts' environment
};

struct ProviderConfig {
  std::string kind;  // "static", "local" or "exec"
  LocalConfig local;
  ExecConfig exec;
};

// The kinds MakeProvider knows, in table order.
std::vector<std::string> ProviderKinds();

// Builds the provider of `config.kind`. The local provider opens its state directory and its
// notice endpoint here.
Result<std::unique_ptr<Provider>> MakeProvider(const ProviderConfig& config);

// Reads a provider mapping ({kind: local, state_dir: ..., ...}). Errors say where and what:
// "<where>:<line>:<col>: <field_prefix><field>: <what>". Unknown fields are errors (with a hint).
Result<ProviderConfig> ParseProviderConfig(const YAML::Node& node, const std::string& where,
                                           const std::string& field_prefix = "");

}  // namespace gpufleet::provider
