// SPDX-License-Identifier: Apache-2.0
// LockManager: host release (crash clean-up, FREE_ALL) and the host registry.

#include <gtest/gtest.h>

#include "lock/lock_manager.hpp"
#include "lock/testing/test_util.hpp"

namespace nlockd::lock {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): test helpers.

class LockManagerHostTest : public ::testing::Test {
 protected:
  ManualClock clock_;
  LockManager manager_{clock_};
  const FileKey f_ = File("fh1");
  const FileKey g_ = File("fh2");
  const LockOwner a1_ = Owner("a", 1);
  const LockOwner a2_ = Owner("a", 2);
  const LockOwner b_ = Owner("b");
  const LockOwner c_ = Owner("c");
};

TEST_F(LockManagerHostTest, ReleaseHostDropsEveryLockShareAndWaiterOfTheHost) {
  manager_.Lock(Req(f_, a1_, 0, 10));
  manager_.Lock(Req(g_, a2_, 0, 10, kS));
  manager_.Lock(Req(g_, a2_, 20, 10, kX));
  manager_.Lock(Req(f_, b_, 50, 10));
  manager_.Lock(Blocking(f_, a2_, 50, 10));
  ShareRequest share;
  share.file = g_;
  share.owner = LockOwner{HostId("a"), 0, OwnerHandle("x")};
  manager_.Share(share);

  const HostReleaseOutcome out = manager_.ReleaseHost(HostId("a"));
  EXPECT_EQ(out.locks, 3u);
  EXPECT_EQ(out.shares, 1u);
  EXPECT_EQ(out.waiters, 1u);
  EXPECT_EQ(out.files_failed, 0u);
  EXPECT_TRUE(out.grants.empty());
  EXPECT_EQ(manager_.DebugString(), "file fh1\n  lock b/1/1@b exclusive [50,59]\n");
  const HostInfo* host = manager_.hosts().Find(HostId("a"));
  ASSERT_NE(host, nullptr);  // Stays registered, idle.
  EXPECT_FALSE(host->HoldsState());
  const LockCounts counts = manager_.Counts();
  EXPECT_EQ(counts.owners, 1u);
  EXPECT_EQ(counts.files, 1u);
  EXPECT_EQ(counts.active_hosts, 1u);
}

TEST_F(LockManagerHostTest, ReleaseHostWakesWaitersOfOtherHosts) {
  manager_.Lock(Req(f_, a1_, 0, 10));
  manager_.Lock(Req(g_, a2_, 0, 10));
  manager_.Lock(Blocking(f_, b_, 0, 10));
  manager_.Lock(Blocking(g_, c_, 5, 1));
  const HostReleaseOutcome out = manager_.ReleaseHost(HostId("a"));
  ASSERT_EQ(out.grants.size(), 2u);
  EXPECT_EQ(Locks(manager_, f_), "1@b X [0,9]");
  EXPECT_EQ(Locks(manager_, g_), "1@c X [5,5]");
}

TEST_F(LockManagerHostTest, ReleaseHostDropsItsGrantedUnacknowledgedWaiters) {
  manager_.Lock(Req(f_, b_, 0, 10));
  const WaiterId id = *manager_.Lock(Blocking(f_, a1_, 0, 10)).waiter;
  manager_.Lock(Blocking(f_, c_, 0, 10));
  manager_.Unlock(f_, b_, 0, 0);  // Grants a1.
  const HostReleaseOutcome out = manager_.ReleaseHost(HostId("a"));
  EXPECT_EQ(out.locks, 1u);
  EXPECT_EQ(out.pending_grants, 1u);
  EXPECT_EQ(Describe(out.grants), "2:1@c X [0,9]");
  EXPECT_FALSE(manager_.RevokeGrant(id).revoked);
}

TEST_F(LockManagerHostTest, ReleasingAnUnknownOrIdleHostDoesNothing) {
  EXPECT_EQ(manager_.ReleaseHost(HostId("nobody")).locks, 0u);
  manager_.Lock(Req(f_, a1_, 0, 10));
  manager_.Unlock(f_, a1_, 0, 0);
  EXPECT_EQ(manager_.ReleaseHost(HostId("a")).locks, 0u);
}

TEST_F(LockManagerHostTest, AReleasedHostCanLockAgainWithoutBeingNewAgain) {
  manager_.Lock(Req(f_, a1_, 0, 10));
  manager_.ReleaseHost(HostId("a"));
  const LockOutcome out = manager_.Lock(Req(f_, a1_, 0, 10));
  EXPECT_EQ(out.status, LockStatus::kGranted);
  EXPECT_FALSE(out.host_added);
  EXPECT_TRUE(out.host_activated);
}

TEST_F(LockManagerHostTest, ForgetOnlyRemovesIdleHosts) {
  manager_.Lock(Req(f_, a1_, 0, 10));
  EXPECT_FALSE(manager_.ForgetHost(HostId("a")));
  manager_.ReleaseHost(HostId("a"));
  EXPECT_TRUE(manager_.ForgetHost(HostId("a")));
  EXPECT_EQ(manager_.Counts().hosts, 0u);
}

TEST_F(LockManagerHostTest, ListsByHostOnlyThatHostsState) {
  manager_.Lock(Req(f_, a1_, 0, 10, kS));
  manager_.Lock(Req(f_, b_, 0, 10, kS));
  manager_.Lock(Req(g_, a2_, 0, 10));
  const auto locks = manager_.ListLocks(StateFilter{HostId("a"), std::nullopt});
  EXPECT_EQ(locks.size(), 2u);
  for (const LockInfo& lock : locks) EXPECT_EQ(lock.owner.host, HostId("a"));
  EXPECT_EQ(manager_.hosts().Find(HostId("a"))->locks, 2u);
}

TEST_F(LockManagerHostTest, AHostKeepsTheAddressOfItsLatestCallThatLeftItHoldingState) {
  LockRequest lock = Req(f_, a1_, 0, 10);
  lock.host_address = "192.0.2.1";
  ASSERT_EQ(manager_.Lock(lock).status, LockStatus::kGranted);
  EXPECT_EQ(manager_.hosts().Find(HostId("a"))->address, "192.0.2.1");
  // A denied call from elsewhere does not move it; a granted one does.
  LockRequest denied = Req(f_, Owner("a", 3), 0, 10);
  denied.host_address = "192.0.2.9";
  ASSERT_EQ(manager_.Lock(denied).status, LockStatus::kDenied);
  EXPECT_EQ(manager_.hosts().Find(HostId("a"))->address, "192.0.2.1");
  LockRequest moved = Req(g_, a2_, 0, 10);
  moved.host_address = "192.0.2.2";
  ASSERT_EQ(manager_.Lock(moved).status, LockStatus::kGranted);
  EXPECT_EQ(manager_.hosts().Find(HostId("a"))->address, "192.0.2.2");
}

}  // namespace
}  // namespace nlockd::lock
