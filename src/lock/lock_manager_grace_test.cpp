// SPDX-License-Identifier: Apache-2.0
// LockManager: grace period, reclaims and restored state.

#include <chrono>
#include <vector>

#include <gtest/gtest.h>

#include "lock/lock_manager.hpp"
#include "lock/testing/test_util.hpp"

namespace nlockd::lock {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): test helpers.
using std::chrono::seconds;

ByteRange R(uint64_t first, uint64_t last) { return ByteRange::FromFirstLast(first, last); }

class LockManagerGraceTest : public ::testing::Test {
 protected:
  // Restores a's X [0,9] and b's S [100,199] on f_, and a's deny-write share on g_.
  void StartWithRestoredState(GraceMode mode) {
    manager_.StartGrace(mode);
    const std::vector<RestoredLock> locks = {
        {f_, a_, R(0, 9), kX},
        {f_, b_, R(100, 199), kS},
    };
    const std::vector<RestoredShare> shares = {
        {g_, share_a_, ShareAccess::kRead, ShareDeny::kWrite},
    };
    const LoadOutcome loaded = manager_.LoadRestored(locks, shares);
    ASSERT_EQ(loaded.locks, 2u);
    ASSERT_EQ(loaded.shares, 1u);
    ASSERT_EQ(loaded.rejected, 0u);
  }

  ShareRequest Shr(const LockOwner& owner, ShareAccess access, ShareDeny deny, bool reclaim) {
    ShareRequest request;
    request.file = g_;
    request.owner = owner;
    request.access = access;
    request.deny = deny;
    request.reclaim = reclaim;
    return request;
  }

  ManualClock clock_;
  LockManager manager_{clock_};
  const FileKey f_ = File("fh1");
  const FileKey g_ = File("fh2");
  const LockOwner a_ = Owner("a");
  const LockOwner b_ = Owner("b");
  const LockOwner c_ = Owner("c");
  const LockOwner share_a_{HostId("a"), 0, OwnerHandle("a")};
  const LockOwner share_c_{HostId("c"), 0, OwnerHandle("c")};
};

TEST_F(LockManagerGraceTest, ClassicGraceRefusesEveryNewLockTestAndShare) {
  manager_.StartGrace(GraceMode::kClassic);
  EXPECT_EQ(manager_.Lock(Req(f_, c_, 0, 10)).status, LockStatus::kDeniedGrace);
  EXPECT_EQ(manager_.Lock(Blocking(f_, c_, 0, 10)).status, LockStatus::kDeniedGrace);
  EXPECT_EQ(manager_.Test(Req(f_, c_, 0, 10)).status, LockStatus::kDeniedGrace);
  EXPECT_EQ(manager_.Share(Shr(share_c_, ShareAccess::kRead, ShareDeny::kNone, false)).status,
            LockStatus::kDeniedGrace);
  EXPECT_EQ(manager_.Counts().waiters, 0u);
}

TEST_F(LockManagerGraceTest, ClassicGraceGrantsReclaimsThatDoNotConflict) {
  manager_.StartGrace(GraceMode::kClassic);
  EXPECT_EQ(manager_.Lock(Reclaim(f_, a_, 0, 10)).status, LockStatus::kGranted);
  EXPECT_EQ(manager_.Lock(Reclaim(f_, b_, 5, 10)).status, LockStatus::kDenied);
  EXPECT_EQ(manager_.Share(Shr(share_c_, ShareAccess::kRead, ShareDeny::kNone, true)).status,
            LockStatus::kGranted);
  EXPECT_EQ(Locks(manager_, f_), "1@a X [0,9]");
}

TEST_F(LockManagerGraceTest, ReclaimsOutsideGraceAreRefused) {
  EXPECT_EQ(manager_.Lock(Reclaim(f_, a_, 0, 10)).status, LockStatus::kDeniedGrace);
  EXPECT_EQ(manager_.Share(Shr(share_c_, ShareAccess::kRead, ShareDeny::kNone, true)).status,
            LockStatus::kDeniedGrace);
}

TEST_F(LockManagerGraceTest, AReclaimOfWhatTheOwnerStillHoldsIsGrantedOutsideGrace) {
  // After SM_SIMU_CRASH clients reclaim locks nlockd never lost.
  ASSERT_EQ(manager_.Lock(Req(f_, a_, 0, 10)).status, LockStatus::kGranted);
  EXPECT_EQ(manager_.Lock(Reclaim(f_, a_, 0, 10)).status, LockStatus::kGranted);
  EXPECT_EQ(manager_.Lock(Reclaim(f_, a_, 2, 3)).status, LockStatus::kGranted);
  // Not held as asked (wider, other type, other owner): refused, nothing changes.
  EXPECT_EQ(manager_.Lock(Reclaim(f_, a_, 0, 11)).status, LockStatus::kDeniedGrace);
  EXPECT_EQ(manager_.Lock(Reclaim(f_, a_, 0, 10, kS)).status, LockStatus::kDeniedGrace);
  EXPECT_EQ(manager_.Lock(Reclaim(f_, b_, 20, 1)).status, LockStatus::kDeniedGrace);
  EXPECT_EQ(manager_.Counts().locks, 1u);

  ASSERT_EQ(manager_.Share(Shr(share_a_, ShareAccess::kRead, ShareDeny::kWrite, false)).status,
            LockStatus::kGranted);
  EXPECT_EQ(manager_.Share(Shr(share_a_, ShareAccess::kRead, ShareDeny::kWrite, true)).status,
            LockStatus::kGranted);
  EXPECT_EQ(manager_.Share(Shr(share_a_, ShareAccess::kRead, ShareDeny::kNone, true)).status,
            LockStatus::kDeniedGrace);
}

TEST_F(LockManagerGraceTest, UnlockCancelAndUnshareAreServedDuringGrace) {
  manager_.StartGrace(GraceMode::kClassic);
  manager_.Lock(Reclaim(f_, a_, 0, 10));
  EXPECT_EQ(manager_.Unlock(f_, a_, 0, 0).status, LockStatus::kGranted);
  EXPECT_EQ(manager_.Cancel(Req(f_, a_, 0, 10)).result, CancelResult::kNotFound);
  EXPECT_FALSE(manager_.Unshare(g_, share_a_).removed);
  EXPECT_EQ(manager_.Counts().locks, 0u);
}

TEST_F(LockManagerGraceTest, RestoredLocksAreHeldAndAwaitTheirReclaim) {
  StartWithRestoredState(GraceMode::kFineGrained);
  EXPECT_EQ(Locks(manager_, f_), "1@a X [0,9]*, 1@b S [100,199]*");
  EXPECT_EQ(manager_.AwaitingReclaimCount(), 3u);
  const LockCounts counts = manager_.Counts();
  EXPECT_EQ(counts.awaiting_locks, 2u);
  EXPECT_EQ(counts.awaiting_shares, 1u);
  EXPECT_EQ(manager_.hosts().Find(HostId("a"))->locks, 1u);
}

TEST_F(LockManagerGraceTest, FineGrainedGraceRefusesOnlyConflictsWithAwaitingLocks) {
  StartWithRestoredState(GraceMode::kFineGrained);
  EXPECT_EQ(manager_.Lock(Req(f_, c_, 5, 10)).status, LockStatus::kDeniedGrace);
  EXPECT_EQ(manager_.Lock(Req(f_, c_, 150, 1, kX)).status, LockStatus::kDeniedGrace);
  EXPECT_EQ(manager_.Lock(Req(f_, c_, 150, 1, kS)).status, LockStatus::kGranted);
  EXPECT_EQ(manager_.Lock(Req(f_, c_, 10, 90)).status, LockStatus::kGranted);
  EXPECT_EQ(manager_.Lock(Req(File("other"), c_, 0, 0)).status, LockStatus::kGranted);
  EXPECT_EQ(manager_.Test(Req(f_, c_, 0, 1, kS)).status, LockStatus::kDeniedGrace);
  EXPECT_EQ(manager_.Test(Req(f_, b_, 300, 1)).status, LockStatus::kGranted);
  EXPECT_EQ(manager_.Share(Shr(share_c_, ShareAccess::kWrite, ShareDeny::kNone, false)).status,
            LockStatus::kDeniedGrace);
  EXPECT_EQ(manager_.Share(Shr(share_c_, ShareAccess::kRead, ShareDeny::kNone, false)).status,
            LockStatus::kGranted);
}

TEST_F(LockManagerGraceTest, AnOwnerMayWorkOverItsOwnAwaitingLocks) {
  StartWithRestoredState(GraceMode::kFineGrained);
  EXPECT_EQ(manager_.Lock(Req(f_, a_, 0, 5)).status, LockStatus::kGranted);
  EXPECT_EQ(Locks(manager_, f_), "1@a X [0,4], 1@a X [5,9]*, 1@b S [100,199]*");
}

TEST_F(LockManagerGraceTest, AReclaimTakesOverTheRestoredLock) {
  StartWithRestoredState(GraceMode::kFineGrained);
  const LockOutcome out = manager_.Lock(Reclaim(f_, a_, 0, 10));
  EXPECT_EQ(out.status, LockStatus::kGranted);
  EXPECT_EQ(Locks(manager_, f_), "1@a X [0,9], 1@b S [100,199]*");
  EXPECT_EQ(manager_.AwaitingReclaimCount(), 2u);
  EXPECT_EQ(manager_.Counts().locks, 2u);
}

TEST_F(LockManagerGraceTest, APartialReclaimLeavesTheRestAwaiting) {
  StartWithRestoredState(GraceMode::kFineGrained);
  manager_.Lock(Reclaim(f_, b_, 120, 10, kS));
  EXPECT_EQ(Locks(manager_, f_),
            "1@a X [0,9]*, 1@b S [100,119]*, 1@b S [120,129], 1@b S [130,199]*");
  EXPECT_EQ(manager_.AwaitingReclaimCount(), 4u);
}

TEST_F(LockManagerGraceTest, AReclaimThatConflictsWithAnotherOwnersRestoredLockIsDenied) {
  StartWithRestoredState(GraceMode::kFineGrained);
  const LockOutcome out = manager_.Lock(Reclaim(f_, c_, 5, 1));
  EXPECT_EQ(out.status, LockStatus::kDenied);
  EXPECT_EQ(out.holder->owner, a_);
  EXPECT_EQ(manager_.Lock(Reclaim(f_, c_, 20, 1)).status, LockStatus::kGranted);
}

TEST_F(LockManagerGraceTest, AShareReclaimTakesOverTheRestoredShare) {
  StartWithRestoredState(GraceMode::kFineGrained);
  EXPECT_EQ(manager_.Share(Shr(share_a_, ShareAccess::kRead, ShareDeny::kWrite, true)).status,
            LockStatus::kGranted);
  EXPECT_EQ(manager_.Counts().awaiting_shares, 0u);
  EXPECT_EQ(manager_.Share(Shr(share_c_, ShareAccess::kWrite, ShareDeny::kNone, false)).status,
            LockStatus::kDenied);  // A real conflict now, not a grace refusal.
}

TEST_F(LockManagerGraceTest, GraceEndsAtItsTimerAndDropsWhatWasNotReclaimed) {
  StartWithRestoredState(GraceMode::kFineGrained);
  manager_.Lock(Reclaim(f_, a_, 0, 10));
  clock_.Advance(seconds(89));
  EXPECT_TRUE(manager_.Tick().grants.empty());
  EXPECT_TRUE(manager_.grace().IsActive());
  clock_.Advance(seconds(1));
  const DropOutcome dropped = manager_.Tick();
  EXPECT_FALSE(manager_.grace().IsActive());
  EXPECT_EQ(manager_.grace().last_end_reason(), GraceEndReason::kTimer);
  EXPECT_EQ(dropped.locks, 1u);
  EXPECT_EQ(dropped.shares, 1u);
  EXPECT_EQ(Locks(manager_, f_), "1@a X [0,9]");
  EXPECT_EQ(manager_.AwaitingReclaimCount(), 0u);
}

TEST_F(LockManagerGraceTest, DroppingUnreclaimedLocksGrantsTheWaitersTheyBlocked) {
  manager_.StartGrace(GraceMode::kFineGrained);
  const std::vector<RestoredLock> locks = {{f_, a_, R(0, 9), kX}};
  manager_.LoadRestored(locks, {});
  manager_.Lock(Reclaim(f_, a_, 0, 5));  // a X [0,4], a X [5,9] awaiting.
  // A new request cannot queue behind an awaiting lock (it is refused for grace), but one
  // behind a reclaimed lock can, and a blocking reclaim can queue behind an awaiting lock.
  EXPECT_EQ(manager_.Lock(Blocking(f_, c_, 7, 1)).status, LockStatus::kDeniedGrace);
  EXPECT_EQ(manager_.Lock(Blocking(f_, c_, 0, 5)).status, LockStatus::kBlocked);
  LockRequest blocking_reclaim = Reclaim(f_, b_, 7, 1, kS);
  blocking_reclaim.block = true;
  EXPECT_EQ(manager_.Lock(blocking_reclaim).status, LockStatus::kBlocked);
  const DropOutcome dropped = manager_.EndGrace(GraceEndReason::kAllReclaimed);
  EXPECT_EQ(dropped.locks, 1u);
  EXPECT_EQ(Describe(dropped.grants), "2:1@b S [7,7]");
  EXPECT_EQ(Describe(manager_.Unlock(f_, a_, 0, 0).grants), "1:1@c X [0,4]");
}

TEST_F(LockManagerGraceTest, AnyCallNoticesThatTheTimerRanOut) {
  manager_.StartGrace(GraceMode::kClassic, seconds(10));
  const std::vector<RestoredLock> locks = {{f_, a_, R(0, 9), kX}};
  manager_.LoadRestored(locks, {});
  manager_.Lock(Reclaim(f_, b_, 20, 1));
  clock_.Advance(seconds(10));
  const LockOutcome out = manager_.Lock(Req(f_, c_, 0, 10));
  EXPECT_EQ(out.status, LockStatus::kGranted);
  EXPECT_EQ(manager_.grace().last_end_reason(), GraceEndReason::kTimer);
  EXPECT_EQ(Locks(manager_, f_), "1@c X [0,9], 1@b X [20,20]");
}

TEST_F(LockManagerGraceTest, DropRestoredReleasesOneHostsAwaitingState) {
  StartWithRestoredState(GraceMode::kFineGrained);
  manager_.Lock(Reclaim(f_, Owner("a", 2), 50, 1));
  const DropOutcome dropped = manager_.DropRestored(HostId("a"));
  EXPECT_EQ(dropped.locks, 1u);
  EXPECT_EQ(dropped.shares, 1u);
  EXPECT_EQ(Locks(manager_, f_), "2@a X [50,50], 1@b S [100,199]*");
  EXPECT_TRUE(manager_.grace().IsActive());
  EXPECT_EQ(manager_.AwaitingReclaimCount(), 1u);
  EXPECT_EQ(manager_.Lock(Req(f_, c_, 0, 10)).status, LockStatus::kGranted);
}

TEST_F(LockManagerGraceTest, RestoredStateReleasedWithItsHostIsCountedDropped) {
  StartWithRestoredState(GraceMode::kFineGrained);
  manager_.Lock(Reclaim(f_, b_, 100, 100, kS));
  manager_.Lock(Reclaim(f_, Owner("a", 2), 50, 1));
  // a rebooted (or sent FREE_ALL) before reclaiming: its restored lock and share go with the
  // rest of its state, unreclaimed.
  const HostReleaseOutcome released = manager_.ReleaseHost(HostId("a"));
  EXPECT_EQ(released.locks, 2u);
  EXPECT_EQ(released.shares, 1u);
  EXPECT_EQ(released.restored, 2u) << "a's restored lock and share, not its new lock";
  EXPECT_EQ(manager_.AwaitingReclaimCount(), 0u);
  EXPECT_EQ(manager_.DroppedRestoredCount(), 2u);
  EXPECT_EQ(manager_.EndGrace(GraceEndReason::kAllReclaimed).locks, 0u);
  EXPECT_EQ(manager_.DroppedRestoredCount(), 2u);
}

TEST_F(LockManagerGraceTest, EveryWayOfDroppingRestoredStateIsCounted) {
  StartWithRestoredState(GraceMode::kFineGrained);
  EXPECT_EQ(manager_.DropRestored(HostId("a")).locks, 1u);
  EXPECT_EQ(manager_.DroppedRestoredCount(), 2u);
  EXPECT_EQ(manager_.EndGrace(GraceEndReason::kTimer).locks, 1u);
  EXPECT_EQ(manager_.DroppedRestoredCount(), 3u);
}

TEST_F(LockManagerGraceTest, EndingGraceEarlyServesNewRequestsAtOnce) {
  StartWithRestoredState(GraceMode::kClassic);
  manager_.Lock(Reclaim(f_, a_, 0, 10));
  manager_.Lock(Reclaim(f_, b_, 100, 100, kS));
  manager_.Share(Shr(share_a_, ShareAccess::kRead, ShareDeny::kWrite, true));
  EXPECT_EQ(manager_.AwaitingReclaimCount(), 0u);
  EXPECT_EQ(manager_.EndGrace(GraceEndReason::kAllReclaimed).locks, 0u);
  EXPECT_EQ(manager_.Lock(Req(f_, c_, 20, 10)).status, LockStatus::kGranted);
  EXPECT_EQ(manager_.Lock(Reclaim(f_, c_, 40, 10)).status, LockStatus::kDeniedGrace);
}

TEST_F(LockManagerGraceTest, LoadRejectsRecordsThatConflictWithEarlierOnes) {
  manager_.StartGrace(GraceMode::kFineGrained);
  const std::vector<RestoredLock> locks = {
      {f_, a_, R(0, 9), kX},
      {f_, b_, R(5, 14), kS},
      {f_, a_, R(10, 19), kX},  // Same owner: merges.
  };
  const std::vector<RestoredShare> shares = {
      {g_, share_a_, ShareAccess::kRead, ShareDeny::kWrite},
      {g_, share_c_, ShareAccess::kWrite, ShareDeny::kNone},
  };
  const LoadOutcome loaded = manager_.LoadRestored(locks, shares);
  EXPECT_EQ(loaded.locks, 2u);
  EXPECT_EQ(loaded.shares, 1u);
  EXPECT_EQ(loaded.rejected, 2u);
  EXPECT_EQ(Locks(manager_, f_), "1@a X [0,19]*");
}

TEST_F(LockManagerGraceTest, RestoredStateIsAdmittedPastTheHostLimit) {
  LockManager manager(clock_, LockManagerOptions{.max_hosts = 1});
  manager.StartGrace(GraceMode::kFineGrained);
  const std::vector<RestoredLock> locks = {{f_, a_, R(0, 9), kX}, {f_, b_, R(10, 19), kX}};
  EXPECT_EQ(manager.LoadRestored(locks, {}).locks, 2u);
  EXPECT_EQ(manager.hosts().size(), 2u);
  EXPECT_EQ(manager.Lock(Req(f_, c_, 50, 1)).status, LockStatus::kNoResources);
}

}  // namespace
}  // namespace nlockd::lock
