// SPDX-License-Identifier: Apache-2.0
#include "rpc/event.hpp"

#include <chrono>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <gtest/gtest.h>

#include "testutil/run_coroutine.hpp"

namespace nlockd::rpc {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testutil::RunCoroutine;

asio::awaitable<bool> WaitAndCount(Event& event, int& woken) {
  bool fired = co_await event.Wait();
  ++woken;
  co_return fired;
}

TEST(Event, SetWakesEveryWaiter) {
  asio::io_context io;
  Event event(io.get_executor());
  int woken = 0;
  int fired = 0;
  for (int i = 0; i < 3; ++i) {
    asio::co_spawn(io, WaitAndCount(event, woken), [&](std::exception_ptr, bool f) { fired += f; });
  }
  io.poll();
  EXPECT_EQ(woken, 0);
  event.Set();
  io.poll();
  EXPECT_EQ(woken, 3);
  EXPECT_EQ(fired, 3);
  EXPECT_TRUE(event.IsSet());
}

TEST(Event, WaitOnASetEventReturnsAtOnce) {
  asio::io_context io;
  Event event(io.get_executor());
  event.Set();
  EXPECT_TRUE(RunCoroutine(io, event.Wait(), milliseconds(500)));
  EXPECT_TRUE(RunCoroutine(io, event.WaitFor(seconds(60)), milliseconds(500)));
  event.Reset();
  EXPECT_FALSE(event.IsSet());
}

TEST(Event, WaitForSaysTheTimeRanOut) {
  asio::io_context io;
  Event event(io.get_executor());
  const auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(RunCoroutine(io, event.WaitFor(milliseconds(30))));
  EXPECT_GE(std::chrono::steady_clock::now() - started, milliseconds(30));
}

TEST(Event, WaitForSaysItFiredBeforeTheTimeout) {
  asio::io_context io;
  Event event(io.get_executor());
  asio::post(io, [&] { event.Set(); });
  EXPECT_TRUE(RunCoroutine(io, event.WaitFor(seconds(60)), milliseconds(2000)));
}

TEST(Event, ResetAfterSetStillReportsTheWaiterFired) {
  asio::io_context io;
  Event event(io.get_executor());
  int woken = 0;
  bool fired = false;
  asio::co_spawn(io, WaitAndCount(event, woken), [&](std::exception_ptr, bool f) { fired = f; });
  io.poll();
  event.Set();
  event.Reset();  // before the waiter ran: it was woken by the Set all the same
  io.poll();
  EXPECT_EQ(woken, 1);
  EXPECT_TRUE(fired);
}

TEST(Event, CancellingTheWaitingCoroutineEndsItsWait) {
  asio::io_context io;
  Event event(io.get_executor());
  asio::cancellation_signal cancel;
  int woken = 0;
  std::optional<bool> fired;
  asio::co_spawn(
      io, WaitAndCount(event, woken),
      asio::bind_cancellation_slot(cancel.slot(), [&](std::exception_ptr, bool f) { fired = f; }));
  io.poll();
  cancel.emit(asio::cancellation_type::terminal);
  io.poll();
  ASSERT_TRUE(fired.has_value());
  EXPECT_FALSE(*fired);
  EXPECT_FALSE(event.IsSet());
  event.Set();  // nobody waits any more
  io.poll();
  EXPECT_EQ(woken, 1);
}

}  // namespace
}  // namespace nlockd::rpc
