// SPDX-License-Identifier: Apache-2.0
// NLM against the real nlockd on 127.0.0.1, through clients nobody here wrote: rpcgen's stubs
// from the system's rpcsvc/nlm_prot.x (versions 1 and 3) and from our RFC 1813 nlm4_prot.x
// (version 4), over TCP and UDP; raw datagrams, encoded by rpcgen's XDR routines, where the
// test needs to choose the xid or read the _RES calls that come back.
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <ostream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rpc/rpc.h>

#include "integration/nlm_rpcgen.hpp"
#include "integration/nlm_test_support.hpp"
#include "integration/raw_rpc.hpp"

namespace nlockd::integration {
namespace {

constexpr auto kReplyTimeout = std::chrono::seconds(10);

struct Transport {
  uint32_t version;
  bool tcp;
};

void PrintTo(const Transport& transport, std::ostream* out) {
  *out << "version " << transport.version << (transport.tcp ? " over TCP" : " over UDP");
}

std::string TransportName(const ::testing::TestParamInfo<Transport>& info) {
  return "V" + std::to_string(info.param.version) + (info.param.tcp ? "Tcp" : "Udp");
}

// The synchronous procedures, each version over each transport, against one nlockd per suite;
// every test works on files of its own.
class NlmCalls : public ::testing::TestWithParam<Transport> {
 protected:
  static void SetUpTestSuite() { nlockd_ = StartLocalNlockd(); }
  static void TearDownTestSuite() {
    EXPECT_EQ(nlockd_->Stop(), 0) << nlockd_->process().output();
    nlockd_.reset();
  }

  void SetUp() override {
    ASSERT_NE(nlockd_->port(), 0);
    client_ = NlmRpcgenClient::Connect(GetParam().version, GetParam().tcp,
                                       LoopbackAddress(nlockd_->port()));
    ASSERT_NE(client_, nullptr) << NlmRpcgenClient::CreateError();
  }

  // A file handle no other test uses (NFS handles are at most 64 bytes).
  static std::string File() { return "fh-" + std::to_string(next_file_++); }

  NlmRpcgenClient& c() { return *client_; }

  static inline std::unique_ptr<NlockdProcess> nlockd_;
  static inline int next_file_ = 0;
  std::unique_ptr<NlmRpcgenClient> client_;
};

INSTANTIATE_TEST_SUITE_P(AllVersions, NlmCalls,
                         ::testing::Values(Transport{1, true}, Transport{1, false},
                                           Transport{3, true}, Transport{3, false},
                                           Transport{4, true}, Transport{4, false}),
                         TransportName);

// SHARE, UNSHARE, NM_LOCK and FREE_ALL came with version 3.
class NlmCallsSinceV3 : public NlmCalls {};
INSTANTIATE_TEST_SUITE_P(V3AndV4, NlmCallsSinceV3,
                         ::testing::Values(Transport{3, true}, Transport{3, false},
                                           Transport{4, true}, Transport{4, false}),
                         TransportName);

class NlmCallsV1 : public NlmCalls {};
INSTANTIATE_TEST_SUITE_P(V1, NlmCallsV1, ::testing::Values(Transport{1, true}, Transport{1, false}),
                         TransportName);

class NlmCallsV4 : public NlmCalls {};
INSTANTIATE_TEST_SUITE_P(V4, NlmCallsV4, ::testing::Values(Transport{4, true}, Transport{4, false}),
                         TransportName);

const NlmLockFlags kExclusive{};
const NlmLockFlags kShared{.exclusive = false};

TEST_P(NlmCalls, ConflictingLockIsDeniedTestReportsTheHolderAndUnlockFreesTheRange) {
  const std::string fh = File();
  NlmLock a = Owner(fh, 1, 0, 100);
  NlmLock b = Owner(fh, 2, 50, 10);
  EXPECT_EQ(Outcome(c().Lock(a, kExclusive, "a-lock"), c()), "granted");
  EXPECT_EQ(Outcome(c().Lock(b, kExclusive, "b-lock"), c()), "denied");
  EXPECT_EQ(Outcome(c().Test(b, true, "b-test"), c()),
            "denied by svid=1 oh=1@client [0+100) exclusive");
  EXPECT_EQ(Outcome(c().Test(b, false, "b-test-shared"), c()),
            "denied by svid=1 oh=1@client [0+100) exclusive");
  // The owner's own TEST sees no conflict.
  EXPECT_EQ(Outcome(c().Test(a, true, "a-test"), c()), "granted");

  auto unlocked = c().Unlock(a, "a-unlock-cookie");
  ASSERT_TRUE(unlocked) << c().error();
  EXPECT_EQ(unlocked->stat, NlmStat::kGranted);
  EXPECT_EQ(unlocked->cookie, "a-unlock-cookie");

  EXPECT_EQ(Outcome(c().Test(b, true, "b-test-2"), c()), "granted");
  EXPECT_EQ(Outcome(c().Lock(b, kExclusive, "b-lock-2"), c()), "granted");
  EXPECT_EQ(Outcome(c().Test(a, false, "a-test-2"), c()),
            "denied by svid=2 oh=2@client [50+10) exclusive");
  // A blocking request that meets no conflict is simply granted.
  EXPECT_EQ(Outcome(c().Lock(Owner(fh, 3, 200, 10), NlmLockFlags{.block = true}, "c-block"), c()),
            "granted");
}

TEST_P(NlmCalls, SharedLocksCoexistAndKeepOutAnExclusiveOne) {
  const std::string fh = File();
  EXPECT_EQ(Outcome(c().Lock(Owner(fh, 1, 0, 100), kShared, "1"), c()), "granted");
  EXPECT_EQ(Outcome(c().Lock(Owner(fh, 2, 20, 10), kShared, "2"), c()), "granted");
  EXPECT_EQ(Outcome(c().Lock(Owner(fh, 3, 95, 10), kExclusive, "3"), c()), "denied");
  EXPECT_EQ(Outcome(c().Test(Owner(fh, 3, 95, 10), true, "3t"), c()),
            "denied by svid=1 oh=1@client [0+100) shared");
  EXPECT_EQ(Outcome(c().Test(Owner(fh, 3, 95, 10), false, "3ts"), c()), "granted");
}

TEST_P(NlmCalls, UnlockingTheMiddleSplitsALockAndRelockingItMergesThePieces) {
  const std::string fh = File();
  NlmLock a = Owner(fh, 1, 0, 100);
  NlmLock b = Owner(fh, 2, 0, 1);
  ASSERT_EQ(Outcome(c().Lock(a, kExclusive, "lock"), c()), "granted");
  EXPECT_EQ(Outcome(c().Unlock(At(a, 40, 20), "unlock-middle"), c()), "granted");
  EXPECT_EQ(Outcome(c().Test(At(b, 50, 1), true, "t50"), c()), "granted");
  EXPECT_EQ(Outcome(c().Test(At(b, 40, 20), true, "t40-60"), c()), "granted");
  EXPECT_EQ(Outcome(c().Test(At(b, 10, 1), true, "t10"), c()),
            "denied by svid=1 oh=1@client [0+40) exclusive");
  EXPECT_EQ(Outcome(c().Test(At(b, 70, 1), true, "t70"), c()),
            "denied by svid=1 oh=1@client [60+40) exclusive");
  EXPECT_EQ(Outcome(c().Lock(At(b, 45, 5), kExclusive, "b-in-the-hole"), c()), "granted");
  EXPECT_EQ(Outcome(c().Unlock(At(b, 45, 5), "b-out"), c()), "granted");

  // The same owner fills the hole again: one lock [0, 100) once more.
  EXPECT_EQ(Outcome(c().Lock(At(a, 40, 20), kExclusive, "relock"), c()), "granted");
  EXPECT_EQ(Outcome(c().Test(At(b, 50, 1), true, "t50-again"), c()),
            "denied by svid=1 oh=1@client [0+100) exclusive");
  // Length 0 means "to the end of the file".
  EXPECT_EQ(Outcome(c().Unlock(At(a, 0, 0), "unlock-all"), c()), "granted");
  EXPECT_EQ(Outcome(c().Test(At(b, 0, 0), true, "t-all"), c()), "granted");
  EXPECT_EQ(Outcome(c().Lock(At(a, 200, 0), kExclusive, "to-eof"), c()), "granted");
  EXPECT_EQ(Outcome(c().Test(At(b, 3000000000u, 1), true, "t-far"), c()),
            "denied by svid=1 oh=1@client [200+0) exclusive");
}

TEST_P(NlmCalls, UpgradingAndDowngradingInPlaceNeverConflictsWithTheOwnersOwnLock) {
  const std::string fh = File();
  NlmLock a = Owner(fh, 1, 0, 100);
  ASSERT_EQ(Outcome(c().Lock(a, kShared, "shared"), c()), "granted");
  EXPECT_EQ(Outcome(c().Lock(At(a, 20, 10), kExclusive, "upgrade-part"), c()), "granted");
  NlmLock b = Owner(fh, 2, 0, 1);
  EXPECT_EQ(Outcome(c().Test(At(b, 25, 1), false, "t-shared-in-excl"), c()),
            "denied by svid=1 oh=1@client [20+10) exclusive");
  EXPECT_EQ(Outcome(c().Test(At(b, 50, 1), false, "t-shared-in-shared"), c()), "granted");
  EXPECT_EQ(Outcome(c().Lock(a, kShared, "downgrade-all"), c()), "granted");
  EXPECT_EQ(Outcome(c().Test(At(b, 25, 1), false, "t-after-downgrade"), c()), "granted");
}

TEST_P(NlmCallsSinceV3, ShareDenyWriteRefusesAWriterUntilUnshared) {
  const std::string fh = File();
  // mode: 0 deny none, 2 deny write; access: 1 read, 2 write.
  NlmShare reader_denying_writes{"client", fh, "share-a", 2, 1};
  NlmShare writer{"client", fh, "share-b", 0, 2};
  NlmShare reader{"client", fh, "share-c", 0, 1};
  EXPECT_EQ(Outcome(c().Share(reader_denying_writes, false, "a"), c()), "granted");
  EXPECT_EQ(Outcome(c().Share(writer, false, "b"), c()), "denied");
  EXPECT_EQ(Outcome(c().Share(reader, false, "c"), c()), "granted");
  // A writer cannot deny writes to a file someone writes, nor a reader deny reads.
  EXPECT_EQ(Outcome(c().Share(NlmShare{"client", fh, "share-d", 1, 1}, false, "d"), c()), "denied");
  auto unshared = c().Unshare(reader_denying_writes, "a-unshare");
  ASSERT_TRUE(unshared) << c().error();
  EXPECT_EQ(unshared->stat, NlmStat::kGranted);
  EXPECT_EQ(unshared->cookie, "a-unshare");
  EXPECT_EQ(Outcome(c().Share(writer, false, "b-again"), c()), "granted");
}

TEST_P(NlmCallsV1, ShareProceduresAreNotPartOfVersion1) {
  EXPECT_FALSE(c().Share(NlmShare{"client", File(), "o", 0, 1}, false, "s"));
  EXPECT_EQ(c().last_status(), RPC_PROCUNAVAIL) << c().error();
  EXPECT_FALSE(c().NmLock(Owner(File(), 1, 0, 1), kExclusive, "n"));
  EXPECT_EQ(c().last_status(), RPC_PROCUNAVAIL) << c().error();
  EXPECT_TRUE(c().Null()) << c().error();
}

TEST_P(NlmCallsSinceV3, NmLockGrantsALockThatConflictsLikeAnyOther) {
  const std::string fh = File();
  NlmLock a = Owner(fh, 1, 0, 10);
  NlmLock b = Owner(fh, 2, 5, 10);
  EXPECT_EQ(Outcome(c().NmLock(a, kExclusive, "nm"), c()), "granted");
  EXPECT_EQ(Outcome(c().Lock(b, kExclusive, "b"), c()), "denied");
  EXPECT_EQ(Outcome(c().NmLock(b, kExclusive, "b-nm"), c()), "denied");
  EXPECT_EQ(Outcome(c().Test(b, true, "b-test"), c()),
            "denied by svid=1 oh=1@client [0+10) exclusive");
  EXPECT_EQ(Outcome(c().Unlock(a, "a-unlock"), c()), "granted");
  EXPECT_EQ(Outcome(c().Test(b, true, "b-test-2"), c()), "granted");
}

TEST_P(NlmCalls, ReclaimOutsideTheGracePeriodIsDenied) {
  NlmLockFlags reclaim{.reclaim = true};
  EXPECT_EQ(Outcome(c().Lock(Owner(File(), 1, 0, 10), reclaim, "reclaim"), c()),
            "denied_grace_period");
}

TEST_P(NlmCallsV4, RangesPastTheEndOfTheOffsetSpaceAreRefusedAsTooBig) {
  NlmLock overflowing = Owner(File(), 1, std::numeric_limits<uint64_t>::max() - 5, 10);
  EXPECT_EQ(Outcome(c().Lock(overflowing, kExclusive, "big"), c()), "fbig");
  EXPECT_EQ(Outcome(c().Test(overflowing, true, "big-test"), c()), "fbig");
  // Up to the last byte is fine.
  EXPECT_EQ(Outcome(c().Lock(At(overflowing, std::numeric_limits<uint64_t>::max() - 5, 5),
                             kExclusive, "last"),
                    c()),
            "granted");
}

TEST_P(NlmCallsV1, AHolderBeyond32BitsIsReportedSaturatedNotWrapped) {
  auto v4 = NlmRpcgenClient::Connect(4, GetParam().tcp, LoopbackAddress(nlockd_->port()));
  ASSERT_NE(v4, nullptr);
  const std::string fh = File();
  const uint64_t k4g = uint64_t{1} << 32;
  ASSERT_EQ(Outcome(v4->Lock(Owner(fh, 1, k4g + 5, 10), kExclusive, "far"), *v4), "granted");
  ASSERT_EQ(Outcome(v4->Lock(Owner(fh, 2, k4g - 16, 20), kExclusive, "across"), *v4), "granted");
  // Version 1 asks about the whole file, then about the last bytes it can name.
  EXPECT_EQ(Outcome(c().Test(Owner(fh, 3, k4g - 8, 0), true, "t-tail"), c()),
            "denied by svid=2 oh=2@client [4294967280+16) exclusive");
  ASSERT_EQ(Outcome(v4->Unlock(Owner(fh, 2, 0, 0), "unlock-across"), *v4), "granted");
  EXPECT_EQ(Outcome(c().Test(Owner(fh, 3, 0, 0), true, "t-all"), c()),
            "denied by svid=1 oh=1@client [4294967295+1) exclusive");
}

// --- Grace ------------------------------------------------------------------------------------

TEST(NlmGrace, NewLocksAreRefusedDuringGraceAndReclaimsAreGranted) {
  auto nlockd = StartLocalNlockd(30);
  ASSERT_NE(nlockd->port(), 0);
  for (uint32_t version : {4u, 1u}) {
    SCOPED_TRACE("version " + std::to_string(version));
    auto c = NlmRpcgenClient::Connect(version, version == 4, LoopbackAddress(nlockd->port()));
    ASSERT_NE(c, nullptr) << NlmRpcgenClient::CreateError();
    const std::string fh = "grace-" + std::to_string(version);
    NlmLock lock = Owner(fh, 7, 0, 100);
    EXPECT_EQ(Outcome(c->Lock(lock, kExclusive, "new"), *c), "denied_grace_period");
    EXPECT_EQ(Outcome(c->Test(lock, true, "test"), *c), "denied_grace_period");
    EXPECT_EQ(Outcome(c->Lock(lock, NlmLockFlags{.reclaim = true}, "reclaim"), *c), "granted");
    if (version >= 3) {
      NlmShare share{"client", fh, "share-owner", 0, 1};
      EXPECT_EQ(Outcome(c->Share(share, false, "share"), *c), "denied_grace_period");
      EXPECT_EQ(Outcome(c->Share(share, true, "share-reclaim"), *c), "granted");
      EXPECT_EQ(Outcome(c->NmLock(Owner(fh, 8, 200, 1), kExclusive, "nm"), *c),
                "denied_grace_period");
    }
    // Giving the reclaimed lock back is allowed.
    EXPECT_EQ(Outcome(c->Unlock(lock, "unlock"), *c), "granted");
  }
  EXPECT_EQ(nlockd->Stop(), 0);
}

TEST(NlmGrace, AfterTheGracePeriodNewLocksAreGrantedAndReclaimsRefused) {
  auto nlockd = StartLocalNlockd(1);
  ASSERT_NE(nlockd->port(), 0);
  ASSERT_TRUE(
      nlockd->process().WaitForLine(std::regex("grace period ended"), std::chrono::seconds(20)))
      << nlockd->process().output();
  auto c = NlmRpcgenClient::Connect(4, true, LoopbackAddress(nlockd->port()));
  ASSERT_NE(c, nullptr) << NlmRpcgenClient::CreateError();
  NlmLock lock = Owner("after-grace", 1, 0, 10);
  EXPECT_EQ(Outcome(c->Lock(lock, NlmLockFlags{.reclaim = true}, "late-reclaim"), *c),
            "denied_grace_period");
  EXPECT_EQ(Outcome(c->Lock(lock, kExclusive, "new"), *c), "granted");
  EXPECT_EQ(Outcome(c->Test(Owner("after-grace", 2, 5, 1), true, "test"), *c),
            "denied by svid=1 oh=1@client [0+10) exclusive");
  EXPECT_EQ(nlockd->Stop(), 0);
}

// --- Procedure 16: a co-resident statd's reboot notice ---------------------------------------

// nlm_sm_status{mon_name, state, priv[16]} from `socket` to nlockd; true when answered.
bool SendStatusCallback(UdpSocket& socket, uint16_t port, const std::string& mon_name,
                        uint32_t xid) {
  XdrWriter status;
  status.Opaque(mon_name).U32(3).Raw(std::vector<uint8_t>(16, 0));
  auto reply = socket.Call(LoopbackAddress(port),
                           BuildCall(xid, kNlmProgram, 4, 16, status.bytes()), kReplyTimeout);
  return reply && reply->accept_stat == kSuccess;
}

TEST(NlmStatusCallback, ReleasesTheRebootedHostOnlyWhenSentFromAReservedLoopbackPort) {
  auto nlockd = StartLocalNlockd();
  ASSERT_NE(nlockd->port(), 0);
  auto c = NlmRpcgenClient::Connect(4, false, LoopbackAddress(nlockd->port()));
  ASSERT_NE(c, nullptr);
  NlmLock held = Owner("rebooted-file", 1, 0, 10, "rebooted-host");
  NlmLock probe = Owner("rebooted-file", 2, 0, 10, "other-host");
  ASSERT_EQ(Outcome(c->Lock(held, kExclusive, "held"), *c), "granted");

  UdpSocket unprivileged;  // An ephemeral port, as any local user could use.
  EXPECT_TRUE(SendStatusCallback(unprivileged, nlockd->port(), "rebooted-host", 0x16001));
  EXPECT_EQ(Outcome(c->Test(probe, true, "still-held"), *c),
            "denied by svid=1 oh=1@rebooted-host [0+10) exclusive");

  UdpSocket privileged;  // What statd uses: a port below 1024, which only root can bind.
  bool bound = false;
  for (uint16_t port = 1023; port >= 600 && !bound; --port) {
    bound = privileged.Bind(LoopbackAddress(port));
  }
  ASSERT_TRUE(bound) << "no free reserved port";
  EXPECT_TRUE(SendStatusCallback(privileged, nlockd->port(), "rebooted-host", 0x16002));
  EXPECT_EQ(Outcome(c->Test(probe, true, "released"), *c), "granted");
  EXPECT_EQ(nlockd->Stop(), 0);
}

// --- _MSG / _RES ------------------------------------------------------------------------------

// What a _MSG call brings back: the empty inline reply and the _RES call nlockd makes to the
// socket the _MSG came from.
struct MsgExchange {
  std::optional<RpcMessage> reply;
  std::optional<RpcMessage> res;
  sockaddr_in res_source{};
};

class NlmAsync : public ::testing::TestWithParam<uint32_t> {
 protected:
  void SetUp() override {
    nlockd_ = StartLocalNlockd();
    ASSERT_NE(nlockd_->port(), 0);
    server_ = LoopbackAddress(nlockd_->port());
  }
  void TearDown() override { EXPECT_EQ(nlockd_->Stop(), 0) << nlockd_->process().output(); }

  uint32_t version() const { return GetParam(); }

  // Sends a _MSG datagram and waits for the inline reply and the _RES call `res_procedure`,
  // answering every call nlockd makes to us (so that it stops retransmitting).
  MsgExchange SendMsg(uint32_t procedure, const std::vector<uint8_t>& args,
                      uint32_t res_procedure) {
    const uint32_t xid = next_xid_++;
    MsgExchange out;
    EXPECT_TRUE(socket_.SendTo(server_, BuildCall(xid, kNlmProgram, version(), procedure, args)));
    auto deadline = std::chrono::steady_clock::now() + kReplyTimeout;
    while (!(out.reply && out.res) && std::chrono::steady_clock::now() < deadline) {
      sockaddr_in from{};
      auto datagram = socket_.Receive(std::chrono::milliseconds(200), &from);
      if (!datagram) continue;
      auto message = ParseMessage(*datagram);
      if (!message) continue;
      if (!message->is_call) {
        if (message->xid == xid) out.reply = message;
        continue;
      }
      socket_.SendTo(from, BuildSuccessReply(message->xid));
      bool fresh = seen_res_xids_.insert(message->xid).second;
      if (fresh && message->procedure == res_procedure) {
        out.res = message;
        out.res_source = from;
      }
    }
    return out;
  }

  std::unique_ptr<NlockdProcess> nlockd_;
  sockaddr_in server_{};
  UdpSocket socket_;
  uint32_t next_xid_ = 0x4d53470;
  std::set<uint32_t> seen_res_xids_;
};

std::string VersionName(const ::testing::TestParamInfo<uint32_t>& param) {
  return "V" + std::to_string(param.param);
}

INSTANTIATE_TEST_SUITE_P(AllVersions, NlmAsync, ::testing::Values(1u, 3u, 4u), VersionName);

// Checks one exchange: an empty SUCCESS reply, and a _RES call of our version from nlockd's
// address.
void ExpectMsgShape(const MsgExchange& exchange, uint32_t version) {
  ASSERT_TRUE(exchange.reply) << "no inline reply to the _MSG";
  EXPECT_EQ(exchange.reply->reply_stat, 0u);
  EXPECT_EQ(exchange.reply->accept_stat, kSuccess);
  EXPECT_TRUE(exchange.reply->body.empty());
  ASSERT_TRUE(exchange.res) << "no _RES call came back to the _MSG's source port";
  EXPECT_EQ(exchange.res->program, kNlmProgram);
  EXPECT_EQ(exchange.res->version, version);
  EXPECT_EQ(exchange.res_source.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
}

TEST_P(NlmAsync, MsgCallsGetAnEmptyReplyAndTheirResultsComeBackAsResCalls) {
  NlmLock a = Owner("msg-file", 1, 0, 100);
  NlmLock b = Owner("msg-file", 2, 50, 1);

  MsgExchange locked =
      SendMsg(kNlmLockMsg, EncodeLockArgs(version(), a, kExclusive, "lock-msg"), kNlmLockRes);
  ExpectMsgShape(locked, version());
  ASSERT_TRUE(locked.res);
  auto lock_res = DecodeRes(version(), locked.res->body);
  ASSERT_TRUE(lock_res);
  EXPECT_EQ(lock_res->stat, NlmStat::kGranted);
  EXPECT_EQ(lock_res->cookie, "lock-msg");

  MsgExchange tested =
      SendMsg(kNlmTestMsg, EncodeTestArgs(version(), b, true, "test-msg"), kNlmTestRes);
  ExpectMsgShape(tested, version());
  ASSERT_TRUE(tested.res);
  auto test_res = DecodeTestRes(version(), tested.res->body);
  ASSERT_TRUE(test_res);
  EXPECT_EQ(test_res->stat, NlmStat::kDenied);
  EXPECT_EQ(test_res->cookie, "test-msg");
  ASSERT_TRUE(test_res->holder);
  EXPECT_EQ(test_res->holder->svid, 1);
  EXPECT_EQ(test_res->holder->oh, "1@client");
  EXPECT_EQ(test_res->holder->offset, 0u);
  EXPECT_EQ(test_res->holder->length, 100u);
  EXPECT_TRUE(test_res->holder->exclusive);

  MsgExchange cancelled = SendMsg(
      kNlmCancelMsg, EncodeCancelArgs(version(), b, true, true, "cancel-msg"), kNlmCancelRes);
  ExpectMsgShape(cancelled, version());
  ASSERT_TRUE(cancelled.res);
  auto cancel_res = DecodeRes(version(), cancelled.res->body);
  ASSERT_TRUE(cancel_res);
  EXPECT_EQ(cancel_res->cookie, "cancel-msg");

  MsgExchange unlocked =
      SendMsg(kNlmUnlockMsg, EncodeUnlockArgs(version(), a, "unlock-msg"), kNlmUnlockRes);
  ExpectMsgShape(unlocked, version());
  ASSERT_TRUE(unlocked.res);
  auto unlock_res = DecodeRes(version(), unlocked.res->body);
  ASSERT_TRUE(unlock_res);
  EXPECT_EQ(unlock_res->stat, NlmStat::kGranted);
  EXPECT_EQ(unlock_res->cookie, "unlock-msg");

  MsgExchange tested_again =
      SendMsg(kNlmTestMsg, EncodeTestArgs(version(), b, true, "test-msg-2"), kNlmTestRes);
  ASSERT_TRUE(tested_again.res);
  auto free_res = DecodeTestRes(version(), tested_again.res->body);
  ASSERT_TRUE(free_res);
  EXPECT_EQ(free_res->stat, NlmStat::kGranted);
}

TEST_P(NlmAsync, AMsgThatDoesNotDecodeGetsGarbageArgsAndNoRes) {
  // No _RES for arguments that do not decode: over UDP the source address is anyone's to forge,
  // and a _RES would be sent to it.
  std::vector<uint8_t> args = EncodeLockArgs(version(), Owner("f", 1, 0, 1), kExclusive, "c");
  args.resize(args.size() / 2);
  MsgExchange exchange = SendMsg(kNlmLockMsg, args, kNlmLockRes);
  ASSERT_TRUE(exchange.reply);
  EXPECT_EQ(exchange.reply->accept_stat, kGarbageArgs);
  EXPECT_FALSE(exchange.res) << "a _RES was sent for arguments that did not decode";
}

// --- Retransmissions --------------------------------------------------------------------------

// The same call bytes sent again, as a client's RPC layer retransmits them: from the same UDP
// socket, or over a new TCP connection after the old one broke.
class NlmRetransmissions : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    nlockd_ = StartLocalNlockd();
    ASSERT_NE(nlockd_->port(), 0);
    server_ = LoopbackAddress(nlockd_->port());
  }
  void TearDown() override { EXPECT_EQ(nlockd_->Stop(), 0) << nlockd_->process().output(); }

  std::optional<RpcMessage> Send(const std::vector<uint8_t>& call) {
    if (!GetParam()) return udp_.Call(server_, call, kReplyTimeout);
    TcpConnection connection(server_);
    if (!connection.connected()) return std::nullopt;
    return connection.Call(call, kReplyTimeout);
  }

  // The status in a reply to LOCK or UNLOCK, or a description of what went wrong.
  std::string StatusOf(const std::optional<RpcMessage>& reply) {
    if (!reply) return "no reply";
    if (reply->accept_stat != kSuccess) return "accept_stat " + std::to_string(reply->accept_stat);
    auto res = DecodeRes(4, reply->body);
    return res ? std::string(ToString(res->stat)) : "undecodable";
  }

  std::string TestFor(const NlmLock& lock) {
    auto reply = Send(
        BuildCall(next_xid_++, kNlmProgram, 4, kNlmTest, EncodeTestArgs(4, lock, true, "test")));
    if (!reply || reply->accept_stat != kSuccess) return "no reply";
    auto res = DecodeTestRes(4, reply->body);
    if (!res) return "undecodable";
    return std::string(ToString(res->stat)) +
           (res->holder ? " by svid=" + std::to_string(res->holder->svid) : "");
  }

  std::unique_ptr<NlockdProcess> nlockd_;
  sockaddr_in server_{};
  UdpSocket udp_;
  uint32_t next_xid_ = 0x7e570000;
};

std::string TcpName(const ::testing::TestParamInfo<bool>& param) {
  return param.param ? "Tcp" : "Udp";
}

INSTANTIATE_TEST_SUITE_P(UdpAndTcp, NlmRetransmissions, ::testing::Bool(), TcpName);

TEST_P(NlmRetransmissions, ARetransmittedLockGetsTheCachedReplyAndIsNotAppliedAgain) {
  NlmLock a = Owner("drc-file", 1, 0, 10);
  NlmLock b = Owner("drc-file", 2, 0, 10);
  const auto lock =
      BuildCall(0x10c1, kNlmProgram, 4, kNlmLock, EncodeLockArgs(4, a, kExclusive, "lock-once"));
  const auto unlock =
      BuildCall(0x10c2, kNlmProgram, 4, kNlmUnlock, EncodeUnlockArgs(4, a, "unlock-once"));

  auto first = Send(lock);
  auto duplicate = Send(lock);  // Same xid, same bytes.
  EXPECT_EQ(StatusOf(first), "granted");
  EXPECT_EQ(StatusOf(duplicate), "granted");
  ASSERT_TRUE(first && duplicate);
  EXPECT_EQ(first->body, duplicate->body);
  EXPECT_EQ(TestFor(b), "denied by svid=1");

  EXPECT_EQ(StatusOf(Send(unlock)), "granted");
  EXPECT_EQ(TestFor(b), "granted");

  // A late copy of the first LOCK: answered from the cache, the lock stays released.
  auto late = Send(lock);
  EXPECT_EQ(StatusOf(late), "granted");
  EXPECT_EQ(TestFor(b), "granted") << "a retransmitted LOCK re-acquired a released lock";

  // And a late UNLOCK does not undo a newer LOCK of the same range.
  EXPECT_EQ(StatusOf(Send(BuildCall(0x10c3, kNlmProgram, 4, kNlmLock,
                                    EncodeLockArgs(4, a, kExclusive, "lock-again")))),
            "granted");
  EXPECT_EQ(StatusOf(Send(unlock)), "granted");
  EXPECT_EQ(TestFor(b), "denied by svid=1") << "a retransmitted UNLOCK released a newer lock";
}

TEST_P(NlmRetransmissions, AReusedXidWithOtherArgumentsIsANewCall) {
  NlmLock a = Owner("drc-reuse", 1, 0, 10);
  NlmLock b = Owner("drc-reuse", 2, 100, 10);
  EXPECT_EQ(StatusOf(Send(BuildCall(0x20c1, kNlmProgram, 4, kNlmLock,
                                    EncodeLockArgs(4, a, kExclusive, "a")))),
            "granted");
  EXPECT_EQ(StatusOf(Send(BuildCall(0x20c1, kNlmProgram, 4, kNlmLock,
                                    EncodeLockArgs(4, b, kExclusive, "b")))),
            "granted");
  EXPECT_EQ(TestFor(At(Owner("drc-reuse", 3, 0, 0), 105, 1)), "denied by svid=2");
}

}  // namespace
}  // namespace nlockd::integration
