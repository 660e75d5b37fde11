// SPDX-License-Identifier: Apache-2.0
#include "base/error.hpp"

#include <gtest/gtest.h>

#include "base/logging.hpp"

namespace nlockd {
namespace {

TEST(Checks, PassingCheckDoesNothing) {
  EXPECT_NO_THROW(NLOCKD_ASSERT(1 + 1 == 2));
  EXPECT_NO_THROW(NLOCKD_REQUIRE(true, "never shown"));
}

TEST(Checks, FailingRequireThrowsFailedWithConditionAndMessage) {
  try {
    NLOCKD_REQUIRE(2 < 1, "caller broke it");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kFailed);
    std::string what = e.what();
    EXPECT_NE(what.find("NLOCKD_REQUIRE"), std::string::npos) << what;
    EXPECT_NE(what.find("2 < 1"), std::string::npos) << what;
    EXPECT_NE(what.find("caller broke it"), std::string::npos) << what;
  }
}

TEST(ChecksDeathTest, AFailingAssertAbortsTheProcessWithItsReason) {
  // A broken invariant of our own is not recovered from: nothing may serve from that state.
  // As in nlockd, the log goes to stderr.
  EXPECT_DEATH(
      {
        SetUpLogging(spdlog::level::info);
        NLOCKD_ASSERT(2 < 1, "table broken");
      },
      "NLOCKD_ASSERT failed at .*2 < 1: table broken");
}

TEST(ErrorKind, NamesEveryKind) {
  EXPECT_EQ(ToString(ErrorKind::kOverloaded), "overloaded");
  EXPECT_EQ(ToString(ErrorKind::kDisconnected), "disconnected");
  EXPECT_EQ(ToString(ErrorKind::kUnimplemented), "unimplemented");
  EXPECT_EQ(ToString(ErrorKind::kFailed), "failed");
}

}  // namespace
}  // namespace nlockd
