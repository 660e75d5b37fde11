// SPDX-License-Identifier: Apache-2.0
// nlockd restarted on the store it crashed with: a hundred client hosts on loopback
// addresses hold locks, nlockd is killed with SIGKILL and started again; every host must learn
// of the restart from SM_NOTIFY, get its locks back by reclaiming them, and the service must
// open again as early as the restored table allows.
#include <chrono>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "integration/recovery_support.hpp"

namespace nlockd::integration::recovery {
namespace {

constexpr size_t kHosts = 100;
constexpr int kGraceSeconds = 60;  // Far longer than the test: grace must end early.

std::vector<std::string> Addresses(size_t hosts) {
  std::vector<std::string> out;
  for (size_t i = 0; i < hosts; ++i) out.push_back(LoopbackPeers::Address(i));
  return out;
}

// Every host takes its locks from a fresh nlockd; returns the lock table and the state number.
std::pair<std::vector<std::string>, int32_t> HoldLocks(NlockdProcess& nlockd, size_t hosts) {
  for (size_t host = 0; host < hosts; ++host) {
    EXPECT_EQ(LockAll(host, nlockd.port(), /*reclaim=*/false), kAllGranted) << "host " << host;
  }
  Admin admin(nlockd);
  std::vector<std::string> table = admin.LockTable();
  EXPECT_EQ(table.size(), 2 * hosts);
  return {table, StateOf(nlockd)};
}

// Each notification names this server and carries one new odd state above `old_state`.
void ExpectNotified(const std::map<std::string, LoopbackPeers::Notification>& notified,
                    int32_t old_state) {
  std::set<int32_t> states;
  for (const auto& [host, notification] : notified) {
    EXPECT_EQ(notification.mon_name, "server.test") << host;
    states.insert(notification.state);
  }
  ASSERT_EQ(states.size(), 1u) << "hosts were told different states";
  EXPECT_EQ(*states.begin() % 2, 1);
  EXPECT_GT(*states.begin(), old_state);
}

void ExpectGraceEndedEarly(NlockdProcess& nlockd, size_t restored) {
  auto ended =
      WaitForLog(nlockd, std::regex(R"(grace period ended" reason=(\S+) reclaimed=(\d+))"), kWait);
  ASSERT_TRUE(ended) << nlockd.process().output();
  EXPECT_EQ((*ended)[1], "all-reclaimed");
  EXPECT_EQ((*ended)[2], std::to_string(restored));
  Admin admin(nlockd);
  json grace = admin.Get("/api/v1/grace");
  EXPECT_EQ(grace["active"], false) << grace.dump();
  EXPECT_EQ(grace["last_end_reason"], "all-reclaimed") << grace.dump();
  EXPECT_EQ(grace["reclaims_expected"], restored) << grace.dump();
}

TEST(RecoveryRestart, AfterKill9EveryHostIsNotifiedReclaimsAndGraceEndsEarly) {
  TempDir dir;
  const std::string store = "sqlite:" + dir.path() + "/nlockd.db";
  LoopbackPeers peers;
  auto first = StartNlockd(store, peers.statd_port(), kGraceSeconds);
  ASSERT_NE(first->port(), 0);
  // A new store recorded nothing: no grace at all.
  EXPECT_TRUE(WaitForLog(*first, std::regex("grace period none\" reason="), kWait))
      << first->process().output();
  auto [before, old_state] = HoldLocks(*first, kHosts);
  Crash(*first);

  auto nlockd = StartNlockd(store, peers.statd_port(), kGraceSeconds);
  ASSERT_NE(nlockd->port(), 0);
  auto started = WaitForLog(
      *nlockd, std::regex(R"(grace period started" mode=(\S+) seconds=(\d+) restored_locks=(\d+))"),
      kWait);
  ASSERT_TRUE(started) << nlockd->process().output();
  EXPECT_EQ((*started)[1], "fine-grained");
  EXPECT_EQ((*started)[2], std::to_string(kGraceSeconds));
  EXPECT_EQ((*started)[3], std::to_string(2 * kHosts));

  auto notified = peers.WaitNotified(Addresses(kHosts), old_state, kWait);
  ASSERT_TRUE(notified) << nlockd->process().output();
  ExpectNotified(*notified, old_state);
  const int32_t state = notified->begin()->second.state;
  EXPECT_EQ(StateOf(*nlockd), state);

  // Fine-grained grace: a lock that touches nothing restored is served at once; one on a range
  // awaiting its owner's reclaim is refused until that owner has reclaimed it.
  const uint16_t port = nlockd->port();
  EXPECT_EQ(NewcomerLocks(port, NewcomerLock("unrelated")), "stat=granted");
  EXPECT_EQ(NewcomerLocks(port, NewcomerLock("file-0")), "stat=denied_grace_period");
  EXPECT_EQ(NewcomerLocks(port, NewcomerLock("common")), "stat=denied_grace_period");
  EXPECT_EQ(LockAll(0, port, /*reclaim=*/true, state), kAllGranted);
  EXPECT_EQ(NewcomerLocks(port, NewcomerLock("file-0")), "stat=denied");  // held, not in grace
  json grace = Admin(*nlockd).Get("/api/v1/grace");
  EXPECT_EQ(grace["active"], true) << grace.dump();
  EXPECT_EQ(grace["mode"], "fine-grained") << grace.dump();
  EXPECT_EQ(grace["reclaims_counted"], 2) << grace.dump();
  EXPECT_EQ(grace["reclaims_expected"], 2 * kHosts) << grace.dump();

  for (size_t host = 1; host < kHosts; ++host) {
    EXPECT_EQ(LockAll(host, port, /*reclaim=*/true, state), kAllGranted) << "host " << host;
  }
  ExpectGraceEndedEarly(*nlockd, 2 * kHosts);
  EXPECT_EQ(NewcomerLocks(port, NewcomerLock("common")), "stat=denied");  // shared holders
  EXPECT_EQ(StatOf(LoopbackPeers::Unlock(LoopbackPeers::Address(kNewcomer), port,
                                         NewcomerLock("unrelated"))),
            "stat=granted");
  EXPECT_EQ(Admin(*nlockd).LockTable(), before);
  EXPECT_EQ(nlockd->Stop(), 0);
}

TEST(RecoveryRestart, AfterAHostCrashTheTableMayBeIncompleteSoGraceIsClassic) {
  constexpr size_t kFewHosts = 10;
  TempDir dir;
  const std::string store = "sqlite:" + dir.path() + "/nlockd.db";
  LoopbackPeers peers;
  ScopedBootId boot("recovery-test-boot-1");
  auto first = StartNlockd(store, peers.statd_port(), kGraceSeconds);
  ASSERT_NE(first->port(), 0);
  auto [before, old_state] = HoldLocks(*first, kFewHosts);
  Crash(*first);

  // The host "rebooted": lock writes that skipped the fsync may be lost.
  boot.Set("recovery-test-boot-2");
  // A short floor, so that grace can end early in the test once the round is answered.
  auto nlockd = StartNlockd(store, peers.statd_port(), kGraceSeconds, {"--grace-floor", "1"});
  ASSERT_NE(nlockd->port(), 0);
  auto started = WaitForLog(
      *nlockd, std::regex(R"(grace period started" mode=(\S+) seconds=\d+ restored_locks=(\d+))"),
      kWait);
  ASSERT_TRUE(started) << nlockd->process().output();
  EXPECT_EQ((*started)[1], "classic");
  EXPECT_EQ((*started)[2], std::to_string(2 * kFewHosts));

  // Classic grace: even a lock on a file nobody held is refused.
  const uint16_t port = nlockd->port();
  EXPECT_EQ(NewcomerLocks(port, NewcomerLock("unrelated")), "stat=denied_grace_period");
  auto notified = peers.WaitNotified(Addresses(kFewHosts), old_state, kWait);
  ASSERT_TRUE(notified) << nlockd->process().output();
  ExpectNotified(*notified, old_state);
  const int32_t state = notified->begin()->second.state;
  for (size_t host = 0; host < kFewHosts; ++host) {
    EXPECT_EQ(LockAll(host, port, /*reclaim=*/true, state), kAllGranted) << "host " << host;
  }
  json grace = Admin(*nlockd).Get("/api/v1/grace");
  EXPECT_EQ(grace["mode"], grace["active"] == true ? json("classic") : json(nullptr))
      << grace.dump();
  ExpectGraceEndedEarly(*nlockd, 2 * kFewHosts);
  EXPECT_EQ(NewcomerLocks(port, NewcomerLock("unrelated")), "stat=granted");
  EXPECT_EQ(StatOf(LoopbackPeers::Unlock(LoopbackPeers::Address(kNewcomer), port,
                                         NewcomerLock("unrelated"))),
            "stat=granted");
  EXPECT_EQ(Admin(*nlockd).LockTable(), before);
  EXPECT_EQ(nlockd->Stop(), 0);
}

}  // namespace
}  // namespace nlockd::integration::recovery
