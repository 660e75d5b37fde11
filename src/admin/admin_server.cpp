// SPDX-License-Identifier: Apache-2.0
#include "admin/admin_server.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <iterator>
#include <list>
#include <memory>
#include <mutex>
#include <system_error>

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/error.hpp"
#include "base/logging.hpp"

namespace nlockd::admin {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

// Set on the accept thread while it refuses a connection that found no slot (ConnectionThreads).
thread_local bool refusing = false;
// The ConnectionGuard id of the connection this HTTP thread serves.
thread_local uint64_t serving = 0;

// Connections waiting for a thread when every thread is taken by a connection past its request
// (handlers at work). Past it, connections are refused at once: a flood of connections cannot
// hold descriptors in a queue.
constexpr size_t kMaxWaitingConnections = 8;

// The admin connections (one descriptor each) may take at most an eighth of the soft
// RLIMIT_NOFILE, so that most descriptors stay for RPC connections.
size_t ConnectionsWithinFileLimit(size_t wanted) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return wanted;
  return std::clamp<size_t>(static_cast<size_t>(limit.rlim_cur) / 8, 2, wanted);
}

std::string PeerText(const sockaddr_storage& address, int& port) {
  char text[INET6_ADDRSTRLEN] = "";
  if (address.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    port = ntohs(in->sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    port = ntohs(in6->sin6_port);
  }
  return text;
}

// One admin connection's socket as httplib reads and writes it, with a deadline for the whole
// request (line, headers and body) and one for the whole answer, where httplib's own stream
// only bounds each read: a client sending a byte every few seconds is cut off at the deadline.
// Waits with poll(2), so descriptors past FD_SETSIZE work too.
class DeadlineStream final : public httplib::Stream {
 public:
  DeadlineStream(int fd, SteadyTime read_deadline, std::chrono::milliseconds response_timeout)
      : fd_(fd), read_deadline_(read_deadline), response_timeout_(response_timeout) {}

  bool is_readable() const override { return Wait(POLLIN, read_deadline_); }
  bool is_writable() const override { return Wait(POLLOUT, WriteDeadline()); }

  ssize_t read(char* ptr, size_t size) override {
    if (buffered_ < filled_) {
      const size_t n = std::min(size, filled_ - buffered_);
      std::memcpy(ptr, buffer_.data() + buffered_, n);
      buffered_ += n;
      return static_cast<ssize_t>(n);
    }
    if (!is_readable()) return -1;
    // httplib reads the request line and headers a byte at a time: one recv fills a buffer.
    if (size < buffer_.size()) {
      const ssize_t n = Receive(buffer_.data(), buffer_.size());
      if (n <= 0) return n;
      filled_ = static_cast<size_t>(n);
      buffered_ = 0;
      return read(ptr, size);
    }
    return Receive(ptr, size);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n = 0;
    do {
      n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
      ip = PeerText(address, port);
    }
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
      ip = PeerText(address, port);
    }
  }
  // httplib asks only to refuse descriptors select(2) cannot watch; this stream polls, so it
  // answers as httplib's own in-memory stream does.
  socket_t socket() const override { return 0; }

 private:
  SteadyTime WriteDeadline() const {
    // The answer's time starts with its first byte.
    if (!write_deadline_) write_deadline_ = std::chrono::steady_clock::now() + response_timeout_;
    return *write_deadline_;
  }

  bool Wait(short events, SteadyTime deadline) const {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd entry{fd_, events, 0};
      const int ready =
          ::poll(&entry, 1, static_cast<int>(std::min<int64_t>(left.count(), 60'000)));
      if (ready > 0) return true;
      if (ready < 0 && errno != EINTR) return false;
    }
  }

  ssize_t Receive(char* ptr, size_t size) {
    ssize_t n = 0;
    do {
      n = ::recv(fd_, ptr, size, 0);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  int fd_;
  SteadyTime read_deadline_;
  std::chrono::milliseconds response_timeout_;
  mutable std::optional<SteadyTime> write_deadline_;
  std::array<char, 4096> buffer_{};
  size_t filled_ = 0;
  size_t buffered_ = 0;
};

// httplib's task queue: one thread per connection up to the limit, so that a connection never
// waits behind another's slow request. Threads start as connections need them (a daemon whose
// admin API is seldom used does not start 32 idle threads: under emulation each one cost its
// start measurably) and end after `idle_thread_linger` without one, so that a burst of
// connections leaves none behind. When every thread is taken, a slow reader is evicted to make
// room (ConnectionGuard::MakeRoom); failing that a few connections wait, newest served first,
// and past them the one that waited longest is answered 503 at once instead of holding its
// descriptor in a queue.
class ConnectionThreads final : public httplib::TaskQueue {
 public:
  ConnectionThreads(size_t threads, std::chrono::milliseconds linger, ConnectionGuard& guard)
      : max_threads_(threads), linger_(linger), guard_(guard) {}

  void enqueue(std::function<void()> fn) override {
    std::function<void()> refused;
    std::list<std::thread> ended;
    {
      std::lock_guard lock(mutex_);
      ended.swap(ended_);
      const bool all_taken = idle_ + starting_ <= jobs_.size();
      if (all_taken && threads_.size() < max_threads_ && !stopping_) {
        ++starting_;
        // The thread finds its own entry, to move it to ended_ when it ends; it takes mutex_
        // first, so the entry is in place by then.
        threads_.emplace_back();
        threads_.back() = std::thread([this, self = std::prev(threads_.end())] { Work(self); });
      } else if (all_taken && !guard_.MakeRoom(jobs_.size()) &&
                 jobs_.size() >= kMaxWaitingConnections) {
        // The connection that has waited longest gives way: a newer one (a health check
        // after a flood) is not stuck behind connections that may never send a byte.
        refused = std::move(jobs_.front());
        jobs_.pop_front();
      }
      jobs_.push_back(std::move(fn));
    }
    if (refused) {
      refusing = true;
      refused();  // HttpServer::process_and_close_socket answers 503 and closes.
      refusing = false;
    }
    ready_.notify_one();
    for (auto& thread : ended) thread.join();  // they have returned, or are about to
  }

  void shutdown() override {
    std::list<std::thread> threads;
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      threads.swap(threads_);
      threads.splice(threads.end(), ended_);
    }
    ready_.notify_all();
    for (auto& thread : threads) thread.join();
  }

 private:
  void Work(std::list<std::thread>::iterator self) {
    std::unique_lock lock(mutex_);
    --starting_;
    for (;;) {
      ++idle_;
      const bool woken =
          ready_.wait_for(lock, linger_, [this] { return !jobs_.empty() || stopping_; });
      --idle_;
      if (!woken) {
        // Idle for the whole linger: this thread ends; the next enqueue (or shutdown) joins it.
        ended_.splice(ended_.end(), threads_, self);
        return;
      }
      if (jobs_.empty()) return;  // stopping
      // The newest first, for the same reason.
      std::function<void()> job = std::move(jobs_.back());
      jobs_.pop_back();
      // A connection still waiting when the server stops is closed, not served.
      const bool stopping = stopping_;
      lock.unlock();
      refusing = stopping;
      job();
      refusing = false;
      lock.lock();
    }
  }

  const size_t max_threads_;
  const std::chrono::milliseconds linger_;
  ConnectionGuard& guard_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> jobs_;  // guarded by mutex_
  size_t idle_ = 0;                         // guarded by mutex_: waiting for a job
  size_t starting_ = 0;                     // guarded by mutex_: started, not waiting yet
  bool stopping_ = false;                   // guarded by mutex_
  std::list<std::thread> threads_;          // guarded by mutex_: running
  std::list<std::thread> ended_;            // guarded by mutex_: returned or returning, unjoined
};

// Closes a connection whose answer has been sent. A client may still be sending a body the
// server refused; closing with unread bytes would reset the connection and could destroy the
// answer before the client reads it. So the server stops sending, reads and drops what comes for
// a moment (at most kLingerBytes or kLingerTime: a client cannot hold the thread with it), then
// closes.
void LingeringClose(int fd) {
  constexpr size_t kLingerBytes = 256 * 1024;
  constexpr auto kLingerTime = std::chrono::milliseconds(500);
  ::shutdown(fd, SHUT_WR);
  const auto deadline = std::chrono::steady_clock::now() + kLingerTime;
  size_t dropped = 0;
  std::array<char, 16 * 1024> sink{};
  while (dropped < kLingerBytes) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd entry{fd, POLLIN, 0};
    if (::poll(&entry, 1, static_cast<int>(left.count())) <= 0) break;
    const ssize_t n = ::recv(fd, sink.data(), sink.size(), 0);
    if (n <= 0) break;
    dropped += static_cast<size_t>(n);
  }
  ::close(fd);
}

HttpResponse BodyTooLarge() {
  return ErrorResponse(413, "payload_too_large", "the request body is too large");
}

void Answer(const HttpResponse& answer, httplib::Response& response) {
  response.status = answer.status;
  for (const auto& [name, value] : answer.headers) response.set_header(name, value);
  response.set_content(answer.body, answer.content_type);
}

}  // namespace

// httplib's server with each connection taken through ConnectionGuard and a DeadlineStream,
// and one request per connection (the stream's deadlines are the request's).
class AdminServer::HttpServer final : public httplib::Server {
 public:
  HttpServer(ConnectionGuard& guard, const ConnectionLimits& limits)
      : guard_(guard), limits_(limits) {}

 private:
  bool process_and_close_socket(socket_t sock) override {
    std::optional<uint64_t> id;
    if (!refusing) id = guard_.Admit(sock);
    if (!id) {
      static constexpr std::string_view kBusy =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      ::send(sock, kBusy.data(), kBusy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ::close(sock);
      refusals_log_.Log(spdlog::level::warn,
                        "admin: connection answered 503: all {} connections busy, or stopping",
                        limits_.max_connections);
      return false;
    }
    serving = *id;
    bool ok = false;
    {
      DeadlineStream stream(sock, std::chrono::steady_clock::now() + limits_.request_timeout,
                            limits_.response_timeout);
      bool closed = true;
      ok = process_request(stream, /*close_connection=*/true, closed, nullptr);
    }
    serving = 0;
    guard_.Leave(*id);  // before close: the guard never shuts down a reused descriptor
    LingeringClose(sock);
    return ok;
  }

  ConnectionGuard& guard_;
  ConnectionLimits limits_;
  LogLimiter refusals_log_{"admin connections refused"};
};

// At most `threads` handler calls at once (AdminServerOptions::threads).
class AdminServer::WorkSlots {
 public:
  explicit WorkSlots(size_t slots) : free_(std::max<size_t>(slots, 1)) {}
  // False if no slot came free within `timeout`.
  bool Acquire(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    if (!freed_.wait_for(lock, timeout, [this] { return free_ > 0; })) return false;
    --free_;
    return true;
  }
  void Release() {
    {
      std::lock_guard lock(mutex_);
      ++free_;
    }
    freed_.notify_one();
  }

 private:
  std::mutex mutex_;
  std::condition_variable freed_;
  size_t free_;  // guarded by mutex_
};

AdminServer::AdminServer(Backend& backend, Metrics& metrics, AdminServerOptions options)
    : router_(std::in_place, backend, metrics, RouterOptions{options.token}),
      handler_([this](const HttpRequest& request) { return router_->Handle(request); }),
      options_(std::move(options)) {}

AdminServer::AdminServer(Handler handler, AdminServerOptions options)
    : handler_(std::move(handler)), options_(std::move(options)) {}

AdminServer::~AdminServer() { Stop(); }

HttpResponse AdminServer::Serve(const httplib::Request& request, std::string body) {
  guard_->RequestRead(serving);
  HttpRequest routed;
  routed.method = request.method;
  routed.target = request.target;
  routed.authorization = request.get_header_value("Authorization");
  routed.body = std::move(body);
  const std::string_view path = std::string_view(routed.target).substr(0, routed.target.find('?'));
  // The liveness probe never waits behind admin work.
  const bool liveness = path == "/healthz";
  if (!liveness && !work_slots_->Acquire(options_.connections.request_timeout)) {
    return ErrorResponse(503, "unavailable", "the admin server is busy");
  }
  HttpResponse answer;
  try {
    answer = handler_(routed);
  } catch (...) {
    if (!liveness) work_slots_->Release();
    throw;
  }
  if (!liveness) work_slots_->Release();
  if (answer.status == 401) {
    auth_log_.Log(spdlog::level::warn, "admin: {} {} from {}: authentication failed",
                  request.method, LogValue(path), request.remote_addr);
  }
  spdlog::debug("admin: {} {} from {}: {}", request.method, request.target, request.remote_addr,
                answer.status);
  return answer;
}

void AdminServer::Start(const std::string& address, uint16_t port) {
  NLOCKD_REQUIRE(server_ == nullptr, "AdminServer started twice");
  ConnectionLimits limits = options_.connections;
  limits.max_connections = ConnectionsWithinFileLimit(limits.max_connections);
  guard_ = std::make_unique<ConnectionGuard>(limits.max_connections);
  work_slots_ = std::make_unique<WorkSlots>(options_.threads);
  auto server = std::make_unique<HttpServer>(*guard_, limits);
  server->new_task_queue = [threads = limits.max_connections, linger = limits.idle_thread_linger,
                            guard = guard_.get()] {
    return new ConnectionThreads(threads, linger, *guard);
  };
  server->set_payload_max_length(options_.max_body_bytes);
  server->set_keep_alive_max_count(1);
  // httplib's default also sets SO_REUSEPORT, which would let a second nlockd bind the same
  // port and steal half of the requests; SO_REUSEADDR alone allows a restart next to TIME_WAIT.
  // The socket it binds is the last one it set up (it tries one per address until one binds).
  auto listening = std::make_shared<int>(-1);
  server->set_socket_options([listening](int sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    *listening = sock;
  });

  // Refusals that need no body are made before it is read: a body too large by its
  // Content-Length, a compressed body (its size after decompression is unknown), and, when the
  // token is known here, a write without it.
  const size_t max_body = options_.max_body_bytes;
  server->set_pre_routing_handler([this, max_body](const httplib::Request& request,
                                                   httplib::Response& response) {
    HttpResponse refusal;
    if (request.has_header("Content-Length") &&
        request.get_header_value<uint64_t>("Content-Length") > max_body) {
      refusal = BodyTooLarge();
    } else if (const std::string encoding = request.get_header_value("Content-Encoding");
               !encoding.empty() && encoding != "identity") {
      refusal = ErrorResponse(415, "unsupported_media_type", "compressed bodies are not accepted");
    } else if (router_ && !options_.token.empty() && request.method != "GET" &&
               request.method != "HEAD" &&
               !BearerTokenMatches(request.get_header_value("Authorization"), options_.token)) {
      refusal = UnauthorizedResponse();
      auth_log_.Log(spdlog::level::warn, "admin: {} {} from {}: authentication failed",
                    request.method, LogValue(request.path), request.remote_addr);
    } else {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    guard_->RequestRead(serving);
    Answer(refusal, response);
    return httplib::Server::HandlerResponse::Handled;
  });

  // One catch-all handler per method: the Router matches paths itself (so that it can answer
  // 405 and decode host names that contain '/'). Methods that may carry a body read it here,
  // counting what arrives whatever the framing: httplib itself bounds only a Content-Length.
  const auto without_body = [this](const httplib::Request& request, httplib::Response& response) {
    Answer(Serve(request, request.body), response);
  };
  const auto with_body = [this, max_body](const httplib::Request& request,
                                          httplib::Response& response,
                                          const httplib::ContentReader& read) {
    std::string body;
    bool too_large = false;
    const bool complete = read([&](const char* data, size_t size) {
      if (body.size() + size > max_body) {
        too_large = true;
        return false;
      }
      body.append(data, size);
      return true;
    });
    if (too_large) {
      guard_->RequestRead(serving);
      Answer(BodyTooLarge(), response);
    } else if (!complete) {
      guard_->RequestRead(serving);
      Answer(ErrorResponse(400, "bad_request", "the request body could not be read"), response);
    } else {
      Answer(Serve(request, std::move(body)), response);
    }
  };
  server->Get(".*", without_body);
  server->Options(".*", without_body);
  server->Post(".*", with_body);
  server->Put(".*", with_body);
  server->Patch(".*", with_body);
  server->Delete(".*", with_body);
  // Errors httplib answers itself (413, 414, a malformed request line) get the JSON shape too.
  const httplib::Server::HandlerWithResponse on_error = [](const httplib::Request&,
                                                           httplib::Response& response) {
    if (!response.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const bool too_large = response.status == 413;
    const HttpResponse error = ErrorResponse(
        response.status, too_large ? "payload_too_large" : "bad_request",
        too_large ? "the request body is too large" : "the request could not be read as HTTP");
    response.set_content(error.body, error.content_type);
    return httplib::Server::HandlerResponse::Handled;
  };
  server->set_error_handler(on_error);

  int bound = port;
  if (port == 0) {
    bound = server->bind_to_any_port(address);
  } else if (!server->bind_to_port(address, port)) {
    bound = -1;
  }
  if (bound <= 0) {
    throw Error(ErrorKind::kFailed,
                "admin: cannot listen on " + address + ":" + std::to_string(port));
  }
  // httplib listens with a backlog of 5: a burst of connections beyond that (a flood, or a
  // monitoring system's checks at once) would have their SYNs dropped and retried a second or
  // more later, health checks among them. A second listen() raises it; the accept loop then
  // answers each queued connection in turn (a slot, or 503 when all are taken).
  if (*listening >= 0 && ::listen(*listening, SOMAXCONN) != 0) {
    spdlog::warn("admin: cannot raise the listen backlog: {}",
                 std::error_code(errno, std::generic_category()).message());
  }
  port_ = static_cast<uint16_t>(bound);
  server_ = std::move(server);
  auto finished = std::make_shared<std::atomic<bool>>(false);
  thread_ = std::thread([server = server_.get(), finished] {
    if (!server->listen_after_bind()) spdlog::error("admin: the HTTP accept loop failed");
    finished->store(true);
  });
  // Stop() only works once the accept loop runs; wait for it so that Start-then-Stop is safe.
  while (!server_->is_running() && !finished->load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // An IPv6 literal goes in brackets in a URL (RFC 3986 section 3.2.2).
  const std::string host = address.find(':') == std::string::npos ? address : "[" + address + "]";
  spdlog::info("admin: listening on http://{}:{}{} (at most {} connections)", host, port_,
               options_.token.empty() ? "" : " (bearer token required)", limits.max_connections);
}

void AdminServer::Stop() {
  if (server_ == nullptr) return;
  server_->stop();
  // Requests still arriving are cut off; those being answered finish.
  guard_->ShutDownReaders();
  if (thread_.joinable()) thread_.join();
  server_.reset();
}

}  // namespace nlockd::admin
