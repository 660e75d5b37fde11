// SPDX-License-Identifier: Apache-2.0
#include "store/sql/key_digest.hpp"

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace nlockd::store {
namespace {

TEST(KeyDigest, IsA32ByteSha256) {
  EXPECT_EQ(RegistrationDigest("a", MyId{"b", 1, 2, 3}).size(), 32U);
  EXPECT_EQ(
      LockOwnerDigest(std::string(1024, 'f'), std::string(1024, 'h'), 1, std::string(1024, 'o'))
          .size(),
      32U);
}

TEST(KeyDigest, IsDeterministic) {
  EXPECT_EQ(ShareDigest("f", "h", "o"), ShareDigest("f", "h", "o"));
}

TEST(KeyDigest, FieldBoundariesMatter) {
  // Length prefixes: ("ab", "c") and ("a", "bc") are different identities.
  EXPECT_NE(ShareDigest("ab", "c", ""), ShareDigest("a", "bc", ""));
  EXPECT_NE(RegistrationDigest("ab", MyId{"c", 1, 1, 1}),
            RegistrationDigest("a", MyId{"bc", 1, 1, 1}));
  EXPECT_NE(LockOwnerDigest("f", "h", 1, "o"), LockOwnerDigest("f", "h", 2, "o"));
}

TEST(KeyDigest, RecordKindsDoNotCollide) {
  // The same fields as a share and as a lock owner with svid 0 still differ.
  std::set<std::string> digests{ShareDigest("f", "h", "o"), LockOwnerDigest("f", "h", 0, "o"),
                                RegistrationDigest("f", MyId{"h", 0, 0, 0})};
  EXPECT_EQ(digests.size(), 3U);
}

TEST(KeyDigest, BinaryBytesAreHashedWhole) {
  EXPECT_NE(ShareDigest(std::string("a\0b", 3), "h", "o"),
            ShareDigest(std::string("a\0c", 3), "h", "o"));
}

}  // namespace
}  // namespace nlockd::store
