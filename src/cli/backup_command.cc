#include "cli/backup_command.h"

#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/exit_codes.h"
#include "store/backup.h"
#include "store/state_store.h"

namespace gpufleet::cli {

std::function<int()> SetupBackupCommand(CLI::App& app) {
  struct Args {
    std::string data_dir;
    std::string store;
    std::string dest;
    std::string output = "text";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "backup", "Copy a controller's state to a file while it runs (SQLite online backup, or pg_dump)");
  sub->add_option("file", a->dest, "The copy to write: a new file (an existing one is never overwritten)")
      ->required();
  sub->add_option("--data-dir", a->data_dir, "The controller's data directory: its SQLite store, state.db");
  sub->add_option("--store", a->store, "The store as `gpufleet server --store` names it: sqlite:PATH or postgresql://...");
  sub->add_option("-o,--output", a->output, "text or json")->transform(CLI::Transformer(std::map<std::string, std::string>{{"table", "text"}}))->check(CLI::IsMember({"text", "json"}));
  sub->footer(R"(Examples:
  gpufleet backup --data-dir /var/lib/gpufleet /backups/state-$(date +%F).db
  gpufleet backup --store 'postgresql://gpufleet@db.example/gpufleet' /backups/gpufleet-$(date +%F).dump
The controller keeps running: SQLite's copy is one consistent snapshot taken with its online backup
API and checked (PRAGMA integrity_check, jobs counted); PostgreSQL's is pg_dump's custom format,
listed back with pg_restore. Restore: docs/operations.md#backup-and-restore.
Exit status: 0 written and checked, 1 the copy failed (nothing is left behind), 2 bad usage.)");
  return [a]() {
    store::StoreLocation where;
    if (!a->store.empty() && !a->data_dir.empty()) {
      std::fprintf(stderr, "gpufleet backup: give --data-dir or --store, not both\n");
      return kExitUsage;
    }
    if (!a->store.empty()) {
      auto parsed = store::ParseStoreLocation(a->store);
      if (!parsed.ok()) {
        std::fprintf(stderr, "gpufleet backup: --store '%s': %s\n", a->store.c_str(), parsed.status().message().c_str());
        return kExitUsage;
      }
      where = *parsed;
    } else if (!a->data_dir.empty()) {
      where = {store::StoreLocation::Engine::kSqlite, a->data_dir + "/state.db"};
    } else {
      std::fprintf(stderr,
                   "gpufleet backup: which store? give --data-dir DIR (the controller's, e.g. "
                   "~/.local/share/gpufleet/server) or --store as the controller was started with\n");
      return kExitUsage;
    }
    auto r = store::BackupStore(where, a->dest);
    if (!r.ok()) {
      std::fprintf(stderr, "gpufleet backup: %s\n", r.status().message().c_str());
      return r.status().code() == StatusCode::kFailedPrecondition ? kExitUsage : kExitFailed;
    }
    if (a->output == "json") {
      // A count the method does not give (jobs of a dump, tables of a SQLite copy) is null, not -1.
      auto count = [](int64_t n) { return n >= 0 ? nlohmann::json(n) : nlohmann::json(nullptr); };
      nlohmann::json j = {{"file", a->dest},  {"store", store::Redacted(where)}, {"method", r->method},
                          {"bytes", r->bytes}, {"jobs", count(r->jobs)},         {"tables", count(r->tables)},
                          {"schema_version", r->schema_version > 0 ? nlohmann::json(r->schema_version)
                                                                   : nlohmann::json(nullptr)}};
      std::printf("%s\n", j.dump(2).c_str());
      return kExitOk;
    }
    std::printf("backed up %s to %s (%s, %lld bytes", store::Redacted(where).c_str(), a->dest.c_str(),
                r->method.c_str(), static_cast<long long>(r->bytes));
    if (r->jobs >= 0) std::printf(", %lld jobs, schema version %d", static_cast<long long>(r->jobs), r->schema_version);
    if (r->tables >= 0) std::printf(", %lld tables", static_cast<long long>(r->tables));
    std::printf("; checked)\n");
    return kExitOk;
  };
}

}  // namespace gpufleet::cli
