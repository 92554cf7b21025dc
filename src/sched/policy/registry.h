// The policy name table: `--policy NAME [--policy-opt k=v ...]` in the simulator and the
// controller's config both come here, so both worlds build identical policies from one string.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "sched/policy.h"

namespace gpufleet::sched {

struct PolicyInfo {
  std::string name;
  std::string help;     // one line
  std::string options;  // "aging=DURATION preempt=BOOL"
};

// Every queue policy, in the order `--help` lists them.
const std::vector<PolicyInfo>& PolicyTable();

struct PolicyConfig {
  Policies policies;
  std::map<std::string, int64_t> team_quota_gpus;  // from quota.<team>=N options
};

// Builds the policies for `name` with options. Options any policy takes: backfill=off|easy|greedy,
// preempt=true|false, max_preempt_attempts=N, min_run=DURATION, victims=least-work-lost|worst-rank,
// hot=C and fit=best|first (placement), quota.<team>=GPUS.
// Unknown names and options are errors that list the valid ones.
Result<PolicyConfig> MakePolicies(const std::string& name, const std::map<std::string, std::string>& options);

// Parses "k=v" strings (as given on the command line) into a map; errors name the bad item.
Result<std::map<std::string, std::string>> ParsePolicyOptions(const std::vector<std::string>& items);

}  // namespace gpufleet::sched
