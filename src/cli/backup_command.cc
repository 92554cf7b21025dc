#include "cli/backup_command.h"

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/exit_codes.h"
#include "common/time.h"
#include "store/backup.h"
#include "store/state_store.h"

namespace gpufleet::cli {

namespace {

// The store `--data-dir DIR` (its state.db) or `--store` names, one of them; else says what is
// wrong ("gpufleet CMD: ...") and gives nothing.
std::optional<store::StoreLocation> StoreFromFlags(const char* cmd, const std::string& data_dir,
                                                   const std::string& store) {
  if (!store.empty() && !data_dir.empty()) {
    std::fprintf(stderr, "gpufleet %s: give --data-dir or --store, not both\n", cmd);
    return std::nullopt;
  }
  if (!store.empty()) {
    auto parsed = store::ParseStoreLocation(store);
    if (!parsed.ok()) {
      std::fprintf(stderr, "gpufleet %s: --store '%s': %s\n", cmd, store.c_str(), parsed.status().message().c_str());
      return std::nullopt;
    }
    return *parsed;
  }
  if (!data_dir.empty()) return store::StoreLocation{store::StoreLocation::Engine::kSqlite, data_dir + "/state.db"};
  std::fprintf(stderr,
               "gpufleet %s: which store? give --data-dir DIR (the controller's, e.g. ~/.local/share/gpufleet/server) "
               "or --store as the controller is started with\n",
               cmd);
  return std::nullopt;
}

}  // namespace

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
    auto where = StoreFromFlags("backup", a->data_dir, a->store);
    if (!where) return kExitUsage;
    auto r = store::BackupStore(*where, a->dest);
    if (!r.ok()) {
      std::fprintf(stderr, "gpufleet backup: %s\n", r.status().message().c_str());
      return r.status().code() == StatusCode::kFailedPrecondition ? kExitUsage : kExitFailed;
    }
    if (a->output == "json") {
      // A count the method does not give (jobs of a dump, tables of a SQLite copy) is null, not -1.
      auto count = [](int64_t n) { return n >= 0 ? nlohmann::json(n) : nlohmann::json(nullptr); };
      nlohmann::json j = {{"file", a->dest},  {"store", store::Redacted(*where)}, {"method", r->method},
                          {"bytes", r->bytes}, {"jobs", count(r->jobs)},         {"tables", count(r->tables)},
                          {"schema_version", r->schema_version > 0 ? nlohmann::json(r->schema_version)
                                                                   : nlohmann::json(nullptr)}};
      std::printf("%s\n", j.dump(2).c_str());
      return kExitOk;
    }
    std::printf("backed up %s to %s (%s, %lld bytes", store::Redacted(*where).c_str(), a->dest.c_str(),
                r->method.c_str(), static_cast<long long>(r->bytes));
    if (r->jobs >= 0) std::printf(", %lld jobs, schema version %d", static_cast<long long>(r->jobs), r->schema_version);
    if (r->tables >= 0) std::printf(", %lld tables", static_cast<long long>(r->tables));
    std::printf("; checked)\n");
    return kExitOk;
  };
}

std::function<int()> SetupRestoreCommand(CLI::App& app) {
  struct Args {
    std::string data_dir;
    std::string store;
    std::string backup;
    std::string output = "text";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "restore", "Put a SQLite backup in place of a stopped controller's store (the old one is kept aside)");
  sub->add_option("file", a->backup, "The backup to restore: a file `gpufleet backup` wrote")->required();
  sub->add_option("--data-dir", a->data_dir, "The controller's data directory: its store is state.db there");
  sub->add_option("--store", a->store, "The store as `gpufleet server --store` names it: sqlite:PATH");
  sub->add_option("-o,--output", a->output, "text or json")->transform(CLI::Transformer(std::map<std::string, std::string>{{"table", "text"}}))->check(CLI::IsMember({"text", "json"}));
  sub->footer(R"(Examples:
  gpufleet restore --data-dir /var/lib/gpufleet /backups/state-2026-12-04.db
  gpufleet restore --store sqlite:/srv/gpufleet/state.db /backups/state-2026-12-04.db -o json
Stop the controller first: a restore is refused while one uses the store. The backup is checked
(integrity, jobs, a schema version this gpufleet opens) before anything changes. The store it
replaces is kept as state.db.before-restore-STAMP (its -wal beside it, so that SQLite never replays
an old write-ahead log over the restored file); remove it once the restored controller runs well.
What a restore gives back: docs/operations.md#backup-and-restore. A PostgreSQL dump is restored
with pg_restore into an empty database (the same page).
Exit status: 0 restored, 1 the restore failed (the store is as it was), 2 bad usage or a controller
is running.)");
  return [a]() {
    auto where = StoreFromFlags("restore", a->data_dir, a->store);
    if (!where) return kExitUsage;
    if (where->engine != store::StoreLocation::Engine::kSqlite) {
      std::fprintf(stderr,
                   "gpufleet restore: --store names a PostgreSQL database: restore its dump with pg_restore into an "
                   "empty database, then start the controller on that (docs/operations.md#backup-and-restore)\n");
      return kExitUsage;
    }
    const std::string target = where->target;
    // A stamp by the wall clock, in UTC: names the store set aside.
    const std::string stamp = [] {
      std::string iso = FormatIso8601(WallNow());  // 2026-12-07T17:15:00Z
      std::string out;
      for (char c : iso.substr(0, 19)) {
        if (c != '-' && c != ':') out += c;
      }
      return out + "Z";
    }();
    auto r = store::RestoreSqliteStore(a->backup, target, stamp,
                                       a->data_dir.empty() ? std::string() : a->data_dir + "/controller.lock");
    if (!r.ok()) {
      std::fprintf(stderr, "gpufleet restore: %s\n", r.status().message().c_str());
      return r.status().code() == StatusCode::kFailedPrecondition ? kExitUsage : kExitFailed;
    }
    const bool has_admin = !a->data_dir.empty() && std::filesystem::exists(a->data_dir + "/admin.token");
    if (a->output == "json") {
      nlohmann::json j = {{"file", a->backup},
                          {"store", "sqlite:" + target},
                          {"bytes", r->copy.bytes},
                          {"jobs", r->copy.jobs},
                          {"schema_version", r->copy.schema_version},
                          {"set_aside", r->set_aside.empty() ? nlohmann::json(nullptr) : nlohmann::json(r->set_aside)}};
      std::printf("%s\n", j.dump(2).c_str());
      return kExitOk;
    }
    std::printf("restored %s into sqlite:%s (%lld bytes, %lld jobs, schema version %d; checked)\n", a->backup.c_str(),
                target.c_str(), static_cast<long long>(r->copy.bytes), static_cast<long long>(r->copy.jobs),
                r->copy.schema_version);
    if (!r->set_aside.empty()) {
      std::printf("the store it replaced is kept as %s; remove it once the controller runs well\n", r->set_aside.c_str());
    }
    const std::string flags = a->data_dir.empty() ? "--store sqlite:" + target + " --data-dir DIR" : "--data-dir " + a->data_dir;
    std::printf("next: gpufleet server %s%s\n", flags.c_str(),
                has_admin ? "" : " --new-admin-token   (no admin.token there: make one; agents join with a new join token)");
    return kExitOk;
  };
}

}  // namespace gpufleet::cli
