// SPDX-License-Identifier: Apache-2.0
#include "nsm/notify_schedule.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace nlockd::nsm {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using Outcome = NotifySchedule::Outcome;

class NotifyScheduleTest : public ::testing::Test {
 protected:
  // Fails the host's attempt due now and advances the clock to its next due time; returns the
  // delay, in seconds, before that next attempt.
  int64_t FailAndWait(const std::string& name) {
    auto attempt = schedule_.PopDue(clock_.Now());
    EXPECT_TRUE(attempt.has_value());
    if (!attempt) return -1;
    EXPECT_EQ(schedule_.Failed(name, attempt->generation, clock_.Now(), std::nullopt),
              Outcome::kRetry);
    auto next = schedule_.NextDue();
    EXPECT_TRUE(next.has_value());
    if (!next) return -1;
    const int64_t delay = std::chrono::duration_cast<seconds>(*next - clock_.Now()).count();
    clock_.Set(*next);
    return delay;
  }

  ManualClock clock_;
  NotifySchedule schedule_{NotifyScheduleOptions{}};
};

TEST_F(NotifyScheduleTest, NewHostIsDueAtOnceAndHandedOutOnce) {
  schedule_.Add("client-a", "10.0.0.1", "server", 7, clock_.Now());
  auto attempt = schedule_.PopDue(clock_.Now());
  ASSERT_TRUE(attempt.has_value());
  EXPECT_EQ(attempt->mon_name, "client-a");
  EXPECT_EQ(attempt->address, "10.0.0.1");
  EXPECT_EQ(attempt->our_name, "server");
  EXPECT_EQ(attempt->state, 7);
  EXPECT_EQ(attempt->attempt, 1u);
  EXPECT_FALSE(attempt->port.has_value());
  EXPECT_EQ(schedule_.in_flight(), 1u);
  EXPECT_FALSE(schedule_.PopDue(clock_.Now()).has_value());
  EXPECT_FALSE(schedule_.NextDue().has_value());
  EXPECT_EQ(schedule_.Answered("client-a", attempt->generation), Outcome::kDone);
  EXPECT_TRUE(schedule_.empty());
  EXPECT_EQ(schedule_.in_flight(), 0u);
}

TEST_F(NotifyScheduleTest, BackoffDoublesFromTwoSecondsToACapOf120) {
  schedule_.Add("client-a", "", "server", 1, clock_.Now());
  std::vector<int64_t> delays;
  for (int i = 0; i < 9; ++i) delays.push_back(FailAndWait("client-a"));
  EXPECT_EQ(delays, (std::vector<int64_t>{2, 4, 8, 16, 32, 64, 120, 120, 120}));
  EXPECT_EQ(schedule_.View("client-a")->failures, 9u);
}

TEST_F(NotifyScheduleTest, NewOptionsApplyToTheNextRetryAndTheNextHostsBudget) {
  schedule_.Add("client-a", "", "server", 1, clock_.Now());
  EXPECT_EQ(FailAndWait("client-a"), 2);
  EXPECT_EQ(FailAndWait("client-a"), 4);
  auto a = schedule_.PopDue(clock_.Now());
  ASSERT_TRUE(a.has_value());
  // A reload: 10 s backoff, a 1 s budget for hosts added from now on.
  schedule_.set_options(
      NotifyScheduleOptions{milliseconds(10000), milliseconds(120000), 4, milliseconds(1000)});
  schedule_.Add("client-b", "", "server", 1, clock_.Now());
  auto b = schedule_.PopDue(clock_.Now());
  ASSERT_TRUE(b.has_value());
  ASSERT_EQ(b->mon_name, "client-b");
  EXPECT_EQ(schedule_.Failed("client-b", b->generation, clock_.Now(), std::nullopt),
            Outcome::kGiveUp);
  // client-a's third failure: 10 s doubled twice; it keeps the 15 minutes its round gave it.
  ASSERT_EQ(schedule_.Failed("client-a", a->generation, clock_.Now(), std::nullopt),
            Outcome::kRetry);
  EXPECT_EQ(*schedule_.NextDue() - clock_.Now(), seconds(40));
  clock_.Set(*schedule_.NextDue());
  EXPECT_EQ(FailAndWait("client-a"), 80);
}

TEST_F(NotifyScheduleTest, OneHostsBackoffDoesNotDelayAnother) {
  schedule_.Add("slow", "", "server", 1, clock_.Now());
  FailAndWait("slow");  // now at t = 2 s, slow due at t = 2 s
  FailAndWait("slow");  // now at t = 6 s
  schedule_.Add("fresh", "", "server", 1, clock_.Now());
  clock_.Advance(seconds(1));
  auto attempt = schedule_.PopDue(clock_.Now());
  ASSERT_TRUE(attempt.has_value());
  // slow was due at t = 6 s, fresh at t = 6 s too; both go at once, neither waits for the other.
  auto second = schedule_.PopDue(clock_.Now());
  ASSERT_TRUE(second.has_value());
  EXPECT_NE(attempt->mon_name, second->mon_name);
}

TEST_F(NotifyScheduleTest, RpcbindIsAskedAgainAfterFourFailuresOnALearnedPort) {
  schedule_.Add("client-a", "10.0.0.1", "server", 1, clock_.Now());
  std::vector<bool> had_port;
  for (int i = 0; i < 10; ++i) {
    auto attempt = schedule_.PopDue(clock_.Now());
    ASSERT_TRUE(attempt.has_value());
    had_port.push_back(attempt->port.has_value());
    std::optional<PeerPort> learned;
    if (!attempt->port) learned = PeerPort{700, false};  // the attempt asked rpcbind
    ASSERT_EQ(schedule_.Failed("client-a", attempt->generation, clock_.Now(), learned),
              Outcome::kRetry);
    clock_.Set(*schedule_.NextDue());
  }
  // Attempt 1 asks rpcbind; 2-4 use the port (4 failures on it); 5 asks again; and so on.
  EXPECT_EQ(had_port,
            (std::vector<bool>{false, true, true, true, false, true, true, true, false, true}));
}

TEST_F(NotifyScheduleTest, AFailedLookupIsRetriedWithALookup) {
  schedule_.Add("client-a", "10.0.0.1", "server", 1, clock_.Now());
  for (int i = 0; i < 3; ++i) {
    auto attempt = schedule_.PopDue(clock_.Now());
    ASSERT_TRUE(attempt.has_value());
    EXPECT_FALSE(attempt->port.has_value());
    schedule_.Failed("client-a", attempt->generation, clock_.Now(), std::nullopt);
    clock_.Set(*schedule_.NextDue());
  }
}

TEST_F(NotifyScheduleTest, GivesUpWhenTheNextAttemptWouldPassTheBudget) {
  const auto start = clock_.Now();
  schedule_.Add("dead", "", "server", 1, start);
  Outcome outcome = Outcome::kRetry;
  int attempts = 0;
  while (outcome == Outcome::kRetry) {
    auto attempt = schedule_.PopDue(clock_.Now());
    ASSERT_TRUE(attempt.has_value());
    ++attempts;
    clock_.Advance(seconds(5));  // each attempt runs into its 5 s deadline
    outcome = schedule_.Failed("dead", attempt->generation, clock_.Now(), std::nullopt);
    if (outcome == Outcome::kRetry) {
      EXPECT_LE(*schedule_.NextDue() - start, minutes(15));
      clock_.Set(*schedule_.NextDue());
    }
  }
  EXPECT_EQ(outcome, Outcome::kGiveUp);
  EXPECT_TRUE(schedule_.empty());
  // Attempts (5 s each) at 0, 7, 16, 29, 50, 87, 156 s (backoff 2..64 s), then every 125 s
  // (120 s cap): 281, 406, 531, 656, 781 s; the next, at 906 s, would be past 900 s.
  EXPECT_EQ(attempts, 12);
  EXPECT_LE(clock_.Now() - start, minutes(15));
}

TEST_F(NotifyScheduleTest, ShortBudgetGivesUpAfterTheFirstFailure) {
  NotifySchedule schedule(
      NotifyScheduleOptions{milliseconds(2000), milliseconds(120000), 4, milliseconds(1000)});
  schedule.Add("dead", "", "server", 1, clock_.Now());
  auto attempt = schedule.PopDue(clock_.Now());
  ASSERT_TRUE(attempt.has_value());
  EXPECT_EQ(schedule.Failed("dead", attempt->generation, clock_.Now(), std::nullopt),
            Outcome::kGiveUp);
  EXPECT_TRUE(schedule.empty());
  EXPECT_EQ(schedule.in_flight(), 0u);
}

TEST_F(NotifyScheduleTest, NewRoundReplacesAHostWithAFreshScheduleAndTheNewestState) {
  schedule_.Add("client-a", "", "server", 3, clock_.Now());
  for (int i = 0; i < 3; ++i) FailAndWait("client-a");
  schedule_.Add("client-a", "", "server", 5, clock_.Now());
  auto view = schedule_.View("client-a");
  ASSERT_TRUE(view.has_value());
  EXPECT_EQ(view->state, 5);
  EXPECT_EQ(view->failures, 0u);
  EXPECT_EQ(view->next_due, clock_.Now());
  EXPECT_EQ(view->give_up_after, clock_.Now() + minutes(15));
  EXPECT_EQ(schedule_.size(), 1u);
}

TEST_F(NotifyScheduleTest, ResultOfAnAttemptForAReplacedEntryIsStale) {
  schedule_.Add("client-a", "", "server", 3, clock_.Now());
  auto old_attempt = schedule_.PopDue(clock_.Now());
  ASSERT_TRUE(old_attempt.has_value());
  schedule_.Add("client-a", "", "server", 5, clock_.Now());
  // The old attempt still runs: the new entry waits for it rather than going out twice.
  EXPECT_FALSE(schedule_.PopDue(clock_.Now()).has_value());
  // Its answer announced state 3, not 5: the host stays owed.
  EXPECT_EQ(schedule_.Answered("client-a", old_attempt->generation), Outcome::kStale);
  auto attempt = schedule_.PopDue(clock_.Now());
  ASSERT_TRUE(attempt.has_value());
  EXPECT_EQ(attempt->state, 5);
  EXPECT_EQ(attempt->attempt, 1u);
  EXPECT_EQ(schedule_.Answered("client-a", attempt->generation), Outcome::kDone);
  EXPECT_TRUE(schedule_.empty());
  EXPECT_EQ(schedule_.in_flight(), 0u);
}

TEST_F(NotifyScheduleTest, AFailureOfAReplacedEntryIsStaleToo) {
  schedule_.Add("client-a", "", "server", 3, clock_.Now());
  auto old_attempt = schedule_.PopDue(clock_.Now());
  ASSERT_TRUE(old_attempt.has_value());
  schedule_.Add("client-a", "", "server", 5, clock_.Now());
  EXPECT_EQ(schedule_.Failed("client-a", old_attempt->generation, clock_.Now(), std::nullopt),
            Outcome::kStale);
  EXPECT_EQ(schedule_.View("client-a")->failures, 0u);
  EXPECT_EQ(schedule_.NextDue(), clock_.Now());
}

TEST_F(NotifyScheduleTest, AnnounceForAllKeepsEachHostsSchedule) {
  schedule_.Add("client-a", "", "server", 3, clock_.Now());
  FailAndWait("client-a");
  FailAndWait("client-a");
  schedule_.AnnounceForAll("server2", 5);
  auto attempt = schedule_.PopDue(clock_.Now());
  ASSERT_TRUE(attempt.has_value());
  EXPECT_EQ(attempt->state, 5);
  EXPECT_EQ(attempt->our_name, "server2");
  EXPECT_EQ(attempt->attempt, 3u);
}

TEST_F(NotifyScheduleTest, HostsComeOutInDueOrder) {
  schedule_.Add("b", "", "server", 1, clock_.Now());
  schedule_.Add("a", "", "server", 1, clock_.Now());
  auto a = schedule_.PopDue(clock_.Now());  // same due time: by name
  auto b = schedule_.PopDue(clock_.Now());
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->mon_name, "a");
  schedule_.Failed("a", a->generation, clock_.Now(), std::nullopt);  // due at +2 s
  clock_.Advance(seconds(1));
  schedule_.Failed("b", b->generation, clock_.Now(), std::nullopt);  // due at +3 s
  EXPECT_EQ(schedule_.NextDue(), clock_.Now() + seconds(1));
  EXPECT_FALSE(schedule_.PopDue(clock_.Now()).has_value());
  clock_.Advance(seconds(2));
  auto first = schedule_.PopDue(clock_.Now());
  auto second = schedule_.PopDue(clock_.Now());
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->mon_name, "a");
  EXPECT_EQ(second->mon_name, "b");
}

}  // namespace
}  // namespace nlockd::nsm
