// SPDX-License-Identifier: Apache-2.0
#include "lock/range_set.hpp"

#include <gtest/gtest.h>

namespace nlockd::lock {
namespace {

constexpr uint64_t kMax = ByteRange::kMaxOffset;

ByteRange R(uint64_t first, uint64_t last) { return ByteRange::FromFirstLast(first, last); }

TEST(RangeSet, AddMergesOverlappingAndTouchingRangesAndKeepsOrder) {
  RangeSet set;
  set.Add(R(20, 29));
  set.Add(R(0, 9));
  set.Add(R(40, kMax));
  EXPECT_EQ(set.ToString(), "[0,9] [20,29] [40,end]");
  set.Add(R(10, 12));  // Touches [0,9].
  set.Add(R(25, 45));  // Joins [20,29] and [40,end].
  EXPECT_EQ(set.ToString(), "[0,12] [20,end]");
}

TEST(RangeSet, SubtractSplitsAndTrims) {
  RangeSet set(R(0, kMax));
  set.Subtract(R(10, 19));
  set.Subtract(R(0, 0));
  set.Subtract(R(kMax, kMax));
  EXPECT_EQ(set.ToString(), "[1,9] [20," + std::to_string(kMax - 1) + "]");
  RangeSet cut;
  cut.Add(R(5, 25));
  set.Subtract(cut);
  EXPECT_EQ(set.ToString(), "[1,4] [26," + std::to_string(kMax - 1) + "]");
  set.Subtract(R(0, kMax));
  EXPECT_TRUE(set.empty());
}

TEST(RangeSet, WithinKeepsTheCommonBytes) {
  RangeSet set;
  set.Add(R(0, 9));
  set.Add(R(20, 29));
  EXPECT_EQ(set.Within(R(5, 24)).ToString(), "[5,9] [20,24]");
  RangeSet other;
  other.Add(R(25, 40));
  other.Add(R(8, 8));
  EXPECT_EQ(set.Within(other).ToString(), "[8,8] [25,29]");
  EXPECT_TRUE(set.Within(R(10, 19)).empty());
  EXPECT_TRUE(set.Overlaps(R(9, 10)));
  EXPECT_FALSE(set.Overlaps(R(10, 19)));
}

TEST(RangeSet, IntersectOfTwoRanges) {
  EXPECT_EQ(Intersect(R(0, 9), R(5, 20)), R(5, 9));
  EXPECT_FALSE(Intersect(R(0, 9), R(10, 20)));
}

}  // namespace
}  // namespace nlockd::lock
