// The policy name table: `--policy NAME [--policy-opt k=v ...]` in the simulator and the
// controller's config both come here, so both worlds build identical policies from one string.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "sched/policy.h"

namespace gpufleet::sched {

// What one policy owns of the options: the keys only it takes (aging, thresholds, ...), read by
// its factory; the options every policy takes are read by MakePolicies.
using PolicyOptions = std::map<std::string, std::string>;

struct PolicyInfo {
  std::string name;
  std::string help;     // one line
  std::string options;  // "aging=DURATION preempt=BOOL"
  // The keys of `options` this policy reads itself ("aging"), passed to `make`; any other key
  // that is not one every policy takes is an error naming the known ones.
  std::vector<std::string> own_keys;
  // Builds the queue policy from its own options (only those in own_keys); errors name the bad
  // value. Never null.
  Result<std::unique_ptr<QueuePolicy>> (*make)(const PolicyOptions& own) = nullptr;
  // The backfill the policy runs with unless backfill= says otherwise; unset: the queue
  // policy's DefaultBackfill().
  std::optional<BackfillMode> backfill;
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
