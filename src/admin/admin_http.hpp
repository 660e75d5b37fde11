// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "admin/router.hpp"

namespace nlockd::admin {

// Answers one admin request; called on the HTTP threads, several at once.
using AdminHandler = std::function<HttpResponse(const HttpRequest&)>;

// The admin HTTP server as the daemon holds it. The daemon loads the server from a module once it
// serves (cmd/nlockd/admin_module.hpp), so that cpp-httplib and the libraries it brings (libssl,
// libcrypto's initialisation, brotli) are not mapped and relocated by every start; this
// interface is all the daemon sees of it. AdminServer (admin/admin_server.hpp) implements it.
class AdminHttpServer {
 public:
  virtual ~AdminHttpServer() = default;  // Stops.

  // Binds and starts serving; returns once requests are accepted. Port 0 picks a free port.
  // Throws if the address cannot be bound. REQUIRES: not started.
  virtual void Start(const std::string& address, uint16_t port) = 0;
  // Stops accepting, finishes the requests in progress and joins the threads. Idempotent.
  virtual void Stop() = 0;
  // The bound port (after Start).
  virtual uint16_t port() const = 0;
};

// The module's entry point (admin/admin_http_module.cpp): a new server over *handler, owned by
// the caller. kAdminHttpModuleEntry names it for dlsym.
using AdminHttpServerFactory = AdminHttpServer* (*)(const AdminHandler* handler);
inline constexpr const char* kAdminHttpModuleEntry = "nlockd_admin_http_server_new";
// The build the module belongs to, which must be the daemon's own: the two share C++ types.
using AdminHttpModuleBuild = const char* (*)();
inline constexpr const char* kAdminHttpModuleBuild = "nlockd_admin_http_module_build";
// The module's file name, beside the daemon in a build tree and in NLOCKD_ADMIN_MODULE_DIR
// once installed.
inline constexpr const char* kAdminHttpModuleFile = "nlockd-admin-http.so";

}  // namespace nlockd::admin
