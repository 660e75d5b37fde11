// SPDX-License-Identifier: Apache-2.0
#include "rpc/task_gate.hpp"

#include <chrono>
#include <optional>

#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <gtest/gtest.h>

#include "rpc/use_tuple.hpp"
#include "testutil/captured_log.hpp"
#include "testutil/run_coroutine.hpp"

namespace nlockd::rpc {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testutil::RunCoroutine;

// Sleeps for an hour unless cancelled; counts how it ended.
asio::awaitable<void> SleepLong(int& cancelled) {
  asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::hours(1));
  auto [ec] = co_await timer.async_wait(kUseTuple);
  if (ec == asio::error::operation_aborted) ++cancelled;
}

// Watches the gate's cancelled() event instead of a cancellation slot.
asio::awaitable<void> WatchCancelled(TaskGate::Pass pass, Event& cancelled, int& woken) {
  TaskGate::Pass held = std::move(pass);
  const bool fired = co_await cancelled.Wait();
  if (fired) ++woken;
}

// Ignores cancellation: sleeps its whole `length`.
asio::awaitable<void> Stubborn(TaskGate::Pass /*pass*/, milliseconds length) {
  asio::steady_timer timer(co_await asio::this_coro::executor, length);
  co_await timer.async_wait(kUseTuple);
}

TEST(TaskGate, CancelledTasksFinishAndTheGateEmpties) {
  asio::io_context io;
  TaskGate gate(io.get_executor(), "test");
  int cancelled = 0;
  int woken = 0;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(gate.Spawn("sleeper", [&] { return SleepLong(cancelled); }));
  }
  auto pass = gate.TryEnter("watcher");
  ASSERT_TRUE(pass);
  asio::co_spawn(io, WatchCancelled(std::move(*pass), gate.cancelled(), woken), asio::detached);
  io.poll();
  EXPECT_EQ(gate.count(), 4u);
  EXPECT_EQ(gate.Running(), "3 sleeper, 1 watcher");

  const auto started = std::chrono::steady_clock::now();
  EXPECT_TRUE(RunCoroutine(io, gate.CancelAndWait(seconds(30))));
  EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(5));
  EXPECT_EQ(cancelled, 3);
  EXPECT_EQ(woken, 1);
  EXPECT_EQ(gate.count(), 0u);
  EXPECT_TRUE(gate.closed());
  EXPECT_FALSE(gate.Spawn("late", [&] { return SleepLong(cancelled); }));
  EXPECT_FALSE(gate.TryEnter().has_value());
}

TEST(TaskGate, ATaskThatIgnoresCancelIsReportedAfterTheBound) {
  asio::io_context io;
  testutil::CapturedLog log;
  TaskGate gate(io.get_executor(), "stubborn owner");
  auto pass = gate.TryEnter("stubborn task");
  ASSERT_TRUE(pass);
  asio::co_spawn(io, Stubborn(std::move(*pass), milliseconds(300)), asio::detached);
  io.poll();

  EXPECT_FALSE(RunCoroutine(io, gate.CancelAndWait(milliseconds(50))));
  EXPECT_EQ(gate.count(), 1u);
  EXPECT_NE(log.text().find("stubborn owner: 1 stubborn task still running 50 ms after shutdown "
                            "began; shutting down without them"),
            std::string::npos)
      << log.text();
  // It ends by itself later; the gate sees it go.
  EXPECT_TRUE(RunCoroutine(io, gate.WaitEmpty(seconds(5))));
}

TEST(TaskGate, APassMayOutliveTheGate) {
  asio::io_context io;
  std::optional<TaskGate::Pass> pass;
  {
    TaskGate gate(io.get_executor());
    std::optional<TaskGate::Pass> entered = gate.TryEnter();
    ASSERT_TRUE(entered);
    pass.emplace(std::move(*entered));
  }
  pass.reset();  // frees what the gate and the pass shared (ASan checks)
}

asio::awaitable<void> Brief(int& done) {
  asio::steady_timer timer(co_await asio::this_coro::executor, milliseconds(1));
  co_await timer.async_wait(kUseTuple);
  ++done;
}

TEST(TaskGate, ReusedSignalsStillCancelTheirNewTasks) {
  asio::io_context io;
  TaskGate gate(io.get_executor());
  int done = 0;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(gate.Spawn("brief", [&] { return Brief(done); }));
  EXPECT_TRUE(RunCoroutine(io, gate.WaitEmpty(seconds(5))));
  EXPECT_EQ(done, 3);
  int cancelled = 0;
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(gate.Spawn("sleeper", [&] { return SleepLong(cancelled); }));
  io.poll();
  EXPECT_TRUE(RunCoroutine(io, gate.CancelAndWait(seconds(5))));
  EXPECT_EQ(cancelled, 4);
}

}  // namespace
}  // namespace nlockd::rpc
