// SPDX-License-Identifier: Apache-2.0
#include "rpc/message.hpp"

#include <vector>

#include <gtest/gtest.h>

namespace nlockd::rpc {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes Words(std::initializer_list<uint32_t> words) {
  Bytes out;
  xdr::Encoder enc(out);
  for (uint32_t w : words) enc.U32(w);
  return out;
}

TEST(EncodeCallHeader, NullCallWithAuthNoneMatchesRfc5531Layout) {
  Bytes out;
  xdr::Encoder enc(out);
  EncodeCallHeader(enc, 0x11223344, 100021, 4, 0);
  EXPECT_EQ(out, Words({0x11223344, 0, 2, 100021, 4, 0, 0, 0, 0, 0}));
}

TEST(DecodeCall, ReadsHeaderAndLeavesArguments) {
  Bytes msg = Words({7, 0, 2, 100024, 1, 2, 0, 0, 0, 0, 0xabcd});
  DecodedCall call = DecodeCall(msg);
  ASSERT_EQ(call.status, CallDecodeStatus::kOk);
  EXPECT_EQ(call.header.xid, 7u);
  EXPECT_EQ(call.header.program, 100024u);
  EXPECT_EQ(call.header.version, 1u);
  EXPECT_EQ(call.header.procedure, 2u);
  EXPECT_EQ(call.args.size(), 4u);
}

TEST(DecodeCall, ReplyIsNotACallAndWrongRpcVersionIsAMismatch) {
  EXPECT_EQ(DecodeCall(Words({1, 1, 0})).status, CallDecodeStatus::kNotACall);
  EXPECT_EQ(DecodeCall(Words({1, 0, 3, 100021, 4, 0})).status, CallDecodeStatus::kRpcMismatch);
}

TEST(DecodeCall, EveryTruncationOfAValidHeaderIsMalformed) {
  // Header of 12 words (an 8-byte credential body), then one word of arguments.
  Bytes msg = Words({7, 0, 2, 100024, 1, 2, 1, 8, 0, 0, 0, 0, 0xa});
  EXPECT_EQ(DecodeCall(msg).status, CallDecodeStatus::kOk);
  for (size_t len = 0; len < 48; ++len) {
    DecodedCall call = DecodeCall(std::span(msg.data(), len));
    if (len < 12) {
      EXPECT_NE(call.status, CallDecodeStatus::kOk) << len;
    } else {
      EXPECT_EQ(call.status, CallDecodeStatus::kMalformed) << len;
    }
  }
}

TEST(DecodeCall, OversizedCredentialIsMalformed) {
  Bytes msg = Words({7, 0, 2, 100024, 1, 0, 1, 401});
  msg.resize(msg.size() + 404 + 8, 0);
  EXPECT_EQ(DecodeCall(msg).status, CallDecodeStatus::kMalformed);
}

TEST(AuthSys, RoundTripsAndRejectsTooManyGroups) {
  AuthSys auth{42, "client1", 1000, 100, {1, 2, 3}};
  Bytes body;
  xdr::Encoder enc(body);
  EncodeAuthSys(enc, auth);
  auto decoded = DecodeAuthSys(body);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->machine_name, "client1");
  EXPECT_EQ(decoded->uid, 1000u);
  EXPECT_EQ(decoded->gids, (std::vector<uint32_t>{1, 2, 3}));

  AuthSys many = auth;
  many.gids.assign(17, 5);
  Bytes bad;
  xdr::Encoder bad_enc(bad);
  EncodeAuthSys(bad_enc, many);
  EXPECT_FALSE(DecodeAuthSys(bad).has_value());
}

TEST(ReplyEncoders, MatchRfc5531Layouts) {
  Bytes accepted, mismatch, rpc_mismatch, auth;
  xdr::Encoder a(accepted), m(mismatch), r(rpc_mismatch), e(auth);
  EncodeAcceptedHeader(a, 9, AcceptStat::kGarbageArgs);
  EncodeProgMismatch(m, 9, 1, 4);
  EncodeRpcMismatch(r, 9);
  EncodeAuthError(e, 9, AuthStat::kBadCred);
  EXPECT_EQ(accepted, Words({9, 1, 0, 0, 0, 4}));
  EXPECT_EQ(mismatch, Words({9, 1, 0, 0, 0, 2, 1, 4}));
  EXPECT_EQ(rpc_mismatch, Words({9, 1, 1, 0, 2, 2}));
  EXPECT_EQ(auth, Words({9, 1, 1, 1, 1}));
  EXPECT_EQ(accepted.size(), kAcceptStatOffset + 4);
}

TEST(DecodeReply, ReadsEachKindOfReply) {
  Bytes ok = Words({9, 1, 0, 0, 0, 0, 77});
  auto r1 = DecodeReply(ok);
  ASSERT_TRUE(r1.ok);
  EXPECT_EQ(r1.accept_stat, AcceptStat::kSuccess);
  EXPECT_EQ(r1.body.size(), 4u);

  auto r2 = DecodeReply(Words({9, 1, 0, 0, 0, 2, 1, 4}));
  ASSERT_TRUE(r2.ok);
  EXPECT_EQ(r2.accept_stat, AcceptStat::kProgMismatch);
  EXPECT_EQ(r2.mismatch_low, 1u);
  EXPECT_EQ(r2.mismatch_high, 4u);

  auto r3 = DecodeReply(Words({9, 1, 1, 1, 2}));
  ASSERT_TRUE(r3.ok);
  EXPECT_EQ(r3.reply_stat, ReplyStat::kMsgDenied);
  EXPECT_EQ(r3.auth_stat, AuthStat::kRejectedCred);

  EXPECT_FALSE(DecodeReply(Words({9, 0, 2})).ok);  // A call, not a reply.
  EXPECT_FALSE(DecodeReply(Words({9, 1, 0, 0, 0, 99})).ok);
}

}  // namespace
}  // namespace nlockd::rpc
