// Backups of a store while a controller may be writing to it (`gpufleet backup`).
//
// SQLite: SQLite's online backup API copies the database page by page into a new file; the copy
// is one consistent snapshot even while the controller commits (docs/operations.md). PostgreSQL:
// pg_dump in its custom format (one consistent snapshot; restore with pg_restore). Either way the
// copy is checked before the call returns: the SQLite copy passes `PRAGMA integrity_check` and
// its jobs are counted; the dump is listed by `pg_restore --list`.
//
// Thread-safety: the functions are safe to call from any thread.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "store/state_store.h"

namespace gpufleet::store {

struct BackupReport {
  std::string method;       // "SQLite online backup", "pg_dump (custom format)"
  int64_t bytes = 0;        // the copy's size
  int64_t jobs = -1;        // jobs in the copy; -1 when not counted (a dump)
  int64_t tables = -1;      // tables the copy holds (of a dump: those with data)
  int schema_version = 0;   // the copy's schema version; 0 when not read (a dump)
};

// Copies the store at `where` to `dest`, a new file: an existing `dest` is refused
// (FailedPrecondition) and left alone, and a failed copy leaves no file behind. The copy is
// written to `dest`.partial and renamed to `dest` once checked (an interrupted backup leaves only
// the .partial file, which the next backup to that name refuses to touch). A SQLite copy must
// hold a schema version a controller reads.
Result<BackupReport> BackupStore(const StoreLocation& where, const std::string& dest);

struct RestoreReport {
  BackupReport copy;     // what was put in place (jobs, schema version, bytes)
  std::string set_aside;  // where the store it replaced now is (its -wal beside it); empty: none
};

// Puts the SQLite backup `backup` in place of the store `store_path` while no controller uses
// it: refuses (FailedPrecondition) while one holds the store's lock or `lock_path` (a data
// directory's controller.lock; empty: none), and refuses a backup that is not a gpufleet store,
// fails its integrity check, or has a schema newer than this gpufleet knows, changing nothing.
// The copy is made and checked as `store_path`.partial first (owned as the store it replaces
// when run as root); only then is the store set aside, with its -wal, -shm and -journal, as
// `store_path`.before-restore-STAMP (`stamp`, e.g. "20261207T171500Z"), never deleted (SQLite
// would otherwise replay an old write-ahead log over the restored file), and the copy renamed
// into place. A restore that fails leaves the store as it was.
Result<RestoreReport> RestoreSqliteStore(const std::string& backup, const std::string& store_path,
                                         const std::string& stamp, const std::string& lock_path = "");

// The path of a PostgreSQL client program (pg_dump, pg_restore): in $GPUFLEET_PG_BINDIR, else the
// newest /usr/lib/postgresql/*/bin (Debian's packages), else on PATH. NotFound saying where it
// looked and which package installs it.
Result<std::string> FindPostgresProgram(const std::string& name);

}  // namespace gpufleet::store
