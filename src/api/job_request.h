// JobRequest: everything a user asks for when submitting a job — the scheduler's JobSpec plus
// what the agents need to run it (command, working directory, environment, checkpoint and
// restart policies). One schema for the job YAML file and the JSON API body; one validator
// (job_yaml.h) for both, which `submit`, POST /v1/jobs and `select` all use.
#pragma once

#include <csignal>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/time.h"
#include "model/job_cost_hints.h"
#include "model/types.h"

namespace gpufleet::api {

struct CheckpointPolicy {
  std::string dir;              // where the job writes checkpoints; default <state>/checkpoints/<job>
  int signal = SIGTERM;         // sent to the process group to ask for a checkpoint and exit
  Duration grace = Duration::Seconds(30);  // then SIGKILL

  bool operator==(const CheckpointPolicy&) const = default;
};

struct RestartPolicy {
  bool on_preemption = true;                // requeue after preemption or node loss
  int max_restarts_on_errors = 0;           // requeue after a non-zero exit this many times
  std::vector<int> recover_on_exit_codes;   // exit codes that always requeue (not counted)

  bool operator==(const RestartPolicy&) const = default;
};

// The stalled-job watchdog (docs/observability.md): a job that made no progress (its
// GPUFLEET_PROGRESS file), wrote no output and kept its GPUs idle for stall_timeout is flagged
// (the JobStalled alert) and, with restart_on_stall, stopped and requeued from its checkpoint.
struct WatchdogPolicy {
  Duration stall_timeout;        // zero: not watched
  bool restart_on_stall = false;  // on_stall: restart (else: alert)

  bool operator==(const WatchdogPolicy&) const = default;
};

struct JobRequest {
  model::JobSpec spec;  // name, team, priority, gang shape, models, cpus, memory, market, ...
  // The command: `run: "python train.py"` becomes {"/bin/sh", "-c", "python train.py"};
  // `run: [python, train.py]` is used as the argv.
  std::vector<std::string> argv;
  std::string workdir;  // empty: the agent's per-job directory
  std::map<std::string, std::string> env;
  std::string user;     // run as this user (agent must be root); empty: the agent's user
  bool process_per_gpu = false;  // start one process per GPU with RANK / LOCAL_RANK set
  // `network: verified`: before a gang's processes start, its nodes run an all-reduce between
  // them (scripts/burnin.py allreduce); a gang whose nodes cannot reach each other fails to start
  // with the reason instead of hanging in its own rendezvous (docs/nodes.md).
  bool verify_network = false;
  CheckpointPolicy checkpoint;
  RestartPolicy restart;
  WatchdogPolicy watchdog;
  // Cost (src/cost/, docs/cost.md): the estimate's GPU, speed hints, deadline, hourly cap,
  // regions and clouds. The whole-job cap, max_cost, is the scheduler's and lives in spec.
  model::JobCostHints cost;
  // Array jobs: the parameter values of this element ({"lr": "0.1"}); empty for plain jobs.
  std::map<std::string, std::string> array_params;

  bool operator==(const JobRequest&) const = default;
};

}  // namespace gpufleet::api
