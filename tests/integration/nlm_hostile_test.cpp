// SPDX-License-Identifier: Apache-2.0
// Malformed and hostile NLM input against the real nlockd: fields past their bounds, lengths
// that lie, truncated arguments, values no enum has, versions and procedures that do not exist.
// Each gets its RPC error (GARBAGE_ARGS, PROG_MISMATCH, PROC_UNAVAIL, RPC_MISMATCH) and
// nothing else: afterwards nlockd still answers NULL and exits 0 on SIGTERM.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
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

// nlm4_lockargs field by field, so that any field can be too long or lie about its length.
struct RawLockArgs {
  std::string cookie = "cookie";
  uint32_t block = 0;
  uint32_t exclusive = 1;
  std::string caller_name = "client";
  std::string fh = "file";
  std::string oh = "owner";
  uint32_t svid = 1;
  uint64_t offset = 0;
  uint64_t length = 10;
  uint32_t reclaim = 0;
  uint32_t state = 1;

  std::vector<uint8_t> Encode() const {
    XdrWriter w;
    w.Opaque(cookie).U32(block).U32(exclusive).Opaque(caller_name).Opaque(fh).Opaque(oh);
    w.U32(svid).U64(offset).U64(length).U32(reclaim).U32(state);
    return w.bytes();
  }
};

// The result of one call, as a string to compare with a literal.
std::string Describe(const std::optional<RpcMessage>& reply) {
  if (!reply) return "no reply";
  if (reply->reply_stat == 1) {
    return reply->reject_stat == 0
               ? "RPC_MISMATCH " + std::to_string(reply->low) + "-" + std::to_string(reply->high)
               : "AUTH_ERROR";
  }
  switch (reply->accept_stat) {
    case kSuccess:
      return "SUCCESS";
    case kProgUnavail:
      return "PROG_UNAVAIL";
    case kProgMismatch:
      return "PROG_MISMATCH " + std::to_string(reply->low) + "-" + std::to_string(reply->high);
    case kProcUnavail:
      return "PROC_UNAVAIL";
    case kGarbageArgs:
      return "GARBAGE_ARGS";
    case kSystemErr:
      return "SYSTEM_ERR";
    default:
      return "accept_stat " + std::to_string(reply->accept_stat);
  }
}

// Over UDP, or over one TCP connection kept for the whole test (so that the connection is
// seen to survive every bad call).
class NlmHostile : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    nlockd_ = StartLocalNlockd();
    ASSERT_NE(nlockd_->port(), 0);
    server_ = LoopbackAddress(nlockd_->port());
    if (tcp()) {
      tcp_ = std::make_unique<TcpConnection>(server_);
      ASSERT_TRUE(tcp_->connected());
    }
  }

  // Whatever a test sent, nlockd keeps serving every version and stops cleanly.
  void TearDown() override {
    if (!nlockd_ || nlockd_->port() == 0) return;
    if (tcp_) {
      EXPECT_EQ(Describe(tcp_->Call(BuildCall(Xid(), kNlmProgram, 4, kNlmNull, {}), kReplyTimeout)),
                "SUCCESS")
          << "the TCP connection did not survive";
    }
    for (bool tcp : {true, false}) {
      for (uint32_t version : {1u, 3u, 4u}) {
        auto client = NlmRpcgenClient::Connect(version, tcp, server_);
        ASSERT_NE(client, nullptr);
        EXPECT_TRUE(client->Null()) << "v" << version << " tcp=" << tcp << ": " << client->error();
      }
    }
    EXPECT_EQ(nlockd_->Stop(), 0) << nlockd_->process().output();
  }

  bool tcp() const { return GetParam(); }
  uint32_t Xid() { return next_xid_++; }

  std::string Call(uint32_t version, uint32_t procedure, const std::vector<uint8_t>& args,
                   uint32_t rpc_version = 2, uint32_t program = kNlmProgram) {
    auto call = BuildCall(Xid(), program, version, procedure, args, rpc_version);
    return Describe(tcp() ? tcp_->Call(call, kReplyTimeout)
                          : udp_.Call(server_, call, kReplyTimeout));
  }

  std::unique_ptr<NlockdProcess> nlockd_;
  sockaddr_in server_{};
  UdpSocket udp_;
  std::unique_ptr<TcpConnection> tcp_;
  uint32_t next_xid_ = 0xbad00000;
};

std::string TcpName(const ::testing::TestParamInfo<bool>& param) {
  return param.param ? "Tcp" : "Udp";
}

INSTANTIATE_TEST_SUITE_P(UdpAndTcp, NlmHostile, ::testing::Bool(), TcpName);

TEST_P(NlmHostile, FieldsAtTheirBoundAreServedAndOneByteMoreIsGarbageArgs) {
  const std::string k1024(1024, 'x');
  RawLockArgs at_bound;
  at_bound.cookie = k1024;
  at_bound.caller_name = k1024;
  at_bound.oh = k1024;
  at_bound.fh = std::string(64, 'f');  // An NFSv3 handle's largest size (Linux caps NLM's too).
  EXPECT_EQ(Call(4, kNlmLock, at_bound.Encode()), "SUCCESS");

  RawLockArgs args;
  args.cookie = k1024 + "x";
  EXPECT_EQ(Call(4, kNlmLock, args.Encode()), "GARBAGE_ARGS") << "cookie of 1025 bytes";
  args = {};
  args.caller_name = k1024 + "x";
  EXPECT_EQ(Call(4, kNlmLock, args.Encode()), "GARBAGE_ARGS") << "caller_name of 1025 bytes";
  args = {};
  args.oh = k1024 + "x";
  EXPECT_EQ(Call(4, kNlmLock, args.Encode()), "GARBAGE_ARGS") << "oh of 1025 bytes";
  args = {};
  args.fh = k1024 + "x";
  EXPECT_EQ(Call(4, kNlmLock, args.Encode()), "GARBAGE_ARGS") << "fh of 1025 bytes";
  args = {};
  args.fh = std::string(65, 'f');
  EXPECT_EQ(Call(4, kNlmLock, args.Encode()), "GARBAGE_ARGS") << "fh of 65 bytes";
  args = {};
  args.caller_name = std::string(100000, 'n');
  if (!tcp()) args.caller_name.resize(60000);  // One datagram.
  EXPECT_EQ(Call(4, kNlmTest, args.Encode()), "GARBAGE_ARGS") << "a huge caller_name";

  // The same bounds through rpcgen's version 1 client: GARBAGE_ARGS is what it cannot decode.
  auto v1 = NlmRpcgenClient::Connect(1, tcp(), server_);
  ASSERT_NE(v1, nullptr);
  EXPECT_FALSE(v1->Lock(NlmLock{"client", std::string(65, 'f'), "oh", 1, 0, 1}, {}, "c"));
  EXPECT_EQ(v1->last_status(), RPC_CANTDECODEARGS) << v1->error();
  EXPECT_EQ(Outcome(v1->Lock(NlmLock{"client", std::string(64, 'g'), "oh", 1, 0, 1}, {}, "c"), *v1),
            "granted");
}

TEST_P(NlmHostile, LengthsThatClaimMoreThanWasSentAreGarbageArgs) {
  for (uint32_t claimed : {0xffffffffu, 0x80000000u, 0x7fffffffu, 1024u, 64u}) {
    SCOPED_TRACE("claimed " + std::to_string(claimed));
    XdrWriter caller;
    caller.Opaque("c").U32(0).U32(1).LyingOpaque(claimed, "short");
    EXPECT_EQ(Call(4, kNlmLock, caller.bytes()), "GARBAGE_ARGS") << "caller_name";
    XdrWriter cookie;
    cookie.LyingOpaque(claimed, "abcd");
    EXPECT_EQ(Call(4, kNlmTest, cookie.bytes()), "GARBAGE_ARGS") << "cookie";
    XdrWriter name;
    name.LyingOpaque(claimed, "host");
    EXPECT_EQ(Call(4, kNlmFreeAll, name.bytes()), "GARBAGE_ARGS") << "FREE_ALL name";
  }
}

TEST_P(NlmHostile, EveryTruncationOfTheArgumentsIsGarbageArgs) {
  struct Case {
    uint32_t version;
    uint32_t procedure;
    std::vector<uint8_t> args;
  };
  NlmLock lock{"client", "file-x", "owner", 3, 5, 7};
  std::vector<Case> cases{
      {4, kNlmLock, EncodeLockArgs(4, lock, {}, "cookie")},
      {1, kNlmLock, EncodeLockArgs(1, lock, {}, "cookie")},
      {4, kNlmUnlock, EncodeUnlockArgs(4, lock, "ck")},
      {3, kNlmShare, EncodeShareArgs(3, NlmShare{"client", "file-x", "o", 1, 1}, false, "ck")},
  };
  for (const auto& c : cases) {
    ASSERT_FALSE(c.args.empty());
    for (size_t size = 0; size < c.args.size(); ++size) {
      std::vector<uint8_t> truncated(c.args.begin(),
                                     c.args.begin() + static_cast<std::ptrdiff_t>(size));
      EXPECT_EQ(Call(c.version, c.procedure, truncated), "GARBAGE_ARGS")
          << "version " << c.version << " procedure " << c.procedure << " cut at " << size << " of "
          << c.args.size();
    }
    EXPECT_EQ(Call(c.version, c.procedure, c.args), "SUCCESS");
  }
}

TEST_P(NlmHostile, ValuesOutsideTheirTypesAreGarbageArgs) {
  RawLockArgs args;
  args.block = 2;
  EXPECT_EQ(Call(4, kNlmLock, args.Encode()), "GARBAGE_ARGS") << "bool 2";
  args = {};
  args.exclusive = 0xffffffff;
  EXPECT_EQ(Call(4, kNlmLock, args.Encode()), "GARBAGE_ARGS") << "bool -1";
  for (auto [mode, access] : {std::pair{7, 1}, std::pair{1, 4}, std::pair{-1, 1}}) {
    XdrWriter share;
    share.Opaque("ck").Opaque("client").Opaque("fh").Opaque("oh");
    share.U32(static_cast<uint32_t>(mode)).U32(static_cast<uint32_t>(access)).U32(0);
    EXPECT_EQ(Call(4, kNlmShare, share.bytes()), "GARBAGE_ARGS")
        << "mode " << mode << " access " << access;
  }
  XdrWriter res;  // A GRANTED_RES whose status is no nlm4_stats.
  res.Opaque("ck").U32(42);
  EXPECT_EQ(Call(4, kNlmGrantedRes, res.bytes()), "GARBAGE_ARGS");
}

TEST_P(NlmHostile, UnknownVersionsProceduresAndRpcVersionsGetTheirErrors) {
  for (uint32_t version : {0u, 2u, 5u, 0xffffffffu}) {
    EXPECT_EQ(Call(version, kNlmNull, {}), "PROG_MISMATCH 1-4") << "version " << version;
    EXPECT_EQ(Call(version, kNlmLock, RawLockArgs{}.Encode()), "PROG_MISMATCH 1-4")
        << "version " << version;
  }
  for (uint32_t procedure : {17u, 18u, 19u, 24u, 255u, 0xffffffffu}) {
    EXPECT_EQ(Call(4, procedure, {}), "PROC_UNAVAIL") << "procedure " << procedure;
  }
  for (uint32_t procedure : {20u, 21u, 22u, 23u}) {  // Version 3's additions.
    EXPECT_EQ(Call(1, procedure, {}), "PROC_UNAVAIL") << "procedure " << procedure;
  }
  EXPECT_EQ(Call(4, kNlmNull, {}, 3), "RPC_MISMATCH 2-2");
  EXPECT_EQ(Call(4, kNlmNull, {}, 0), "RPC_MISMATCH 2-2");
  EXPECT_EQ(Call(4, kNlmNull, {}, 2, 100022), "PROG_UNAVAIL");
}

TEST_P(NlmHostile, MessagesThatAreNotCallsGetNoAnswer) {
  XdrWriter reply;  // A reply, as if nlockd had called us.
  reply.U32(0x51).U32(1).U32(0).U32(0).U32(0).U32(0);
  XdrWriter odd_type;  // msg_type 7.
  odd_type.U32(0x52).U32(7).U32(2).U32(kNlmProgram).U32(4).U32(0).U32(0).U32(0).U32(0).U32(0);
  XdrWriter header_only;  // Cut inside the call header.
  header_only.U32(0x53).U32(0).U32(2).U32(kNlmProgram);
  const auto null = BuildCall(0x54, kNlmProgram, 4, kNlmNull, {});
  if (tcp()) {
    for (const auto* junk : {&reply, &odd_type, &header_only}) {
      // Unanswerable records: nlockd may skip them or close the connection, never answer.
      TcpConnection connection(server_);
      ASSERT_TRUE(connection.SendRecord(junk->bytes()));
      ASSERT_TRUE(connection.SendRecord(null));
      auto first = connection.ReceiveRecord(kReplyTimeout);
      if (first) {
        auto message = ParseMessage(*first);
        ASSERT_TRUE(message);
        EXPECT_EQ(message->xid, 0x54u) << "a record that was not a call got an answer";
      }
    }
    return;
  }
  for (const auto* junk : {&reply, &odd_type, &header_only}) {
    ASSERT_TRUE(udp_.SendTo(server_, junk->bytes()));
  }
  ASSERT_TRUE(udp_.SendTo(server_, null));
  // Datagrams are served in order: the first answer must be NULL's.
  auto first = udp_.Receive(kReplyTimeout);
  ASSERT_TRUE(first);
  auto message = ParseMessage(*first);
  ASSERT_TRUE(message);
  EXPECT_EQ(message->xid, 0x54u) << "a datagram that was not a call got an answer";
}

}  // namespace
}  // namespace nlockd::integration
