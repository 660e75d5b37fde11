// SPDX-License-Identifier: Apache-2.0
// LockManager: undoing a LOCK, UNLOCK, SHARE or UNSHARE gives the owner back exactly its prior
// state.

#include <gtest/gtest.h>

#include "lock/lock_manager.hpp"
#include "lock/testing/test_util.hpp"

namespace nlockd::lock {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): test helpers.

ByteRange R(uint64_t first, uint64_t last) { return ByteRange::FromFirstLast(first, last); }

class LockManagerUndoTest : public ::testing::Test {
 protected:
  // Takes a snapshot, makes the LOCK, and returns the snapshot to undo it with.
  PriorLocks LockThenSnapshot(const LockRequest& request, LockStatus expected) {
    std::optional<PriorLocks> prior =
        manager_.SnapshotLocks(request.file, request.owner, request.offset, request.length);
    EXPECT_TRUE(prior.has_value());
    EXPECT_EQ(manager_.Lock(request).status, expected);
    return prior.value_or(PriorLocks{});
  }

  ShareRequest Shr(const LockOwner& owner, ShareAccess access, ShareDeny deny) {
    ShareRequest request;
    request.file = f_;
    request.owner = owner;
    request.access = access;
    request.deny = deny;
    return request;
  }

  // The shares of f_ as "oh access deny" joined by ", ".
  std::string Shares() const {
    std::string out;
    for (const ShareInfo& share : manager_.ListShares()) {
      if (!out.empty()) out += ", ";
      out += share.owner.oh.value() + " " + std::string(ToString(share.access)) + " " +
             std::string(ToString(share.deny));
    }
    return out;
  }

  ManualClock clock_;
  LockManager manager_{clock_};
  const FileKey f_ = File("fh1");
  const LockOwner a_ = Owner("a");
  const LockOwner b_ = Owner("b");
};

TEST_F(LockManagerUndoTest, UndoingAnUpgradeGivesBackTheSharedLock) {
  manager_.Lock(Req(f_, a_, 0, 101, kS));
  const PriorLocks prior = LockThenSnapshot(Req(f_, a_, 0, 101, kX), LockStatus::kGranted);
  ASSERT_EQ(Locks(manager_, f_), "1@a X [0,100]");
  const RestoreOutcome undo = manager_.RestoreLocks(f_, a_, prior);
  EXPECT_TRUE(undo.restored);
  EXPECT_EQ(Locks(manager_, f_), "1@a S [0,100]");
  EXPECT_EQ(manager_.Counts().locks, 1u);
}

TEST_F(LockManagerUndoTest, UndoingAnOverlappingLockRestoresTheOldPiecesAndKeepsTheRest) {
  manager_.Lock(Req(f_, a_, 0, 50, kX));   // [0,49]
  manager_.Lock(Req(f_, a_, 60, 10, kS));  // [60,69]
  manager_.Lock(Req(f_, a_, 90, 10, kS));  // [90,99], outside the undone range.
  const PriorLocks prior = LockThenSnapshot(Req(f_, a_, 40, 40, kS), LockStatus::kGranted);
  ASSERT_EQ(Locks(manager_, f_), "1@a X [0,39], 1@a S [40,79], 1@a S [90,99]");
  EXPECT_TRUE(manager_.RestoreLocks(f_, a_, prior).restored);
  EXPECT_EQ(Locks(manager_, f_), "1@a X [0,49], 1@a S [60,69], 1@a S [90,99]");
  EXPECT_EQ(manager_.Counts().locks, 3u);
}

TEST_F(LockManagerUndoTest, UndoingANewLockReleasesItAndServesTheWaitersItBlocked) {
  const PriorLocks prior = LockThenSnapshot(Req(f_, a_, 0, 10, kX), LockStatus::kGranted);
  ASSERT_EQ(manager_.Lock(Blocking(f_, b_, 5, 10)).status, LockStatus::kBlocked);
  const RestoreOutcome undo = manager_.RestoreLocks(f_, a_, prior);
  EXPECT_TRUE(undo.restored);
  EXPECT_EQ(Describe(undo.grants), "1:1@b X [5,14]");
  EXPECT_EQ(Locks(manager_, f_), "1@b X [5,14]");
}

TEST_F(LockManagerUndoTest, AnUpgradeUndoGrantsNoWaiterTheBytesItGivesBack) {
  manager_.Lock(Req(f_, a_, 0, 10, kS));
  const PriorLocks prior = LockThenSnapshot(Req(f_, a_, 0, 20, kX), LockStatus::kGranted);
  ASSERT_EQ(manager_.Lock(Blocking(f_, b_, 0, 20)).status, LockStatus::kBlocked);
  const RestoreOutcome undo = manager_.RestoreLocks(f_, a_, prior);
  EXPECT_TRUE(undo.grants.empty()) << "a still holds S [0,9]";
  EXPECT_EQ(Locks(manager_, f_), "1@a S [0,9]");
  EXPECT_EQ(manager_.ListWaiters().size(), 1u);
}

TEST_F(LockManagerUndoTest, ADowngradeAnotherOwnerUsedMeanwhileIsNotUndone) {
  manager_.Lock(Req(f_, a_, 0, 10, kX));
  const PriorLocks prior = LockThenSnapshot(Req(f_, a_, 0, 10, kS), LockStatus::kGranted);
  ASSERT_EQ(manager_.Lock(Req(f_, b_, 0, 10, kS)).status, LockStatus::kGranted);
  const RestoreOutcome undo = manager_.RestoreLocks(f_, a_, prior);
  EXPECT_FALSE(undo.restored);
  EXPECT_EQ(Locks(manager_, f_), "1@a S [0,9], 1@b S [0,9]");
}

TEST_F(LockManagerUndoTest, ADowngradeNobodyUsedIsUndone) {
  manager_.Lock(Req(f_, a_, 0, 10, kX));
  const PriorLocks prior = LockThenSnapshot(Req(f_, a_, 0, 10, kS), LockStatus::kGranted);
  EXPECT_TRUE(manager_.RestoreLocks(f_, a_, prior).restored);
  EXPECT_EQ(Locks(manager_, f_), "1@a X [0,9]");
}

TEST_F(LockManagerUndoTest, AHostReleasedMeanwhileGetsNothingBack) {
  manager_.Lock(Req(f_, a_, 0, 10, kS));
  const PriorLocks prior = LockThenSnapshot(Req(f_, a_, 0, 10, kX), LockStatus::kGranted);
  manager_.ReleaseHost(a_.host);
  EXPECT_TRUE(manager_.RestoreLocks(f_, a_, prior).restored);
  EXPECT_EQ(Locks(manager_, f_), "");
  EXPECT_EQ(manager_.Counts().locks, 0u);
  EXPECT_EQ(manager_.Counts().owners, 0u);
}

TEST_F(LockManagerUndoTest, AnUndoneReclaimLeavesTheRestoredLockAwaiting) {
  manager_.StartGrace(GraceMode::kFineGrained);
  const std::vector<RestoredLock> locks = {{f_, a_, R(0, 9), kX}};
  manager_.LoadRestored(locks, {});
  const PriorLocks prior = LockThenSnapshot(Reclaim(f_, a_, 0, 5), LockStatus::kGranted);
  ASSERT_EQ(Locks(manager_, f_), "1@a X [0,4], 1@a X [5,9]*");
  EXPECT_TRUE(manager_.RestoreLocks(f_, a_, prior).restored);
  EXPECT_EQ(Locks(manager_, f_), "1@a X [0,9]*");
  EXPECT_EQ(manager_.AwaitingReclaimCount(), 1u);
}

TEST_F(LockManagerUndoTest, AGrantOfTheOwnerMadeSinceTheSnapshotIsNotOverwritten) {
  manager_.Lock(Req(f_, b_, 10, 10, kX));
  const WaiterId id = *manager_.Lock(Blocking(f_, a_, 5, 15, kS)).waiter;  // a waits for S [5,19].
  const PriorLocks prior = LockThenSnapshot(Req(f_, a_, 0, 10, kX), LockStatus::kGranted);
  // While a's LOCK awaits its write, b's release grants a's block over part of that LOCK.
  EXPECT_EQ(Describe(manager_.Unlock(f_, b_, 0, 0).grants), "1:1@a S [5,19]");
  ASSERT_EQ(Locks(manager_, f_), "1@a X [0,4], 1@a S [5,19]");
  EXPECT_TRUE(manager_.RestoreLocks(f_, a_, prior).restored);
  EXPECT_EQ(Locks(manager_, f_), "1@a S [5,19]") << "the grant announced to the client stays";
  // Taking that grant back now gives back what a held before the undone LOCK: nothing.
  EXPECT_TRUE(manager_.RevokeGrant(id).revoked);
  EXPECT_EQ(Locks(manager_, f_), "");
}

TEST_F(LockManagerUndoTest, AnUndoneLockHandsItsBytesBackToTheGrantItWasMadeOver) {
  manager_.Lock(Req(f_, b_, 0, 10, kX));
  const WaiterId id = *manager_.Lock(Blocking(f_, a_, 0, 10, kX)).waiter;
  manager_.Unlock(f_, b_, 0, 0);  // Grants a X [0,9]; its callback is in flight.
  const PriorLocks prior = LockThenSnapshot(Req(f_, a_, 0, 20, kS), LockStatus::kGranted);
  ASSERT_EQ(Locks(manager_, f_), "1@a S [0,19]");
  EXPECT_TRUE(manager_.RestoreLocks(f_, a_, prior).restored);
  EXPECT_EQ(Locks(manager_, f_), "1@a X [0,9]");
  // The grant decides its bytes again: taking it back takes them.
  EXPECT_TRUE(manager_.RevokeGrant(id).revoked);
  EXPECT_EQ(Locks(manager_, f_), "");
}

TEST_F(LockManagerUndoTest, AnInvalidRangeHasNoSnapshot) {
  EXPECT_FALSE(manager_.SnapshotLocks(f_, a_, ByteRange::kMaxOffset, 2).has_value());
}

TEST_F(LockManagerUndoTest, UndoingAShareChangeGivesBackThePriorReservation) {
  manager_.Share(Shr(a_, ShareAccess::kRead, ShareDeny::kWrite));
  const PriorShare prior = manager_.SnapshotShare(f_, a_);
  ASSERT_EQ(manager_.Share(Shr(a_, ShareAccess::kReadWrite, ShareDeny::kReadWrite)).status,
            LockStatus::kGranted);
  EXPECT_TRUE(manager_.RestoreShare(f_, a_, prior).restored);
  EXPECT_EQ(Shares(), "1@a read deny-write");
  EXPECT_EQ(manager_.Counts().shares, 1u);
}

TEST_F(LockManagerUndoTest, UndoingAFirstShareRemovesIt) {
  const PriorShare prior = manager_.SnapshotShare(f_, a_);
  manager_.Share(Shr(a_, ShareAccess::kRead, ShareDeny::kWrite));
  EXPECT_TRUE(manager_.RestoreShare(f_, a_, prior).restored);
  EXPECT_EQ(Shares(), "");
  EXPECT_EQ(manager_.Counts().shares, 0u);
  EXPECT_EQ(manager_.Counts().owners, 0u);
}

TEST_F(LockManagerUndoTest, AWeakerShareAnotherOwnerUsedMeanwhileIsNotUndone) {
  manager_.Share(Shr(a_, ShareAccess::kRead, ShareDeny::kWrite));
  const PriorShare prior = manager_.SnapshotShare(f_, a_);
  manager_.Share(Shr(a_, ShareAccess::kRead, ShareDeny::kNone));
  ASSERT_EQ(manager_.Share(Shr(b_, ShareAccess::kWrite, ShareDeny::kNone)).status,
            LockStatus::kGranted);
  EXPECT_FALSE(manager_.RestoreShare(f_, a_, prior).restored);
  EXPECT_EQ(Shares(), "1@a read deny-none, 1@b write deny-none");
}

TEST_F(LockManagerUndoTest, UndoingAnUnlockOfTheOwnersLastLockMakesTheOwnerAgain) {
  manager_.Lock(Req(f_, a_, 0, 100));
  manager_.Lock(Req(f_, b_, 200, 10, kS));
  const std::optional<PriorLocks> prior = manager_.SnapshotLocks(f_, a_, 0, 0);
  ASSERT_TRUE(prior.has_value());
  ASSERT_EQ(manager_.Unlock(f_, a_, 0, 0).status, LockStatus::kGranted);
  ASSERT_EQ(Locks(manager_, f_), "1@b S [200,209]");
  const RestoreOutcome undo = manager_.RestoreLocks(f_, a_, *prior);
  EXPECT_TRUE(undo.restored);
  EXPECT_EQ(Locks(manager_, f_), "1@a X [0,99], 1@b S [200,209]");
  EXPECT_EQ(manager_.Counts().locks, 2u);
  EXPECT_EQ(manager_.hosts().Find(a_.host)->locks, 1u);
  ASSERT_EQ(manager_.Unlock(f_, a_, 0, 0).status, LockStatus::kGranted);
  EXPECT_EQ(Locks(manager_, f_), "1@b S [200,209]");
}

TEST_F(LockManagerUndoTest, UndoingAnUnlockAfterAnotherOwnerTookTheRangeChangesNothing) {
  manager_.Lock(Req(f_, a_, 0, 10));
  const std::optional<PriorLocks> prior = manager_.SnapshotLocks(f_, a_, 0, 10);
  ASSERT_EQ(manager_.Unlock(f_, a_, 0, 10).status, LockStatus::kGranted);
  ASSERT_EQ(manager_.Lock(Req(f_, b_, 5, 1)).status, LockStatus::kGranted);
  EXPECT_FALSE(manager_.RestoreLocks(f_, a_, *prior).restored);
  EXPECT_EQ(Locks(manager_, f_), "1@b X [5,5]");
  EXPECT_EQ(manager_.hosts().Find(a_.host)->locks, 0u);
  EXPECT_FALSE(manager_.hosts().Find(a_.host)->HoldsState());
}

TEST_F(LockManagerUndoTest, AHostReleaseSinceTheSnapshotStands) {
  manager_.Lock(Req(f_, a_, 0, 10));
  manager_.Share(Shr(a_, ShareAccess::kRead, ShareDeny::kWrite));
  const std::optional<PriorLocks> prior = manager_.SnapshotLocks(f_, a_, 0, 10);
  const PriorShare prior_share = manager_.SnapshotShare(f_, a_);
  ASSERT_EQ(manager_.Unlock(f_, a_, 0, 10).status, LockStatus::kGranted);
  manager_.Unshare(f_, a_);
  manager_.ReleaseHost(a_.host);  // a rebooted while the unlock was being written.
  EXPECT_TRUE(manager_.RestoreLocks(f_, a_, *prior).restored);
  EXPECT_TRUE(manager_.RestoreShare(f_, a_, prior_share).restored);
  EXPECT_EQ(manager_.Counts().locks, 0u);
  EXPECT_EQ(Shares(), "");
}

// The snapshot finds the host's releases through the owner when it holds something, by the
// host's name when not: a release since stands either way.
TEST_F(LockManagerUndoTest, AHostReleaseSinceASnapshotOfAnOwnerHoldingNothingStands) {
  manager_.Lock(Req(f_, b_, 50, 10));  // another owner, so that the file exists
  const std::optional<PriorLocks> prior = manager_.SnapshotLocks(f_, a_, 0, 10);
  ASSERT_TRUE(prior.has_value());
  ASSERT_EQ(manager_.Lock(Req(f_, a_, 0, 10)).status, LockStatus::kGranted);
  manager_.ReleaseHost(a_.host);
  ASSERT_EQ(manager_.Lock(Req(f_, a_, 0, 10, kS)).status, LockStatus::kGranted);
  EXPECT_TRUE(manager_.RestoreLocks(f_, a_, *prior).restored);
  EXPECT_EQ(Locks(manager_, f_), "1@a S [0,9], 1@b X [50,59]") << "the later lock stays";
}

TEST_F(LockManagerUndoTest, UndoingAnUnshareOfTheOwnersLastShareMakesTheOwnerAgain) {
  manager_.Share(Shr(a_, ShareAccess::kRead, ShareDeny::kWrite));
  const PriorShare prior = manager_.SnapshotShare(f_, a_);
  EXPECT_TRUE(manager_.Unshare(f_, a_).removed);
  EXPECT_EQ(Shares(), "");
  EXPECT_TRUE(manager_.RestoreShare(f_, a_, prior).restored);
  EXPECT_EQ(Shares(), "1@a read deny-write");
  EXPECT_EQ(manager_.Share(Shr(b_, ShareAccess::kWrite, ShareDeny::kNone)).status,
            LockStatus::kDenied);
}

}  // namespace
}  // namespace nlockd::lock
