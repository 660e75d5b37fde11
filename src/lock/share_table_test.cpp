// SPDX-License-Identifier: Apache-2.0
#include "lock/share_table.hpp"

#include <gtest/gtest.h>

namespace nlockd::lock {
namespace {

const OwnerId kA(0);
const OwnerId kB(1);
using A = ShareAccess;
using D = ShareDeny;

TEST(SharesConflict, AccessMeetsTheOthersDenyEitherWay) {
  EXPECT_FALSE(SharesConflict(A::kRead, D::kNone, A::kRead, D::kNone));
  EXPECT_FALSE(SharesConflict(A::kRead, D::kWrite, A::kRead, D::kWrite));
  EXPECT_TRUE(SharesConflict(A::kWrite, D::kNone, A::kRead, D::kWrite));
  EXPECT_TRUE(SharesConflict(A::kRead, D::kWrite, A::kWrite, D::kNone));
  EXPECT_TRUE(SharesConflict(A::kRead, D::kNone, A::kNone, D::kRead));
  EXPECT_FALSE(SharesConflict(A::kNone, D::kNone, A::kReadWrite, D::kReadWrite));
  EXPECT_TRUE(SharesConflict(A::kReadWrite, D::kNone, A::kNone, D::kWrite));
  EXPECT_FALSE(SharesConflict(A::kRead, D::kRead, A::kNone, D::kWrite));
}

TEST(ShareTable, OwnSharesNeverConflictAndAreReplaced) {
  ShareTable table;
  EXPECT_EQ(table.Set(ShareEntry{kA, A::kRead, D::kReadWrite, false}).entries, 1);
  EXPECT_EQ(table.FindConflict(kA, A::kReadWrite, D::kNone), nullptr);
  EXPECT_EQ(table.Set(ShareEntry{kA, A::kReadWrite, D::kNone, false}).entries, 0);
  ASSERT_EQ(table.size(), 1u);
  EXPECT_EQ(table.Find(kA)->access, A::kReadWrite);
}

TEST(ShareTable, FindsTheFirstConflictingReservationOfAnotherOwner) {
  ShareTable table;
  table.Set(ShareEntry{kA, A::kRead, D::kNone, false});
  table.Set(ShareEntry{kB, A::kRead, D::kWrite, false});
  const ShareEntry* conflict = table.FindConflict(OwnerId(2), A::kWrite, D::kNone);
  ASSERT_NE(conflict, nullptr);
  EXPECT_EQ(conflict->owner, kB);
  conflict = table.FindConflict(OwnerId(2), A::kRead, D::kRead);
  ASSERT_NE(conflict, nullptr);
  EXPECT_EQ(conflict->owner, kA);
}

TEST(ShareTable, RemoveAndAwaitingBookkeeping) {
  ShareTable table;
  table.Set(ShareEntry{kA, A::kRead, D::kWrite, true});
  EXPECT_EQ(table.awaiting_count(), 1u);
  EXPECT_NE(table.FindAwaitingConflict(kB, A::kWrite, D::kNone), nullptr);
  EXPECT_EQ(table.FindAwaitingConflict(kA, A::kWrite, D::kNone), nullptr);
  const ShareTable::Delta reclaim = table.Set(ShareEntry{kA, A::kRead, D::kWrite, false});
  EXPECT_EQ(reclaim.awaiting, -1);
  EXPECT_EQ(table.awaiting_count(), 0u);
  EXPECT_EQ(table.Remove(kB).entries, 0);
  EXPECT_EQ(table.Remove(kA).entries, -1);
  EXPECT_TRUE(table.empty());
}

}  // namespace
}  // namespace nlockd::lock
