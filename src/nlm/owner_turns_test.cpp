// SPDX-License-Identifier: Apache-2.0
#include "nlm/owner_turns.hpp"

#include <string>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <gtest/gtest.h>

namespace nlockd::nlm {
namespace {

class OwnerTurnsTest : public ::testing::Test {
 protected:
  // Takes the slot's turn, notes `name`, and holds the turn until `release` is set and polled.
  static asio::awaitable<void> TakeAndHold(OwnerTurns* turns, size_t slot, std::string name,
                                           std::vector<std::string>* order, bool* release) {
    OwnerTurns::Turn turn = co_await turns->Take(slot);
    order->push_back(name);
    asio::steady_timer poll(co_await asio::this_coro::executor);
    while (!*release) {
      poll.expires_after(std::chrono::milliseconds(1));
      co_await poll.async_wait(asio::use_awaitable);
    }
  }

  void Spawn(size_t slot, const char* name, bool* release) {
    asio::co_spawn(io_, TakeAndHold(&turns_, slot, name, &order_, release), asio::detached);
    Run();
  }
  void Run() {
    io_.restart();
    io_.run_for(std::chrono::milliseconds(5));
  }

  asio::io_context io_;
  OwnerTurns turns_{io_.get_executor()};
  std::vector<std::string> order_;
};

TEST_F(OwnerTurnsTest, OneOwnersCallsTakeTurnsInArrivalOrder) {
  const size_t slot = OwnerTurns::SlotOf(
      lock::FileKey("fh"), lock::LockOwner{lock::HostId("h"), 1, lock::OwnerHandle("1@h")});
  bool release_first = false, release_second = false, release_third = false;
  Spawn(slot, "first", &release_first);
  Spawn(slot, "second", &release_second);
  Spawn(slot, "third", &release_third);
  EXPECT_EQ(order_, std::vector<std::string>{"first"});
  EXPECT_FALSE(turns_.TryTake(slot)) << "held, and others wait before a newcomer";
  release_first = true;
  Run();
  EXPECT_EQ(order_, (std::vector<std::string>{"first", "second"}));
  EXPECT_FALSE(turns_.TryTake(slot)) << "handed straight to the next waiter";
  release_second = true;
  Run();
  release_third = true;
  Run();
  EXPECT_EQ(order_, (std::vector<std::string>{"first", "second", "third"}));
  EXPECT_FALSE(turns_.held(slot));
  std::optional<OwnerTurns::Turn> turn = turns_.TryTake(slot);
  EXPECT_TRUE(turn);
  EXPECT_TRUE(turns_.held(slot));
  turn.reset();
  EXPECT_FALSE(turns_.held(slot));
}

TEST_F(OwnerTurnsTest, SlotsNameTheFileAndTheWholeOwner) {
  const lock::LockOwner owner{lock::HostId("h"), 1, lock::OwnerHandle("1@h")};
  const size_t slot = OwnerTurns::SlotOf(lock::FileKey("fh"), owner);
  EXPECT_EQ(slot, OwnerTurns::SlotOf(lock::FileKey("fh"), owner));
  EXPECT_LT(slot, OwnerTurns::kSlots);
  // Not a guarantee for any two owners (slots are shared by hashing), but for these it holds.
  EXPECT_NE(slot, OwnerTurns::SlotOf(lock::FileKey("fh2"), owner));
  EXPECT_NE(slot,
            OwnerTurns::SlotOf(lock::FileKey("fh"),
                               lock::LockOwner{lock::HostId("h"), 2, lock::OwnerHandle("1@h")}));
}

}  // namespace
}  // namespace nlockd::nlm
