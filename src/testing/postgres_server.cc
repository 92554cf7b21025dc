#include "testing/postgres_server.h"

#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "common/process.h"
#include "store/backup.h"

namespace gpufleet::testing {
namespace {

namespace fs = std::filesystem;

// The folder of initdb, pg_ctl and postgres (where initdb is), or an error saying where it looked.
Result<std::string> FindBinDir() {
  auto initdb = store::FindPostgresProgram("initdb");
  if (!initdb.ok()) {
    return Status::FailedPrecondition("PostgreSQL's server programs were not found: " + initdb.status().message() +
                                      " (the server programs are in Debian's postgresql package)");
  }
  return fs::path(*initdb).parent_path().string();
}

std::string Tail(const std::string& text, size_t max = 2000) {
  return text.size() <= max ? text : "..." + text.substr(text.size() - max);
}

}  // namespace

Result<std::unique_ptr<PostgresServer>> PostgresServer::Start() {
  GF_ASSIGN_OR_RETURN(std::string bindir, FindBinDir());
  const char* tmp = std::getenv("TMPDIR");
  std::string base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  std::vector<std::string> as_user;
  uid_t uid = geteuid();
  gid_t gid = getegid();
  if (uid == 0) {
    // The server refuses to run as root: run it as nobody, in a directory nobody can reach.
    const passwd* pw = getpwnam("nobody");
    if (pw == nullptr) {
      return Status::FailedPrecondition(
          "running as root, and PostgreSQL refuses root: no user 'nobody' to run it as (create one with "
          "useradd --system nobody)");
    }
    uid = pw->pw_uid;
    gid = pw->pw_gid;
    as_user = {"setpriv", "--reuid=" + std::to_string(uid), "--regid=" + std::to_string(gid), "--clear-groups",
               "--"};
    base = "/tmp";  // $TMPDIR may sit under root's home, which nobody cannot enter
  }
  std::string tmpl = base + "/gpufleet-pg-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return Status::Unavailable("cannot make a directory like " + tmpl);
  if (!as_user.empty() && chown(tmpl.c_str(), uid, gid) != 0) {
    std::error_code ec;
    fs::remove_all(tmpl, ec);
    return Status::Unavailable("cannot hand " + tmpl + " to the user nobody");
  }
  std::unique_ptr<PostgresServer> server(new PostgresServer(bindir, tmpl, std::move(as_user)));
  GF_RETURN_IF_ERROR(server->RunServerProgram(
      "initdb", {bindir + "/initdb", "--pgdata=" + tmpl + "/data", "--auth=trust", "--username=postgres",
                 "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions"}));
  GF_RETURN_IF_ERROR(server->Restart());
  return server;
}

PostgresServer::~PostgresServer() {
  if (running_) (void)Kill();
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string PostgresServer::Url(const std::string& query) const {
  // The socket directory as the host; '/' is allowed in a query value.
  return "postgresql:///postgres?host=" + dir_ + "&user=postgres" + (query.empty() ? "" : "&" + query);
}

Status PostgresServer::Kill() {
  running_ = false;
  return RunServerProgram("pg_ctl stop", {bindir_ + "/pg_ctl", "--pgdata=" + dir_ + "/data", "--mode=immediate",
                                          "--wait", "stop"});
}

Status PostgresServer::Restart() {
  // Unix socket only; small, since tests hold a few connections. Recovery after Kill() starts by
  // syncing the data directory: one syncfs instead of an fsync per file (seconds on a slow disk).
  const std::string options = "-c listen_addresses= -c unix_socket_directories=" + dir_ +
                              " -c max_connections=20 -c shared_buffers=16MB -c recovery_init_sync_method=syncfs";
  GF_RETURN_IF_ERROR(RunServerProgram("pg_ctl start", {bindir_ + "/pg_ctl", "--pgdata=" + dir_ + "/data",
                                                       "--log=" + dir_ + "/server.log", "--options=" + options,
                                                       "--wait", "--timeout=60", "start"}));
  running_ = true;
  return Status::Ok();
}

Status PostgresServer::RunServerProgram(const std::string& step, std::vector<std::string> argv) const {
  std::vector<std::string> full = as_user_;
  full.insert(full.end(), argv.begin(), argv.end());
  CommandOptions o;
  o.timeout = Duration::Seconds(90);
  auto r = RunCommand(full, o);
  if (!r.ok()) return Status::Unavailable("PostgreSQL test server: " + step + ": " + r.status().message());
  if (!r->ok()) {
    std::string log;
    if (step == "pg_ctl start") {
      auto tail = RunCommand({"tail", "-n", "20", dir_ + "/server.log"}, {});
      if (tail.ok()) log = "; server.log: " + tail->stdout_text;
    }
    return Status::Unavailable("PostgreSQL test server: " + step + " " + r->Describe(o.timeout) + ": " +
                               Tail(r->stdout_text + r->stderr_text) + log);
  }
  return Status::Ok();
}

Result<std::string> PostgresServer::Psql(const std::string& sql) const {
  CommandOptions o;
  o.timeout = Duration::Seconds(60);
  auto r = RunCommand({bindir_ + "/psql", "--no-psqlrc", "--quiet", "--tuples-only", "--no-align",
                       "--set=ON_ERROR_STOP=1", "--dbname=" + Url(), "--command=" + sql},
                      o);
  if (!r.ok()) return r.status();
  if (!r->ok()) return Status::Internal("psql " + r->Describe(o.timeout) + ": " + Tail(r->stderr_text));
  std::string out = r->stdout_text;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace gpufleet::testing
