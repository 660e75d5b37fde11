// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

#include "admin/admin_server.hpp"
#include "admin/metrics.hpp"
#include "admin/testing/fake_backend.hpp"

namespace nlockd::admin::testing {

// An AdminServer on 127.0.0.1 (a free port) over a populated FakeBackend.
struct TestServer {
  explicit TestServer(AdminServerOptions options = {})
      : server(backend, metrics, std::move(options)) {
    FakeBackend::Populate(backend);
    server.Start("127.0.0.1", 0);
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(server.port()); }

  FakeBackend backend;
  Metrics metrics;
  AdminServer server;
};

}  // namespace nlockd::admin::testing
