// gpufleet-test-postgres: a throwaway PostgreSQL server for the shell tests and the benchmarks,
// the same one the C++ tests start (testing/postgres_server.h).
//
// Starts the server, prints its libpq URL (unix socket in a temp dir) on one line of stdout, and
// keeps it running until stdin reaches its end or SIGTERM/SIGINT arrives; then stops it and
// removes its directory. Exits 1 with the reason on stderr when the server cannot start.
//
//   exec 3< <(gpufleet-test-postgres)   # or a coprocess; read -r url <&3
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "testing/postgres_server.h"

int main() {
  // Signals are taken by sigwait below, in this thread, instead of killing the process and
  // leaving the server behind.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto server = gpufleet::testing::PostgresServer::Start();
  if (!server.ok()) {
    std::fprintf(stderr, "gpufleet-test-postgres: %s\n", server.status().message().c_str());
    return 1;
  }
  std::printf("%s\n", (*server)->Url().c_str());
  std::fflush(stdout);
  // Stdin's end is a stop signal too: a reader thread raises SIGTERM at EOF.
  std::thread([] {
    char buf[256];
    while (read(STDIN_FILENO, buf, sizeof buf) > 0) {
    }
    kill(getpid(), SIGTERM);
  }).detach();
  int sig = 0;
  sigwait(&stop, &sig);
  server->reset();
  return 0;
}
