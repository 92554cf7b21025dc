// The job file: what `gpufleet submit job.yaml` reads and what POST /v1/jobs accepts (the same
// schema as JSON). One strict validator for both: an unknown field, a wrong type or an absurd
// amount is an error that names the source, line, column and field, and suggests the fix.
//
//   name: resnet50                 # letters, digits, '-', '_', '.'; default "job"
//   team: vision                   # default "default"
//   priority: 10                   # -1000 .. 1000, larger runs first under the priority policy
//   resources:
//     gpus: 4                      # per node; 0 for CPU-only; 0.25 for a quarter of one GPU
//     gpu_type: [H100, A100-80GB]  # any of, first preferred; a single name is fine too
//     nodes: 2                     # a gang: all nodes start together or not at all
//     cpus: 16                     # per node (0.5 allowed)
//     memory: 64Gi                 # per node: Mi, Gi, Ti (or M, G, T); a plain number is MiB
//   run: python3 train.py --epochs 3   # a shell command, or a list used as argv
//   workdir: /data/runs            # default: a directory the agent makes for the job
//   env: {BATCH: "256"}
//   user: alice                    # run as this user (agent runs as root)
//   environment: pytorch-2.5-cu124 # a preset of data/environments.yaml (`gpufleet environments`):
//                                  # placed only on nodes whose driver and GPUs can run it
//   process_per_gpu: false         # true: one process per GPU with RANK and LOCAL_RANK
//   market: any                    # any | spot | on-demand (on-demand never lands on spot)
//   estimate: 10h on A100          # expected runtime (on a GPU model; default the reference, A100)
//   profile: compute               # compute | memory | balanced: how speed scales across GPUs
//   workload: training-vision      # a class of data/gpu_speeds.csv (`select` ranks with its speeds)
//   step_time: {A100: 0.42s, H100: 0.23s}   # measured time per step: overrides the speed tables
//   deadline: 24h                  # finish within this long after submission
//   max_hourly_cost: 40            # dollars per hour
//   max_cost: 300                  # dollars for the whole job
//   regions: ["europe-*"]          # where it may run (globs on region or zone)
//   clouds: [gcp, aws]             # which clouds `select` and the pool may rent it on
//   constraints: {gdpr: "true"}    # node labels required
//   checkpoint: {dir: /ckpt, signal: SIGTERM, grace: 60s, interval: 30m, restart_overhead: 5m}
//   restart: {on_preemption: true, max_restarts_on_errors: 2, recover_on_exit_codes: [75]}
//   array:                         # a sweep: one job per combination (cartesian product)
//     lr: [0.1, 0.01]
//     batch: [32, 64]
//
// In an array, "{{lr}}" in name, run, workdir and env values is replaced by the element's value;
// each element also gets GPUFLEET_ARRAY_INDEX and GPUFLEET_PARAM_<NAME> in its environment.
// A file may hold several jobs as YAML documents separated by '---'.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/job_request.h"
#include "common/status.h"
#include "model/gpu_catalog.h"
#include "model/gpu_speeds.h"

namespace gpufleet::api {

// The most jobs one submission may hold (the elements of its arrays, the documents of its file).
inline constexpr int kMaxArrayJobs = 100000;

struct JobParseOptions {
  std::string source = "job.yaml";  // named in errors: "job.yaml:7:3: resources.gpus: ..."
  const model::GpuCatalog* catalog = nullptr;  // nullptr: the built-in catalog
  // `select` prices a job that has no command yet, but cannot price one without an estimate.
  bool require_run = true;
  bool require_estimate = false;
  // When given, `workload:` must be one of its classes; otherwise only its shape is checked.
  const model::GpuSpeeds* speeds = nullptr;
  // The team of a job that names none (the controller passes its submitter's team).
  std::string default_team = "default";
  // When given, checks an `environment:` name against the presets that decide (the controller's
  // table); its error is reported at the field's line and column.
  std::function<Status(const std::string&)> check_environment{};
};

// Parses every job of `text` (YAML or JSON), expanding arrays. Errors name source:line:column and
// the field path. Nothing is returned unless everything is valid.
Result<std::vector<JobRequest>> ParseJobs(std::string_view text, const JobParseOptions& options = {});

// The job in the file schema above (arrays already expanded: no `array` field), for the CLI to
// send and for `gpufleet status` to show. ParseJobs(ToJobJson(r).dump()) gives `r` back, except
// for an array element's parameters (its GPUFLEET_* variables are left out).
nlohmann::json ToJobJson(const JobRequest& request);

// "64Gi" -> 65536 MiB; "512Mi", "1.5Ti", "2G", plain numbers are MiB.
Result<int64_t> ParseMemoryMib(std::string_view s);
// "SIGTERM", "TERM", "15" -> 15; only signals a job may ask for (not KILL/STOP).
Result<int> ParseSignal(std::string_view s);
std::string SignalName(int sig);
// Whether `s` may name a team, a job or a node: 1-128 letters, digits, '-', '_' or '.'.
bool ValidTeamName(const std::string& s);
// The same as a Status: InvalidArgument "FIELD: use 1-128 letters, ... got 'VALUE'" if not.
Status CheckName(const std::string& field, const std::string& value);
// A node's name: 1-253 letters, digits, '.', '_' or '-' (a host name; what the node routes carry).
bool ValidNodeName(const std::string& name);
// Dollars ("40", "12.5", "$3.20") -> micro-dollars.
Result<int64_t> ParseDollars(std::string_view s);

}  // namespace gpufleet::api
