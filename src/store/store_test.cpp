// SPDX-License-Identifier: Apache-2.0
#include "store/store.hpp"

#include <gtest/gtest.h>

namespace nlockd::store {
namespace {

TEST(StateNumber, BumpsToTheNextOddNumber) {
  EXPECT_EQ(NextOddState(0), 1);
  EXPECT_EQ(NextOddState(1), 3);
  EXPECT_EQ(NextOddState(2), 3);
  EXPECT_EQ(NextOddState(-3), -1);
}

TEST(StateNumber, WrapsLikeAnXdrInt) {
  EXPECT_EQ(NextOddState(2147483646), 2147483647);
  EXPECT_EQ(NextOddState(2147483647), -2147483647);
  EXPECT_EQ(NextEvenState(2147483647), -2147483647 - 1);
}

TEST(StateNumber, CleanShutdownMakesItEven) {
  EXPECT_EQ(NextEvenState(3), 4);
  EXPECT_EQ(NextEvenState(4), 4);
  EXPECT_EQ(NextEvenState(-1), 0);
}

TEST(Durability, RegistrationsAndStateAreSyncedLockTableChangesCommitted) {
  int32_t state = 0;
  for (const WriteOp& op : std::vector<WriteOp>{
           PutRegistrationOp{}, RemoveRegistrationOp{}, RemoveRegistrationsOfOp{},
           PutNotifyOwedOp{}, ClearOp{}, BumpStateOp{&state}, MarkCleanShutdownOp{}}) {
    EXPECT_EQ(DurabilityOf(op), Durability::kSynced) << op.index();
  }
  for (const WriteOp& op : std::vector<WriteOp>{LockChangesOp{}, ReleaseHostOp{},
                                                RemoveNotifyOwedOp{}, MarkLockTableCompleteOp{}}) {
    EXPECT_EQ(DurabilityOf(op), Durability::kCommitted) << op.index();
  }
}

}  // namespace
}  // namespace nlockd::store
