// gpufleet-test-postgres: a throwaway PostgreSQL server for the shell tests and the benchmarks,
// the same one the C++ tests start (testing/postgres_server.h).
//
// Starts the server, prints its libpq URL (unix socket in a temp dir) on one line of stdout, and
// keeps it running until stdin reaches its end or SIGTERM/SIGINT arrives; then stops it and
// removes its directory. Exits 1 with the reason on stderr when the server cannot start.
//
// While it runs it takes one command a line on stdin, for chaos tests, and answers each with one
// line on stdout: "ok" (with what psql printed, newlines as spaces) or "error: WHY".
//   kill        stop the server as a crash would (immediate mode; clients are cut off)
//   restart     start it again on the same data (it recovers from its WAL)
//   sql STMT    run STMT through psql as the superuser
//
//   coproc PG { exec gpufleet-test-postgres; }; read -r url <&"${PG[0]}"
//   echo kill >&"${PG[1]}"; read -r answer <&"${PG[0]}"
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "testing/postgres_server.h"

namespace {

std::mutex server_mu;
std::unique_ptr<gpufleet::testing::PostgresServer> server;  // guarded by server_mu

std::string OneLine(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

std::string Run(const std::string& line) {
  std::lock_guard<std::mutex> lock(server_mu);
  if (!server) return "error: the server is gone";
  if (line == "kill") {
    gpufleet::Status st = server->Kill();
    return st.ok() ? "ok" : "error: " + OneLine(st.message());
  }
  if (line == "restart") {
    gpufleet::Status st = server->Restart();
    return st.ok() ? "ok" : "error: " + OneLine(st.message());
  }
  if (line.rfind("sql ", 0) == 0) {
    auto out = server->Psql(line.substr(4));
    return out.ok() ? OneLine("ok " + *out) : "error: " + OneLine(out.status().message());
  }
  return "error: unknown command '" + line + "' (kill, restart, sql STATEMENT)";
}

}  // namespace

int main() {
  // Signals are taken by sigwait in their own thread, instead of killing the process and leaving
  // the server behind.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto started = gpufleet::testing::PostgresServer::Start();
  if (!started.ok()) {
    std::fprintf(stderr, "gpufleet-test-postgres: %s\n", started.status().message().c_str());
    return 1;
  }
  server = std::move(*started);
  std::printf("%s\n", server->Url().c_str());
  std::fflush(stdout);
  std::thread([stop] {
    int sig = 0;
    sigwait(&stop, &sig);
    {
      std::lock_guard<std::mutex> lock(server_mu);
      server.reset();
    }
    std::_Exit(0);
  }).detach();
  // Commands until stdin's end, which is a stop like a signal.
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    std::printf("%s\n", Run(line).c_str());
    std::fflush(stdout);
  }
  std::lock_guard<std::mutex> lock(server_mu);
  server.reset();
  return 0;
}
