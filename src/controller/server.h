// ApiServer: the controller's HTTP/JSON API under /v1 (docs/api.md), on cpp-httplib.
//
// Every route but /v1/health needs a bearer token (auth.h). Handlers validate the request fully
// before anything changes, answer 4xx with {"error": {"code", "message"}} when it is wrong, and
// hand valid requests to the Engine. Bodies are limited in size (413 beyond).
#pragma once

#include <atomic>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/status.h"
#include "controller/auth.h"
#include "controller/engine.h"
#include "store/state_store.h"

namespace httplib {
class Server;
}

namespace gpufleet::controller {

class Pool;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8470;  // 0: any free port (see port())
  std::string data_dir;  // logs live in <data_dir>/logs
  size_t max_body_bytes = 8 << 20;
  int threads = 64;  // agents hold one long-poll each
  Duration max_poll_wait = Duration::Seconds(30);
};

class ApiServer {
 public:
  ApiServer(Engine& engine, store::StateStore& store, Authenticator& auth, const sched::Clock& clock,
            ServerOptions options);
  ~ApiServer();
  // Binds and starts serving on a background thread. Errors name the address.
  Status Start();
  void Stop();
  int port() const { return port_; }
  // Serves GET /v1/pool from this pool (the instances it rented); without one the route says so.
  void SetPool(const Pool* pool) { pool_ = pool; }

 private:
  void Routes();
  std::string LogPath(int64_t job, int attempt, int part) const;

  Engine& engine_;
  store::StateStore& store_;
  Authenticator& auth_;
  const sched::Clock& clock_;
  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<const Pool*> pool_{nullptr};
  int listen_fd_ = -1;
  std::mutex logs_mu_;
  std::condition_variable logs_cv_;
};

}  // namespace gpufleet::controller
