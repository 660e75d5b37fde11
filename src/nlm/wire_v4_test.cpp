// SPDX-License-Identifier: Apache-2.0
// NLM version 4 codec against the rpcgen routines of tests/integration/rpcgen/nlm4_prot.x.
#include <cstring>

#include <gtest/gtest.h>

#include "nlm/wire.hpp"
#include "nlm4_prot_test.h"
#include "testutil/tirpc_xdr.hpp"

namespace nlockd::nlm {
namespace {

using testutil::NetObj;
using testutil::TirpcDecode;
using testutil::TirpcEncode;

TEST(WireV4, LockArgsMatchRpcgenBytesBothWays) {
  std::string cookie = "\x01\x02\x03", fh(32, '\xfe'), oh = "1234@client";
  char caller[] = "client.example";
  ::nlm4_lockargs theirs{};
  theirs.cookie = NetObj(cookie);
  theirs.block = 1;
  theirs.exclusive = 1;
  theirs.alock.caller_name = caller;
  theirs.alock.fh = NetObj(fh);
  theirs.alock.oh = NetObj(oh);
  theirs.alock.svid = -7;
  theirs.alock.l_offset = 0xfffffffffffffff0ULL;
  theirs.alock.l_len = 0x10;
  theirs.reclaim = 0;
  theirs.state = 3;
  std::vector<uint8_t> bytes = TirpcEncode(xdr_nlm4_lockargs, &theirs);
  ASSERT_FALSE(bytes.empty());

  nlm4_lockargs ours;
  xdr::Decoder dec(bytes);
  ASSERT_TRUE(Decode(dec, NLM4_VERS, ours));
  EXPECT_EQ(dec.remaining(), 0u);
  EXPECT_EQ(ours.cookie, cookie);
  EXPECT_TRUE(ours.block);
  EXPECT_TRUE(ours.exclusive);
  EXPECT_EQ(ours.alock.caller_name, caller);
  EXPECT_EQ(ours.alock.fh, fh);
  EXPECT_EQ(ours.alock.oh, oh);
  EXPECT_EQ(ours.alock.svid, -7);
  EXPECT_EQ(ours.alock.l_offset, 0xfffffffffffffff0ULL);
  EXPECT_EQ(ours.alock.l_len, 0x10u);
  EXPECT_EQ(ours.state, 3);

  std::vector<uint8_t> again;
  xdr::Encoder enc(again);
  Encode(enc, NLM4_VERS, ours);
  EXPECT_EQ(again, bytes);
}

TEST(WireV4, DeniedTestResCarriesTheHolderInTheUnion) {
  nlm4_testres ours;
  ours.cookie = "ck";
  ours.stat = NLM4_DENIED;
  ours.holder = nlm4_holder{true, 42, "owner", 1ULL << 40, 0};
  std::vector<uint8_t> bytes;
  xdr::Encoder enc(bytes);
  Encode(enc, NLM4_VERS, ours);

  ::nlm4_testres theirs{};
  ASSERT_TRUE(TirpcDecode(xdr_nlm4_testres, bytes, &theirs));
  EXPECT_EQ(theirs.stat.stat, ::NLM4_DENIED);
  EXPECT_EQ(theirs.stat.nlm4_testrply_u.holder.svid, 42);
  EXPECT_EQ(theirs.stat.nlm4_testrply_u.holder.l_offset, 1ULL << 40);
  EXPECT_EQ(theirs.stat.nlm4_testrply_u.holder.exclusive, 1);
  xdr_free(reinterpret_cast<xdrproc_t>(xdr_nlm4_testres), reinterpret_cast<char*>(&theirs));

  nlm4_testres granted{"ck", NLM4_GRANTED, {}};
  std::vector<uint8_t> short_bytes;
  xdr::Encoder enc2(short_bytes);
  Encode(enc2, NLM4_VERS, granted);
  EXPECT_EQ(short_bytes.size(), 4u + 4u + 4u);  // cookie, stat, no holder
}

TEST(WireV4, StatusNamesAreTheSpecsNamesInLowercase) {
  EXPECT_EQ(ToString(NLM4_GRANTED), "granted");
  EXPECT_EQ(ToString(NLM4_DENIED_NOLOCKS), "denied_nolocks");
  EXPECT_EQ(ToString(NLM4_BLOCKED), "blocked");
  EXPECT_EQ(ToString(NLM4_DENIED_GRACE_PERIOD), "denied_grace_period");
  EXPECT_EQ(ToString(NLM4_DEADLCK), "deadlck");
  EXPECT_EQ(ToString(NLM4_STALE_FH), "stale_fh");
  EXPECT_EQ(ToString(NLM4_FAILED), "failed");
}

TEST(WireV4, VersionFourCodesPassThrough) {
  for (nlm4_stats stat : {NLM4_ROFS, NLM4_STALE_FH, NLM4_FBIG, NLM4_FAILED, NLM4_DEADLCK}) {
    nlm4_res res{"c", stat};
    std::vector<uint8_t> bytes;
    xdr::Encoder enc(bytes);
    Encode(enc, NLM4_VERS, res);
    ::nlm4_res theirs{};
    ASSERT_TRUE(TirpcDecode(xdr_nlm4_res, bytes, &theirs));
    EXPECT_EQ(static_cast<int>(theirs.stat.stat), static_cast<int>(stat));
    xdr_free(reinterpret_cast<xdrproc_t>(xdr_nlm4_res), reinterpret_cast<char*>(&theirs));
  }
}

TEST(WireV4, ShareArgsAndStatusCallbackDecode) {
  std::string cookie = "c", fh = "fh", oh = "oh";
  char caller[] = "host";
  ::nlm4_shareargs share{};
  share.cookie = NetObj(cookie);
  share.share.caller_name = caller;
  share.share.fh = NetObj(fh);
  share.share.oh = NetObj(oh);
  share.share.mode = fsm4_DW;
  share.share.access = fsa4_RW;
  share.reclaim = 1;
  auto bytes = TirpcEncode(xdr_nlm4_shareargs, &share);
  nlm4_shareargs ours;
  xdr::Decoder dec(bytes);
  ASSERT_TRUE(Decode(dec, NLM4_VERS, ours));
  EXPECT_EQ(ours.share.mode, fsm_DW);
  EXPECT_EQ(ours.share.access, fsa_RW);
  EXPECT_TRUE(ours.reclaim);

  ::nlm4_sm_status status{};
  char name[] = "client1";
  status.mon_name = name;
  status.state = 5;
  std::memset(status.priv, 0xab, sizeof status.priv);
  auto status_bytes = TirpcEncode(xdr_nlm4_sm_status, &status);
  nlm_sm_status our_status;
  xdr::Decoder dec2(status_bytes);
  ASSERT_TRUE(Decode(dec2, NLM4_VERS, our_status));
  EXPECT_EQ(our_status.mon_name, "client1");
  EXPECT_EQ(our_status.state, 5);
  EXPECT_EQ(our_status.priv[15], 0xab);
}

TEST(WireV4, BadShareModeIsRejected) {
  std::string cookie = "c", fh = "fh", oh = "oh";
  char caller[] = "host";
  ::nlm4_shareargs share{};
  share.cookie = NetObj(cookie);
  share.share.caller_name = caller;
  share.share.fh = NetObj(fh);
  share.share.oh = NetObj(oh);
  auto bytes = TirpcEncode(xdr_nlm4_shareargs, &share);
  bytes[bytes.size() - 12 + 3] = 9;  // mode: rpcgen's encoder would not write it.
  nlm4_shareargs ours;
  xdr::Decoder dec(bytes);
  EXPECT_FALSE(Decode(dec, NLM4_VERS, ours));
  EXPECT_EQ(dec.failure()->field, "mode");
}

TEST(WireV4, OversizedStringsAndEveryTruncationFailCleanly) {
  std::string cookie = "c", fh(65, 'f'), oh = "o";
  std::string long_name(1025, 'n');
  ::nlm4_lockargs theirs{};
  theirs.cookie = NetObj(cookie);
  theirs.alock.caller_name = long_name.data();
  theirs.alock.fh = NetObj(oh);
  theirs.alock.oh = NetObj(oh);
  // rpcgen's encoder refuses an over-long string, so build the long name by hand.
  std::vector<uint8_t> bytes;
  xdr::Encoder enc(bytes);
  nlm4_lockargs ours;
  ours.cookie = cookie;
  ours.alock.caller_name = long_name;
  ours.alock.fh = "x";
  Encode(enc, NLM4_VERS, ours);
  nlm4_lockargs decoded;
  xdr::Decoder dec(bytes);
  EXPECT_FALSE(Decode(dec, NLM4_VERS, decoded));
  EXPECT_EQ(dec.failure()->field, "caller_name");
  EXPECT_EQ(dec.failure()->error, xdr::DecodeError::kTooLong);

  ours.alock.caller_name = "ok";
  ours.alock.fh = fh;
  bytes.clear();
  Encode(enc, NLM4_VERS, ours);
  xdr::Decoder dec2(bytes);
  EXPECT_FALSE(Decode(dec2, NLM4_VERS, decoded));
  EXPECT_EQ(dec2.failure()->field, "fh");

  ours.alock.fh = "fine";
  bytes.clear();
  Encode(enc, NLM4_VERS, ours);
  for (size_t len = 0; len < bytes.size(); ++len) {
    xdr::Decoder truncated(std::span(bytes.data(), len));
    EXPECT_FALSE(Decode(truncated, NLM4_VERS, decoded)) << len;
  }
}

}  // namespace
}  // namespace nlockd::nlm
