// SPDX-License-Identifier: Apache-2.0
// The lock journal under kill -9: lanes of NLM clients lock and unlock ranges that they contend
// for, nlockd is killed at a random moment, started again on the same store, and its restored
// lock table must hold every lock whose LOCK was answered GRANTED (and not released since), none
// whose UNLOCK was answered, and no range twice. Many kill points in one test; more with
// NLOCKD_JOURNAL_CRASH_ROUNDS (a soak). And a second nlockd on the same store refuses to start.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "integration/nlm_rpcgen.hpp"
#include "integration/raw_rpc.hpp"
#include "integration/recovery_support.hpp"

namespace nlockd::integration::recovery {
namespace {

constexpr int kLanes = 8;
constexpr uint64_t kRanges = 12;  // per round, contended by every lane
constexpr int kDefaultRounds = 40;

// What a lane knows of one range from the answers it got.
enum class Known { kFree, kHeld, kUnknown };

std::string Hex(const std::string& bytes) {
  std::string out;
  for (const char c : bytes) out += fmt::format("{:02x}", static_cast<unsigned char>(c));
  return out;
}

int Rounds() {
  const char* env = std::getenv("NLOCKD_JOURNAL_CRASH_ROUNDS");
  return env != nullptr ? std::max(1, std::atoi(env)) : kDefaultRounds;
}

// One client owner (its own svid and TCP connection) that locks and unlocks random ranges of
// `file` until the server goes away or `stop` is set; ends with what it knows per range.
struct Lane {
  int index = 0;
  std::string file;
  std::map<uint64_t, Known> known;
  size_t answered = 0;
  std::string error;

  NlmLock LockOf(uint64_t range) const {
    // Apart, so that an owner's locks never touch and merge.
    return NlmLock{"crash-client", file, fmt::format("lane{}", index), index + 1, range * 20, 10};
  }

  // One call on conn; nullopt when no reply came (the server died).
  static std::optional<NlmReply> Call(TcpConnection& conn, uint32_t xid, uint32_t procedure,
                                      const std::vector<uint8_t>& args) {
    const std::optional<RpcMessage> reply =
        conn.Call(BuildCall(xid, kNlmProgram, 4, procedure, args), std::chrono::seconds(20));
    if (!reply || reply->reply_stat != 0 || reply->accept_stat != kSuccess) return std::nullopt;
    return DecodeRes(4, reply->body);
  }

  // Raw RPC over its own connection (rpcgen's client stubs keep their result in static storage,
  // so lanes on threads cannot share them).
  void Run(uint16_t port, uint32_t seed, const std::atomic<bool>& stop) {
    TcpConnection conn(Ipv4("127.0.0.1", port));
    if (!conn.connected()) {
      error = "cannot connect";
      return;
    }
    uint32_t xid = seed;
    std::mt19937 rng(seed);
    for (uint64_t r = 0; r < kRanges; ++r) known[r] = Known::kFree;
    while (!stop.load()) {
      const uint64_t range = rng() % kRanges;
      const bool held = known[range] == Known::kHeld;
      known[range] = Known::kUnknown;  // sent, not answered yet
      std::optional<NlmReply> reply =
          held ? Call(conn, ++xid, kNlmUnlock, EncodeUnlockArgs(4, LockOf(range), "u"))
               : Call(conn, ++xid, kNlmLock,
                      EncodeLockArgs(4, LockOf(range), NlmLockFlags{true, false, false, 1}, "l"));
      if (!reply) return;  // the server is gone: this range stays unknown
      ++answered;
      if (held) {
        if (reply->stat != NlmStat::kGranted) {
          error = fmt::format("UNLOCK answered {}", ToString(reply->stat));
          return;
        }
        known[range] = Known::kFree;
      } else {
        if (reply->stat != NlmStat::kGranted && reply->stat != NlmStat::kDenied) {
          error = fmt::format("LOCK answered {}", ToString(reply->stat));
          return;
        }
        known[range] = reply->stat == NlmStat::kGranted ? Known::kHeld : Known::kFree;
      }
    }
  }
};

// The restored locks of `file` as (lane index, range); fails on anything unexpected.
std::multimap<uint64_t, int> RestoredLocks(NlockdProcess& nlockd, const std::string& file) {
  std::multimap<uint64_t, int> by_range;
  Admin admin(nlockd);
  const std::string hex_file = Hex(file);
  for (size_t offset = 0;;) {
    json page = admin.Get("/api/v1/locks?limit=1000&offset=" + std::to_string(offset));
    if (!page.is_object() || !page["locks"].is_array()) break;
    for (const json& lock : page["locks"]) {
      if (lock["file"].get<std::string>() != hex_file) continue;
      by_range.emplace(lock["offset"].get<uint64_t>() / 20,
                       static_cast<int>(lock["svid"].get<int64_t>()) - 1);
    }
    if (!page["next_offset"].is_number()) break;
    offset = page["next_offset"].get<size_t>();
  }
  return by_range;
}

TEST(JournalCrash, EveryAnsweredLockSurvivesKillNineAtManyPoints) {
  TempDir dir;
  const std::string store = "sqlite:" + dir.path() + "/nlockd.db";
  LoopbackPeers peers;
  // Grace far longer than the test: the restored locks stay visible as restored.
  auto nlockd = StartNlockd(store, peers.statd_port(), 600);
  ASSERT_NE(nlockd->port(), 0);
  std::mt19937 rng(std::random_device{}());
  const int rounds = Rounds();
  size_t total_answered = 0;
  size_t total_held = 0;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string file = "crash-file-" + std::to_string(round);
    std::vector<Lane> lanes(kLanes);
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < kLanes; ++i) {
      lanes[static_cast<size_t>(i)].index = i;
      lanes[static_cast<size_t>(i)].file = file;
      threads.emplace_back([&, i, seed = static_cast<uint32_t>(rng())] {
        lanes[static_cast<size_t>(i)].Run(nlockd->port(), seed, stop);
      });
    }
    // A kill point anywhere from early to well into the load.
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 150));
    Crash(*nlockd);
    stop = true;
    for (auto& t : threads) t.join();

    nlockd = StartNlockd(store, peers.statd_port(), 600);
    ASSERT_NE(nlockd->port(), 0) << "round " << round;
    const std::multimap<uint64_t, int> restored = RestoredLocks(*nlockd, file);
    for (uint64_t range = 0; range < kRanges; ++range) {
      EXPECT_LE(restored.count(range), 1U) << "range " << range << " granted twice";
    }
    for (const Lane& lane : lanes) {
      EXPECT_EQ(lane.error, "") << "lane " << lane.index;
      total_answered += lane.answered;
      for (const auto& [range, known] : lane.known) {
        bool present = false;
        const auto [first, last] = restored.equal_range(range);
        for (auto it = first; it != last; ++it) present = present || it->second == lane.index;
        if (known == Known::kHeld) {
          ++total_held;
          EXPECT_TRUE(present) << "lane " << lane.index << " range " << range
                               << ": answered GRANTED, missing after the restart";
        } else if (known == Known::kFree) {
          EXPECT_FALSE(present) << "lane " << lane.index << " range " << range
                                << ": released (or denied), back after the restart";
        }
      }
    }
  }
  ::testing::Test::RecordProperty("answered", static_cast<int>(total_answered));
  ::testing::Test::RecordProperty("held_at_kill", static_cast<int>(total_held));
  EXPECT_GT(total_held, 0U);
  EXPECT_EQ(nlockd->Stop(), 0);
}

TEST(JournalCrash, ASecondNlockdOnTheSameStoreRefusesToStartNamingTheFirst) {
  TempDir dir;
  const std::string store = "sqlite:" + dir.path() + "/nlockd.db";
  LoopbackPeers peers;
  auto first = StartNlockd(store, peers.statd_port(), 0);
  ASSERT_NE(first->port(), 0);
  testutil::Subprocess second({NLOCKD_BINARY, "--store", store, "--listen", "127.0.0.1:0",
                               "--rpcbind-register=false", "--admin-listen", "127.0.0.1:0"});
  const std::optional<int> status = second.Wait(std::chrono::milliseconds(20000));
  ASSERT_TRUE(status) << second.output();
  EXPECT_NE(*status, 0);
  EXPECT_NE(second.output().find(
                fmt::format("is in use by another nlockd (pid {},", first->process().pid())),
            std::string::npos)
      << second.output();
  // The first one serves on, untouched.
  EXPECT_EQ(NewcomerLocks(first->port(), NewcomerLock("still-serving")), "stat=granted");
  EXPECT_EQ(first->Stop(), 0);
}

}  // namespace
}  // namespace nlockd::integration::recovery
