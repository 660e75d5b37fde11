// SPDX-License-Identifier: Apache-2.0
#include "lock/owner_table.hpp"

#include <gtest/gtest.h>

namespace nlockd::lock {
namespace {

LockOwner MakeOwner(int32_t svid) {
  return LockOwner{HostId("h"), svid, OwnerHandle(std::to_string(svid))};
}

TEST(OwnerTable, InternsEachOwnerOnce) {
  OwnerTable table;
  const OwnerId a = table.Add(MakeOwner(1), nullptr);
  const OwnerId b = table.Add(MakeOwner(2), nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(table.Find(MakeOwner(1)), a);
  EXPECT_EQ(table.owner(b), MakeOwner(2));
  EXPECT_EQ(table.size(), 2u);
}

TEST(OwnerTable, OwnerIsRemovedWhenItsLastRecordGoesAndItsIdIsReused) {
  OwnerTable table;
  const OwnerId a = table.Add(MakeOwner(1), nullptr);
  EXPECT_FALSE(table.AddRefs(a, 2));
  EXPECT_FALSE(table.AddRefs(a, -1));
  EXPECT_TRUE(table.AddRefs(a, -1));
  EXPECT_FALSE(table.Find(MakeOwner(1)));
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.Add(MakeOwner(3), nullptr), a);
}

TEST(OwnerTable, AddingNoRecordsToAFreshOwnerRemovesIt) {
  OwnerTable table;
  const OwnerId a = table.Add(MakeOwner(1), nullptr);
  EXPECT_TRUE(table.AddRefs(a, 0));
  EXPECT_EQ(table.size(), 0u);
}

TEST(OwnerTable, NoOwnerIsNeverHandedOut) {
  OwnerTable table;
  EXPECT_NE(table.Add(MakeOwner(1), nullptr), NoOwner());
}

}  // namespace
}  // namespace nlockd::lock
