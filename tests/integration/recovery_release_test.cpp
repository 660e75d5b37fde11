// SPDX-License-Identifier: Apache-2.0
// Restored locks that leave without their reclaim: a host that reboots during grace loses
// them, and they count as dropped, not reclaimed, in the log and the admin API.
#include <chrono>
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "integration/raw_rpc.hpp"
#include "integration/recovery_support.hpp"

namespace nlockd::integration::recovery {
namespace {

constexpr int kGraceSeconds = 60;  // Far longer than the test: grace must end early.

// SM_NOTIFY (program 100024 version 1 procedure 6; stat_chge: mon_name, state) from `from`
// to nlockd at 127.0.0.1:`port`; whether it was answered.
bool NotifyFrom(const std::string& from, uint16_t port, const std::string& mon_name,
                int32_t state) {
  UdpSocket socket;
  if (!socket.Bind(Ipv4(from, 0))) return false;
  XdrWriter args;
  args.Opaque(mon_name).U32(static_cast<uint32_t>(state));
  auto reply =
      socket.Call(Ipv4("127.0.0.1", port), BuildCall(0x5e1ea5e, 100024, 1, 6, args.bytes()),
                  std::chrono::seconds(5));
  return reply && reply->reply_stat == 0 && reply->accept_stat == kSuccess;
}

TEST(RecoveryRelease, RestoredLocksOfAHostThatRebootsAreDroppedNotReclaimed) {
  TempDir dir;
  const std::string store = "sqlite:" + dir.path() + "/nlockd.db";
  LoopbackPeers peers;
  auto first = StartNlockd(store, peers.statd_port(), kGraceSeconds);
  ASSERT_NE(first->port(), 0);
  EXPECT_EQ(LockAll(1, first->port(), /*reclaim=*/false), kAllGranted);
  Crash(*first);

  auto nlockd = StartNlockd(store, peers.statd_port(), kGraceSeconds);
  ASSERT_NE(nlockd->port(), 0);
  ASSERT_TRUE(
      WaitForLog(*nlockd, std::regex(R"(grace period started" .* restored_locks=2 )"), kWait))
      << nlockd->process().output();
  // Host 1 reboots before it reclaims anything.
  const std::string host = LoopbackPeers::Address(1);
  ASSERT_TRUE(NotifyFrom(host, nlockd->port(), host, 3)) << nlockd->process().output();
  auto ended = WaitForLog(
      *nlockd, std::regex(R"(grace period ended" reason=(\S+) reclaimed=(\d+) dropped=(\d+))"),
      kWait);
  ASSERT_TRUE(ended) << nlockd->process().output();
  EXPECT_EQ((*ended)[1], "all-reclaimed") << "nothing is left to wait for";
  EXPECT_EQ((*ended)[2], "0");
  EXPECT_EQ((*ended)[3], "2");
  json grace = Admin(*nlockd).Get("/api/v1/grace");
  EXPECT_EQ(grace["reclaims_expected"], 2) << grace.dump();
  EXPECT_EQ(grace["reclaims_counted"], 0) << grace.dump();
  EXPECT_EQ(nlockd->Stop(), 0);
}

}  // namespace
}  // namespace nlockd::integration::recovery
