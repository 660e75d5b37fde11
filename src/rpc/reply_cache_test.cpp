// SPDX-License-Identifier: Apache-2.0
#include "rpc/reply_cache.hpp"

#include <map>
#include <optional>
#include <random>

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

// A model of the ring (slot i takes every max_entries-th new call) against the cache, under
// random churn that collides in the index, wraps the ring, and abandons entries.
TEST_F(ReplyCacheTest, AgreesWithARingModelUnderChurn) {
  constexpr size_t kEntries = 37;
  ReplyCache cache(ReplyCache::Options{kEntries, seconds(1000)});
  struct Entry {
    uint32_t xid;
    int client;
    bool done = false;
    ReplyCache::Ticket ticket;
  };
  std::vector<std::optional<Entry>> ring(kEntries);
  std::map<std::pair<uint32_t, int>, size_t> where;  // (xid, client) -> ring position.
  size_t next = 0;
  const char* clients[] = {"192.0.2.1", "192.0.2.2", "2001:db8::1"};
  std::mt19937 random(42);
  std::vector<uint8_t> reply;
  TimePoint now{};
  for (int step = 0; step < 20000; ++step) {
    const auto xid = static_cast<uint32_t>(random() % 120);
    const int client = static_cast<int>(random() % 3);
    reply.clear();
    const ReplyCache::Lookup got = cache.Begin(KeyFor(xid, clients[client]), reply, now, ticket);
    auto found = where.find({xid, client});
    if (found != where.end()) {
      Entry& entry = *ring[found->second];
      ASSERT_EQ(got, entry.done ? ReplyCache::Lookup::kReplay : ReplyCache::Lookup::kInProgress);
      if (entry.done) {
        ASSERT_EQ(reply, (std::vector<uint8_t>{static_cast<uint8_t>(xid)}));
      }
      continue;
    }
    ASSERT_EQ(got, ReplyCache::Lookup::kNew) << step;
    if (ring[next]) where.erase({ring[next]->xid, ring[next]->client});
    ring[next] = Entry{xid, client, false, ticket};
    where[{xid, client}] = next;
    const size_t position = next;
    next = (next + 1) % kEntries;
    // Settle a random earlier call still in progress (or this one).
    const size_t pick = random() % 2 == 0 ? position : random() % kEntries;
    if (!ring[pick] || ring[pick]->done) continue;
    if (random() % 4 == 0) {
      cache.Abandon(ring[pick]->ticket);
      where.erase({ring[pick]->xid, ring[pick]->client});
      ring[pick].reset();
    } else {
      cache.Finish(ring[pick]->ticket, std::vector<uint8_t>{static_cast<uint8_t>(ring[pick]->xid)});
      ring[pick]->done = true;
    }
    ASSERT_EQ(cache.size(), where.size()) << step;
  }
}

TEST(ReplyCacheChecksum, TellsArgumentsApart) {
  std::vector<uint8_t> a{1, 2, 3}, b{1, 2, 4};
  EXPECT_NE(ReplyCache::Checksum(a), ReplyCache::Checksum(b));
  EXPECT_EQ(ReplyCache::Checksum(a), ReplyCache::Checksum(std::vector<uint8_t>{1, 2, 3}));
  // Words and tails: a trailing zero, and a change in any byte of a longer argument.
  EXPECT_NE(ReplyCache::Checksum(a), ReplyCache::Checksum(std::vector<uint8_t>{1, 2, 3, 0}));
  EXPECT_NE(ReplyCache::Checksum({}), ReplyCache::Checksum(std::vector<uint8_t>{0}));
  std::vector<uint8_t> lock(100, 7);
  const uint64_t sum = ReplyCache::Checksum(lock);
  for (size_t i = 0; i < lock.size(); ++i) {
    lock[i] ^= 0x80;
    EXPECT_NE(ReplyCache::Checksum(lock), sum) << i;
    lock[i] ^= 0x80;
  }
}

}  // namespace
}  // namespace nlockd::rpc
