// SPDX-License-Identifier: Apache-2.0
#include "call_window.hpp"

#include <gtest/gtest.h>

namespace example {
namespace {

TEST(CallWindow, FillsAtTheLimit) {
  CallWindow window(3);
  EXPECT_FALSE(window.Full());
  window.Opened();
  window.Opened();
  EXPECT_FALSE(window.Full());
  window.Opened();
  EXPECT_TRUE(window.Full());
  EXPECT_EQ(window.in_flight(), 3u);
}

TEST(CallWindow, AnswersWakeTheReaderOnlyWhenTheyMakeRoomInAFullWindow) {
  CallWindow window(2);
  window.Opened();
  EXPECT_FALSE(window.Answered(1));  // Never full: nobody waits.
  window.Opened();
  window.Opened();
  ASSERT_TRUE(window.Full());
  EXPECT_TRUE(window.Answered(1));  // Room for one: wake.
  EXPECT_FALSE(window.Full());
  EXPECT_FALSE(window.Answered(1));  // Already woken.
  EXPECT_EQ(window.in_flight(), 0u);
}

TEST(CallWindow, AWriteOfManyRepliesDrainsAtOnce) {
  CallWindow window(4);
  for (int i = 0; i < 4; ++i) window.Opened();
  ASSERT_TRUE(window.Full());
  EXPECT_TRUE(window.Answered(4));
  EXPECT_EQ(window.in_flight(), 0u);
}

TEST(CallWindow, StaysFullWhileAnswersLeaveItAtTheLimit) {
  // Calls taken past the limit (none are, but a reader may check late) still need answers
  // down to below it before the reader is woken.
  CallWindow window(2);
  for (int i = 0; i < 4; ++i) window.Opened();
  EXPECT_FALSE(window.Answered(2));
  EXPECT_TRUE(window.Full());
  EXPECT_TRUE(window.Answered(1));
  EXPECT_FALSE(window.Full());
}

}  // namespace
}  // namespace example
