// `gpufleet plan` with the live cluster:
//   --from-cluster  plans from the controller's own history (the jobs `gpufleet history -o jsonl`
//                   exports, fetched by the same code: cluster_history.h), over the last --since;
//   --apply FILE    writes the recommended plan as the pool file `gpufleet server --pool FILE`
//                   runs (controller::LoadPoolConfig reads it; it is checked with that parser
//                   before it is written, atomically, never over a file without --force).
//
// The pool file: the plan's on-demand and spot node types as offers (the plan's cloud, region,
// instance type and prices per node-hour); its reserved nodes as `min_nodes` (a reservation is
// a discount on instances of that type, so the pool keeps that many of its nodes once rented);
// max_nodes and max_gpus from the history's busiest hour plus a quarter; idle release and boot
// estimate as the replay assumed. The provider is the local one (fake-GPU agents on this
// machine, to try the plan) unless --pool-provider takes the provider: mapping of another pool
// file (the exec scripts of your cloud).
//
// Thread-safety: functions over values; the Check/Read/Apply functions print to stderr.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "common/status.h"
#include "common/time.h"
#include "plan/planner.h"
#include "sim/trace.h"

namespace gpufleet::cli {

struct PlanClusterArgs {
  bool from_cluster = false;
  std::string server;  // --server/--token, else GPUFLEET_SERVER/GPUFLEET_TOKEN, else the config file
  std::string token;
  std::string since;   // "4w": only jobs submitted in the last four weeks, counted up to now
  std::string team;
  std::string apply;   // the pool file to write
  bool force = false;
  std::string pool_provider;  // a pool file whose provider: mapping the written file uses
};

// Adds --from-cluster, --server, --token, --since, --team, --apply, --force, --pool-provider.
void AddPlanClusterFlags(CLI::App* sub, PlanClusterArgs& args);

// The checks that need neither the controller nor a plan, run before either: one source
// (--trace or --from-cluster), the connection flags only with the latter, --since, and --apply's
// path (its folder exists; no file there unless --force) and --pool-provider. 0, or the exit code
// after printing why.
// `inputs`: the files the command reads (flag, path; empty paths are skipped), which --apply
// must not name.
int CheckPlanClusterFlags(const PlanClusterArgs& args, bool has_trace,
                          const std::vector<std::pair<std::string, std::string>>& inputs = {});

// The controller's history as a trace, and the window to plan it over: [now - since, now), or
// from the first job to now. `window_from_flags`: --from was given (it wins over --since, and
// the planner checks the span). On failure, the exit code after printing why (3: unreachable or
// the token refused; 2: no finished jobs, or under a week of history; 1: a broken answer).
struct ClusterHistory {
  int exit_code = 0;
  sim::Trace trace;
  std::optional<Time> from;
  Time to;
  std::string source;  // "the cluster at http://...", for the report
};
ClusterHistory ReadClusterHistory(const PlanClusterArgs& args, bool window_from_flags);

struct PoolFileOptions {
  std::string source;         // what the plan was made from, for the file's header
  std::string pool_provider;  // see PlanClusterArgs
  std::string written_to;     // the path, for the header's "run it" line
  Time now;                   // for the header
};

// The recommended replay as a pool file (YAML text): the recommendation, else, when the plan
// was not verified, the optimiser's plan. FailedPrecondition when it was verified and nothing met
// the SLO; InvalidArgument when --pool-provider cannot be used.
Result<std::string> PoolFileText(const plan::PlannerReport& report, const plan::PlannerOptions& options,
                                 const PoolFileOptions& file);

// Parses `text` as the server would (controller::ParsePoolConfig), then writes it to `path`
// atomically: a temporary file in the same folder, then a rename (with `force`) or a link that
// fails if a file appeared there. Nothing is left behind on failure.
Status WritePoolFile(const std::string& path, const std::string& text, bool force);

// --apply: PoolFileText, WritePoolFile and a note of what was written and how to run it. The exit code.
int ApplyPlan(const PlanClusterArgs& args, const plan::PlannerReport& report, const plan::PlannerOptions& options,
              const std::string& source);

}  // namespace gpufleet::cli
