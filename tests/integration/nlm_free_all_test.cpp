// SPDX-License-Identifier: Apache-2.0
// Who may release a host's state: FREE_ALL only from the host it names, procedure 16 (the
// status monitor's reboot callback) only from the local status monitor. Client hosts are
// loopback addresses (LoopbackPeers numbering): every one of them is "local", none of them is
// another.
#include <chrono>
#include <optional>
#include <regex>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

#include "integration/loopback_peers.hpp"
#include "integration/nlockd_process.hpp"
#include "integration/raw_rpc.hpp"

namespace nlockd::integration {
namespace {

constexpr auto kTimeout = std::chrono::seconds(5);
constexpr uint32_t kNlmSmNotify = 16;

const NlmLock kHeld{"hosta", "file", "1@hosta", 1, 0, 10};
const NlmLock kWanted{"hostb", "file", "2@hostb", 2, 0, 10};

// An NLM version 4 call from `from`:`port` (0: any port) to nlockd; whether a reply came.
bool CallFrom(const std::string& from, uint16_t port, uint16_t server, uint32_t procedure,
              const XdrWriter& args) {
  static uint32_t xid = 0xf4ee0000;
  UdpSocket socket;
  if (!socket.Bind(Ipv4(from, port))) {
    ADD_FAILURE() << "cannot bind " << from << ":" << port;
    return false;
  }
  auto reply = socket.Call(Ipv4("127.0.0.1", server),
                           BuildCall(++xid, kNlmProgram, 4, procedure, args.bytes()), kTimeout);
  return reply && reply->reply_stat == 0 && reply->accept_stat == kSuccess;
}

bool FreeAll(const std::string& from, uint16_t server, const std::string& name) {
  return CallFrom(from, 0, server, kNlmFreeAll, XdrWriter().Opaque(name).U32(5));
}

// nlm_sm_status: mon_name, state, 16 bytes of private data.
bool SmNotify(const std::string& from, uint16_t port, uint16_t server, const std::string& name) {
  return CallFrom(from, port, server, kNlmSmNotify,
                  XdrWriter().Opaque(name).U32(5).Raw(std::vector<uint8_t>(16, 0)));
}

class NlmFreeAll : public ::testing::Test {
 protected:
  NlmFreeAll()
      : nlockd_(NLOCKD_BINARY, {"--listen", "127.0.0.1:0", "--rpcbind-register=false", "--grace",
                                "0", "--name", "server.test"}) {}

  // Host b's lock on the range host a held: denied while a holds it.
  std::string BTries() {
    return StatOf(LoopbackPeers::Lock(b_, nlockd_.port(), kWanted, NlmLockFlags{}));
  }

  NlockdProcess nlockd_;
  const std::string a_ = LoopbackPeers::Address(1);  // 127.0.1.2
  const std::string b_ = LoopbackPeers::Address(2);  // 127.0.1.3
};

TEST_F(NlmFreeAll, AnotherHostCannotFreeAHostByItsNameOrAddress) {
  ASSERT_NE(nlockd_.port(), 0);
  const uint16_t port = nlockd_.port();
  ASSERT_EQ(StatOf(LoopbackPeers::Lock(a_, port, kHeld, NlmLockFlags{})), "stat=granted");
  EXPECT_TRUE(FreeAll(b_, port, "hosta"));
  EXPECT_TRUE(FreeAll(b_, port, a_));
  EXPECT_EQ(BTries(), "stat=denied") << nlockd_.process().output();
  EXPECT_TRUE(nlockd_.process().WaitForLine(
      std::regex("FREE_ALL\" name=hosta from " + std::regex_replace(b_, std::regex("\\."), "\\.") +
                 " refused"),
      kTimeout))
      << nlockd_.process().output();

  // Host a frees itself.
  EXPECT_TRUE(FreeAll(a_, port, "hosta"));
  EXPECT_EQ(BTries(), "stat=granted") << nlockd_.process().output();
  EXPECT_EQ(nlockd_.Stop(), 0);
}

TEST_F(NlmFreeAll, OnlyTheLocalStatusMonitorMayReportAReboot) {
  ASSERT_NE(nlockd_.port(), 0);
  const uint16_t port = nlockd_.port();
  ASSERT_EQ(StatOf(LoopbackPeers::Lock(a_, port, kHeld, NlmLockFlags{})), "stat=granted");
  // From a loopback address but an unreserved port: not a status monitor.
  EXPECT_TRUE(SmNotify(b_, 0, port, "hosta"));
  EXPECT_TRUE(SmNotify(b_, 0, port, a_));
  EXPECT_EQ(BTries(), "stat=denied") << nlockd_.process().output();
  EXPECT_TRUE(nlockd_.process().WaitForLine(std::regex("SM_NOTIFY .* refused"), kTimeout))
      << nlockd_.process().output();
  // The local status monitor: loopback and a reserved port (binding one needs root).
  if (geteuid() != 0) GTEST_SKIP() << "binding a reserved port needs root";
  EXPECT_TRUE(SmNotify("127.0.0.1", 707, port, "hosta"));
  EXPECT_EQ(BTries(), "stat=granted") << nlockd_.process().output();
  EXPECT_EQ(nlockd_.Stop(), 0);
}

}  // namespace
}  // namespace nlockd::integration
