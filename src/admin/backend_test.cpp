// SPDX-License-Identifier: Apache-2.0
#include "admin/backend.hpp"

#include <gtest/gtest.h>

#include "admin/json_views.hpp"
#include "admin/router.hpp"

namespace nlockd::admin {
namespace {

TEST(RegistrationId, IsStableAcrossBuilds) {
  // A golden value: ids are stored in operators' scripts, so the hash must never change.
  EXPECT_EQ(MakeRegistrationId("client-a", "localhost", 100021, 1, 16), "947acc3475be92d5");
}

TEST(RegistrationId, EveryKeyFieldCounts) {
  const std::string base = MakeRegistrationId("a", "b", 1, 2, 3);
  EXPECT_EQ(base.size(), 16u);
  EXPECT_NE(base, MakeRegistrationId("a", "b", 1, 2, 4));
  EXPECT_NE(base, MakeRegistrationId("a", "b", 1, 3, 3));
  EXPECT_NE(base, MakeRegistrationId("a", "b", 2, 2, 3));
  EXPECT_NE(base, MakeRegistrationId("a", "c", 1, 2, 3));
  // Field boundaries are part of the key.
  EXPECT_NE(MakeRegistrationId("ab", "c", 1, 2, 3), MakeRegistrationId("a", "bc", 1, 2, 3));
}

TEST(TakePage, CutsOnePageAndCountsAll) {
  const std::vector<int> all = {1, 2, 3, 4, 5};
  auto page = TakePage(all, Page{.offset = 1, .limit = 2});
  EXPECT_EQ(page.items, (std::vector<int>{2, 3}));
  EXPECT_EQ(page.total, 5u);
  page = TakePage(all, Page{.offset = 4, .limit = 10});
  EXPECT_EQ(page.items, (std::vector<int>{5}));
  page = TakePage(all, Page{.offset = 9, .limit = 10});
  EXPECT_TRUE(page.items.empty());
  EXPECT_EQ(page.total, 5u);
}

TEST(Hex, RoundTripsBytes) {
  const std::string bytes("\x00\x01\xab\xff", 4);
  EXPECT_EQ(HexEncode(bytes), "0001abff");
  EXPECT_EQ(HexDecode("0001ABff"), bytes);
  EXPECT_EQ(HexDecode("abc"), std::nullopt);
  EXPECT_EQ(HexDecode("zz"), std::nullopt);
  EXPECT_EQ(HexDecode(""), std::string());
}

TEST(PercentDecode, DecodesEscapesAndRejectsBadOnes) {
  EXPECT_EQ(PercentDecode("a%2Fb%20c", false), "a/b c");
  EXPECT_EQ(PercentDecode("a+b", false), "a+b");
  EXPECT_EQ(PercentDecode("a+b", true), "a b");
  EXPECT_EQ(PercentDecode("a%2", false), std::nullopt);
  EXPECT_EQ(PercentDecode("a%", false), std::nullopt);
  EXPECT_EQ(PercentDecode("%zz", false), std::nullopt);
}

TEST(JsonViews, GraceRendersNullsWhenInactive) {
  GraceView grace;
  grace.last_end_reason = "timer";
  EXPECT_EQ(ToJson(grace).dump(),
            R"({"active":false,"last_end_reason":"timer","mode":null,"reclaims_counted":0,)"
            R"("reclaims_expected":0,"seconds_left":0.0})");
}

TEST(JsonViews, LockRendersHandlesAsHex) {
  const LockView lock{"\x01\xfe", "h", 3, "o", 10, 0, true, false};
  EXPECT_EQ(ToJson(lock).dump(),
            R"({"awaiting_reclaim":false,"exclusive":true,"file":"01fe","host":"h",)"
            R"("length":0,"offset":10,"owner":"6f","svid":3})");
}

}  // namespace
}  // namespace nlockd::admin
