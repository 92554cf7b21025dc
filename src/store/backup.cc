// Backups of a store (backup.h): SQLite's online backup API, or pg_dump.
#include "store/backup.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "common/fd.h"
#include "common/process.h"
#include "store/schema_version.h"

namespace gpufleet::store {
namespace {

namespace fs = std::filesystem;

bool IsProgram(const fs::path& p) { return ::access(p.c_str(), X_OK) == 0; }

std::string Tail(const std::string& text, size_t max = 1500) {
  return text.size() <= max ? text : "..." + text.substr(text.size() - max);
}

// Closes a connection when it goes out of scope.
struct Db {
  sqlite3* db = nullptr;
  ~Db() { sqlite3_close(db); }
  std::string Error() const { return db != nullptr ? sqlite3_errmsg(db) : "out of memory"; }
};

// One text value of a query with no parameters, or an error.
Result<std::string> QueryText(sqlite3* db, const char* sql) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) != SQLITE_OK) return Status::Internal(sqlite3_errmsg(db));
  std::string out;
  const int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW && sqlite3_column_text(st, 0) != nullptr) {
    out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Status::Internal(sqlite3_errmsg(db));
  return out;
}

// "file:PATH?immutable=1": a database file nobody writes (a backup), opened without a lock or a
// -wal/-shm beside it (a copy of a store carries its write-ahead-log flag), also on read-only
// storage. '%', '?' and '#' in the path are escaped as a URI needs.
std::string ImmutableUri(const std::string& path) {
  std::string uri = "file:";
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
      uri += buf;
    } else {
      uri += c;
    }
  }
  return uri + "?immutable=1";
}

// `immutable_source`: the source is a backup file, not a live store (ImmutableUri).
Result<BackupReport> BackupSqlite(const std::string& source, const std::string& dest, bool immutable_source = false) {
  Db from;
  // Read-only: a backup never changes the source, and does not create one that is missing.
  const int opened = immutable_source ? sqlite3_open_v2(ImmutableUri(source).c_str(), &from.db,
                                                        SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr)
                                      : sqlite3_open_v2(source.c_str(), &from.db, SQLITE_OPEN_READONLY, nullptr);
  if (opened != SQLITE_OK) {
    return Status::Unavailable(source + ": cannot open the database: " + from.Error());
  }
  sqlite3_busy_timeout(from.db, 5000);
  Db to;
  if (sqlite3_open_v2(dest.c_str(), &to.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK) {
    return Status::Unavailable(dest + ": cannot create the copy: " + to.Error());
  }
  sqlite3_backup* b = sqlite3_backup_init(to.db, "main", from.db, "main");
  if (b == nullptr) return Status::Internal(dest + ": cannot start the backup: " + to.Error());
  // All pages in one step: a writer that commits meanwhile waits for the busy timeout at most,
  // and the copy is one snapshot. A busy or locked source is tried again a few times.
  int rc = SQLITE_OK;
  for (int attempt = 0; attempt < 20; ++attempt) {
    rc = sqlite3_backup_step(b, -1);
    if (rc != SQLITE_BUSY && rc != SQLITE_LOCKED) break;
    sqlite3_sleep(100);
  }
  sqlite3_backup_finish(b);
  if (rc != SQLITE_DONE) {
    const std::string why = sqlite3_errstr(rc), detail = to.Error();
    return Status::Unavailable(source + ": the backup did not finish: " + why +
                               (detail == why || detail == "not an error" ? "" : " (" + detail + ")"));
  }
  // One file, whatever the store's journal: the copy of a store in WAL mode is marked as one, and
  // opening it (to check it, to restore it) would make -wal and -shm files beside it, or fail on
  // read-only storage. A controller that opens it as its store turns WAL on again.
  if (auto mode = QueryText(to.db, "PRAGMA journal_mode=DELETE"); !mode.ok() || *mode != "delete") {
    return Status::Internal(dest + ": cannot make the copy one file (journal_mode=DELETE): " +
                            (mode.ok() ? *mode : mode.status().message()));
  }
  GF_ASSIGN_OR_RETURN(std::string integrity, QueryText(to.db, "PRAGMA integrity_check"));
  if (integrity != "ok") return Status::Internal(dest + ": the copy fails its integrity check: " + integrity);
  BackupReport r;
  r.method = "SQLite online backup";
  auto jobs = QueryText(to.db, "SELECT count(*) FROM jobs");
  // Schema 7 and later: the tasks of arrays stored once that have no row of their own yet.
  if (jobs.ok()) {
    auto in_arrays = QueryText(to.db,
                               "SELECT COALESCE(SUM(last_id - first_id + 1), 0) - (SELECT count(*) FROM jobs j "
                               "JOIN job_arrays a ON j.id BETWEEN a.first_id AND a.last_id) FROM job_arrays");
    if (in_arrays.ok()) jobs = std::to_string(std::atoll(jobs->c_str()) + std::atoll(in_arrays->c_str()));
  }
  if (!jobs.ok()) {
    return Status::InvalidArgument(source + " holds no gpufleet state (no jobs table): " + jobs.status().message());
  }
  r.jobs = std::atoll(jobs->c_str());
  // A copy a controller would not open is no backup: its schema version must be there and read
  // as the store reads it.
  auto version = QueryText(to.db, "SELECT value FROM meta WHERE key = 'schema_version'");
  if (!version.ok() || version->empty()) {
    return Status::InvalidArgument(source + " has no schema_version in its meta table" +
                                   (version.ok() ? std::string() : " (" + version.status().message() + ")") +
                                   ": a controller would not open a copy of it");
  }
  auto parsed = ParseSchemaVersion(*version, source);
  if (!parsed.ok()) return Status::InvalidArgument(parsed.status().message() + ": a controller would not open a copy of it");
  r.schema_version = *parsed;
  auto tables = QueryText(to.db, "SELECT count(*) FROM sqlite_master WHERE type = 'table'");
  if (tables.ok()) r.tables = std::atoll(tables->c_str());
  return r;
}

Result<BackupReport> BackupPostgres(const std::string& url, const std::string& dest) {
  GF_ASSIGN_OR_RETURN(std::string pg_dump, FindPostgresProgram("pg_dump"));
  GF_ASSIGN_OR_RETURN(std::string pg_restore, FindPostgresProgram("pg_restore"));
  CommandOptions o;
  o.timeout = Duration::Hours(6);
  GF_ASSIGN_OR_RETURN(CommandResult dump,
                      RunCommand({pg_dump, "--format=custom", "--file=" + dest, "--dbname=" + url}, o));
  if (!dump.ok()) {
    return Status::Unavailable("pg_dump " + dump.Describe(o.timeout) + ": " + Tail(dump.stderr_text));
  }
  CommandOptions l;
  l.timeout = Duration::Minutes(10);
  GF_ASSIGN_OR_RETURN(CommandResult list, RunCommand({pg_restore, "--list", dest}, l));
  if (!list.ok()) {
    return Status::Internal("the dump cannot be read back: pg_restore --list " + list.Describe(l.timeout) + ": " +
                            Tail(list.stderr_text));
  }
  BackupReport r;
  r.method = "pg_dump (custom format)";
  r.tables = 0;
  bool jobs = false;
  std::istringstream lines(list.stdout_text);
  for (std::string line; std::getline(lines, line);) {
    // "215; 0 16390 TABLE DATA public jobs gpufleet"
    const size_t at = line.find(" TABLE DATA ");
    if (at == std::string::npos || line.rfind(";", 0) == 0) continue;
    ++r.tables;
    std::istringstream words(line.substr(at + 12));
    std::string schema, table;
    words >> schema >> table;
    jobs = jobs || table == "jobs";
  }
  // A database name mistyped (or another application's) dumps fine: say so rather than call an
  // empty copy a checked backup.
  if (!jobs) return Status::InvalidArgument("the database holds no gpufleet state (no jobs table in the dump)");
  return r;
}

}  // namespace

Result<std::string> FindPostgresProgram(const std::string& name) {
  if (const char* env = std::getenv("GPUFLEET_PG_BINDIR"); env != nullptr && *env != '\0') {
    if (IsProgram(fs::path(env) / name)) return (fs::path(env) / name).string();
    return Status::NotFound(std::string("GPUFLEET_PG_BINDIR=") + env + " holds no " + name);
  }
  // Debian: /usr/lib/postgresql/VERSION/bin; the newest version wins.
  std::vector<std::pair<int, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const fs::path program = entry.path() / "bin" / name;
    if (IsProgram(program)) found.emplace_back(std::atoi(entry.path().filename().c_str()), program.string());
  }
  if (!found.empty()) return std::max_element(found.begin(), found.end())->second;
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    const std::string dirs = path;
    for (size_t start = 0; start <= dirs.size();) {
      size_t end = dirs.find(':', start);
      if (end == std::string::npos) end = dirs.size();
      const std::string dir = dirs.substr(start, end - start);
      if (!dir.empty() && IsProgram(fs::path(dir) / name)) return (fs::path(dir) / name).string();
      start = end + 1;
    }
  }
  return Status::NotFound("PostgreSQL's " + name +
                          " was not found (looked in $GPUFLEET_PG_BINDIR, /usr/lib/postgresql/*/bin and PATH); "
                          "install Debian's postgresql-client package (scripts/setup.sh installs postgresql) or set "
                          "GPUFLEET_PG_BINDIR");
}

Result<BackupReport> BackupStore(const StoreLocation& where, const std::string& dest) {
  if (dest.empty()) return Status::InvalidArgument("the backup needs a file to write");
  std::error_code ec;
  if (fs::is_directory(dest, ec)) {
    return Status::FailedPrecondition(dest + " is a directory; give a file in it (" +
                                      (fs::path(dest) / "state-YYYY-MM-DD.db").string() + ")");
  }
  if (where.engine == StoreLocation::Engine::kSqlite) {
    // SQLite's own files beside the store (its rollback journal, write-ahead log and shared
    // memory): a copy there would be taken, or deleted, by SQLite itself.
    const fs::path store = fs::weakly_canonical(where.target, ec);
    const fs::path target = fs::weakly_canonical(dest, ec);
    for (const char* suffix : {"", "-journal", "-wal", "-shm"}) {
      if (!store.empty() && target == fs::path(store.string() + suffix)) {
        return Status::FailedPrecondition(dest + " is " + (*suffix == '\0' ? "the store itself" : "SQLite's own file beside the store") +
                                          "; give a file elsewhere");
      }
    }
  }
  if (fs::exists(fs::symlink_status(dest, ec))) {
    return Status::FailedPrecondition(dest + " exists; give a new file (a backup never overwrites one)");
  }
  // The copy is written under a name of its own and renamed into place once checked, so that an
  // interrupted backup (killed, out of time) never leaves a partial copy under the name a good
  // one would have. Made here, private to this user (the copy holds jobs' commands and
  // environments and the audit log, as the store does), before the copy writes into it; O_EXCL:
  // one backup at a time writes it.
  const std::string partial = dest + ".partial";
  {
    const int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
      if (errno == EEXIST) {
        return Status::FailedPrecondition(partial + " exists: another backup to " + dest +
                                          " is running, or one was interrupted (remove it and run again)");
      }
      return Status::Unavailable(dest + ": cannot create the copy: " + std::strerror(errno));
    }
    ::fchmod(fd, 0600);
    ::close(fd);
  }
  auto discard = [&] {
    fs::remove(partial, ec);
    fs::remove(partial + "-journal", ec);
  };
  auto made = where.engine == StoreLocation::Engine::kSqlite ? BackupSqlite(where.target, partial)
                                                              : BackupPostgres(where.target, partial);
  if (!made.ok()) {
    discard();
    return made.status();
  }
  made->bytes = static_cast<int64_t>(fs::file_size(partial, ec));
  if (ec) made->bytes = 0;
  // Into place without replacing a file that appeared meanwhile.
  if (::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, dest.c_str(), RENAME_NOREPLACE) != 0) {
    const int err = errno;
    bool moved = false;
    if (err == EINVAL || err == ENOSYS) {  // (a file system without it: link, then unlink)
      moved = ::link(partial.c_str(), dest.c_str()) == 0;
      if (moved) ::unlink(partial.c_str());
    }
    if (!moved) {
      const int why = err == EINVAL || err == ENOSYS ? errno : err;
      discard();
      if (why == EEXIST) return Status::FailedPrecondition(dest + " appeared while the copy was made; give a new file");
      return Status::Unavailable(dest + ": cannot put the copy in place: " + std::strerror(why));
    }
  }
  return made;
}

Result<RestoreReport> RestoreSqliteStore(const std::string& backup, const std::string& store_path,
                                         const std::string& stamp, const std::string& lock_path) {
  std::error_code ec;
  if (!fs::is_regular_file(backup, ec)) {
    return Status::InvalidArgument(backup + (fs::exists(backup, ec) ? " is not a file" : ": no such file"));
  }
  if (fs::weakly_canonical(backup, ec) == fs::weakly_canonical(store_path, ec)) {
    return Status::InvalidArgument(backup + " is the store itself; give a backup file");
  }
  // The backup is checked before anything changes: read as a store (integrity, jobs, a schema
  // version this gpufleet opens), as a file nobody writes.
  {
    Db db;
    if (sqlite3_open_v2(ImmutableUri(backup).c_str(), &db.db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr) !=
        SQLITE_OK) {
      return Status::InvalidArgument(backup + ": cannot open it as a SQLite database: " + db.Error());
    }
    auto integrity = QueryText(db.db, "PRAGMA integrity_check");
    if (!integrity.ok()) return Status::InvalidArgument(backup + " is not a SQLite database: " + integrity.status().message());
    if (*integrity != "ok") return Status::InvalidArgument(backup + " fails its integrity check: " + *integrity);
    if (!QueryText(db.db, "SELECT count(*) FROM jobs").ok()) {
      return Status::InvalidArgument(backup + " holds no gpufleet state (no jobs table)");
    }
    auto version = QueryText(db.db, "SELECT value FROM meta WHERE key = 'schema_version'");
    if (!version.ok() || version->empty()) return Status::InvalidArgument(backup + " has no schema_version in its meta table");
    GF_ASSIGN_OR_RETURN(int v, ParseSchemaVersion(*version, backup));
    GF_RETURN_IF_ERROR(CheckSchemaVersion(v, kCurrentSchemaVersion, backup));
  }
  const fs::path folder = fs::path(store_path).parent_path();
  if (!folder.empty() && !fs::is_directory(folder, ec)) {
    fs::create_directories(folder, ec);
    if (ec) return Status::Unavailable("cannot create " + folder.string() + ": " + ec.message());
    ::chmod(folder.c_str(), 0700);
  }
  // No controller there, now or while this runs: it holds an flock on its data directory's
  // controller.lock and on its store's file (cli's server); both are taken here.
  std::optional<UniqueFd> dir_lock;
  if (!lock_path.empty()) {
    dir_lock.emplace(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    if (dir_lock->get() < 0) return Status::Unavailable("cannot open " + lock_path + ": " + std::strerror(errno));
    if (::flock(dir_lock->get(), LOCK_EX | LOCK_NB) != 0) {
      return Status::FailedPrecondition("a controller is running on " + folder.string() + "; stop it first");
    }
  }
  std::optional<UniqueFd> store_lock;
  struct stat old_store {};
  const bool had_store = ::stat(store_path.c_str(), &old_store) == 0;
  if (had_store) {
    store_lock.emplace(::open(store_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (store_lock->get() < 0) return Status::Unavailable("cannot open " + store_path + ": " + std::strerror(errno));
    if (::flock(store_lock->get(), LOCK_EX | LOCK_NB) != 0) {
      return Status::FailedPrecondition("a controller is using " + store_path + "; stop it first");
    }
  }
  // 1. The copy, beside the store under a name of its own, checked; the store is untouched until
  // it is whole (a restore killed meanwhile leaves the store as it was, and the .partial file).
  const std::string partial = store_path + ".partial";
  {
    const int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
      if (errno == EEXIST) {
        return Status::FailedPrecondition(partial + " exists: an earlier restore or backup there was interrupted; "
                                          "remove it (and " + partial + "-journal) and run again");
      }
      return Status::Unavailable(partial + ": cannot create the copy: " + std::strerror(errno));
    }
    // Owned as the store it replaces (or its folder) is: a restore run as root into a
    // controller's directory must leave a store that controller's user can write.
    struct stat owner = old_store;
    const bool have_owner = had_store || ::stat(folder.empty() ? "." : folder.c_str(), &owner) == 0;
    if (::geteuid() == 0 && have_owner) {
      if (::fchown(fd, owner.st_uid, owner.st_gid) != 0) {
        const int err = errno;
        ::close(fd);
        ::unlink(partial.c_str());
        return Status::Unavailable(partial + ": cannot give it the store's owner: " + std::strerror(err));
      }
    }
    ::close(fd);
  }
  auto discard = [&] {
    fs::remove(partial, ec);
    fs::remove(partial + "-journal", ec);
  };
  auto copied = BackupSqlite(backup, partial, /*immutable_source=*/true);
  if (!copied.ok()) {
    discard();
    return copied.status().WithContext("the restore did not finish (" + store_path + " is as it was)");
  }
  copied->bytes = static_cast<int64_t>(fs::file_size(partial, ec));
  if (ec) copied->bytes = 0;
  // 2. The store aside, with its -wal, -shm and -journal (also those left without a store: SQLite
  // would replay a stray -wal over the restored file), never deleted; 3. the copy in its place.
  RestoreReport out;
  out.copy = *copied;
  const std::string aside = store_path + ".before-restore-" + stamp;
  std::vector<std::pair<std::string, std::string>> moved;  // (from, to)
  auto put_back = [&] {
    for (auto it = moved.rbegin(); it != moved.rend(); ++it) ::rename(it->second.c_str(), it->first.c_str());
  };
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    const std::string from = store_path + suffix, to = aside + suffix;
    if (!fs::exists(fs::symlink_status(from, ec))) continue;
    if (fs::exists(fs::symlink_status(to, ec))) {
      put_back();
      discard();
      return Status::FailedPrecondition(to + " exists; restore again in a moment (or move it away)");
    }
    if (::rename(from.c_str(), to.c_str()) != 0) {
      const int err = errno;
      put_back();
      discard();
      return Status::Unavailable("cannot set " + from + " aside as " + to + ": " + std::strerror(err));
    }
    moved.emplace_back(from, to);
  }
  if (!moved.empty()) out.set_aside = aside;
  if (::rename(partial.c_str(), store_path.c_str()) != 0) {
    const int err = errno;
    put_back();
    discard();
    return Status::Unavailable("cannot put the copy in place as " + store_path + ": " + std::strerror(err) + " (" +
                               store_path + " is as it was)");
  }
  return out;
}

}  // namespace gpufleet::store
