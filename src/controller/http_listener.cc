#include "controller/http_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>

#include "common/strings.h"

namespace gpufleet::controller {

namespace {

using SteadyTime = std::chrono::steady_clock::time_point;
SteadyTime SteadyNow() { return std::chrono::steady_clock::now(); }
std::chrono::milliseconds Ms(Duration d) { return std::chrono::milliseconds(d.millis()); }

thread_local bool tl_close_after = false;

std::string PeerAddress(const sockaddr_storage& ss, int* port) {
  char host[INET6_ADDRSTRLEN] = {0};
  *port = 0;
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    *port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    *port = ntohs(a->sin6_port);
  }
  return host;
}

// Best effort on a socket nobody reads from: a short answer, then close.
void RefuseAndClose(int fd, const char* message) {
  std::string body = std::string("{\"error\":{\"code\":\"unavailable\",\"message\":\"") + message + "\"}}\n";
  std::string out = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                    "Connection: close\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n" + body;
  ssize_t unused = ::send(fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)unused;
  ::close(fd);
}

// After answering a request whose body was not read (401, 413): stop sending, then discard what
// the client still sends for a moment, so that it reads the answer instead of a reset. Bounded in
// time; nothing is kept.
void Linger(int fd) {
  ::shutdown(fd, SHUT_WR);
  auto deadline = SteadyNow() + std::chrono::seconds(1);
  char buf[16384];
  while (SteadyNow() < deadline) {
    pollfd p{fd, POLLIN, 0};
    int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyNow()).count());
    if (::poll(&p, 1, std::max(left, 1)) <= 0) break;
    ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) break;
  }
}

}  // namespace

void CloseAfterResponse() { tl_close_after = true; }

// One client connection and the stream cpp-httplib reads requests from. The read buffer lives as
// long as the connection, so bytes of a pipelined next request are kept.
struct HttpListener::Conn : public httplib::Stream {
  int fd = -1;
  std::string client;
  int client_port = 0;
  std::string local;
  int local_port = 0;
  int requests = 0;
  bool active = false;  // counted in active_by_client_
  const std::atomic<bool>* stopping = nullptr;  // the listener's: a stop ends every wait
  SteadyTime idle_since;

  // Per request.
  SteadyTime head_deadline, body_deadline;
  bool head_done = false;
  uint32_t last4 = 0;        // the last bytes read, to find the end of the head
  size_t body_bytes = 0;     // read after the head
  size_t max_body = 0;
  Duration write_timeout;
  SSL* ssl = nullptr;        // with TLS: the session over fd
  bool handshaken = false;
  bool failed = false;       // a deadline or the body cap was hit: the connection ends
  bool timed_out = false;
  bool answered_413 = false;
  // The head as read (bounded), and whether it declares no body: without Content-Length and
  // Transfer-Encoding a request has none (RFC 9112 6.3), so the body reads end at once instead of
  // waiting for a hang-up (cpp-httplib reads a POST without either until end of stream).
  std::string head;
  bool no_body = false;
  std::string held;  // a response head waiting for its body (see write)

  char buf[4096];
  size_t pos = 0, len = 0;

  void BeginRequest(const ListenerLimits& l) {
    SteadyTime now = SteadyNow();
    head_deadline = now + Ms(l.header_timeout);
    body_deadline = now + Ms(l.request_timeout);
    head_done = false;
    last4 = 0;
    body_bytes = 0;
    max_body = l.max_body_bytes;
    write_timeout = l.write_timeout;
    failed = timed_out = answered_413 = false;
    head.clear();
    no_body = false;
  }

  static bool HasHeader(const std::string& head, std::string_view name) {
    // name is lower case, with its colon; matched at the start of a line, case-insensitively.
    for (size_t at = head.find('\n'); at != std::string::npos; at = head.find('\n', at + 1)) {
      if (head.size() - at - 1 < name.size()) break;
      bool same = true;
      for (size_t i = 0; i < name.size() && same; ++i) {
        same = std::tolower(static_cast<unsigned char>(head[at + 1 + i])) == name[i];
      }
      if (same) return true;
    }
    return false;
  }

  // Bytes read but not yet handed out, here or (decrypted) inside TLS.
  bool Buffered() const { return pos < len || (ssl != nullptr && SSL_pending(ssl) > 0); }

  bool WaitFor(short events, SteadyTime deadline) const {
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyNow()).count();
      if (left <= 0 || (stopping != nullptr && stopping->load())) return false;
      pollfd p{fd, events, 0};
      int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 200)));
      if (n > 0) return true;
      if (n < 0 && errno != EINTR) return false;
    }
  }

  bool is_readable() const override {
    return Buffered() || WaitFor(POLLIN, head_done ? body_deadline : std::min(head_deadline, body_deadline));
  }
  bool is_writable() const override {
    return !failed && WaitFor(POLLOUT, SteadyNow() + Ms(write_timeout));
  }

  // Counts what is handed to the parser: the head until CRLFCRLF, then the body (chunk framing
  // included, which over-counts a little: the cap is on the wire size).
  void Account(const char* p, size_t n) {
    size_t i = 0;
    for (; !head_done && i < n; ++i) {
      last4 = (last4 << 8) | static_cast<unsigned char>(p[i]);
      if (head.size() < 64 * 1024) head.push_back(p[i]);
      if (last4 == 0x0d0a0d0a) {
        head_done = true;
        no_body = !HasHeader(head, "content-length:") && !HasHeader(head, "transfer-encoding:");
      }
    }
    body_bytes += n - i;
  }

  // Runs one TLS call (SSL_read, SSL_write, SSL_accept) until it is done, waiting for the socket
  // as it asks, up to `deadline`. Its result: > 0 done, 0 the peer closed, < 0 failed.
  template <typename Call>
  int TlsCall(Call call, SteadyTime deadline) {
    for (;;) {
      ERR_clear_error();
      int n = call();
      if (n > 0) return n;
      int e = SSL_get_error(ssl, n);
      if (e == SSL_ERROR_ZERO_RETURN) return 0;
      short want = e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
      if (want == 0) {
        ERR_clear_error();
        return -1;
      }
      if (!WaitFor(want, deadline)) {
        timed_out = true;
        return -1;
      }
    }
  }

  // The TLS handshake of a new connection, within the head's deadline.
  bool Handshake(const ListenerLimits& l) {
    handshaken = TlsCall([this] { return SSL_accept(ssl); }, SteadyNow() + Ms(l.header_timeout)) > 0;
    return handshaken;
  }

  ssize_t read(char* ptr, size_t size) override {
    if (failed) return -1;
    if (head_done && no_body) return 0;  // the end of this request's (absent) body
    // Refill once this buffer is handed out (Buffered() would say no while TLS holds more of a
    // record decrypted, and the read below would hand out nothing: an end of stream to httplib).
    if (pos >= len) {
      SteadyTime deadline = head_done ? body_deadline : std::min(head_deadline, body_deadline);
      ssize_t n;
      if (ssl != nullptr) {
        n = TlsCall([this] { return SSL_read(ssl, buf, sizeof buf); }, deadline);
        if (n < 0) failed = true;
        if (n <= 0) return n;
      } else {
        // The socket is non-blocking: read what is there, and wait only when nothing is (a
        // request that follows its answer at once is usually there already).
        for (;;) {
          if (SteadyNow() >= deadline) {
            failed = timed_out = true;
            return -1;
          }
          n = ::recv(fd, buf, sizeof buf, 0);
          if (n >= 0) break;
          if (errno == EINTR) continue;
          if (errno != EAGAIN && errno != EWOULDBLOCK) return n;
          if (!WaitFor(POLLIN, deadline)) {
            failed = timed_out = true;
            return -1;
          }
        }
        if (n == 0) return 0;
      }
      pos = 0;
      len = static_cast<size_t>(n);
    }
    size_t n = std::min(size, len - pos);
    Account(buf + pos, n);
    if (head_done && body_bytes > max_body + 64 * 1024) {
      // An undeclared (chunked) body past the cap: answer here, and end the connection.
      failed = true;
      if (!answered_413) {
        answered_413 = true;
        std::string body = "{\"error\":{\"code\":\"payload_too_large\",\"message\":\"the request body is too large: more than " +
                           std::to_string(max_body) + " bytes\"}}\n";
        std::string out = "HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\nConnection: close\r\n"
                          "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
        Send(out.data(), out.size());
      }
      return -1;
    }
    std::memcpy(ptr, buf + pos, n);
    pos += n;
    return static_cast<ssize_t>(n);
  }

  // Sends all of [ptr, ptr + size): `size`, or -1 if it could not. write_timeout bounds each
  // wait for the client to make room (progress restarts it), not the whole of a large body.
  ssize_t Send(const char* ptr, size_t size) {
    size_t done = 0;
    while (done < size) {
      const SteadyTime deadline = SteadyNow() + Ms(write_timeout);
      if (ssl != nullptr) {
        // The context allows partial writes (tls.cc): each call may take only part of it.
        const size_t chunk = std::min<size_t>(size - done, 1 << 30);
        int n = TlsCall([&] { return SSL_write(ssl, ptr + done, static_cast<int>(chunk)); }, deadline);
        if (n <= 0) return -1;
        done += static_cast<size_t>(n);
        continue;
      }
      // The socket is non-blocking: wait for room only when the kernel has none.
      ssize_t n = ::send(fd, ptr + done, size - done, MSG_NOSIGNAL);
      if (n >= 0) {
        done += static_cast<size_t>(n);
        continue;
      }
      if (errno == EINTR) continue;
      if ((errno != EAGAIN && errno != EWOULDBLOCK) || !WaitFor(POLLOUT, deadline)) return -1;
    }
    return static_cast<ssize_t>(size);
  }

  // A response's head (status line and headers) that declares its body's length is held back and
  // sent together with the body's first bytes, in one segment: sent alone, the client wakes for
  // the head and again for the body, and the server makes two sends. A head without a length
  // (a chunked stream, 100 Continue) goes out at once. FlushHeld sends a head that no body
  // followed (HEAD, 204, an empty body).
  static bool IsHeadWithLength(const char* ptr, size_t size) {
    std::string_view s(ptr, size);
    if (!s.starts_with("HTTP/1.") || !s.ends_with("\r\n\r\n")) return false;
    std::string text(s);
    return HasHeader(text, "content-length:") && !HasHeader(text, "transfer-encoding:");
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (failed) return static_cast<ssize_t>(size);  // the answer was given (413) or nobody listens
    if (held.empty() && IsHeadWithLength(ptr, size)) {
      held.assign(ptr, size);
      return static_cast<ssize_t>(size);
    }
    if (held.empty()) return Send(ptr, size);
    // The head and up to 64 KB of the body in one buffer, freed once sent (an idle connection
    // keeps no room for it).
    constexpr size_t kJoinUpTo = 64 * 1024;
    const size_t first = std::min(size, kJoinUpTo);
    std::string out = std::move(held);
    held = std::string();
    out.append(ptr, first);
    if (Send(out.data(), out.size()) < 0) return -1;
    if (first < size && Send(ptr + first, size - first) < 0) return -1;
    return static_cast<ssize_t>(size);
  }

  // After a response: sends a head still held. False if it could not.
  bool FlushHeld() {
    if (held.empty()) return true;
    std::string out = std::move(held);
    held = std::string();
    return failed || Send(out.data(), out.size()) >= 0;
  }

  ~Conn() override {
    if (ssl != nullptr) SSL_free(ssl);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = client;
    port = client_port;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = local;
    port = local_port;
  }
  socket_t socket() const override { return fd; }
};

HttpListener::HttpListener(RouteTable& routes, ListenerLimits limits, std::string name)
    : routes_(routes), limits_(limits), name_(std::move(name)) {}

HttpListener::~HttpListener() { Stop(); }

Status HttpListener::Bind(const std::string& host, int port) {
  addrinfo hints;
  std::memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string port_text = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), port_text.c_str(), &hints, &res); rc != 0) {
    return Status::InvalidArgument("cannot listen on " + host + ":" + port_text + ": " + gai_strerror(rc));
  }
  std::string last_error = "no address";
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      listen_fd_ = fd;
      sockaddr_storage ss;
      socklen_t sl = sizeof ss;
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &sl);
      PeerAddress(ss, &port_);
      break;
    }
    last_error = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(res);
  if (listen_fd_ < 0) return Status::Unavailable("cannot listen on " + host + ":" + port_text + ": " + last_error);
  return Status::Ok();
}

Status HttpListener::Start() {
  if (listen_fd_ < 0) return Status::FailedPrecondition("listener " + name_ + " is not bound");
  ::fcntl(listen_fd_, F_SETFL, ::fcntl(listen_fd_, F_GETFL) | O_NONBLOCK);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || wake_fd_ < 0) return Status::Unavailable("epoll: " + std::string(std::strerror(errno)));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.fd = wake_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  acceptor_ = std::thread([this] { AcceptLoop(); });
  return Status::Ok();
}

void HttpListener::Stop() {
  {
    MutexLock lock(mu_);
    if (stopping_ || epoll_fd_ < 0) {
      stopping_ = true;
      if (epoll_fd_ < 0 && listen_fd_ >= 0) {
        ::close(listen_fd_);
        listen_fd_ = -1;
      }
      return;
    }
    stopping_ = true;
    stop_flag_ = true;
    // Connections not yet being served are closed below, not served.
    ready_.clear();
    waiting_.clear();
  }
  uint64_t one = 1;
  ssize_t unused = ::write(wake_fd_, &one, sizeof one);
  (void)unused;
  if (acceptor_.joinable()) acceptor_.join();
  MutexLock lock(mu_);
  work_cv_.NotifyAll();
  idle_cv_.Wait(mu_, [&] {
    mu_.AssertHeld();
    return workers_ == 0;
  });
  // What is left is idle or waiting: nobody serves it now.
  for (auto& [fd, c] : conns_) ::close(fd);
  conns_.clear();
  ready_.clear();
  waiting_.clear();
  lock.Unlock();
  ::close(listen_fd_);
  ::close(epoll_fd_);
  ::close(wake_fd_);
  listen_fd_ = epoll_fd_ = wake_fd_ = -1;
}

HttpListener::Stats HttpListener::stats() const {
  MutexLock lock(mu_);
  return Stats{static_cast<int>(conns_.size()), workers_, refused_, timed_out_.load()};
}

void HttpListener::AcceptLoop() {
  epoll_event events[64];
  auto last_sweep = SteadyNow();
  for (;;) {
    int n = ::epoll_wait(epoll_fd_, events, 64, 1000);
    {
      MutexLock lock(mu_);
      if (stopping_) return;
    }
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        Accept();
      } else if (fd != wake_fd_) {
        MutexLock lock(mu_);
        auto it = conns_.find(fd);
        if (it != conns_.end()) Ready(it->second.get());
      }
    }
    if (SteadyNow() - last_sweep >= std::chrono::seconds(1)) {
      SweepIdle();
      last_sweep = SteadyNow();
    }
  }
}

void HttpListener::Accept() {
  for (;;) {
    sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if (errno == EMFILE || errno == ENFILE) spdlog::warn("{} listener: out of file descriptors", name_);
      return;
    }
    int port = 0;
    std::string client = PeerAddress(ss, &port);
    MutexLock lock(mu_);
    if (static_cast<int>(conns_.size()) >= limits_.max_connections) {
      ++refused_;
      if (tls_) {
        ::close(fd);  // no plain-text answer on a TLS port
      } else {
        RefuseAndClose(fd, "the server has too many connections; retry shortly");
      }
      continue;
    }
    if (conns_by_client_[client] >= limits_.max_connections_per_client) {
      ++refused_;
      if (tls_) {
        ::close(fd);  // no plain-text answer on a TLS port
      } else {
        RefuseAndClose(fd, "too many connections from your address; retry shortly");
      }
      continue;
    }
    int yes = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    auto c = std::make_unique<Conn>();
    if (tls_) {
      c->ssl = SSL_new(tls_.get());
      if (c->ssl == nullptr || SSL_set_fd(c->ssl, fd) != 1) {
        ERR_clear_error();
        ::close(fd);
        continue;
      }
    }
    c->fd = fd;
    c->client = client;
    c->client_port = port;
    sockaddr_storage ls;
    socklen_t ll = sizeof ls;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ls), &ll) == 0) c->local = PeerAddress(ls, &c->local_port);
    c->idle_since = SteadyNow();
    c->stopping = &stop_flag_;
    ++conns_by_client_[client];
    conns_[fd] = std::move(c);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
    ev.data.fd = fd;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
}

// Caller holds mu_. The connection has bytes (or hung up): serve it when its client may.
void HttpListener::Ready(Conn* c) {
  if (active_by_client_[c->client] >= limits_.max_active_per_client) {
    waiting_[c->client].push_back(c);
    return;
  }
  Dispatch(c);
}

// Caller holds mu_.
void HttpListener::Dispatch(Conn* c) {
  c->active = true;
  ++active_by_client_[c->client];
  ready_.push_back(c);
  work_cv_.NotifyOne();
  // Every ready connection should have a worker on its way: idle ones, or a new one.
  if (static_cast<int>(ready_.size()) > idle_workers_ && workers_ < limits_.max_workers) {
    ++workers_;
    std::thread([this] { WorkerLoop(); }).detach();
  }
}

void HttpListener::WorkerLoop() {
  MutexLock lock(mu_);
  for (;;) {
    if (ready_.empty()) {
      if (stopping_) break;
      ++idle_workers_;
      bool got = work_cv_.WaitFor(mu_, std::chrono::seconds(30), [&] {
        mu_.AssertHeld();
        return !ready_.empty() || stopping_;
      });
      --idle_workers_;
      if (!got && workers_ > limits_.min_workers) break;  // idle too long: shrink
      continue;
    }
    Conn* c = ready_.front();
    ready_.pop_front();
    lock.Unlock();
    Serve(c);
    lock.Lock();
  }
  --workers_;
  idle_cv_.NotifyAll();
}

void HttpListener::Serve(Conn* c) {
  if (c->ssl != nullptr && !c->handshaken && !c->Handshake(limits_)) {
    // Not TLS (plain HTTP to a TLS port), a certificate the client refused, or too slow.
    spdlog::debug("{} listener: TLS handshake with {} failed", name_, c->client);
    Finish(c, false);
    return;
  }
  bool keep;
  // Serve what is already buffered (pipelined requests) before handing the socket back to epoll.
  // A hang-up reads as end of stream: process_request fails and the connection closes.
  do {
    c->BeginRequest(limits_);
    tl_close_after = false;
    ++c->requests;
    bool last = c->requests >= limits_.keep_alive_max_requests;
    {
      MutexLock lock(mu_);
      if (stopping_) last = true;
    }
    bool closed = false;
    bool ok = routes_.Serve(*c, last, closed);
    if (!c->FlushHeld()) ok = false;
    if (c->timed_out) timed_out_.fetch_add(1);
    keep = ok && !closed && !last && !c->failed && !tl_close_after;
    if (!keep && (tl_close_after || c->answered_413)) {
      if (c->ssl != nullptr) SSL_shutdown(c->ssl);  // close_notify, best effort
      Linger(c->fd);
    }
  } while (keep && (c->Buffered() || NextRequestSoon(c)));
  Finish(c, keep);
}

// A client that sends its next request as soon as it has the answer (one request in flight, the
// common case of a script or the CLI) is served by the same worker: a short wait on the socket
// instead of handing it to epoll and waking another thread for it. Not while other connections
// wait for a worker, or this client has one waiting for a slot: the wait would hold them up.
// Stop() ends the wait within 200 ms whatever its length.
bool HttpListener::NextRequestSoon(const Conn* c) {
  if (limits_.keep_alive_wait <= Duration::Zero()) return false;
  {
    MutexLock lock(mu_);
    if (stopping_ || !ready_.empty() || waiting_.count(c->client) > 0) return false;
  }
  const auto deadline = SteadyNow() + std::chrono::milliseconds(limits_.keep_alive_wait.millis());
  for (;;) {
    if (stop_flag_.load()) return false;
    const auto left = std::min<std::chrono::nanoseconds>(deadline - SteadyNow(), std::chrono::milliseconds(200));
    if (left <= std::chrono::nanoseconds::zero()) return false;
    pollfd p{c->fd, POLLIN, 0};
    timespec wait{static_cast<time_t>(left.count() / 1000000000), static_cast<long>(left.count() % 1000000000)};
    const int n = ::ppoll(&p, 1, &wait, nullptr);
    if (n > 0) return (p.revents & POLLIN) != 0;
    if (n < 0 && errno != EINTR) return false;
  }
}

void HttpListener::Finish(Conn* c, bool keep) {
  MutexLock lock(mu_);
  c->active = false;
  if (--active_by_client_[c->client] <= 0) active_by_client_.erase(c->client);
  // Its client may have a request waiting for this slot.
  if (auto w = waiting_.find(c->client); w != waiting_.end()) {
    if (!w->second.empty()) {
      Conn* next = w->second.front();
      w->second.pop_front();
      Dispatch(next);
    }
    if (w->second.empty()) waiting_.erase(w);
  }
  if (!keep || stopping_) {
    CloseConn(c);
    return;
  }
  c->idle_since = SteadyNow();
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
  ev.data.fd = c->fd;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->fd, &ev);
}

// Caller holds mu_.
void HttpListener::CloseConn(Conn* c) {
  int fd = c->fd;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  if (--conns_by_client_[c->client] <= 0) conns_by_client_.erase(c->client);
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
  conns_.erase(fd);
}

void HttpListener::SweepIdle() {
  MutexLock lock(mu_);
  auto cutoff = SteadyNow() - Ms(limits_.idle_timeout);
  std::vector<Conn*> old;
  for (auto& [fd, c] : conns_) {
    if (!c->active && c->idle_since < cutoff) old.push_back(c.get());
  }
  for (Conn* c : old) {
    // A waiting connection is also idle in this sense; drop it from its queue first.
    if (auto w = waiting_.find(c->client); w != waiting_.end()) {
      auto& q = w->second;
      q.erase(std::remove(q.begin(), q.end(), c), q.end());
      if (q.empty()) waiting_.erase(w);
    }
    CloseConn(c);
  }
}

}  // namespace gpufleet::controller
