// SPDX-License-Identifier: Apache-2.0
#include "lock/owner.hpp"

#include <gtest/gtest.h>

namespace nlockd::lock {
namespace {

TEST(LockOwner, AllThreePartsTakePartInIdentity) {
  const LockOwner a{HostId("10.0.0.1"), 7, OwnerHandle("7@client")};
  EXPECT_EQ(a, (LockOwner{HostId("10.0.0.1"), 7, OwnerHandle("7@client")}));
  EXPECT_NE(a, (LockOwner{HostId("10.0.0.2"), 7, OwnerHandle("7@client")}));
  EXPECT_NE(a, (LockOwner{HostId("10.0.0.1"), 8, OwnerHandle("7@client")}));
  EXPECT_NE(a, (LockOwner{HostId("10.0.0.1"), 7, OwnerHandle("8@client")}));
}

TEST(LockOwner, EqualOwnersHashEqually) {
  const LockOwner a{HostId("h"), 1, OwnerHandle("x")};
  const LockOwner b{HostId("h"), 1, OwnerHandle("x")};
  EXPECT_EQ(LockOwnerHash{}(a), LockOwnerHash{}(b));
}

TEST(LockOwner, TextEscapesOpaqueBytes) {
  const LockOwner owner{HostId("h"), -1, OwnerHandle(std::string("a\0/\xff", 4))};
  EXPECT_EQ(owner.ToString(), "h/-1/a\\x00\\x2f\\xff");
}

}  // namespace
}  // namespace nlockd::lock
