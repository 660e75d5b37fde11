// SPDX-License-Identifier: Apache-2.0
// LockManager: share reservations.

#include <gtest/gtest.h>

#include "lock/lock_manager.hpp"
#include "lock/testing/test_util.hpp"

namespace nlockd::lock {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): test helpers.

LockOwner ShareOwner(const std::string& host) {
  return LockOwner{HostId(host), 0, OwnerHandle("oh-" + host)};
}

ShareRequest Shr(const FileKey& file, const LockOwner& owner, ShareAccess access, ShareDeny deny,
                 bool reclaim = false) {
  ShareRequest request;
  request.file = file;
  request.owner = owner;
  request.access = access;
  request.deny = deny;
  request.reclaim = reclaim;
  return request;
}

class LockManagerShareTest : public ::testing::Test {
 protected:
  ManualClock clock_;
  LockManager manager_{clock_};
  const FileKey f_ = File("fh1");
  const LockOwner a_ = ShareOwner("a");
  const LockOwner b_ = ShareOwner("b");
};

TEST_F(LockManagerShareTest, DenyWriteRefusesAWriter) {
  EXPECT_EQ(manager_.Share(Shr(f_, a_, ShareAccess::kRead, ShareDeny::kWrite)).status,
            LockStatus::kGranted);
  const ShareOutcome out = manager_.Share(Shr(f_, b_, ShareAccess::kWrite, ShareDeny::kNone));
  EXPECT_EQ(out.status, LockStatus::kDenied);
  EXPECT_EQ(*out.holder, (ShareHolder{a_, ShareAccess::kRead, ShareDeny::kWrite}));
  EXPECT_EQ(manager_.Share(Shr(f_, b_, ShareAccess::kRead, ShareDeny::kNone)).status,
            LockStatus::kGranted);
}

TEST_F(LockManagerShareTest, ANewDenyMustNotCoverAnExistingAccess) {
  manager_.Share(Shr(f_, a_, ShareAccess::kWrite, ShareDeny::kNone));
  EXPECT_EQ(manager_.Share(Shr(f_, b_, ShareAccess::kRead, ShareDeny::kWrite)).status,
            LockStatus::kDenied);
  EXPECT_EQ(manager_.Share(Shr(f_, b_, ShareAccess::kRead, ShareDeny::kRead)).status,
            LockStatus::kGranted);
}

TEST_F(LockManagerShareTest, AnOwnersNewShareReplacesItsOld) {
  manager_.Share(Shr(f_, a_, ShareAccess::kRead, ShareDeny::kReadWrite));
  EXPECT_EQ(manager_.Share(Shr(f_, a_, ShareAccess::kReadWrite, ShareDeny::kNone)).status,
            LockStatus::kGranted);
  ASSERT_EQ(manager_.ListShares().size(), 1u);
  EXPECT_EQ(manager_.ListShares()[0].access, ShareAccess::kReadWrite);
  EXPECT_EQ(manager_.Share(Shr(f_, b_, ShareAccess::kRead, ShareDeny::kNone)).status,
            LockStatus::kGranted);
  EXPECT_EQ(manager_.Counts().shares, 2u);
}

TEST_F(LockManagerShareTest, UnshareAlwaysSucceedsAndFreesTheFile) {
  EXPECT_FALSE(manager_.Unshare(f_, a_).removed);
  const ShareOutcome first = manager_.Share(Shr(f_, a_, ShareAccess::kRead, ShareDeny::kNone));
  EXPECT_TRUE(first.host_added);
  EXPECT_TRUE(manager_.Unshare(f_, a_).removed);
  const LockCounts counts = manager_.Counts();
  EXPECT_EQ(counts.shares, 0u);
  EXPECT_EQ(counts.files, 0u);
  EXPECT_EQ(counts.owners, 0u);
}

TEST_F(LockManagerShareTest, SharesAndByteRangeLocksAreIndependent) {
  manager_.Share(Shr(f_, a_, ShareAccess::kReadWrite, ShareDeny::kReadWrite));
  EXPECT_EQ(manager_.Lock(Req(f_, Owner("b"), 0, 0)).status, LockStatus::kGranted);
  manager_.Unlock(f_, Owner("b"), 0, 0);
  EXPECT_EQ(manager_.Counts().files, 1u);
}

TEST_F(LockManagerShareTest, RefusesSharesPastTheHostsLimit) {
  LockManager manager(clock_, LockManagerOptions{.max_shares_per_host = 1});
  manager.Share(Shr(f_, a_, ShareAccess::kRead, ShareDeny::kNone));
  EXPECT_EQ(manager.Share(Shr(File("fh2"), a_, ShareAccess::kRead, ShareDeny::kNone)).status,
            LockStatus::kNoResources);
  EXPECT_EQ(manager.Share(Shr(f_, a_, ShareAccess::kWrite, ShareDeny::kNone)).status,
            LockStatus::kGranted);  // Replacing is fine.
}

TEST_F(LockManagerShareTest, ReleaseHostDropsItsShares) {
  manager_.Share(Shr(f_, a_, ShareAccess::kRead, ShareDeny::kWrite));
  const HostReleaseOutcome out = manager_.ReleaseHost(HostId("a"));
  EXPECT_EQ(out.shares, 1u);
  EXPECT_EQ(manager_.Share(Shr(f_, b_, ShareAccess::kWrite, ShareDeny::kNone)).status,
            LockStatus::kGranted);
}

}  // namespace
}  // namespace nlockd::lock
