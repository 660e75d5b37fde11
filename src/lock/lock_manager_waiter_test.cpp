// SPDX-License-Identifier: Apache-2.0
// LockManager: blocked requests, grants, cancel, revoke.

#include <gtest/gtest.h>

#include "lock/lock_manager.hpp"
#include "lock/testing/test_util.hpp"

namespace nlockd::lock {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): test helpers.

class LockManagerWaiterTest : public LockManagerFixture {};

TEST_F(LockManagerWaiterTest, ABlockingConflictQueuesAWaiter) {
  manager_.Lock(Req(f_, a_, 0, 10));
  const LockOutcome out = manager_.Lock(Blocking(f_, b_, 5, 10));
  EXPECT_EQ(out.status, LockStatus::kBlocked);
  ASSERT_TRUE(out.waiter);
  EXPECT_EQ(out.holder->owner, a_);
  EXPECT_TRUE(out.host_added);  // A blocked host is monitored too: it will hold the lock.
  EXPECT_EQ(manager_.Counts().waiters, 1u);
  EXPECT_EQ(manager_.hosts().Find(HostId("b"))->waiters, 1u);
  EXPECT_EQ(Locks(manager_, f_), "1@a X [0,9]");
}

TEST_F(LockManagerWaiterTest, ANonBlockingConflictQueuesNothing) {
  manager_.Lock(Req(f_, a_, 0, 10));
  manager_.Lock(Req(f_, b_, 5, 10));
  EXPECT_EQ(manager_.Counts().waiters, 0u);
  EXPECT_TRUE(manager_.Unlock(f_, a_, 0, 0).grants.empty());
}

TEST_F(LockManagerWaiterTest, ARetransmittedBlockingRequestReusesItsWaiter) {
  manager_.Lock(Req(f_, a_, 0, 10));
  const LockOutcome first = manager_.Lock(Blocking(f_, b_, 0, 10));
  const LockOutcome again = manager_.Lock(Blocking(f_, b_, 0, 10));
  EXPECT_EQ(again.status, LockStatus::kBlocked);
  EXPECT_EQ(again.waiter, first.waiter);
  EXPECT_EQ(manager_.Counts().waiters, 1u);
  // A different range or type is a different request.
  EXPECT_NE(manager_.Lock(Blocking(f_, b_, 0, 10, kS)).waiter, first.waiter);
  EXPECT_EQ(manager_.Counts().waiters, 2u);
}

TEST_F(LockManagerWaiterTest, UnlockGrantsTheWaiterAndReportsIt) {
  manager_.Lock(Req(f_, a_, 0, 10));
  const WaiterId id = *manager_.Lock(Blocking(f_, b_, 5, 10)).waiter;
  const UnlockOutcome out = manager_.Unlock(f_, a_, 0, 10);
  ASSERT_EQ(out.grants.size(), 1u);
  EXPECT_EQ(out.grants[0], (WaiterGrant{id, f_, b_, ByteRange::FromFirstLast(5, 14), kX}));
  EXPECT_EQ(Locks(manager_, f_), "1@b X [5,14]");
  const LockCounts counts = manager_.Counts();
  EXPECT_EQ(counts.waiters, 0u);
  EXPECT_EQ(counts.pending_grants, 1u);
  EXPECT_EQ(manager_.hosts().Find(HostId("b"))->pending_grants, 1u);
}

TEST_F(LockManagerWaiterTest, WaitersForTheSameRangeAreServedInArrivalOrder) {
  manager_.Lock(Req(f_, a_, 0, 10));
  manager_.Lock(Blocking(f_, c_, 0, 10));
  manager_.Lock(Blocking(f_, b_, 0, 10));
  manager_.Lock(Blocking(f_, d_, 0, 10));
  EXPECT_EQ(Describe(manager_.Unlock(f_, a_, 0, 0).grants), "1:1@c X [0,9]");
  EXPECT_EQ(Describe(manager_.Unlock(f_, c_, 0, 0).grants), "2:1@b X [0,9]");
  EXPECT_EQ(Describe(manager_.Unlock(f_, b_, 0, 0).grants), "3:1@d X [0,9]");
}

TEST_F(LockManagerWaiterTest, CompatibleSharedWaitersAreGrantedTogether) {
  manager_.Lock(Req(f_, a_, 0, 10));
  manager_.Lock(Blocking(f_, b_, 0, 10, kS));
  manager_.Lock(Blocking(f_, c_, 5, 10, kS));
  manager_.Lock(Blocking(f_, d_, 0, 1, kX));
  EXPECT_EQ(Describe(manager_.Unlock(f_, a_, 0, 0).grants), "1:1@b S [0,9], 2:1@c S [5,14]");
  EXPECT_EQ(manager_.Counts().waiters, 1u);
}

TEST_F(LockManagerWaiterTest, AYoungerWaiterThatFitsIsGrantedWhileAnOlderOneStaysBlocked) {
  manager_.Lock(Req(f_, a_, 0, 10));
  manager_.Lock(Req(f_, b_, 20, 10));
  manager_.Lock(Blocking(f_, c_, 0, 30));  // Needs both released.
  manager_.Lock(Blocking(f_, d_, 0, 10));  // Needs only a's.
  EXPECT_EQ(Describe(manager_.Unlock(f_, a_, 0, 0).grants), "2:1@d X [0,9]");
  EXPECT_TRUE(manager_.Unlock(f_, b_, 0, 0).grants.empty());  // c now waits for d.
  EXPECT_EQ(Describe(manager_.Unlock(f_, d_, 0, 0).grants), "1:1@c X [0,29]");
}

TEST_F(LockManagerWaiterTest, ANewRequestThatFitsTheHoldersIsGrantedDespiteOlderWaiters) {
  manager_.Lock(Req(f_, a_, 0, 10, kS));
  manager_.Lock(Blocking(f_, b_, 0, 10, kX));
  // Like Linux: c's shared lock conflicts with no holder, so it is granted now.
  EXPECT_EQ(manager_.Lock(Req(f_, c_, 0, 10, kS)).status, LockStatus::kGranted);
  EXPECT_TRUE(manager_.Unlock(f_, a_, 0, 0).grants.empty());
  EXPECT_EQ(Describe(manager_.Unlock(f_, c_, 0, 0).grants), "1:1@b X [0,9]");
}

TEST_F(LockManagerWaiterTest, CancelRemovesAQueuedWaiter) {
  manager_.Lock(Req(f_, a_, 0, 10));
  const WaiterId id = *manager_.Lock(Blocking(f_, b_, 0, 10)).waiter;
  const CancelOutcome other_type = manager_.Cancel(Req(f_, b_, 0, 10, kS));
  EXPECT_EQ(other_type.result, CancelResult::kNotFound);
  EXPECT_TRUE(other_type.waiters_removed.empty());
  const CancelOutcome cancelled = manager_.Cancel(Req(f_, b_, 0, 10));
  EXPECT_EQ(cancelled.result, CancelResult::kCancelled);
  EXPECT_EQ(cancelled.waiters_removed, WaiterIds{id});
  EXPECT_EQ(manager_.Counts().waiters, 0u);
  EXPECT_EQ(manager_.Counts().owners, 1u);
  EXPECT_TRUE(manager_.Unlock(f_, a_, 0, 0).grants.empty());
  EXPECT_EQ(manager_.Cancel(Req(f_, b_, 0, 10)).result, CancelResult::kNotFound);
  EXPECT_EQ(manager_.Counts().files, 0u);
}

TEST_F(LockManagerWaiterTest, CancelOfAGrantedBlockUndoesTheGrantAndServesTheNext) {
  manager_.Lock(Req(f_, a_, 0, 10));
  const WaiterId b_id = *manager_.Lock(Blocking(f_, b_, 0, 10)).waiter;
  manager_.Lock(Blocking(f_, c_, 0, 10));
  manager_.Unlock(f_, a_, 0, 0);  // Grants b.
  const CancelOutcome out = manager_.Cancel(Req(f_, b_, 0, 10));
  EXPECT_EQ(out.result, CancelResult::kGrantUndone);
  EXPECT_EQ(out.waiters_removed, WaiterIds{b_id});
  EXPECT_EQ(Describe(out.grants), "2:1@c X [0,9]");
  EXPECT_EQ(Locks(manager_, f_), "1@c X [0,9]");
}

TEST_F(LockManagerWaiterTest, RevokingAGrantReleasesItsLockAndGrantsTheNext) {
  manager_.Lock(Req(f_, a_, 0, 10));
  const WaiterId b_id = *manager_.Lock(Blocking(f_, b_, 0, 10)).waiter;
  manager_.Lock(Blocking(f_, c_, 0, 10));
  manager_.Unlock(f_, a_, 0, 0);
  const RevokeOutcome out = manager_.RevokeGrant(b_id);
  EXPECT_TRUE(out.revoked);
  EXPECT_EQ(Describe(out.grants), "2:1@c X [0,9]");
  EXPECT_FALSE(manager_.RevokeGrant(b_id).revoked);
  EXPECT_EQ(manager_.hosts().Find(HostId("b"))->locks, 0u);
}

TEST_F(LockManagerWaiterTest, AcknowledgedGrantsCannotBeRevoked) {
  manager_.Lock(Req(f_, a_, 0, 10));
  const WaiterId id = *manager_.Lock(Blocking(f_, b_, 0, 10)).waiter;
  EXPECT_FALSE(manager_.AcknowledgeGrant(id));  // Not granted yet.
  EXPECT_FALSE(manager_.RevokeGrant(id).revoked);
  manager_.Unlock(f_, a_, 0, 0);
  EXPECT_TRUE(manager_.AcknowledgeGrant(id));
  EXPECT_FALSE(manager_.AcknowledgeGrant(id));
  EXPECT_FALSE(manager_.RevokeGrant(id).revoked);
  EXPECT_EQ(Locks(manager_, f_), "1@b X [0,9]");
  EXPECT_EQ(manager_.Counts().pending_grants, 0u);
}

TEST_F(LockManagerWaiterTest, ARetransmitAfterTheGrantAnswersGrantedAndSettlesIt) {
  manager_.Lock(Req(f_, a_, 0, 10));
  const WaiterId id = *manager_.Lock(Blocking(f_, b_, 0, 10)).waiter;
  manager_.Unlock(f_, a_, 0, 0);
  // The client re-polls before the GRANTED callback reached it.
  const LockOutcome again = manager_.Lock(Blocking(f_, b_, 0, 10));
  EXPECT_EQ(again.status, LockStatus::kGranted);
  EXPECT_EQ(again.waiters_removed, WaiterIds{id});
  EXPECT_FALSE(manager_.RevokeGrant(id).revoked);  // A late callback failure changes nothing.
  EXPECT_EQ(Locks(manager_, f_), "1@b X [0,9]");
}

TEST_F(LockManagerWaiterTest, UnlockCancelsTheOwnersBlocksOverTheRange) {
  manager_.Lock(Req(f_, a_, 0, 10));
  const WaiterId first = *manager_.Lock(Blocking(f_, b_, 0, 10)).waiter;
  const WaiterId second = *manager_.Lock(Blocking(f_, b_, 5, 1, kS)).waiter;
  manager_.Lock(Req(f_, a_, 50, 10));
  manager_.Lock(Blocking(f_, b_, 50, 10));
  const UnlockOutcome out = manager_.Unlock(f_, b_, 0, 20);
  EXPECT_EQ(out.waiters_cancelled, 2u);
  EXPECT_EQ(out.waiters_removed, (WaiterIds{first, second}));  // Not the one at 50.
  EXPECT_EQ(manager_.Counts().waiters, 1u);
  EXPECT_TRUE(manager_.Unlock(f_, a_, 0, 10).grants.empty());
}

TEST_F(LockManagerWaiterTest, UnlockSettlesTheOwnersGrantsOverTheRange) {
  manager_.Lock(Req(f_, a_, 0, 10));
  const WaiterId id = *manager_.Lock(Blocking(f_, b_, 0, 10)).waiter;
  manager_.Unlock(f_, a_, 0, 0);
  const UnlockOutcome out = manager_.Unlock(f_, b_, 0, 10);
  EXPECT_EQ(out.waiters_cancelled, 0u);
  EXPECT_EQ(out.waiters_removed, WaiterIds{id});  // Settled, not cancelled.
  manager_.Lock(Req(f_, b_, 0, 10));
  EXPECT_FALSE(manager_.RevokeGrant(id).revoked);  // Must not drop the new lock.
  EXPECT_EQ(Locks(manager_, f_), "1@b X [0,9]");
}

TEST_F(LockManagerWaiterTest, ADowngradeGrantsSharedWaiters) {
  manager_.Lock(Req(f_, a_, 0, 100));
  manager_.Lock(Blocking(f_, b_, 10, 10, kS));
  manager_.Lock(Blocking(f_, c_, 90, 10, kS));
  const LockOutcome out = manager_.Lock(Req(f_, a_, 0, 50, kS));
  EXPECT_EQ(out.status, LockStatus::kGranted);
  EXPECT_EQ(Describe(out.grants), "1:1@b S [10,19]");
}

TEST_F(LockManagerWaiterTest, AGrantThatDowngradesItsOwnersLockWakesOlderWaiters) {
  manager_.Lock(Req(f_, b_, 0, 10, kX));       // b holds X [0,9].
  manager_.Lock(Req(f_, a_, 20, 10, kX));      // a holds X [20,29].
  manager_.Lock(Blocking(f_, c_, 0, 5, kS));   // c waits on b's X.
  manager_.Lock(Blocking(f_, b_, 0, 30, kS));  // b wants S [0,29]: waits on a.
  // a unlocks: b's waiter is granted, turning b's X [0,9] into S, so c fits too.
  EXPECT_EQ(Describe(manager_.Unlock(f_, a_, 0, 0).grants), "2:1@b S [0,29], 1:1@c S [0,4]");
  EXPECT_EQ(Locks(manager_, f_), "1@b S [0,29], 1@c S [0,4]");
}

TEST_F(LockManagerWaiterTest, NoWakeUpIsLostWhenOneReleaseFreesSeveralRanges) {
  manager_.Lock(Req(f_, a_, 0, 100));
  manager_.Lock(Blocking(f_, b_, 0, 10));
  manager_.Lock(Blocking(f_, c_, 40, 10));
  manager_.Lock(Blocking(f_, d_, 95, 0));
  EXPECT_EQ(Describe(manager_.Unlock(f_, a_, 0, 0).grants),
            "1:1@b X [0,9], 2:1@c X [40,49], 3:1@d X [95,end]");
}

TEST_F(LockManagerWaiterTest, WaitersOnlyWakeForReleasesTheyOverlap) {
  manager_.Lock(Req(f_, a_, 0, 10));
  manager_.Lock(Req(f_, a_, 50, 10));
  manager_.Lock(Blocking(f_, b_, 50, 10));
  EXPECT_TRUE(manager_.Unlock(f_, a_, 0, 10).grants.empty());
  EXPECT_EQ(manager_.Counts().waiters, 1u);
}

TEST_F(LockManagerWaiterTest, RefusesWaitersPastTheHostsLimit) {
  LockManager manager(clock_, LockManagerOptions{.max_waiters_per_host = 1});
  manager.Lock(Req(f_, a_, 0, 10));
  EXPECT_EQ(manager.Lock(Blocking(f_, b_, 0, 1)).status, LockStatus::kBlocked);
  EXPECT_EQ(manager.Lock(Blocking(f_, b_, 0, 1)).status, LockStatus::kBlocked);  // Same one.
  EXPECT_EQ(manager.Lock(Blocking(f_, b_, 1, 1)).status, LockStatus::kNoResources);
}

TEST_F(LockManagerWaiterTest, RefusesWaitersPastTheTotalLimitWhateverTheHost) {
  LockManager manager(clock_, LockManagerOptions{.max_waiters = 2});
  manager.Lock(Req(f_, a_, 0, 10));
  EXPECT_EQ(manager.Lock(Blocking(f_, b_, 0, 1)).status, LockStatus::kBlocked);
  EXPECT_EQ(manager.Lock(Blocking(f_, c_, 1, 1)).status, LockStatus::kBlocked);
  EXPECT_EQ(manager.Lock(Blocking(f_, d_, 2, 1)).status, LockStatus::kNoResources)
      << "a host with no waiter of its own, past the total";
  EXPECT_EQ(manager.Lock(Blocking(f_, b_, 0, 1)).status, LockStatus::kBlocked)
      << "a retransmission of a queued request is still answered";
  EXPECT_EQ(manager.Lock(Req(f_, d_, 20, 1)).status, LockStatus::kGranted) << "locks are not";
  manager.Cancel(Blocking(f_, b_, 0, 1));
  EXPECT_EQ(manager.Lock(Blocking(f_, d_, 2, 1)).status, LockStatus::kBlocked);
}

TEST_F(LockManagerWaiterTest, ListsWaitersInArrivalOrder) {
  manager_.Lock(Req(f_, a_, 0, 10));
  manager_.Lock(Blocking(f_, c_, 0, 10));
  clock_.Advance(std::chrono::seconds(1));
  manager_.Lock(Blocking(f_, b_, 0, 10, kS));
  const std::vector<WaiterInfo> waiters = manager_.ListWaiters();
  ASSERT_EQ(waiters.size(), 2u);
  EXPECT_EQ(waiters[0].owner, c_);
  EXPECT_EQ(waiters[1].owner, b_);
  EXPECT_EQ(waiters[1].type, kS);
  EXPECT_FALSE(waiters[1].granted);
  EXPECT_EQ(waiters[1].since - waiters[0].since, std::chrono::seconds(1));
  EXPECT_EQ(manager_.ListWaiters(StateFilter{HostId("b"), std::nullopt}).size(), 1u);
}

}  // namespace
}  // namespace nlockd::lock
