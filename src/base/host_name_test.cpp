// SPDX-License-Identifier: Apache-2.0
#include "base/host_name.hpp"

#include <clocale>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace nlockd {
namespace {

TEST(HostName, CaseOfAsciiLettersDoesNotMatter) {
  EXPECT_TRUE(SameHostName("Client-A.Example.ORG", "client-a.example.org"));
  EXPECT_EQ(FoldHostName("Client-A.Example.ORG"), "client-a.example.org");
  EXPECT_TRUE(SameHostName("", ""));
  EXPECT_FALSE(SameHostName("client-a", "client-b"));
  EXPECT_FALSE(SameHostName("client", "client-a"));
  EXPECT_TRUE(SameHostName("192.0.2.1", "192.0.2.1"));
  EXPECT_FALSE(SameHostName("192.0.2.1", "192.0.2.10"));
}

TEST(HostName, FoldedNamesAreEqualExactlyWhenTheNamesMatch) {
  const std::vector<std::string> names = {"client-a", "Client-A", "CLIENT-A", "client-b",
                                          "client",   "",         "FE80::1",  "fe80::1",
                                          "h\xC9st",  "h\xE9st",  "@",        "`"};
  for (const std::string& a : names) {
    for (const std::string& b : names) {
      EXPECT_EQ(SameHostName(a, b), FoldHostName(a) == FoldHostName(b)) << a << " vs " << b;
    }
  }
}

TEST(HostName, BytesOutsideAsciiAreComparedAsTheyAreWhateverTheLocale) {
  // In Latin-1 locales tolower() folds 0xC9 to 0xE9; host names are compared byte for byte.
  const std::string upper = "h\xC9st", lower = "h\xE9st";
  const char* previous = std::setlocale(LC_CTYPE, nullptr);
  const std::string saved = previous != nullptr ? previous : "C";
  std::setlocale(LC_CTYPE, "en_US.ISO-8859-1");
  EXPECT_FALSE(SameHostName(upper, lower));
  EXPECT_EQ(FoldHostName(upper), upper);
  std::setlocale(LC_CTYPE, saved.c_str());
}

}  // namespace
}  // namespace nlockd
