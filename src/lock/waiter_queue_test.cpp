// SPDX-License-Identifier: Apache-2.0
#include "lock/waiter_queue.hpp"

#include <vector>

#include <gtest/gtest.h>

namespace nlockd::lock {
namespace {

Waiter MakeWaiter(uint64_t id, uint32_t owner, uint64_t first, uint64_t last) {
  return Waiter{WaiterId(id),
                OwnerId(owner),
                ByteRange::FromFirstLast(first, last),
                LockType::kExclusive,
                Waiter::State::kQueued,
                Clock::time_point{},
                {},
                {}};
}

TEST(WaiterQueue, KeepsArrivalOrder) {
  WaiterQueue queue;
  queue.Append(MakeWaiter(1, 0, 0, 9));
  auto second = queue.Append(MakeWaiter(2, 1, 0, 9));
  queue.Append(MakeWaiter(3, 2, 0, 9));
  queue.Erase(second);
  std::vector<uint64_t> ids;
  for (const Waiter& w : queue) ids.push_back(w.id.value());
  EXPECT_EQ(ids, (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(queue.queued_count(), 2u);
}

TEST(WaiterQueue, FindsExactlyTheSameRequestInTheWantedState) {
  WaiterQueue queue;
  auto it = queue.Append(MakeWaiter(1, 0, 0, 9));
  const auto range = ByteRange::FromFirstLast(0, 9);
  EXPECT_EQ(queue.Find(OwnerId(0), range, LockType::kExclusive, Waiter::State::kQueued), it);
  EXPECT_EQ(queue.Find(OwnerId(0), range, LockType::kShared, Waiter::State::kQueued), queue.end());
  EXPECT_EQ(queue.Find(OwnerId(0), ByteRange::FromFirstLast(0, 8), LockType::kExclusive,
                       Waiter::State::kQueued),
            queue.end());
  queue.MarkGranted(it, Clock::time_point{} + std::chrono::seconds(5));
  EXPECT_EQ(queue.queued_count(), 0u);
  EXPECT_EQ(queue.Find(OwnerId(0), range, LockType::kExclusive, Waiter::State::kGranted), it);
  EXPECT_EQ(it->since, Clock::time_point{} + std::chrono::seconds(5));
}

}  // namespace
}  // namespace nlockd::lock
