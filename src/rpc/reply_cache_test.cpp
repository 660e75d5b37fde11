#include "rpc/reply_cache.hpp"

#include <gtest/gtest.h>

namespace nlockd::rpc {
namespace {

using std::chrono::seconds;
using TimePoint = std::chrono::steady_clock::time_point;

ReplyCache::Key KeyFor(uint32_t xid, const char* address = "192.0.2.1", uint64_t sum = 7) {
  return ReplyCache::Key{asio::ip::make_address(address), xid, 100021, 4, 2, sum};
}

class ReplyCacheTest : public ::testing::Test {
 protected:
  ReplyCache::Ticket ticket;  // Set by each Begin that reports a new call.
};

TEST_F(ReplyCacheTest, NewThenInProgressThenReplay) {
  ReplyCache cache;
  std::vector<uint8_t> reply;
  TimePoint now{};
  EXPECT_EQ(cache.Begin(KeyFor(1), reply, now, ticket), ReplyCache::Lookup::kNew);
  EXPECT_EQ(cache.Begin(KeyFor(1), reply, now, ticket), ReplyCache::Lookup::kInProgress);
  cache.Finish(ticket, std::vector<uint8_t>{1, 2, 3});
  EXPECT_EQ(cache.Begin(KeyFor(1), reply, now, ticket), ReplyCache::Lookup::kReplay);
  EXPECT_EQ(reply, (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(cache.replays(), 1u);
  EXPECT_EQ(cache.dropped_in_progress(), 1u);
}

TEST_F(ReplyCacheTest, DifferentClientXidOrArgumentsAreDifferentCalls) {
  ReplyCache cache;
  std::vector<uint8_t> reply;
  TimePoint now{};
  ASSERT_EQ(cache.Begin(KeyFor(1), reply, now, ticket), ReplyCache::Lookup::kNew);
  EXPECT_EQ(cache.Begin(KeyFor(2), reply, now, ticket), ReplyCache::Lookup::kNew);
  EXPECT_EQ(cache.Begin(KeyFor(1, "192.0.2.2"), reply, now, ticket), ReplyCache::Lookup::kNew);
  EXPECT_EQ(cache.Begin(KeyFor(1, "192.0.2.1", 8), reply, now, ticket), ReplyCache::Lookup::kNew);
}

TEST_F(ReplyCacheTest, EntriesExpireAndTheOldestIsEvictedPastTheBound) {
  ReplyCache cache(ReplyCache::Options{2, seconds(10)});
  std::vector<uint8_t> reply;
  TimePoint now{};
  cache.Begin(KeyFor(1), reply, now, ticket);
  cache.Finish(ticket, std::vector<uint8_t>{1});
  cache.Begin(KeyFor(2), reply, now, ticket);
  cache.Begin(KeyFor(3), reply, now, ticket);  // Evicts xid 1.
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.Begin(KeyFor(1), reply, now, ticket), ReplyCache::Lookup::kNew);
  cache.Finish(ticket, std::vector<uint8_t>{1});
  EXPECT_EQ(cache.Begin(KeyFor(1), reply, now + seconds(11), ticket), ReplyCache::Lookup::kNew);
}

TEST_F(ReplyCacheTest, AbandonedCallRunsAgain) {
  ReplyCache cache;
  std::vector<uint8_t> reply;
  TimePoint now{};
  cache.Begin(KeyFor(1), reply, now, ticket);
  cache.Abandon(ticket);
  EXPECT_EQ(cache.Begin(KeyFor(1), reply, now, ticket), ReplyCache::Lookup::kNew);
}

TEST_F(ReplyCacheTest, AfterManyWrapsTheNewestEntriesReplayAndOlderOnesAreNew) {
  ReplyCache cache(ReplyCache::Options{4, seconds(10)});
  std::vector<uint8_t> reply;
  TimePoint now{};
  for (uint32_t xid = 1; xid <= 103; ++xid) {
    ASSERT_EQ(cache.Begin(KeyFor(xid), reply, now, ticket), ReplyCache::Lookup::kNew);
    if (xid % 3 == 0) {
      cache.Abandon(ticket);
    } else {
      cache.Finish(ticket, std::vector<uint8_t>{static_cast<uint8_t>(xid)});
    }
  }
  EXPECT_EQ(cache.size(), 3u) << "xids 100, 101, 103 (102 was abandoned)";
  for (uint32_t xid : {100u, 101u, 103u}) {
    reply.clear();
    EXPECT_EQ(cache.Begin(KeyFor(xid), reply, now, ticket), ReplyCache::Lookup::kReplay) << xid;
    EXPECT_EQ(reply, std::vector<uint8_t>{static_cast<uint8_t>(xid)});
  }
  // New calls take the ring's slots in turn, evicting the oldest (an abandoned entry's slot is
  // reused only when its turn comes).
  EXPECT_EQ(cache.Begin(KeyFor(102), reply, now, ticket), ReplyCache::Lookup::kNew);
  EXPECT_EQ(cache.Begin(KeyFor(99), reply, now, ticket), ReplyCache::Lookup::kNew) << "evicted";
  EXPECT_EQ(cache.size(), 3u) << "103, 102, 99";
  EXPECT_EQ(cache.Begin(KeyFor(100), reply, now, ticket), ReplyCache::Lookup::kNew) << "evicted";
}

TEST_F(ReplyCacheTest, ATicketOfAnEvictedCallIsIgnored) {
  ReplyCache cache(ReplyCache::Options{1, seconds(10)});
  std::vector<uint8_t> reply;
  TimePoint now{};
  ASSERT_EQ(cache.Begin(KeyFor(1), reply, now, ticket), ReplyCache::Lookup::kNew);
  const ReplyCache::Ticket first = ticket;
  ASSERT_EQ(cache.Begin(KeyFor(2), reply, now, ticket), ReplyCache::Lookup::kNew);  // Evicts 1.
  cache.Finish(first, std::vector<uint8_t>{1});
  cache.Abandon(first);
  EXPECT_EQ(cache.Begin(KeyFor(2), reply, now, ticket), ReplyCache::Lookup::kInProgress)
      << "the slot's new call is untouched";
  EXPECT_EQ(cache.Begin(KeyFor(1), reply, now, ticket), ReplyCache::Lookup::kNew);
}

TEST(ReplyCacheChecksum, TellsArgumentsApart) {
  std::vector<uint8_t> a{1, 2, 3}, b{1, 2, 4};
  EXPECT_NE(ReplyCache::Checksum(a), ReplyCache::Checksum(b));
  EXPECT_EQ(ReplyCache::Checksum(a), ReplyCache::Checksum(std::vector<uint8_t>{1, 2, 3}));
}

}  // namespace
}  // namespace nlockd::rpc
