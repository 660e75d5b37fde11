// SPDX-License-Identifier: Apache-2.0
#include "nlm/grant_cookies.hpp"

#include <set>

#include <gtest/gtest.h>

namespace nlockd::nlm {
namespace {

// The key 00 01 .. 0f of the SipHash paper's test vectors (Appendix A), as two little-endian
// words.
constexpr GrantCookies::Key kPaperKey{0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL};

TEST(GrantCookies, SipHashMatchesThePapersVectors) {
  uint8_t message[15];
  for (uint8_t i = 0; i < 15; ++i) message[i] = i;
  EXPECT_EQ(GrantCookies::SipHash24(kPaperKey, message, 15), 0xa129ca6149be45e5ULL);
  EXPECT_EQ(GrantCookies::SipHash24(kPaperKey, message, 0), 0x726fdb47dd0e0e31ULL);
  EXPECT_EQ(GrantCookies::SipHash24(kPaperKey, message, 8), 0x93f5f5799a932462ULL);
}

TEST(GrantCookies, CookiesAreEightBytesDistinctAndDependOnTheKey) {
  GrantCookies a(kPaperKey);
  GrantCookies b(GrantCookies::Key{1, 2});
  std::set<std::string> seen;
  for (int i = 0; i < 10000; ++i) {
    std::string cookie = a.Next();
    ASSERT_EQ(cookie.size(), 8u);
    EXPECT_TRUE(seen.insert(cookie).second) << "repeated cookie at " << i;
  }
  EXPECT_NE(GrantCookies(kPaperKey).Next(), b.Next());
  EXPECT_EQ(GrantCookies(kPaperKey).Next(), GrantCookies(kPaperKey).Next());
}

}  // namespace
}  // namespace nlockd::nlm
