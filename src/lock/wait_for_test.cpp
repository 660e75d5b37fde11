// SPDX-License-Identifier: Apache-2.0
#include "lock/wait_for.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace nlockd::lock {
namespace {

constexpr LockType kX = LockType::kExclusive;
constexpr LockType kS = LockType::kShared;

ByteRange R(uint64_t first, uint64_t last) { return ByteRange::FromFirstLast(first, last); }
OwnerId O(uint32_t id) { return OwnerId(id); }

Waiter MakeWaiter(uint64_t id, OwnerId owner, ByteRange range, LockType type = kX) {
  return Waiter{WaiterId(id), owner, range, type, Waiter::State::kQueued, {}, {}, {}};
}

std::string WaitersOf(const WaitFor& graph, OwnerId owner) {
  std::string out;
  graph.ForEachWaiter(owner, [&](const Waiter& w) { out += std::to_string(w.id.value()) + " "; });
  return out;
}

TEST(WaitFor, KeepsEachOwnersQueuedWaitersAcrossRemovals) {
  WaitFor graph;
  LockTable f(1);
  LockTable g(2);
  Waiter w1 = MakeWaiter(1, O(3), R(0, 0));
  Waiter w2 = MakeWaiter(2, O(3), R(0, 0));
  Waiter w3 = MakeWaiter(3, O(3), R(5, 5));
  Waiter other = MakeWaiter(4, O(0), R(0, 0));
  EXPECT_FALSE(graph.Waiting(O(3)));
  EXPECT_FALSE(graph.Waiting(O(1000)));  // Past every id seen.
  graph.Add(w1, f);
  graph.Add(w2, g);
  graph.Add(w3, f);
  graph.Add(other, g);
  EXPECT_EQ(WaitersOf(graph, O(3)), "3 2 1 ");
  graph.Remove(w2);  // Middle.
  EXPECT_EQ(WaitersOf(graph, O(3)), "3 1 ");
  graph.Remove(w3);  // Head.
  EXPECT_EQ(WaitersOf(graph, O(3)), "1 ");
  graph.Remove(w1);
  EXPECT_FALSE(graph.Waiting(O(3)));
  EXPECT_TRUE(graph.Waiting(O(0)));
  EXPECT_EQ(w1.wait_link.locks, nullptr);
}

// Owners 0..3; f and g two files.
class WaitForCheck : public ::testing::Test {
 protected:
  WaitFor::Result Check(OwnerId requester, const LockTable& table, ByteRange range,
                        LockType type = kX) {
    return graph_.Check(requester, table, range, type, limits_);
  }

  WaitFor graph_;
  WaitForLimits limits_;
  LockTable f_{1};
  LockTable g_{2};
};

TEST_F(WaitForCheck, HoldersThatWaitForNobodyEndTheSearch) {
  f_.Lock(O(1), R(0, 9), kX, false);
  EXPECT_EQ(Check(O(0), f_, R(0, 0)), WaitFor::Result::kNoCycle);
}

TEST_F(WaitForCheck, FindsTheRequesterBehindAWaitingHolder) {
  f_.Lock(O(1), R(0, 9), kX, false);
  g_.Lock(O(0), R(0, 9), kX, false);
  Waiter w = MakeWaiter(1, O(1), R(5, 5));
  graph_.Add(w, g_);  // 1 waits on g, held by 0.
  EXPECT_EQ(Check(O(0), f_, R(0, 0)), WaitFor::Result::kCycle);
  // Outside the range 1 holds, or compatible with it, 0 waits for nobody.
  EXPECT_EQ(Check(O(0), f_, R(10, 10)), WaitFor::Result::kNoCycle);
  f_.Lock(O(1), R(0, 9), kS, false);
  EXPECT_EQ(Check(O(0), f_, R(0, 0), kS), WaitFor::Result::kNoCycle);
  // 1 waiting for a shared lock of 0 does not wait for it.
  g_.Lock(O(0), R(0, 9), kS, false);
  graph_.Remove(w);
  Waiter shared = MakeWaiter(2, O(1), R(5, 5), kS);
  graph_.Add(shared, g_);
  EXPECT_EQ(Check(O(0), f_, R(0, 0)), WaitFor::Result::kNoCycle);
}

TEST_F(WaitForCheck, AnOwnerWaitingForItselfIsNoCycleOfTheRequester) {
  // 1 waits on g over a range it partly holds itself, and 2 holds the rest.
  f_.Lock(O(1), R(0, 0), kX, false);
  g_.Lock(O(1), R(0, 4), kX, false);
  g_.Lock(O(2), R(5, 9), kX, false);
  Waiter w = MakeWaiter(1, O(1), R(0, 9));
  graph_.Add(w, g_);
  EXPECT_EQ(Check(O(0), f_, R(0, 0)), WaitFor::Result::kNoCycle);
  EXPECT_EQ(Check(O(2), f_, R(0, 0)), WaitFor::Result::kCycle);
}

TEST_F(WaitForCheck, LimitsStopTheSearchAndSaySo) {
  f_.Lock(O(1), R(0, 0), kX, false);
  g_.Lock(O(0), R(0, 0), kX, false);
  Waiter w = MakeWaiter(1, O(1), R(0, 0));
  graph_.Add(w, g_);
  limits_.max_cycle = 1;
  EXPECT_EQ(Check(O(0), f_, R(0, 0)), WaitFor::Result::kGaveUp);
  limits_.max_cycle = 2;
  EXPECT_EQ(Check(O(0), f_, R(0, 0)), WaitFor::Result::kCycle);
  limits_.max_steps = 1;  // The entry on f, then no budget for the one on g.
  EXPECT_EQ(Check(O(0), f_, R(0, 0)), WaitFor::Result::kGaveUp);
}

}  // namespace
}  // namespace nlockd::lock
