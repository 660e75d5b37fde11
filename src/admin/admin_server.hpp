// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "admin/admin_http.hpp"
#include "admin/connection_guard.hpp"
#include "admin/router.hpp"
#include "base/log_limiter.hpp"

namespace httplib {
struct Request;
}

namespace nlockd::admin {

class Backend;
class Metrics;

struct AdminServerOptions {
  // When not empty, required as "Authorization: Bearer <token>" everywhere but /healthz.
  std::string token;
  // Handler calls at once; each may block on a Backend call. Bounds the admin work put on the
  // server's executor (/healthz does not wait for one).
  size_t threads = 4;
  // Stops a client from making the server buffer a huge request body (413 past it), counted
  // as received whatever the framing (Content-Length, chunked) and after decompression.
  size_t max_body_bytes = size_t{64} * 1024;
  // Connections, and how long a request and its answer may take (admin/connection_guard.hpp).
  // max_connections is lowered to an eighth of RLIMIT_NOFILE's soft limit when that is
  // smaller, so that most descriptors stay for RPC. One request per connection.
  ConnectionLimits connections;
};

// The admin HTTP server (cpp-httplib): /metrics, /healthz, /readyz and /api/v1 (docs/api.md) on
// its own threads, never on the lock executor or an io thread; a Router (or the handler given)
// does the work. `backend` and `metrics`, or the handler's state, must outlive the server.
class AdminServer final : public AdminHttpServer {
 public:
  static constexpr uint16_t kDefaultPort = 9464;
  // Answers one request; called on the HTTP threads, several at once.
  using Handler = AdminHandler;

  AdminServer(Backend& backend, Metrics& metrics, AdminServerOptions options = {});
  // Serves `handler` (e.g. nlockd::LockService::HandleAdminRequest, which checks the token
  // itself; options.token is not used here).
  AdminServer(Handler handler, AdminServerOptions options = {});
  ~AdminServer() override;  // Stops.
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  // Binds and starts serving; returns once requests are accepted. Port 0 picks a free port.
  // Throws nlockd::Error (kFailed) if the address cannot be bound.
  // REQUIRES: not started.
  void Start(const std::string& address, uint16_t port) override;
  // Stops accepting, finishes the requests in progress and joins the threads. Idempotent.
  void Stop() override;

  // The bound port (after Start).
  uint16_t port() const override { return port_; }
  // The connection limits in force (after Start; null before).
  const ConnectionGuard* connections() const { return guard_.get(); }

 private:
  class HttpServer;
  class WorkSlots;

  // Hands a read request to the handler (in a work slot) and logs failed logins.
  HttpResponse Serve(const httplib::Request& request, std::string body);

  std::optional<Router> router_;
  Handler handler_;
  AdminServerOptions options_;
  std::unique_ptr<ConnectionGuard> guard_;
  std::unique_ptr<WorkSlots> work_slots_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  uint16_t port_ = 0;
  // Failed logins are logged with the caller's address, at most so often.
  LogLimiter auth_log_{"admin authentication failures"};
};

}  // namespace nlockd::admin
