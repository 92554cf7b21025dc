#include "cli/cli.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cli/backup_command.h"
#include "cli/client_common.h"
#include "cli/client_commands.h"
#include "cli/cluster_commands.h"
#include "cli/cost_commands.h"
#include "cli/environment_commands.h"
#include "cli/plan_command.h"
#include "cli/sim_command.h"
#include "sched/policy/registry.h"

namespace gpufleet::cli {

namespace {
// A command's report that could not be written in full (a full disk, a closed file) is a failure,
// not exit 0 with half a report: exit 1 unless the command failed already. (A reader that went
// away, `| head`, is no failure of the command's: no message, its exit code stands.)
int FinishOutput(const std::string& cmd, int rc) {
  errno = 0;
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) != 0;
  if (!failed || errno == EPIPE) return rc;
  const int err = errno;
  std::fprintf(stderr, "gpufleet %s: could not write the output to standard output%s\n", cmd.c_str(),
               err != 0 ? (std::string(" (") + std::strerror(err) + ")").c_str() : "");
  return rc == 0 ? 1 : rc;
}

constexpr const char* kVersion = kGpufleetVersion;

std::function<int()> SetupPolicies(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("policies", "List the scheduling policies and their options");
  auto json = std::make_shared<std::string>("text");
  sub->add_option("-o,--output", *json, "text or json")->transform(CLI::Transformer(std::map<std::string, std::string>{{"table", "text"}}))->capture_default_str();
  sub->footer(R"(Examples:
  gpufleet policies
  gpufleet policies -o json     # [{name, help, options, common_options}, ...]
  gpufleet sim --trace data/traces/philly/philly.csv --cluster-gpus 480 --policy las --policy-opt min_run=30m)");
  return [json]() {
    const auto& table = sched::PolicyTable();
    // The options every policy takes (sched::MakePolicies reads them).
    static constexpr const char* kCommon =
        "backfill=off|easy|greedy preempt=true|false min_run=DURATION max_preempt_attempts=N hot=C quota.TEAM=GPUS "
        "victims=least-work-lost|worst-rank fit=best|first";
    if (*json == "json") {
      nlohmann::ordered_json arr = nlohmann::ordered_json::array();
      for (const auto& p : table) {
        arr.push_back({{"name", p.name}, {"help", p.help}, {"options", p.options}, {"common_options", kCommon}});
      }
      std::printf("%s\n", arr.dump(2).c_str());
      return 0;
    }
    if (*json != "text") {
      std::fprintf(stderr, "gpufleet policies: -o must be text or json\n");
      return 2;
    }
    for (const auto& p : table) {
      std::printf("%-11s %s\n", p.name.c_str(), p.help.c_str());
      if (!p.options.empty()) std::printf("%-11s   options: %s\n", "", p.options.c_str());
    }
    std::printf("\nEvery policy also takes: backfill=off|easy|greedy preempt=true|false min_run=DURATION\n"
                "  max_preempt_attempts=N hot=C quota.TEAM=GPUS victims=least-work-lost|worst-rank fit=best|first\n"
                "(docs/policies.md says what each does, and which replay a published simulator's rules)\n");
    return 0;
  };
}

std::function<int()> SetupVersion(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("version", "Print the version (also: gpufleet --version)");
  sub->footer("Examples:\n  gpufleet version\n  gpufleet --version");
  return []() {
    std::printf("gpufleet %s\n", kVersion);
    return 0;
  };
}

// The subcommand table: {name, setup}. Help text lives with each command.
struct Command {
  const char* name;
  std::function<std::function<int()>(CLI::App&)> setup;
};

const std::vector<Command>& Commands() {
  static const std::vector<Command> table = {
      {"dev", SetupDevCommand},
      {"server", SetupServerCommand},
      {"agent", SetupAgentCommand},
      {"sim", SetupSimCommand},
      {"plan", SetupPlanCommand},
      {"offers", SetupOffersCommand},
      {"select", SetupSelectCommand},
      {"environments", SetupEnvironmentsCommand},
      {"submit", SetupSubmitCommand},
      {"run", SetupRunCommand},
      {"cost", SetupCostCommand},
      {"budget", SetupBudgetCommand},
      {"quota", SetupQuotaCommand},
      {"alerts", SetupAlertsCommand},
      {"queue", SetupQueueCommand},
      {"status", SetupStatusCommand},
      {"logs", SetupLogsCommand},
      {"cancel", SetupCancelCommand},
      {"explain", SetupExplainCommand},
      {"nodes", SetupNodesCommand},
      {"node", SetupNodeCommand},
      {"pool", SetupPoolCommand},
      {"controllers", SetupControllersCommand},
      {"history", SetupHistoryCommand},
      {"token", SetupTokenCommand},
      {"audit", SetupAuditCommand},
      {"backup", SetupBackupCommand},
      {"restore", SetupRestoreCommand},
      {"drain", SetupDrainCommand},
      {"undrain", SetupUndrainCommand},
      {"policies", SetupPolicies},
      {"version", SetupVersion},
  };
  return table;
}

}  // namespace

int Main(int argc, char** argv) {
  CLI::App app{"gpufleet: a cost-aware GPU training cluster.\n"
               "Schedules training jobs (multi-node gangs included) on rented GPU servers, and replays\n"
               "job histories through the same scheduler to compare policies."};
  app.require_subcommand(1);
  app.fallthrough(false);
  app.footer(R"(Examples:
  gpufleet dev                                  # a whole cluster on this machine (fake GPUs)
  gpufleet run --gpus 1 -f -- sh -c 'echo hello on GPUs $CUDA_VISIBLE_DEVICES'
  gpufleet submit train.yaml; gpufleet queue; gpufleet logs -f 1; gpufleet explain 2
  gpufleet sim --trace data/traces/philly/philly.csv --cluster-gpus 480 --compare fifo,backfill,las
  gpufleet sim --trace data/traces/tiresias/60_job.csv --cluster examples/clusters/small-h100.yaml -o json
  gpufleet policies

Run 'gpufleet COMMAND --help' for a command's options and more examples.)");
  app.set_version_flag("--version", std::string("gpufleet ") + kVersion, "Print the version and exit");
  // CLI11 quotes the words it did not expect; one of them may be a token (a value given to a
  // flag that does not take one): never print a secret back.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return client::RedactSecrets(e.what()) + "\nRun with --help for more information.\n";
  });
  std::map<std::string, std::function<int()>> runners;
  for (const auto& c : Commands()) runners[c.name] = c.setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return FinishOutput("help", app.exit(e));
  } catch (const CLI::CallForAllHelp& e) {
    return FinishOutput("help", app.exit(e));
  } catch (const CLI::CallForVersion& e) {
    return FinishOutput("version", app.exit(e));
  } catch (const CLI::ParseError& e) {
    // An unknown first word reads better as "unknown command" than CLI11's generic message.
    if (argc > 1 && argv[1][0] != '-' && !runners.count(argv[1])) {
      std::string names;
      for (const auto& c : Commands()) names += std::string(names.empty() ? "" : ", ") + c.name;
      std::fprintf(stderr, "gpufleet: unknown command '%s' (commands: %s)\n",
                   client::RedactSecrets(client::Printable(argv[1])).c_str(), names.c_str());
      return 2;
    }
    // Flags come after the command: "gpufleet --server URL queue" says so.
    if (argc > 1 && argv[1][0] == '-') {
      for (int i = 2; i < argc; ++i) {
        if (argv[i][0] != '-' && runners.count(argv[i])) {
          std::fprintf(stderr, "gpufleet: %s goes after the command: gpufleet %s %s ...\n",
                       client::RedactSecrets(client::Printable(argv[1])).c_str(), argv[i],
                       client::RedactSecrets(client::Printable(argv[1])).c_str());
          return 2;
        }
      }
    }
    // ... and so does an unknown word after a command that has subcommands (gpufleet token lst).
    if (argc > 2 && argv[1][0] != '-' && runners.count(argv[1]) && argv[2][0] != '-') {
      const CLI::App* group = app.get_subcommand(argv[1]);
      if (group->get_require_subcommand_min() > 0 && group->get_subcommands(nullptr).size() > 0) {
        bool known = false;
        std::string names;
        for (const CLI::App* s : group->get_subcommands(nullptr)) {
          known = known || s->check_name(argv[2]);
          names += std::string(names.empty() ? "" : ", ") + s->get_name();
        }
        if (!known) {
          std::fprintf(stderr, "gpufleet %s: unknown subcommand '%s' (subcommands: %s)\n", argv[1],
                       client::RedactSecrets(client::Printable(argv[2])).c_str(), names.c_str());
          return 2;
        }
      }
    }
    // `gpufleet run` whose command was not put after `--`: its own flags (echo -n) or flags given
    // after it were read as run's. Say where the command goes.
    if (argc > 1 && std::string_view(argv[1]) == "run") {
      // Where the command begins: the first word that is no flag of run's and no flag's value.
      // Only a flag after it (its own, or one of run's given late) gets the hint; a mistyped flag
      // of run's before it (--gpuz) keeps CLI11's own message.
      const CLI::App* run = app.get_subcommand("run");
      bool dashes = false, flag_after_command = false;
      int command_at = 0;
      for (int i = 2; i < argc && !dashes; ++i) {
        const std::string_view word = argv[i];
        dashes = word == "--";
        if (dashes) break;
        if (command_at > 0) {
          flag_after_command = flag_after_command || (word.size() > 1 && word[0] == '-');
          continue;
        }
        if (word.size() > 1 && word[0] == '-') continue;
        const std::string before = argv[i - 1];
        const CLI::Option* opt = before.size() > 1 && before[0] == '-' && before.find('=') == std::string::npos
                                     ? run->get_option_no_throw(before)
                                     : nullptr;
        if (opt != nullptr && opt->get_type_size() > 0) continue;  // the value of a flag of run's
        command_at = i;
      }
      if (!dashes && flag_after_command) {
        std::fprintf(stderr,
                     "gpufleet run: %s\nPut the command after --, its flags and all: gpufleet run [flags] -- CMD "
                     "ARGS... (e.g. gpufleet run --gpus 0 -- echo -n hi)\n",
                     client::RedactSecrets(e.what()).c_str());
        return 2;
      }
    }
    app.exit(e);
    return 2;
  }
  for (CLI::App* sub : app.get_subcommands()) {
    auto it = runners.find(sub->get_name());
    if (it != runners.end()) return FinishOutput(sub->get_name(), it->second());
  }
  return 2;
}

}  // namespace gpufleet::cli
