// SPDX-License-Identifier: Apache-2.0
#include "bench/load/load_generator.hpp"

#include <chrono>

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace nlockd::bench {
namespace {

// A TCP port that completes handshakes (the kernel does, from the listen backlog) but never
// accepts, reads or answers: a server that stopped answering.
class SilentServer {
 public:
  SilentServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    socklen_t length = sizeof address;
    EXPECT_EQ(::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length), 0);
    port_ = ntohs(address.sin_port);
  }
  ~SilentServer() { ::close(fd_); }
  SilentServer(const SilentServer&) = delete;
  SilentServer& operator=(const SilentServer&) = delete;
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

TEST(LoadGenerator, ASilentServerEndsEachConnectionAtTheCallTimeoutInsteadOfHangingTheRun) {
  SilentServer server;
  LoadOptions options;
  options.target = asio::ip::make_address("127.0.0.1");
  options.port = server.port();
  options.connections = 3;
  options.pipeline = 2;
  options.warmup = std::chrono::milliseconds(0);
  // Far longer than the ctest timeout: the run must end through the call timeout.
  options.duration = std::chrono::hours(1);
  options.call_timeout = std::chrono::milliseconds(200);
  FixedWorkload null({100021, 4, 0, {}});
  const LoadResult result = RunLoad(options, null);
  EXPECT_EQ(result.calls, 0U);
  // One timeout per connection: its first lane to time out ends it; the others stop with it.
  EXPECT_EQ(result.timeouts, 3U);
  EXPECT_EQ(result.errors, 3U);
  EXPECT_NE(FormatResult(options, "NULL", result).find("3 connections timed out"),
            std::string::npos);
}

}  // namespace
}  // namespace nlockd::bench
