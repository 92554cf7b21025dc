// PostgresServer: a throwaway PostgreSQL server for tests, started by the test itself.
//
// Start() runs initdb in a new directory under $TMPDIR (or /tmp) and starts the server on a unix
// socket in that directory only (no TCP port, so parallel tests cannot collide), with trust
// authentication for the superuser `postgres` and the default durability (fsync on). The
// destructor stops it and removes the directory.
//
// PostgreSQL refuses to run as root. When the test runs as root (CI containers), the server
// programs run as the user `nobody` (through setpriv), and the directory is handed to that user;
// otherwise they run as the calling user. The server programs are found in $GPUFLEET_PG_BINDIR,
// else in the newest /usr/lib/postgresql/*/bin (Debian's `postgresql` package, which
// scripts/setup.sh installs), else on PATH.
//
// A server that cannot be started is an error that says which step failed, with its output, so a
// test reports it as a failure instead of skipping.
//
// Thread-safety: none; one test thread drives it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace gpufleet::testing {

class PostgresServer {
 public:
  static Result<std::unique_ptr<PostgresServer>> Start();
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // A libpq URL for database `postgres` as the superuser, through the socket; `query` is added
  // as URL query parameters ("options=-csearch_path%3Dt1").
  std::string Url(const std::string& query = "") const;
  const std::string& dir() const { return dir_; }

  // Stops the server as a crash would (immediate mode: no shutdown checkpoint, clients cut off).
  Status Kill();
  // Starts it again on the same data (after Kill); it recovers from its WAL.
  Status Restart();

  // Runs SQL through psql as the superuser and returns what it printed (unaligned, tuples only).
  // Fails when a statement fails.
  Result<std::string> Psql(const std::string& sql) const;

 private:
  PostgresServer(std::string bindir, std::string dir, std::vector<std::string> as_user)
      : bindir_(std::move(bindir)), dir_(std::move(dir)), as_user_(std::move(as_user)) {}
  Status RunServerProgram(const std::string& step, std::vector<std::string> argv) const;

  std::string bindir_;
  std::string dir_;                    // the socket lives here; the data in dir_/data
  std::vector<std::string> as_user_;   // prefix that runs a program as the server's user, or empty
  bool running_ = false;
};

}  // namespace gpufleet::testing
