// SPDX-License-Identifier: Apache-2.0
// The edges of the grace period after a restart: a host that never answers its
// notification, SM_SIMU_CRASH as a restart in place, and what is refused during and after grace.
#include <chrono>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "integration/recovery_support.hpp"

namespace nlockd::integration::recovery {
namespace {

constexpr int kGraceSeconds = 60;  // Far longer than the tests: grace must end for a reason.

int32_t HoldThenCrash(NlockdProcess& nlockd, size_t hosts) {
  for (size_t host = 0; host < hosts; ++host) {
    EXPECT_EQ(LockAll(host, nlockd.port(), /*reclaim=*/false), kAllGranted) << "host " << host;
  }
  const int32_t state = StateOf(nlockd);
  Crash(nlockd);
  return state;
}

bool HoldsNothing(Admin& admin, size_t host) {
  for (const std::string& row : admin.LockTable()) {
    if (row.starts_with(LoopbackPeers::Address(host) + " ")) return false;
  }
  return true;
}

// Host 1 is down when nlockd comes back: its status monitor drops every SM_NOTIFY. Once the
// notification budget is spent, its restored locks go, the request they held off is served,
// and grace ends because nothing is left to wait for.
TEST(RecoveryGrace, AHostThatNeverAnswersLosesItsRestoredLocksAfterItsRetries) {
  TempDir dir;
  const std::string store = "sqlite:" + dir.path() + "/nlockd.db";
  LoopbackPeers peers;
  auto first = StartNlockd(store, peers.statd_port(), kGraceSeconds);
  ASSERT_NE(first->port(), 0);
  const int32_t old_state = HoldThenCrash(*first, 2);

  const std::string silent = LoopbackPeers::Address(1);
  peers.Silence(silent);
  auto nlockd = StartNlockd(store, peers.statd_port(), kGraceSeconds,
                            {"--notify-budget", "3", "--notify-backoff", "1", "--notify-timeout",
                             "1", "--notify-drop-unreachable", "true"});
  ASSERT_NE(nlockd->port(), 0);
  const auto restarted = std::chrono::steady_clock::now();
  auto notified = peers.WaitNotified({LoopbackPeers::Address(0)}, old_state, kWait);
  ASSERT_TRUE(notified) << nlockd->process().output();
  const int32_t state = notified->begin()->second.state;
  EXPECT_EQ(LockAll(0, nlockd->port(), /*reclaim=*/true, state), kAllGranted);
  // Host 1's range stays out of reach while nlockd still waits for host 1 (a blocking request
  // is not queued behind a lock awaiting its reclaim: DENIED_GRACE_PERIOD, and the client
  // retries).
  EXPECT_EQ(NewcomerLocks(nlockd->port(), NewcomerLock("file-1"), /*block=*/true),
            "stat=denied_grace_period");

  EXPECT_TRUE(WaitForLog(
      *nlockd,
      std::regex("host " + silent + " never answered SM_NOTIFY; dropped its 2 restored locks"),
      kWait))
      << nlockd->process().output();
  auto ended = WaitForLog(
      *nlockd, std::regex(R"(grace period ended" reason=(\S+) reclaimed=(\d+) dropped=(\d+))"),
      kWait);
  ASSERT_TRUE(ended) << nlockd->process().output();
  EXPECT_EQ((*ended)[1], "all-reclaimed");
  EXPECT_EQ((*ended)[2], "2");
  EXPECT_EQ((*ended)[3], "2");
  EXPECT_GE(std::chrono::steady_clock::now() - restarted, std::chrono::seconds(2))
      << "grace ended before host 1's budget was spent";
  EXPECT_GE(peers.Attempts(silent), 2u) << "host 1 was not retried";
  EXPECT_EQ(NewcomerLocks(nlockd->port(), NewcomerLock("file-1"), /*block=*/true), "stat=granted");
  Admin admin(*nlockd);
  EXPECT_TRUE(HoldsNothing(admin, 1)) << ::testing::PrintToString(admin.LockTable());
  EXPECT_FALSE(HoldsNothing(admin, 0));
  EXPECT_EQ(admin.Get("/api/v1/grace")["last_end_reason"], "all-reclaimed");
  EXPECT_EQ(nlockd->Stop(), 0);
}

// SM_SIMU_CRASH from loopback: the state moves on and every monitored host is told, as after a
// restart, while the process and its port stay.
TEST(RecoveryGrace, SimuCrashNotifiesEveryMonitoredHostWithANewOddState) {
  constexpr size_t kHosts = 5;
  TempDir dir;
  LoopbackPeers peers;
  auto nlockd =
      StartNlockd("sqlite:" + dir.path() + "/nlockd.db", peers.statd_port(), kGraceSeconds);
  ASSERT_NE(nlockd->port(), 0);
  std::vector<std::string> hosts;
  for (size_t host = 0; host < kHosts; ++host) {
    EXPECT_EQ(LockAll(host, nlockd->port(), /*reclaim=*/false), kAllGranted);
    hosts.push_back(LoopbackPeers::Address(host));
  }
  const std::vector<std::string> before = Admin(*nlockd).LockTable();
  const int32_t old_state = StateOf(*nlockd);

  NsmRpcgenClient nsm("127.0.0.1", nlockd->port(), false);
  ASSERT_TRUE(nsm.SimuCrash()) << nsm.error();
  auto notified = peers.WaitNotified(hosts, old_state, kWait);
  ASSERT_TRUE(notified) << nlockd->process().output();
  for (const auto& [host, notification] : *notified) {
    EXPECT_EQ(notification.mon_name, "server.test") << host;
    EXPECT_EQ(notification.state, old_state + 2) << host;
  }
  EXPECT_EQ(StateOf(*nlockd), old_state + 2);
  // The hosts reclaim as after a restart, and end up holding what they held.
  for (size_t host = 0; host < kHosts; ++host) {
    EXPECT_EQ(LockAll(host, nlockd->port(), /*reclaim=*/true, old_state + 2), kAllGranted)
        << "host " << host;
  }
  EXPECT_EQ(Admin(*nlockd).LockTable(), before);
  EXPECT_EQ(NewcomerLocks(nlockd->port(), NewcomerLock("file-0")), "stat=denied");
  EXPECT_EQ(nlockd->Stop(), 0);
}

// During grace a new lock on a restored range is refused with DENIED_GRACE_PERIOD; once grace
// is over (here ended by the operator) a late reclaim is refused the same way and the range of
// the host that missed it is free.
TEST(RecoveryGrace, NewLocksOnRestoredRangesWaitForGraceAndLateReclaimsAreRefused) {
  TempDir dir;
  const std::string store = "sqlite:" + dir.path() + "/nlockd.db";
  LoopbackPeers peers;
  auto first = StartNlockd(store, peers.statd_port(), kGraceSeconds);
  ASSERT_NE(first->port(), 0);
  const int32_t old_state = HoldThenCrash(*first, 2);

  auto nlockd = StartNlockd(store, peers.statd_port(), kGraceSeconds);
  ASSERT_NE(nlockd->port(), 0);
  const uint16_t port = nlockd->port();
  EXPECT_EQ(NewcomerLocks(port, NewcomerLock("file-1")), "stat=denied_grace_period");
  EXPECT_EQ(NewcomerLocks(port, NewcomerLock("file-1"), /*block=*/true),
            "stat=denied_grace_period");
  auto notified =
      peers.WaitNotified({LoopbackPeers::Address(0), LoopbackPeers::Address(1)}, old_state, kWait);
  ASSERT_TRUE(notified) << nlockd->process().output();
  const int32_t state = notified->begin()->second.state;
  EXPECT_EQ(LockAll(0, port, /*reclaim=*/true, state), kAllGranted);

  Admin admin(*nlockd);
  json ended = admin.Post("/api/v1/grace/end");
  EXPECT_EQ(ended["active"], false) << ended.dump();
  EXPECT_EQ(ended["last_end_reason"], "admin") << ended.dump();
  EXPECT_TRUE(WaitForLog(*nlockd, std::regex("grace period ended\" reason=admin"), kWait))
      << nlockd->process().output();
  EXPECT_EQ(LockAll(1, port, /*reclaim=*/true, state),
            "stat=denied_grace_period stat=denied_grace_period");
  EXPECT_TRUE(HoldsNothing(admin, 1)) << ::testing::PrintToString(admin.LockTable());
  EXPECT_EQ(NewcomerLocks(port, NewcomerLock("file-1")), "stat=granted");
  EXPECT_EQ(NewcomerLocks(port, NewcomerLock("file-0")), "stat=denied");
  EXPECT_EQ(nlockd->Stop(), 0);
}

}  // namespace
}  // namespace nlockd::integration::recovery
