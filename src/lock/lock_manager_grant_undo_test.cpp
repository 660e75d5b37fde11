// SPDX-License-Identifier: Apache-2.0
// LockManager: taking back a granted block (CANCEL of a granted block, a revoked grant) gives
// the owner back what it held over the range before the grant, not nothing.

#include <gtest/gtest.h>

#include "lock/lock_manager.hpp"
#include "lock/testing/test_util.hpp"

namespace nlockd::lock {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): test helpers.

class LockManagerGrantUndoTest : public LockManagerFixture {
 protected:
  // a holds S [0,99]; b holds S [0,99] too, so a's blocking upgrade to X [0,99] waits; b's unlock
  // grants it. Returns the upgrade's waiter id.
  WaiterId GrantAnUpgrade() {
    manager_.Lock(Req(f_, a_, 0, 100, kS));
    manager_.Lock(Req(f_, b_, 0, 100, kS));
    const LockOutcome blocked = manager_.Lock(Blocking(f_, a_, 0, 100, kX));
    EXPECT_EQ(blocked.status, LockStatus::kBlocked);
    EXPECT_EQ(Describe(manager_.Unlock(f_, b_, 0, 0).grants), "1:1@a X [0,99]");
    EXPECT_EQ(Locks(manager_, f_), "1@a X [0,99]");
    return blocked.waiter.value_or(WaiterId(0));
  }
};

TEST_F(LockManagerGrantUndoTest, CancelOfAGrantedUpgradeGivesBackTheSharedLock) {
  GrantAnUpgrade();
  const CancelOutcome out = manager_.Cancel(Blocking(f_, a_, 0, 100, kX));
  EXPECT_EQ(out.result, CancelResult::kGrantUndone);
  EXPECT_EQ(Locks(manager_, f_), "1@a S [0,99]");
  const LockCounts counts = manager_.Counts();
  EXPECT_EQ(counts.locks, 1u);
  EXPECT_EQ(counts.pending_grants, 0u);
  EXPECT_EQ(manager_.hosts().Find(HostId("a"))->locks, 1u);
}

TEST_F(LockManagerGrantUndoTest, ARevokedUpgradeGivesBackTheSharedLock) {
  const WaiterId id = GrantAnUpgrade();
  EXPECT_TRUE(manager_.RevokeGrant(id).revoked);
  EXPECT_EQ(Locks(manager_, f_), "1@a S [0,99]");
  EXPECT_EQ(manager_.Counts().locks, 1u);
}

TEST_F(LockManagerGrantUndoTest, UndoingAMergedGrantKeepsTheLockItMergedWith) {
  manager_.Lock(Req(f_, a_, 0, 10, kX));                                   // a: X [0,9].
  manager_.Lock(Req(f_, b_, 10, 10, kX));                                  // b: X [10,19].
  const WaiterId id = *manager_.Lock(Blocking(f_, a_, 5, 15, kX)).waiter;  // a wants [5,19].
  manager_.Unlock(f_, b_, 0, 0);
  ASSERT_EQ(Locks(manager_, f_), "1@a X [0,19]");
  EXPECT_TRUE(manager_.RevokeGrant(id).revoked);
  EXPECT_EQ(Locks(manager_, f_), "1@a X [0,9]");
}

TEST_F(LockManagerGrantUndoTest, UndoingAGrantServesTheWaitersItBlockedButNotOnBytesGivenBack) {
  GrantAnUpgrade();
  // c wants S on a's range and beyond; d wants X on bytes only the grant had taken.
  manager_.Lock(Req(f_, a_, 200, 10, kX));
  ASSERT_EQ(manager_.Lock(Blocking(f_, c_, 50, 100, kS)).status, LockStatus::kBlocked);
  const LockOwner d = Owner("d");
  ASSERT_EQ(manager_.Lock(Blocking(f_, d, 0, 10, kX)).status, LockStatus::kBlocked);
  const CancelOutcome out = manager_.Cancel(Blocking(f_, a_, 0, 100, kX));
  EXPECT_EQ(Describe(out.grants), "2:1@c S [50,149]") << "d still conflicts with a's S [0,99]";
  EXPECT_EQ(Locks(manager_, f_), "1@a S [0,99], 1@c S [50,149], 1@a X [200,209]");
  EXPECT_EQ(manager_.Counts().waiters, 1u);
}

TEST_F(LockManagerGrantUndoTest, BytesTheOwnerChangedAfterTheGrantAreNotTakenBack) {
  GrantAnUpgrade();
  // a downgrades part of what it was granted, by its own LOCK (not the same request).
  ASSERT_EQ(manager_.Lock(Req(f_, a_, 40, 20, kS)).status, LockStatus::kGranted);
  ASSERT_EQ(Locks(manager_, f_), "1@a X [0,39], 1@a S [40,59], 1@a X [60,99]");
  EXPECT_EQ(manager_.Cancel(Blocking(f_, a_, 0, 100, kX)).result, CancelResult::kGrantUndone);
  EXPECT_EQ(Locks(manager_, f_), "1@a S [0,99]");

  // A new lock taken over bytes the grant had added stays when the grant is undone.
  manager_.Lock(Req(f_, b_, 0, 0, kS));
  manager_.Unlock(f_, a_, 0, 0);
  manager_.Lock(Req(f_, a_, 0, 10, kS));  // a: S [0,9]; b: S [0,end].
  const WaiterId id = *manager_.Lock(Blocking(f_, a_, 0, 100, kX)).waiter;
  manager_.Unlock(f_, b_, 0, 0);
  ASSERT_EQ(Locks(manager_, f_), "1@a X [0,99]");
  ASSERT_EQ(manager_.Lock(Req(f_, a_, 80, 10, kX)).status, LockStatus::kGranted);
  EXPECT_TRUE(manager_.RevokeGrant(id).revoked);
  EXPECT_EQ(Locks(manager_, f_), "1@a S [0,9], 1@a X [80,89]");
}

TEST_F(LockManagerGrantUndoTest, AnUnlockOfPartOfTheGrantSettlesIt) {
  const WaiterId id = GrantAnUpgrade();
  manager_.Unlock(f_, a_, 90, 10);  // The client is done with the grant: it stands.
  EXPECT_FALSE(manager_.RevokeGrant(id).revoked);
  EXPECT_EQ(manager_.Cancel(Blocking(f_, a_, 0, 100, kX)).result, CancelResult::kNotFound);
  EXPECT_EQ(Locks(manager_, f_), "1@a X [0,89]");
}

TEST_F(LockManagerGrantUndoTest, ADowngradingGrantAnotherOwnerUsedKeepsTheSharedLockThere) {
  manager_.Lock(Req(f_, a_, 0, 10, kX));   // a: X [0,9].
  manager_.Lock(Req(f_, b_, 10, 10, kX));  // b: X [10,19].
  ASSERT_EQ(manager_.Lock(Blocking(f_, c_, 0, 5, kS)).status, LockStatus::kBlocked);
  const WaiterId id = *manager_.Lock(Blocking(f_, a_, 0, 20, kS)).waiter;  // a: S [0,19].
  // b's unlock grants a's S [0,19], which downgrades a's X [0,9]: c's S [0,4] fits too.
  EXPECT_EQ(Describe(manager_.Unlock(f_, b_, 0, 0).grants), "2:1@a S [0,19], 1:1@c S [0,4]");
  EXPECT_TRUE(manager_.RevokeGrant(id).revoked);
  // a gets its X back where nobody else holds a lock; on c's bytes it keeps the S it was granted.
  EXPECT_EQ(Locks(manager_, f_), "1@a S [0,4], 1@c S [0,4], 1@a X [5,9]");
}

TEST_F(LockManagerGrantUndoTest, TwoStackedGrantsOfOneOwnerUndoInAnyOrder) {
  manager_.Lock(Req(f_, b_, 0, 20, kX));
  const WaiterId first = *manager_.Lock(Blocking(f_, a_, 0, 10, kX)).waiter;
  manager_.Lock(Req(f_, c_, 20, 10, kX));
  const WaiterId second = *manager_.Lock(Blocking(f_, a_, 5, 25, kS)).waiter;
  manager_.Unlock(f_, b_, 0, 0);  // Grants the first: a X [0,9].
  manager_.Unlock(f_, c_, 0, 0);  // Grants the second on top: a X [0,4], S [5,29].
  ASSERT_EQ(Locks(manager_, f_), "1@a X [0,4], 1@a S [5,29]");
  // The older one goes first: the newer one keeps its bytes, and will give back nothing there.
  EXPECT_TRUE(manager_.RevokeGrant(first).revoked);
  EXPECT_EQ(Locks(manager_, f_), "1@a S [5,29]");
  EXPECT_TRUE(manager_.RevokeGrant(second).revoked);
  EXPECT_EQ(Locks(manager_, f_), "");
  EXPECT_EQ(manager_.Counts().locks, 0u);
  EXPECT_EQ(manager_.Counts().owners, 0u);
}

TEST_F(LockManagerGrantUndoTest, AnAcknowledgedLaterGrantStandsWhenAnOlderOneIsUndone) {
  manager_.Lock(Req(f_, b_, 0, 20, kX));
  const WaiterId first = *manager_.Lock(Blocking(f_, a_, 0, 10, kX)).waiter;
  manager_.Lock(Req(f_, c_, 20, 10, kX));
  const WaiterId second = *manager_.Lock(Blocking(f_, a_, 5, 25, kS)).waiter;
  manager_.Unlock(f_, b_, 0, 0);
  manager_.Unlock(f_, c_, 0, 0);
  EXPECT_TRUE(manager_.AcknowledgeGrant(second));
  EXPECT_TRUE(manager_.RevokeGrant(first).revoked);
  EXPECT_EQ(Locks(manager_, f_), "1@a S [5,29]");
}

TEST_F(LockManagerGrantUndoTest, AGrantUndoneDuringGraceGivesBackTheRestoredLockAwaiting) {
  manager_.StartGrace(GraceMode::kFineGrained);
  const std::vector<RestoredLock> locks = {{f_, a_, ByteRange::FromFirstLast(0, 9), kS}};
  manager_.LoadRestored(locks, {});
  manager_.Lock(Req(f_, b_, 10, 10, kX));
  const WaiterId id = *manager_.Lock(Blocking(f_, a_, 0, 20, kS)).waiter;
  manager_.Unlock(f_, b_, 0, 0);
  ASSERT_EQ(Locks(manager_, f_), "1@a S [0,19]");
  EXPECT_TRUE(manager_.RevokeGrant(id).revoked);
  EXPECT_EQ(Locks(manager_, f_), "1@a S [0,9]*");
  EXPECT_EQ(manager_.AwaitingReclaimCount(), 1u);
}

TEST_F(LockManagerGrantUndoTest, AGrantUndoneAfterGraceGivesBackNoRestoredLock) {
  manager_.StartGrace(GraceMode::kFineGrained);
  const std::vector<RestoredLock> locks = {{f_, a_, ByteRange::FromFirstLast(0, 9), kS},
                                           {f_, c_, ByteRange::FromFirstLast(50, 59), kS}};
  manager_.LoadRestored(locks, {});
  manager_.Lock(Req(f_, b_, 10, 10, kX));
  const WaiterId id = *manager_.Lock(Blocking(f_, a_, 0, 20, kS)).waiter;
  manager_.Unlock(f_, b_, 0, 0);
  manager_.EndGrace(GraceEndReason::kTimer);  // Drops c's unclaimed lock; a's was replaced.
  EXPECT_TRUE(manager_.RevokeGrant(id).revoked);
  EXPECT_EQ(Locks(manager_, f_), "");
  EXPECT_EQ(manager_.AwaitingReclaimCount(), 0u);
}

TEST_F(LockManagerGrantUndoTest, AGrantUndoneAfterItsHostsRestoredLocksWereDroppedGivesNoneBack) {
  manager_.StartGrace(GraceMode::kFineGrained);
  const FileKey g = File("fh2");
  const std::vector<RestoredLock> locks = {{f_, a_, ByteRange::FromFirstLast(0, 9), kS},
                                           {g, a_, ByteRange::FromFirstLast(0, 9), kS}};
  manager_.LoadRestored(locks, {});
  manager_.Lock(Req(f_, b_, 10, 10, kX));
  const WaiterId id = *manager_.Lock(Blocking(f_, a_, 0, 20, kS)).waiter;
  manager_.Unlock(f_, b_, 0, 0);
  ASSERT_EQ(manager_.AwaitingReclaimCount(), 1u);
  manager_.DropRestored(a_.host);  // a will never reclaim: its restored state is gone.
  EXPECT_EQ(manager_.AwaitingReclaimCount(), 0u);
  EXPECT_TRUE(manager_.RevokeGrant(id).revoked);
  EXPECT_EQ(Locks(manager_, f_), "");
  EXPECT_EQ(manager_.AwaitingReclaimCount(), 0u);
}

}  // namespace
}  // namespace nlockd::lock
