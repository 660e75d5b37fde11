// SPDX-License-Identifier: Apache-2.0
#include "lock/grace_period.hpp"

#include <chrono>

#include <gtest/gtest.h>

#include "base/error.hpp"

namespace nlockd::lock {
namespace {

using std::chrono::seconds;

TEST(GracePeriod, IsClosedUntilStarted) {
  ManualClock clock;
  GracePeriod grace(clock);
  EXPECT_FALSE(grace.IsActive());
  EXPECT_FALSE(grace.Expired());
  EXPECT_FALSE(grace.mode());
  EXPECT_EQ(grace.Remaining(), Clock::duration::zero());
  EXPECT_FALSE(grace.End(GraceEndReason::kAdmin));
  EXPECT_FALSE(grace.last_end_reason());
}

TEST(GracePeriod, DefaultsToNinetySecondsAndExpiresAtTheDeadline) {
  ManualClock clock;
  GracePeriod grace(clock);
  grace.Start(GraceMode::kClassic);
  EXPECT_TRUE(grace.IsActive());
  EXPECT_EQ(grace.mode(), GraceMode::kClassic);
  EXPECT_EQ(grace.Remaining(), seconds(90));
  clock.Advance(seconds(89));
  EXPECT_TRUE(grace.IsActive());
  EXPECT_EQ(grace.Remaining(), seconds(1));
  clock.Advance(seconds(1));
  EXPECT_FALSE(grace.IsActive());
  EXPECT_TRUE(grace.Expired());
  EXPECT_TRUE(grace.End(GraceEndReason::kTimer));
  EXPECT_FALSE(grace.Expired());
  EXPECT_EQ(grace.last_end_reason(), GraceEndReason::kTimer);
}

TEST(GracePeriod, AProtocolMayOverrideTheDuration) {
  ManualClock clock;
  GracePeriod grace(clock, seconds(30));
  grace.Start(GraceMode::kFineGrained, seconds(5));
  EXPECT_EQ(grace.Remaining(), seconds(5));
  EXPECT_EQ(grace.mode(), GraceMode::kFineGrained);
  grace.Start(GraceMode::kClassic);
  EXPECT_EQ(grace.Remaining(), seconds(30));
}

TEST(GracePeriod, EndsEarlyWithAReason) {
  ManualClock clock;
  GracePeriod grace(clock);
  grace.Start(GraceMode::kFineGrained);
  EXPECT_TRUE(grace.End(GraceEndReason::kAllReclaimed));
  EXPECT_FALSE(grace.IsActive());
  EXPECT_EQ(grace.last_end_reason(), GraceEndReason::kAllReclaimed);
  EXPECT_EQ(ToString(GraceEndReason::kAllReclaimed), "all-reclaimed");
}

TEST(GracePeriod, ANonPositiveDurationIsACallerBug) {
  ManualClock clock;
  GracePeriod grace(clock);
  EXPECT_THROW(grace.Start(GraceMode::kClassic, seconds(0)), Error);
}

}  // namespace
}  // namespace nlockd::lock
