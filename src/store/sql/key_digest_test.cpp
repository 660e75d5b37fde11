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

std::string Hex(const std::string& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    hex += kDigits[byte >> 4];
    hex += kDigits[byte & 0xF];
  }
  return hex;
}

// Stores written by any version hold these keys: the values are SHA-256 of the documented
// encoding as Python's hashlib computes it (tag, then 4-byte big-endian lengths and integers),
// whichever library hashes here.
TEST(KeyDigest, MatchesSha256OfTheEncoding) {
  EXPECT_EQ(Hex(ShareDigest("f", "h", "o")),
            "d41332608c5ea799dc744872763f3bb9cd0dc64f3197da06a7ed7986a7ec4cdd");
  EXPECT_EQ(Hex(LockOwnerDigest(std::string(1024, 'f'), std::string(1024, 'h'), 1,
                                std::string(1024, 'o'))),
            "0ae22645bf0b7d1acd012e1ebaec2c85454361633fcd5be2d963b3450d721536");
  EXPECT_EQ(Hex(RegistrationDigest("a", MyId{"b", 1, 2, 3})),
            "0f23267619a8af92b9d95a5bb82436e0a6622937631b1e220c2cef06baf6c1e2");
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
