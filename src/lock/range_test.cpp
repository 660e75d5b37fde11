// SPDX-License-Identifier: Apache-2.0
#include "lock/range.hpp"

#include <gtest/gtest.h>

#include "base/error.hpp"

namespace nlockd::lock {
namespace {

constexpr uint64_t kMax = ByteRange::kMaxOffset;

TEST(ByteRange, ZeroLengthMeansToTheEnd) {
  const auto range = ByteRange::FromOffsetLength(100, 0);
  ASSERT_TRUE(range);
  EXPECT_EQ(range->first(), 100u);
  EXPECT_EQ(range->last(), kMax);
  EXPECT_TRUE(range->ToEnd());
  EXPECT_EQ(range->length(), 0u);
}

TEST(ByteRange, LengthGivesAnInclusiveLastByte) {
  const auto range = ByteRange::FromOffsetLength(10, 5);
  ASSERT_TRUE(range);
  EXPECT_EQ(range->first(), 10u);
  EXPECT_EQ(range->last(), 14u);
  EXPECT_EQ(range->offset(), 10u);
  EXPECT_EQ(range->length(), 5u);
  EXPECT_FALSE(range->ToEnd());
}

TEST(ByteRange, RangesEndingExactlyAtTheLastByteAreValid) {
  EXPECT_EQ(ByteRange::FromOffsetLength(kMax, 1), ByteRange::FromFirstLast(kMax, kMax));
  EXPECT_EQ(ByteRange::FromOffsetLength(1, kMax), ByteRange::FromFirstLast(1, kMax));
  EXPECT_EQ(ByteRange::FromOffsetLength(0, kMax), ByteRange::FromFirstLast(0, kMax - 1));
  EXPECT_EQ(ByteRange::FromOffsetLength(kMax, 0), ByteRange::FromFirstLast(kMax, kMax));
}

TEST(ByteRange, RangesPastTheLastByteAreRejected) {
  EXPECT_FALSE(ByteRange::FromOffsetLength(kMax, 2));
  EXPECT_FALSE(ByteRange::FromOffsetLength(2, kMax));
  EXPECT_FALSE(ByteRange::FromOffsetLength(kMax - 9, 11));
  EXPECT_TRUE(ByteRange::FromOffsetLength(kMax - 9, 10));
}

TEST(ByteRange, AnExplicitLengthToTheLastByteReportsLengthZero) {
  EXPECT_EQ(ByteRange::FromOffsetLength(1, kMax)->length(), 0u);
}

TEST(ByteRange, DefaultIsTheWholeFile) {
  EXPECT_EQ(ByteRange(), ByteRange::FromFirstLast(0, kMax));
}

TEST(ByteRange, InvertedFirstLastIsACallerBug) {
  EXPECT_THROW(ByteRange::FromFirstLast(5, 4), Error);
}

TEST(ByteRange, OverlapsAndContains) {
  const auto a = ByteRange::FromFirstLast(10, 19);
  EXPECT_TRUE(a.Overlaps(ByteRange::FromFirstLast(19, 30)));
  EXPECT_TRUE(a.Overlaps(ByteRange::FromFirstLast(0, 10)));
  EXPECT_FALSE(a.Overlaps(ByteRange::FromFirstLast(20, 30)));
  EXPECT_FALSE(a.Overlaps(ByteRange::FromFirstLast(0, 9)));
  EXPECT_TRUE(a.Contains(ByteRange::FromFirstLast(10, 19)));
  EXPECT_FALSE(a.Contains(ByteRange::FromFirstLast(9, 19)));
  EXPECT_TRUE(ByteRange().Contains(ByteRange::FromFirstLast(kMax, kMax)));
}

TEST(ByteRange, TouchesIncludesAdjacencyWithoutOverflowAtTheEnds) {
  const auto a = ByteRange::FromFirstLast(10, 19);
  EXPECT_TRUE(a.Touches(ByteRange::FromFirstLast(20, 25)));
  EXPECT_TRUE(a.Touches(ByteRange::FromFirstLast(0, 9)));
  EXPECT_FALSE(a.Touches(ByteRange::FromFirstLast(21, 25)));
  const auto tail = ByteRange::FromFirstLast(kMax, kMax);
  const auto head = ByteRange::FromFirstLast(0, 0);
  EXPECT_FALSE(tail.Touches(head));
  EXPECT_FALSE(head.Touches(tail));
  EXPECT_TRUE(ByteRange::FromFirstLast(5, kMax - 1).Touches(tail));
}

TEST(ByteRange, HullAndText) {
  EXPECT_EQ(ByteRange::FromFirstLast(10, 19).Hull(ByteRange::FromFirstLast(30, kMax)),
            ByteRange::FromFirstLast(10, kMax));
  EXPECT_EQ(ByteRange::FromFirstLast(10, 19).ToString(), "[10,19]");
  EXPECT_EQ(ByteRange::FromFirstLast(10, kMax).ToString(), "[10,end]");
}

}  // namespace
}  // namespace nlockd::lock
