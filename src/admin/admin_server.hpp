// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "admin/router.hpp"

namespace httplib {
class Server;
}

namespace nlockd::admin {

class Backend;
class Metrics;

struct AdminServerOptions {
  // When not empty, required as "Authorization: Bearer <token>" everywhere but /healthz.
  std::string token;
  // HTTP worker threads; each may block on a Backend call. Bounds the concurrent admin work.
  size_t threads = 4;
  // Stops a client from making the server buffer a huge request body (413 past it).
  size_t max_body_bytes = size_t{64} * 1024;
};

// The admin HTTP server (cpp-httplib): /metrics, /healthz, /readyz and /api/v1 (docs/api.md) on
// its own threads, never on the lock executor or an io thread; a Router (or the handler given)
// does the work. `backend` and `metrics`, or the handler's state, must outlive the server.
class AdminServer {
 public:
  static constexpr uint16_t kDefaultPort = 9464;
  // Answers one request; called on the HTTP threads, several at once.
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  AdminServer(Backend& backend, Metrics& metrics, AdminServerOptions options = {});
  // Serves `handler` (e.g. nlockd::LockService::HandleAdminRequest, which checks the token
  // itself; options.token is not used here).
  AdminServer(Handler handler, AdminServerOptions options = {});
  ~AdminServer();  // Stops.
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  // Binds and starts serving; returns once requests are accepted. Port 0 picks a free port.
  // Throws nlockd::Error (kFailed) if the address cannot be bound.
  // REQUIRES: not started.
  void Start(const std::string& address, uint16_t port);
  // Stops accepting, finishes the requests in progress and joins the threads. Idempotent.
  void Stop();

  // The bound port (after Start).
  uint16_t port() const { return port_; }

 private:
  std::optional<Router> router_;
  Handler handler_;
  AdminServerOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  uint16_t port_ = 0;
};

}  // namespace nlockd::admin
