// The client commands: talk to a running controller over its HTTP API (docs/api.md).
//
//   submit job.yaml          run [flags] -- CMD ARGS...     queue          status JOB
//   logs [-f] JOB            cancel JOB...                  explain JOB    nodes
//   history                  token create                   drain NODE     undrain NODE
//   cost                     budget TEAM                    pool
//   controllers
//
// Each takes --server and --token (else GPUFLEET_SERVER / GPUFLEET_TOKEN, else the config file,
// see client_config.h); listings and shows take -o table|json. Exit codes (client.h): 0 ok,
// 1 the operation failed, 2 usage error or bad input, 3 cannot reach the controller or the
// token was refused.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace gpufleet::cli {

// Each adds its subcommand to `app`; the returned function runs it after parsing and gives the
// exit code.
std::function<int()> SetupSubmitCommand(CLI::App& app);
std::function<int()> SetupRunCommand(CLI::App& app);
std::function<int()> SetupQueueCommand(CLI::App& app);
std::function<int()> SetupStatusCommand(CLI::App& app);
std::function<int()> SetupLogsCommand(CLI::App& app);
std::function<int()> SetupCancelCommand(CLI::App& app);
std::function<int()> SetupExplainCommand(CLI::App& app);
std::function<int()> SetupNodesCommand(CLI::App& app);
std::function<int()> SetupNodeCommand(CLI::App& app);
std::function<int()> SetupPoolCommand(CLI::App& app);
std::function<int()> SetupControllersCommand(CLI::App& app);
std::function<int()> SetupHistoryCommand(CLI::App& app);
std::function<int()> SetupTokenCommand(CLI::App& app);
std::function<int()> SetupAuditCommand(CLI::App& app);
std::function<int()> SetupCostCommand(CLI::App& app);
std::function<int()> SetupBudgetCommand(CLI::App& app);
std::function<int()> SetupQuotaCommand(CLI::App& app);
std::function<int()> SetupAlertsCommand(CLI::App& app);
std::function<int()> SetupDrainCommand(CLI::App& app);
std::function<int()> SetupUndrainCommand(CLI::App& app);

}  // namespace gpufleet::cli
