// SPDX-License-Identifier: Apache-2.0
// The admin server against clients that do not play fair: slow requests, endless bodies, floods
// of connections, wrong tokens.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "admin/admin_server.hpp"
#include "admin/testing/test_server.hpp"
#include "testutil/captured_log.hpp"

namespace nlockd::admin {
namespace {

using std::chrono::milliseconds;
using testing::TestServer;

// A raw TCP connection to the admin server, for requests no polite client sends.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0;
  }
  ~RawConnection() { ::close(fd_); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }
  bool Send(std::string_view bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  // Everything the server sends until it closes, or until `timeout`; nullopt if it did not
  // close in time.
  std::optional<std::string> ReadUntilClosed(milliseconds timeout) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left =
          std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd entry{fd_, POLLIN, 0};
      if (::poll(&entry, 1, static_cast<int>(left.count())) <= 0) continue;
      char buffer[4096];
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) return out;
      out.append(buffer, static_cast<size_t>(n));
    }
  }

 private:
  int fd_;
  bool connected_ = false;
};

// Clients that send their request a byte at a time, forever (slowloris), from a thread of
// their own; stopped by the destructor.
class SlowClients {
 public:
  SlowClients(uint16_t port, int count, milliseconds every) {
    for (int i = 0; i < count; ++i) {
      connections_.push_back(std::make_unique<RawConnection>(port));
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
  RawConnection& at(size_t i) { return *connections_.at(i); }

 private:
  std::vector<std::unique_ptr<RawConnection>> connections_;
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
  RawConnection connection(server.server.port());
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
  RawConnection connection(server.server.port());
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
  RawConnection connection(server.server.port());
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
  RawConnection connection(server.server.port());
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
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 100; ++i) {
    idle.push_back(std::make_unique<RawConnection>(server.server.port()));
  }
  EXPECT_EQ(Healthz(server.url(), std::chrono::seconds(3)), 200);
  EXPECT_LE(server.server.connections()->open(), 4u);
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
