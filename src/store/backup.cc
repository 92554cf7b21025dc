// Backups of a store (backup.h): SQLite's online backup API, or pg_dump.
#include "store/backup.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <utility>
#include <vector>

#include "common/process.h"

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

Result<BackupReport> BackupSqlite(const std::string& source, const std::string& dest) {
  Db from;
  // Read-only: a backup never changes the source, and does not create one that is missing.
  if (sqlite3_open_v2(source.c_str(), &from.db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
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
    return Status::Unavailable(source + ": the backup did not finish: " + sqlite3_errstr(rc) + " (" + to.Error() + ")");
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
  auto version = QueryText(to.db, "SELECT value FROM meta WHERE key = 'schema_version'");
  if (version.ok()) r.schema_version = std::atoi(version->c_str());
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
  if (fs::exists(dest, ec)) {
    return Status::FailedPrecondition(dest + " exists; give a new file (a backup never overwrites one)");
  }
  // Made here, private to this user (the copy holds jobs' commands and environments and the
  // audit log, as the store does), before the copy writes into it.
  {
    const int fd = ::open(dest.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
      if (errno == EEXIST) return Status::FailedPrecondition(dest + " exists; give a new file (a backup never overwrites one)");
      return Status::Unavailable(dest + ": cannot create the copy: " + std::strerror(errno));
    }
    ::fchmod(fd, 0600);
    ::close(fd);
  }
  auto made = where.engine == StoreLocation::Engine::kSqlite ? BackupSqlite(where.target, dest)
                                                              : BackupPostgres(where.target, dest);
  if (!made.ok()) {
    fs::remove(dest, ec);
    return made.status();
  }
  made->bytes = static_cast<int64_t>(fs::file_size(dest, ec));
  if (ec) made->bytes = 0;
  return made;
}

}  // namespace gpufleet::store
