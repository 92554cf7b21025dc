// HttpListener: serves the routes of an httplib::Server on a socket it owns, with the limits a
// server reachable by many clients needs and cpp-httplib's own accept loop lacks:
//
//   - connections in total and per client address are capped; one over a cap is answered 503
//     with Retry-After and closed at once, before a thread is spent on it;
//   - requests being read or served at once per client address are capped, so one address
//     cannot occupy every worker (its further requests wait their turn);
//   - a request's head must arrive within `header_timeout` of its first byte and the whole request
//     within `request_timeout`, so slow senders cannot hold a worker;
//   - an idle keep-alive connection is watched by epoll and holds no thread; it is closed after
//     `idle_timeout`;
//   - a body larger than `max_body_bytes` is refused with 413 before it is read, whether its size
//     is declared (Content-Length) or not (chunked: the count stops the read);
//   - workers are started on demand up to `max_workers` and end when idle, so long-polls that do
//     hold a worker cannot starve the rest while under the cap.
//
// Routing, parsing and the handlers stay cpp-httplib's (RouteTable::Serve calls its protected
// process_request); a pre-routing handler installed on the routes may reject a request before its
// body is read (authentication), and should call CloseAfterResponse() when it does. Handlers set
// the whole body: cpp-httplib's content providers do not work here (they stop at once, because
// the routes' own server socket never opens), so no route uses them.
//
// Thread-safety: Start/Stop from one thread; stats() from any.
#pragma once

#include <httplib.h>
#include <openssl/ssl.h>

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/time.h"

namespace gpufleet::controller {

struct ListenerLimits {
  int max_connections = 4096;
  int max_connections_per_client = 512;
  int max_active_per_client = 64;
  Duration header_timeout = Duration::Seconds(10);
  Duration request_timeout = Duration::Seconds(60);
  Duration idle_timeout = Duration::Seconds(120);
  Duration write_timeout = Duration::Seconds(30);
  size_t max_body_bytes = 8 << 20;
  int min_workers = 4;
  int max_workers = 256;
  int keep_alive_max_requests = 100000;
  // After answering on a kept-alive connection, how long its worker waits for the next request
  // before handing the socket back to epoll (0: at once).
  Duration keep_alive_wait = Duration::Millis(1);
};

// The routes: an httplib::Server whose handlers the listener calls. Serve is httplib's
// process_request, made reachable.
class RouteTable : public httplib::Server {
 public:
  bool Serve(httplib::Stream& stream, bool close_connection, bool& connection_closed) {
    return process_request(stream, close_connection, connection_closed, nullptr);
  }
};

// Called from a handler (pre-routing included): close the connection after this response, e.g.
// because the request's body was not read.
void CloseAfterResponse();

class HttpListener {
 public:
  HttpListener(RouteTable& routes, ListenerLimits limits, std::string name);
  ~HttpListener();
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  // Binds host:port (port 0: any free port). The error names the address.
  Status Bind(const std::string& host, int port);
  // Serves TLS with this context (before Start): every connection begins with a handshake, within
  // header_timeout; one that fails is closed.
  void SetTls(std::shared_ptr<SSL_CTX> context) { tls_ = std::move(context); }
  int port() const { return port_; }
  // Serves on background threads until Stop.
  Status Start();
  // Stops accepting, closes idle connections, waits for the requests being served.
  void Stop() GF_EXCLUDES(mu_);

  struct Stats {
    int connections = 0;
    int workers = 0;
    int64_t refused_connections = 0;  // over a connection cap
    int64_t timed_out_requests = 0;   // head or body not in time
  };
  Stats stats() const GF_EXCLUDES(mu_);

 private:
  struct Conn;
  void AcceptLoop() GF_EXCLUDES(mu_);
  void Accept() GF_EXCLUDES(mu_);
  void Ready(Conn* c) GF_REQUIRES(mu_);
  bool NextRequestSoon(const Conn* c) GF_EXCLUDES(mu_);
  void Dispatch(Conn* c) GF_REQUIRES(mu_);
  void WorkerLoop() GF_EXCLUDES(mu_);
  void Serve(Conn* c) GF_EXCLUDES(mu_);
  void Finish(Conn* c, bool keep) GF_EXCLUDES(mu_);
  void CloseConn(Conn* c) GF_REQUIRES(mu_);
  void SweepIdle() GF_EXCLUDES(mu_);

  RouteTable& routes_;
  const ListenerLimits limits_;
  std::shared_ptr<SSL_CTX> tls_;
  const std::string name_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;

  // Guards the connection table and the work queues, and a Conn's `active` and `idle_since`. Not
  // held while a request is read or served; held while a refused connection gets its short 503
  // on a non-blocking socket.
  mutable Mutex mu_;
  CondVar work_cv_;
  CondVar idle_cv_;
  bool stopping_ GF_GUARDED_BY(mu_) = false;
  std::map<int, std::unique_ptr<Conn>> conns_ GF_GUARDED_BY(mu_);  // by fd
  std::map<std::string, int> conns_by_client_ GF_GUARDED_BY(mu_);
  std::map<std::string, int> active_by_client_ GF_GUARDED_BY(mu_);
  std::map<std::string, std::deque<Conn*>> waiting_ GF_GUARDED_BY(mu_);  // ready, over the per-client active cap
  std::deque<Conn*> ready_ GF_GUARDED_BY(mu_);                           // for the workers
  int workers_ GF_GUARDED_BY(mu_) = 0;
  int idle_workers_ GF_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> threads_;
  int64_t refused_ GF_GUARDED_BY(mu_) = 0;
  std::atomic<int64_t> timed_out_{0};
  std::atomic<bool> stop_flag_{false};  // stopping_, readable without mu_
};

}  // namespace gpufleet::controller
