// SPDX-License-Identifier: Apache-2.0
// The admin server against clients that do not play fair: slow requests, endless bodies, floods
// of connections, wrong tokens.
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include "admin/admin_server.hpp"
#include "admin/testing/test_server.hpp"
#include "testutil/captured_log.hpp"
#include "testutil/raw_tcp_connection.hpp"

namespace nlockd::admin {
namespace {

using std::chrono::milliseconds;
using testing::TestServer;
using testutil::RawTcpConnection;

// Clients that send their request a byte at a time, forever (slowloris), from a thread of
// their own; stopped by the destructor.
class SlowClients {
 public:
  SlowClients(uint16_t port, int count, milliseconds every) {
    for (int i = 0; i < count; ++i) {
      connections_.push_back(std::make_unique<RawTcpConnection>(port));
      connections_.back()->Send("GET /metrics HTTP/1.1\r\nX-Slow: ");
    }
    thread_ = std::thread([this, every] {
      std::unique_lock lock(mutex_);
      while (!stopped_.wait_for(lock, every, [this] { return stopping_; })) {
        for (auto& connection : connections_) connection->Send("a");
      }
    });
  }
  ~SlowClients() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    stopped_.notify_all();
    thread_.join();
  }
  RawTcpConnection& at(size_t i) { return *connections_.at(i); }

 private:
  std::vector<std::unique_ptr<RawTcpConnection>> connections_;
  std::mutex mutex_;
  std::condition_variable stopped_;
  bool stopping_ = false;
  std::thread thread_;
};

int Healthz(const std::string& url, std::chrono::seconds timeout) {
  httplib::Client client(url);
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  httplib::Result result = client.Get("/healthz");
  return result ? result->status : 0;
}

TEST(AdminServerLimits, SlowRequestsDoNotStarveHealthz) {
  TestServer server;  // the defaults: 4 handler slots
  SlowClients slow(server.server.port(), 8, milliseconds(500));
  EXPECT_EQ(Healthz(server.url(), std::chrono::seconds(3)), 200);
  // More slow clients than connection slots: the oldest make room.
  SlowClients more(server.server.port(), 40, milliseconds(500));
  EXPECT_EQ(Healthz(server.url(), std::chrono::seconds(3)), 200);
  EXPECT_LE(server.server.connections()->open(), 32u);
  EXPECT_GT(server.server.connections()->evicted(), 0u);
}

TEST(AdminServerLimits, ASlowRequestIsCutOffAtItsDeadline) {
  AdminServerOptions options;
  options.connections.request_timeout = milliseconds(400);
  TestServer server(options);
  SlowClients slow(server.server.port(), 1, milliseconds(100));
  const auto started = std::chrono::steady_clock::now();
  EXPECT_TRUE(slow.at(0).ReadUntilClosed(milliseconds(5000)).has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - started, milliseconds(3000));
}

TEST(AdminServerLimits, AChunkedBodyIsBoundedLikeAnyOther) {
  AdminServerOptions options;
  options.max_body_bytes = 1024;
  TestServer server(options);
  RawTcpConnection connection(server.server.port());
  ASSERT_TRUE(connection.connected());
  connection.Send(
      "POST /api/v1/notify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n");
  const std::string chunk = "400\r\n" + std::string(1024, ' ') + "\r\n";
  // Far more than the limit; the server stops reading (and answers) past it.
  for (int i = 0; i < 64 && connection.Send(chunk); ++i) {
  }
  auto answer = connection.ReadUntilClosed(milliseconds(5000));
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->rfind("HTTP/1.1 413", 0), 0u) << *answer;
  EXPECT_NE(answer->find("payload_too_large"), std::string::npos) << *answer;
  EXPECT_TRUE(server.backend.notified().empty());
}

TEST(AdminServerLimits, ALargeContentLengthIsRefusedBeforeTheBodyIsRead) {
  AdminServerOptions options;
  options.max_body_bytes = 1024;
  TestServer server(options);
  RawTcpConnection connection(server.server.port());
  connection.Send(
      "POST /api/v1/notify HTTP/1.1\r\nHost: x\r\nContent-Length: 104857600\r\n\r\nabc");
  auto answer = connection.ReadUntilClosed(milliseconds(3000));
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->rfind("HTTP/1.1 413", 0), 0u) << *answer;
}

TEST(AdminServerLimits, AWriteWithoutTheTokenIsRefusedBeforeItsBody) {
  AdminServerOptions options;
  options.token = "secret";
  TestServer server(options);
  RawTcpConnection connection(server.server.port());
  // The body never comes: the answer must not wait for it.
  connection.Send(
      "POST /api/v1/notify HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\n"
      "Content-Length: 60000\r\n\r\n");
  auto answer = connection.ReadUntilClosed(milliseconds(3000));
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->rfind("HTTP/1.1 401", 0), 0u) << *answer;
}

TEST(AdminServerLimits, ACompressedBodyIsRefused) {
  TestServer server;
  RawTcpConnection connection(server.server.port());
  connection.Send(
      "POST /api/v1/notify HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\n"
      "Content-Length: 3\r\n\r\nabc");
  auto answer = connection.ReadUntilClosed(milliseconds(3000));
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->rfind("HTTP/1.1 415", 0), 0u) << *answer;
}

TEST(AdminServerLimits, AFloodOfIdleConnectionsHoldsAtMostTheLimit) {
  AdminServerOptions options;
  options.connections.max_connections = 4;
  TestServer server(options);
  std::vector<std::unique_ptr<RawTcpConnection>> idle;
  const auto begun = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) {
    idle.push_back(std::make_unique<RawTcpConnection>(server.server.port()));
    EXPECT_TRUE(idle.back()->connected()) << i;
  }
  // The listen queue takes them all at once: a SYN dropped from a full queue is retried only a
  // second later (httplib's own backlog is 5).
  EXPECT_LT(std::chrono::steady_clock::now() - begun, milliseconds(900));
  EXPECT_EQ(Healthz(server.url(), std::chrono::seconds(3)), 200);
  EXPECT_LE(server.server.connections()->open(), 4u);
}

size_t ThreadsOfThisProcess() {
  return static_cast<size_t>(std::distance(std::filesystem::directory_iterator("/proc/self/task"),
                                           std::filesystem::directory_iterator{}));
}

// A thread per connection, started when a connection needs it: none wait idle from the start
// (the default limit is 32), and slow connections get threads of their own up to the limit.
TEST(AdminServerLimits, ConnectionThreadsStartAsConnectionsComeUpToTheLimit) {
  const size_t before = ThreadsOfThisProcess();
  AdminServerOptions options;
  options.connections.max_connections = 6;
  TestServer server(options);
  EXPECT_LE(ThreadsOfThisProcess(), before + 1) << "only the accept thread at start";
  EXPECT_EQ(Healthz(server.url(), std::chrono::seconds(3)), 200);
  EXPECT_LE(ThreadsOfThisProcess(), before + 2) << "one connection, one thread";
  {
    // Four connections hold four threads; a health check still gets one of its own. (The
    // slow clients have a thread too.)
    SlowClients slow(server.server.port(), 4, milliseconds(100));
    EXPECT_EQ(Healthz(server.url(), std::chrono::seconds(3)), 200);
    EXPECT_GE(ThreadsOfThisProcess(), before + 1 + 1 + 4);
    EXPECT_LE(ThreadsOfThisProcess(), before + 1 + 1 + 6);
  }
}

// Threads left idle by a burst end after their linger; the next connection starts one again.
TEST(AdminServerLimits, ConnectionThreadsIdleForTheirLingerEnd) {
  const size_t before = ThreadsOfThisProcess();
  AdminServerOptions options;
  options.connections.max_connections = 6;
  options.connections.idle_thread_linger = milliseconds(200);
  TestServer server(options);
  {
    SlowClients slow(server.server.port(), 4, milliseconds(50));
    EXPECT_EQ(Healthz(server.url(), std::chrono::seconds(3)), 200);
    EXPECT_GE(ThreadsOfThisProcess(), before + 1 + 1 + 4);
  }
  // The slow clients are gone (their connections closed): their threads go idle, then end.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (ThreadsOfThisProcess() > before + 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(ThreadsOfThisProcess(), before + 1) << "only the accept thread left";
  EXPECT_EQ(Healthz(server.url(), std::chrono::seconds(3)), 200);
}

TEST(AdminServerLimits, FailedLoginsAreWarnedWithTheSourceAtALimitedRate) {
  testutil::CapturedLog log("%l %v");
  {
    AdminServerOptions options;
    options.token = "secret";
    TestServer server(options);
    httplib::Client client(server.url());
    client.set_bearer_token_auth("wrong");
    for (int i = 0; i < 30; ++i) {
      httplib::Result result = client.Get("/api/v1/status");
      ASSERT_TRUE(result);
      EXPECT_EQ(result->status, 401);
    }
  }
  const std::string text = log.text();
  const size_t lines = log.Count("authentication failed");
  EXPECT_GE(lines, 1u);
  EXPECT_LT(lines, 30u);
  EXPECT_NE(text.find("warning admin: GET /api/v1/status from 127.0.0.1: authentication failed"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace nlockd::admin
