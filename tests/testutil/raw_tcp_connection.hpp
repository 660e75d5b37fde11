// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace nlockd::testutil {

// A plain TCP connection to a port on 127.0.0.1, for bytes no polite client sends (half a
// request, a request a byte at a time, a connection that never speaks).
class RawTcpConnection {
 public:
  explicit RawTcpConnection(uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0;
  }
  ~RawTcpConnection() { ::close(fd_); }
  RawTcpConnection(const RawTcpConnection&) = delete;
  RawTcpConnection& operator=(const RawTcpConnection&) = delete;

  bool connected() const { return connected_; }
  bool Send(std::string_view bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  // Blocks until `size` bytes came into `into`; false if the connection closed or failed first.
  bool ReadExactly(void* into, size_t size) {
    auto* at = static_cast<char*>(into);
    while (size > 0) {
      const ssize_t n = ::recv(fd_, at, size, 0);
      if (n <= 0) return false;
      at += n;
      size -= static_cast<size_t>(n);
    }
    return true;
  }
  // Everything the server sends until it closes, or until `timeout`; nullopt if it did not
  // close in time.
  std::optional<std::string> ReadUntilClosed(std::chrono::milliseconds timeout) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
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

}  // namespace nlockd::testutil
