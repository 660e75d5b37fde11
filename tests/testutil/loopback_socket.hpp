// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace nlockd::testutil {

// A socket of `type` (SOCK_DGRAM, SOCK_STREAM) bound to 127.0.0.1 on a port the kernel chose,
// for a test's stand-in peer. The caller owns `fd`.
struct LoopbackSocket {
  int fd = -1;
  uint16_t port = 0;
};

inline LoopbackSocket BindLoopback(int type) {
  LoopbackSocket bound;
  bound.fd = socket(AF_INET, type, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(bound.fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  socklen_t length = sizeof address;
  getsockname(bound.fd, reinterpret_cast<sockaddr*>(&address), &length);
  bound.port = ntohs(address.sin_port);
  return bound;
}

}  // namespace nlockd::testutil
