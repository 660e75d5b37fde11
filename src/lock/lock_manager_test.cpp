// SPDX-License-Identifier: Apache-2.0
#include "lock/lock_manager.hpp"

#include <chrono>

#include <gtest/gtest.h>

#include "lock/testing/test_util.hpp"

namespace nlockd::lock {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): test helpers.
constexpr uint64_t kMax = ByteRange::kMaxOffset;

ByteRange R(uint64_t first, uint64_t last) { return ByteRange::FromFirstLast(first, last); }

class LockManagerTest : public LockManagerFixture {};

TEST_F(LockManagerTest, GrantsAnUncontendedLock) {
  const LockOutcome out = manager_.Lock(Req(f_, a_, 0, 10));
  EXPECT_EQ(out.status, LockStatus::kGranted);
  EXPECT_FALSE(out.holder);
  EXPECT_TRUE(out.grants.empty());
  EXPECT_EQ(Locks(manager_, f_), "1@a X [0,9]");
}

TEST_F(LockManagerTest, DeniesAConflictingLockAndNamesTheHolder) {
  manager_.Lock(Req(f_, a_, 0, 10));
  const LockOutcome out = manager_.Lock(Req(f_, b_, 5, 10, kS));
  EXPECT_EQ(out.status, LockStatus::kDenied);
  ASSERT_TRUE(out.holder);
  EXPECT_EQ(*out.holder, (Holder{a_, kX, R(0, 9)}));
  EXPECT_EQ(Locks(manager_, f_), "1@a X [0,9]");
}

TEST_F(LockManagerTest, SharedLocksOfDifferentOwnersCoexist) {
  EXPECT_EQ(manager_.Lock(Req(f_, a_, 0, 10, kS)).status, LockStatus::kGranted);
  EXPECT_EQ(manager_.Lock(Req(f_, b_, 5, 10, kS)).status, LockStatus::kGranted);
  EXPECT_EQ(manager_.Lock(Req(f_, c_, 12, 1, kX)).status, LockStatus::kDenied);
  EXPECT_EQ(manager_.Lock(Req(f_, c_, 15, 0, kX)).status, LockStatus::kGranted);
  EXPECT_EQ(Locks(manager_, f_), "1@a S [0,9], 1@b S [5,14], 1@c X [15,end]");
}

TEST_F(LockManagerTest, AnOwnersLocksNeverConflictWithEachOther) {
  manager_.Lock(Req(f_, a_, 0, 30, kS));
  EXPECT_EQ(manager_.Lock(Req(f_, a_, 10, 10, kX)).status, LockStatus::kGranted);
  EXPECT_EQ(Locks(manager_, f_), "1@a S [0,9], 1@a X [10,19], 1@a S [20,29]");
  EXPECT_EQ(manager_.Lock(Req(f_, a_, 0, 30, kS)).status, LockStatus::kGranted);
  EXPECT_EQ(Locks(manager_, f_), "1@a S [0,29]");
}

TEST_F(LockManagerTest, UpgradeIsDeniedWhileAnotherOwnerSharesTheRange) {
  manager_.Lock(Req(f_, a_, 0, 10, kS));
  manager_.Lock(Req(f_, b_, 0, 10, kS));
  const LockOutcome out = manager_.Lock(Req(f_, a_, 0, 10, kX));
  EXPECT_EQ(out.status, LockStatus::kDenied);
  EXPECT_EQ(out.holder->owner, b_);
  EXPECT_EQ(Locks(manager_, f_), "1@a S [0,9], 1@b S [0,9]");
}

TEST_F(LockManagerTest, UnlockingAMiddlePartSplitsTheLock) {
  manager_.Lock(Req(f_, a_, 0, 0));
  EXPECT_EQ(manager_.Unlock(f_, a_, 100, 50).status, LockStatus::kGranted);
  EXPECT_EQ(Locks(manager_, f_), "1@a X [0,99], 1@a X [150,end]");
  EXPECT_EQ(manager_.Lock(Req(f_, b_, 120, 10)).status, LockStatus::kGranted);
}

TEST_F(LockManagerTest, UnlockingWhatIsNotHeldSucceeds) {
  EXPECT_EQ(manager_.Unlock(f_, a_, 0, 0).status, LockStatus::kGranted);
  manager_.Lock(Req(f_, b_, 0, 10));
  EXPECT_EQ(manager_.Unlock(f_, a_, 0, 10).status, LockStatus::kGranted);
  EXPECT_EQ(Locks(manager_, f_), "1@b X [0,9]");
}

TEST_F(LockManagerTest, TestAnswersTheFirstConflictingHolderByStart) {
  manager_.Lock(Req(f_, a_, 50, 10, kX));
  manager_.Lock(Req(f_, b_, 10, 31, kS));  // [10,40]
  TestOutcome out = manager_.Test(Req(f_, c_, 40, 20, kX));
  EXPECT_EQ(out.status, LockStatus::kDenied);
  EXPECT_EQ(*out.holder, (Holder{b_, kS, R(10, 40)}));
  out = manager_.Test(Req(f_, c_, 40, 20, kS));
  EXPECT_EQ(*out.holder, (Holder{a_, kX, R(50, 59)}));
  EXPECT_EQ(manager_.Test(Req(f_, c_, 0, 10, kX)).status, LockStatus::kGranted);
  EXPECT_EQ(manager_.Test(Req(f_, a_, 40, 20, kX)).status, LockStatus::kDenied);  // b's share.
  EXPECT_EQ(manager_.Test(Req(f_, a_, 41, 0, kX)).status, LockStatus::kGranted);
  EXPECT_EQ(manager_.Counts().files, 1u);  // Test creates nothing.
}

TEST_F(LockManagerTest, TestIgnoresTheRequestersOwnLocks) {
  manager_.Lock(Req(f_, a_, 0, 10));
  EXPECT_EQ(manager_.Test(Req(f_, a_, 0, 10)).status, LockStatus::kGranted);
}

TEST_F(LockManagerTest, RangesPastTheLastByteAreInvalid) {
  EXPECT_EQ(manager_.Lock(Req(f_, a_, kMax, 2)).status, LockStatus::kInvalidRange);
  EXPECT_EQ(manager_.Test(Req(f_, a_, 2, kMax)).status, LockStatus::kInvalidRange);
  EXPECT_EQ(manager_.Unlock(f_, a_, kMax, 2).status, LockStatus::kInvalidRange);
  EXPECT_EQ(manager_.Cancel(Req(f_, a_, kMax, 2)).result, CancelResult::kInvalidRange);
  EXPECT_EQ(manager_.Counts().files, 0u);
}

TEST_F(LockManagerTest, RangesTouchingTheLastByteWork) {
  EXPECT_EQ(manager_.Lock(Req(f_, a_, kMax, 1)).status, LockStatus::kGranted);
  EXPECT_EQ(manager_.Lock(Req(f_, b_, kMax - 1, 0)).status, LockStatus::kDenied);
  EXPECT_EQ(manager_.Lock(Req(f_, b_, kMax - 1, 1)).status, LockStatus::kGranted);
  EXPECT_EQ(manager_.Lock(Req(f_, a_, 0, kMax)).status, LockStatus::kDenied);
  EXPECT_EQ(manager_.Lock(Req(f_, a_, 0, kMax - 1)).status, LockStatus::kGranted);
  EXPECT_EQ(Locks(manager_, f_),
            "1@a X [0,18446744073709551613], "
            "1@b X [18446744073709551614,18446744073709551614], "
            "1@a X [18446744073709551615,end]");
}

TEST_F(LockManagerTest, ZeroLengthLocksReachAnyLaterOffset) {
  manager_.Lock(Req(f_, a_, 1000, 0, kS));
  EXPECT_EQ(manager_.Lock(Req(f_, b_, kMax, 1, kX)).status, LockStatus::kDenied);
  EXPECT_EQ(manager_.Lock(Req(f_, b_, 0, 1000, kX)).status, LockStatus::kGranted);
}

TEST_F(LockManagerTest, OwnersDifferingOnlyInTheirHandleAreDistinct) {
  const LockOwner a1{HostId("a"), 1, OwnerHandle("x")};
  const LockOwner a1_other_oh{HostId("a"), 1, OwnerHandle("y")};
  const LockOwner other_host_same_oh{HostId("b"), 1, OwnerHandle("x")};
  manager_.Lock(Req(f_, a1, 0, 10));
  EXPECT_EQ(manager_.Lock(Req(f_, a1_other_oh, 0, 10)).status, LockStatus::kDenied);
  EXPECT_EQ(manager_.Lock(Req(f_, other_host_same_oh, 0, 10)).status, LockStatus::kDenied);
  EXPECT_EQ(manager_.Counts().owners, 1u);
}

TEST_F(LockManagerTest, FilesAreIndependent) {
  manager_.Lock(Req(f_, a_, 0, 0));
  EXPECT_EQ(manager_.Lock(Req(File("fh2"), b_, 0, 0)).status, LockStatus::kGranted);
  EXPECT_EQ(manager_.Counts().files, 2u);
}

TEST_F(LockManagerTest, FilesOwnersAndHostStateAreFreedWhenEmpty) {
  manager_.Lock(Req(f_, a_, 0, 10));
  manager_.Lock(Req(f_, b_, 20, 10, kS));
  manager_.Unlock(f_, a_, 0, 0);
  manager_.Unlock(f_, b_, 0, 0);
  const LockCounts counts = manager_.Counts();
  EXPECT_EQ(counts.locks, 0u);
  EXPECT_EQ(counts.files, 0u);
  EXPECT_EQ(counts.owners, 0u);
  EXPECT_EQ(counts.active_hosts, 0u);
  EXPECT_EQ(counts.hosts, 2u);  // Still registered, idle.
  EXPECT_EQ(manager_.DebugString(), "");
}

TEST_F(LockManagerTest, EmptyFileRecordsAreKeptForReuseWithinABound) {
  manager_.Lock(Req(f_, a_, 0, 10));
  manager_.Unlock(f_, a_, 0, 0);
  EXPECT_EQ(manager_.Counts().idle_files, 1u);
  manager_.Lock(Req(f_, a_, 0, 10));
  EXPECT_EQ(manager_.Counts().idle_files, 0u);
  EXPECT_EQ(manager_.Counts().files, 1u);
  for (int i = 0; i < 3000; ++i) {
    const FileKey file = File("cycled-" + std::to_string(i));
    manager_.Lock(Req(file, b_, 0, 1));
    manager_.Unlock(file, b_, 0, 1);
    ASSERT_LE(manager_.Counts().idle_files, LockManager::kMinIdleFiles);
  }
  EXPECT_EQ(manager_.Counts().files, 1u);
  EXPECT_EQ(Locks(manager_, f_), "1@a X [0,9]");
}

TEST_F(LockManagerTest, ReportsAHostsFirstStateOnceAndEachActivation) {
  LockOutcome out = manager_.Lock(Req(f_, a_, 0, 10));
  EXPECT_TRUE(out.host_added);
  EXPECT_TRUE(out.host_activated);
  out = manager_.Lock(Req(f_, Owner("a", 2), 20, 10));
  EXPECT_FALSE(out.host_added);
  EXPECT_FALSE(out.host_activated);
  manager_.Unlock(f_, a_, 0, 0);
  manager_.Unlock(f_, Owner("a", 2), 0, 0);
  out = manager_.Lock(Req(f_, a_, 0, 10));
  EXPECT_FALSE(out.host_added);  // Monitor once per host, not per activation.
  EXPECT_TRUE(out.host_activated);
  manager_.Unlock(f_, a_, 0, 0);
  EXPECT_TRUE(manager_.ForgetHost(HostId("a")));
  EXPECT_TRUE(manager_.Lock(Req(f_, a_, 0, 10)).host_added);
}

TEST_F(LockManagerTest, RecordsTheHostsNsmStateLabelAndCounts) {
  LockRequest request = Req(f_, Owner("10.0.0.7"), 0, 10);
  request.nsm_state = 5;
  request.host_label = "client7";
  clock_.Advance(std::chrono::seconds(3));
  manager_.Lock(request);
  manager_.Lock(Req(f_, Owner("10.0.0.7"), 20, 10));
  const HostInfo* host = manager_.hosts().Find(HostId("10.0.0.7"));
  ASSERT_NE(host, nullptr);
  EXPECT_EQ(host->nsm_state, 5);
  EXPECT_EQ(host->label, "client7");
  EXPECT_EQ(host->locks, 2u);
  EXPECT_EQ(host->last_seen, clock_.Now());
  clock_.Advance(std::chrono::seconds(2));
  manager_.Test(Req(f_, Owner("10.0.0.7"), 0, 1));
  EXPECT_EQ(host->last_seen, clock_.Now());
}

TEST_F(LockManagerTest, LockCountsFollowMergesAndSplits) {
  manager_.Lock(Req(f_, a_, 0, 10, kS));
  manager_.Lock(Req(f_, a_, 10, 10, kS));
  EXPECT_EQ(manager_.Counts().locks, 1u);
  manager_.Unlock(f_, a_, 5, 5);
  EXPECT_EQ(manager_.Counts().locks, 2u);
  EXPECT_EQ(manager_.hosts().Find(HostId("a"))->locks, 2u);
}

TEST_F(LockManagerTest, RefusesNewHostsPastTheLimit) {
  LockManager manager(clock_, LockManagerOptions{.max_hosts = 2});
  EXPECT_EQ(manager.Lock(Req(f_, a_, 0, 1)).status, LockStatus::kGranted);
  EXPECT_EQ(manager.Lock(Req(f_, b_, 1, 1)).status, LockStatus::kGranted);
  const LockOutcome refused = manager.Lock(Req(f_, c_, 2, 1));
  EXPECT_EQ(refused.status, LockStatus::kNoResources);
  EXPECT_EQ(manager.Lock(Req(f_, Owner("a", 2), 3, 1)).status, LockStatus::kGranted);
  manager.Unlock(f_, b_, 0, 0);  // b idle: evicted to make room.
  EXPECT_EQ(manager.Lock(Req(f_, c_, 2, 1)).status, LockStatus::kGranted);
  EXPECT_EQ(manager.hosts().Find(HostId("b")), nullptr);
}

TEST_F(LockManagerTest, RefusesLocksPastTheHostsLimitButStillServesHeldOnes) {
  LockManager manager(clock_, LockManagerOptions{.max_locks_per_host = 2});
  manager.Lock(Req(f_, a_, 0, 1));
  manager.Lock(Req(f_, a_, 10, 1));
  EXPECT_EQ(manager.Lock(Req(f_, a_, 20, 1)).status, LockStatus::kNoResources);
  EXPECT_EQ(manager.Lock(Req(f_, a_, 0, 1)).status, LockStatus::kGranted);  // Already held.
  EXPECT_EQ(manager.Lock(Req(f_, b_, 20, 1)).status, LockStatus::kGranted);
  manager.Unlock(f_, a_, 0, 1);
  EXPECT_EQ(manager.Lock(Req(f_, a_, 30, 1)).status, LockStatus::kGranted);
}

TEST_F(LockManagerTest, RefusesNewOwnersPastTheHostsOwnerBytes) {
  // Owners with 1 KiB handles: 256 + 1 (host "a") + 1024 bytes each; two fit, a third does not.
  LockManager manager(clock_, LockManagerOptions{.max_owner_bytes_per_host = 2 * 1281});
  auto large = [](int32_t svid) {
    return LockOwner{HostId("a"), svid, OwnerHandle(std::to_string(svid) + std::string(1023, 'o'))};
  };
  EXPECT_EQ(manager.Lock(Req(f_, large(1), 0, 1)).status, LockStatus::kGranted);
  EXPECT_EQ(manager.Lock(Req(f_, large(2), 10, 1)).status, LockStatus::kGranted);
  EXPECT_EQ(manager.Lock(Req(f_, large(3), 20, 1)).status, LockStatus::kNoResources);
  EXPECT_EQ(manager.Lock(Blocking(f_, large(3), 0, 1)).status, LockStatus::kNoResources);
  EXPECT_EQ(manager.Lock(Req(f_, large(1), 30, 1)).status, LockStatus::kGranted)
      << "an owner the host has already costs nothing more";
  EXPECT_EQ(manager.Lock(Req(f_, b_, 40, 1)).status, LockStatus::kGranted) << "another host";
  manager.Unlock(f_, large(2), 0, 0);  // Its owner goes, and its bytes with it.
  EXPECT_EQ(manager.Lock(Req(f_, large(3), 20, 1)).status, LockStatus::kGranted);
}

TEST_F(LockManagerTest, RefusesLocksPastTheTotalLimit) {
  LockManager manager(clock_, LockManagerOptions{.max_locks = 1});
  manager.Lock(Req(f_, a_, 0, 1));
  EXPECT_EQ(manager.Lock(Req(f_, b_, 5, 1)).status, LockStatus::kNoResources);
}

TEST_F(LockManagerTest, ListsLocksByHostAndByFile) {
  const FileKey g = File("fh2");
  manager_.Lock(Req(f_, a_, 0, 10));
  manager_.Lock(Req(g, a_, 0, 10, kS));
  manager_.Lock(Req(g, b_, 5, 10, kS));
  EXPECT_EQ(manager_.ListLocks().size(), 3u);
  const std::vector<LockInfo> of_a = manager_.ListLocks(StateFilter{HostId("a"), std::nullopt});
  ASSERT_EQ(of_a.size(), 2u);
  for (const LockInfo& lock : of_a) EXPECT_EQ(lock.owner, a_);
  const std::vector<LockInfo> on_g = manager_.ListLocks(StateFilter{std::nullopt, g});
  ASSERT_EQ(on_g.size(), 2u);
  EXPECT_EQ(on_g[0], (LockInfo{g, a_, R(0, 9), kS, false}));
  EXPECT_EQ(on_g[1], (LockInfo{g, b_, R(5, 14), kS, false}));
  EXPECT_EQ(manager_.ListLocks(StateFilter{HostId("b"), f_}).size(), 0u);
  EXPECT_EQ(manager_.ListLocks(StateFilter{HostId("nobody"), std::nullopt}).size(), 0u);
}

TEST_F(LockManagerTest, DebugStringRendersEverythingSortedByFile) {
  manager_.Lock(Req(File("z"), a_, 0, 10));
  manager_.Lock(Req(File("y"), b_, 5, 0, kS));
  manager_.Lock(Blocking(File("z"), b_, 5, 1));
  ShareRequest share;
  share.file = File("y");
  share.owner = LockOwner{HostId("a"), 0, OwnerHandle("a")};
  share.access = ShareAccess::kRead;
  share.deny = ShareDeny::kWrite;
  manager_.Share(share);
  EXPECT_EQ(manager_.DebugString(),
            "file y\n"
            "  lock b/1/1@b shared [5,end]\n"
            "  share a/0/a read deny-write\n"
            "file z\n"
            "  lock a/1/1@a exclusive [0,9]\n"
            "  waiter 1 b/1/1@b exclusive [5,5] queued\n");
}

}  // namespace
}  // namespace nlockd::lock
