// SPDX-License-Identifier: Apache-2.0
#include "admin/admin_server.hpp"

#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "admin/metrics.hpp"
#include "admin/testing/fake_backend.hpp"
#include "admin/testing/test_server.hpp"
#include "base/error.hpp"

namespace nlockd::admin {
namespace {

using nlohmann::json;
using testing::FakeBackend;
using testing::TestServer;

TEST(AdminServer, PortZeroPicksAFreePort) {
  TestServer server;
  EXPECT_NE(server.server.port(), 0);
  httplib::Client client(server.url());
  httplib::Result result = client.Get("/healthz");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
}

TEST(AdminServer, StartThrowsWhenThePortIsTaken) {
  TestServer first;
  FakeBackend backend;
  Metrics metrics;
  AdminServer second(backend, metrics);
  try {
    second.Start("127.0.0.1", first.server.port());
    FAIL() << "bound a port already in use";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kFailed);
    EXPECT_NE(std::string(error.what()).find("cannot listen"), std::string::npos);
  }
}

TEST(AdminServer, StartThrowsOnAnUnusableAddress) {
  FakeBackend backend;
  Metrics metrics;
  AdminServer server(backend, metrics);
  EXPECT_THROW(server.Start("192.0.2.1", 0), Error);  // TEST-NET-1: not an address of ours.
}

TEST(AdminServer, StopIsIdempotentAndClosesThePort) {
  TestServer server;
  const std::string url = server.url();
  server.server.Stop();
  server.server.Stop();
  httplib::Client client(url);
  client.set_connection_timeout(1);
  EXPECT_FALSE(client.Get("/healthz"));
}

TEST(AdminServer, OversizedBodyIsRefused) {
  AdminServerOptions options;
  options.max_body_bytes = 1024;
  TestServer server(options);
  httplib::Client client(server.url());
  httplib::Result result =
      client.Post("/api/v1/notify", std::string(4096, ' '), "application/json");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 413);
  EXPECT_EQ(json::parse(result->body)["error"]["code"], "payload_too_large");
  EXPECT_TRUE(server.backend.notified().empty());
}

// A backend whose every Status() fails with the given fault.
class FailingBackend : public FakeBackend {
 public:
  explicit FailingBackend(ErrorKind kind) : kind_(kind) {}
  StatusView Status() override { throw Error(kind_, "store is down"); }

 private:
  ErrorKind kind_;
};

TEST(AdminServer, FaultsMapToServerErrors) {
  struct Case {
    ErrorKind kind;
    int status;
    const char* code;
  };
  for (const Case& c : {Case{ErrorKind::kDisconnected, 503, "unavailable"},
                        Case{ErrorKind::kOverloaded, 503, "unavailable"},
                        Case{ErrorKind::kUnimplemented, 501, "unimplemented"},
                        Case{ErrorKind::kFailed, 500, "internal"}}) {
    FailingBackend backend(c.kind);
    Metrics metrics;
    AdminServer server(backend, metrics);
    server.Start("127.0.0.1", 0);
    httplib::Client client("http://127.0.0.1:" + std::to_string(server.port()));
    httplib::Result result = client.Get("/api/v1/status");
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, c.status);
    const json body = json::parse(result->body);
    EXPECT_EQ(body["error"]["code"], c.code);
    EXPECT_EQ(body["error"]["message"], "store is down");
    // Metrics are still served, without the snapshot.
    result = client.Get("/metrics");
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, 200);
  }
}

TEST(AdminServer, ServesConcurrentClients) {
  TestServer server;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      httplib::Client client(server.url());
      for (int i = 0; i < 20; ++i) {
        httplib::Result result = client.Get(i % 2 == 0 ? "/api/v1/status" : "/metrics");
        if (result && result->status == 200) ++ok;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(ok.load(), 160);
}

}  // namespace
}  // namespace nlockd::admin
