// SPDX-License-Identifier: Apache-2.0
#include "admin/connection_guard.hpp"

#include <array>

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

namespace nlockd::admin {
namespace {

// A connected pair: the guard gets `server`, the test watches `client` for the shutdown.
struct Pair {
  Pair() {
    std::array<int, 2> fds{};
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds.data()), 0);
    server = fds[0];
    client = fds[1];
  }
  ~Pair() {
    ::close(server);
    ::close(client);
  }
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;
  // Whether the server side was shut down (the client reads end of file at once).
  bool ShutDown() const {
    char byte = 0;
    return ::recv(client, &byte, 1, MSG_DONTWAIT) == 0;
  }
  int server = -1;
  int client = -1;
};

TEST(ConnectionGuard, WhenFullTheOldestReaderMakesRoom) {
  ConnectionGuard guard(2);
  Pair a, b, c;
  auto first = guard.Admit(a.server);
  auto second = guard.Admit(b.server);
  ASSERT_TRUE(first && second);
  auto third = guard.Admit(c.server);
  ASSERT_TRUE(third);
  EXPECT_TRUE(a.ShutDown());
  EXPECT_FALSE(b.ShutDown());
  EXPECT_EQ(guard.evicted(), 1u);
  guard.Leave(*first);
  EXPECT_EQ(guard.open(), 2u);
}

TEST(ConnectionGuard, ConnectionsPastTheirRequestAreNeverEvicted) {
  ConnectionGuard guard(2);
  Pair a, b, c;
  auto first = guard.Admit(a.server);
  auto second = guard.Admit(b.server);
  guard.RequestRead(*first);
  guard.RequestRead(*second);
  EXPECT_FALSE(guard.MakeRoom(0));
  EXPECT_FALSE(guard.Admit(c.server));
  EXPECT_FALSE(a.ShutDown());
  EXPECT_FALSE(b.ShutDown());
  guard.Leave(*second);
  EXPECT_TRUE(guard.MakeRoom(0));
  EXPECT_TRUE(guard.Admit(c.server));
}

TEST(ConnectionGuard, MakeRoomCountsAnEvictedConnectionAsLeaving) {
  ConnectionGuard guard(1);
  Pair a;
  auto first = guard.Admit(a.server);
  ASSERT_TRUE(first);
  EXPECT_TRUE(guard.MakeRoom(0));  // evicts a
  EXPECT_TRUE(a.ShutDown());
  EXPECT_TRUE(guard.MakeRoom(0));  // a is on its way out: no second eviction needed
  EXPECT_EQ(guard.evicted(), 1u);
  // One connection already waits for a's slot: a second one finds none.
  EXPECT_FALSE(guard.MakeRoom(1));
}

TEST(ConnectionGuard, StoppingShutsDownOnlyReaders) {
  ConnectionGuard guard(4);
  Pair a, b;
  guard.Admit(a.server);
  auto busy = guard.Admit(b.server);
  guard.RequestRead(*busy);
  guard.ShutDownReaders();
  EXPECT_TRUE(a.ShutDown());
  EXPECT_FALSE(b.ShutDown());
}

}  // namespace
}  // namespace nlockd::admin
