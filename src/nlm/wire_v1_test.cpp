// SPDX-License-Identifier: Apache-2.0
// NLM versions 1 and 3 codec against the rpcgen routines of the system's nlm_prot.x.
#include <gtest/gtest.h>

#include "nlm/wire.hpp"
#include "nlm_prot_test.h"
#include "testutil/tirpc_xdr.hpp"

namespace nlockd::nlm {
namespace {

using testutil::NetObj;
using testutil::TirpcDecode;
using testutil::TirpcEncode;

TEST(WireV1, LockArgsUse32BitUnsignedRangesWithoutSignExtension) {
  std::string cookie = "ck", fh(32, 'h'), oh = "9@c";
  char caller[] = "c";
  ::nlm_lockargs theirs{};
  theirs.cookie = NetObj(cookie);
  theirs.exclusive = 1;
  theirs.alock.caller_name = caller;
  theirs.alock.fh = NetObj(fh);
  theirs.alock.oh = NetObj(oh);
  theirs.alock.svid = 9;
  theirs.alock.l_offset = 0xfffffff0u;
  theirs.alock.l_len = 0x80000000u;
  theirs.state = 1;
  auto bytes = TirpcEncode(xdr_nlm_lockargs, &theirs);
  nlm4_lockargs ours;
  xdr::Decoder dec(bytes);
  ASSERT_TRUE(Decode(dec, NLM_VERS, ours));
  EXPECT_EQ(ours.alock.l_offset, 0xfffffff0u);
  EXPECT_EQ(ours.alock.l_len, 0x80000000u);
  std::vector<uint8_t> again;
  xdr::Encoder enc(again);
  Encode(enc, NLM_VERSX, ours);
  EXPECT_EQ(again, bytes);
}

TEST(WireV1, VersionFourOnlyCodesAreMappedInReplies) {
  EXPECT_EQ(StatusForVersion(NLM4_DEADLCK, NLM_VERS), NLM4_DENIED);
  EXPECT_EQ(StatusForVersion(NLM4_FBIG, NLM_VERSX), NLM4_DENIED_NOLOCKS);
  EXPECT_EQ(StatusForVersion(NLM4_STALE_FH, NLM_VERS), NLM4_DENIED_NOLOCKS);
  EXPECT_EQ(StatusForVersion(NLM4_DENIED_GRACE_PERIOD, NLM_VERS), NLM4_DENIED_GRACE_PERIOD);
  EXPECT_EQ(StatusForVersion(NLM4_FBIG, NLM4_VERS), NLM4_FBIG);

  nlm4_res res{"c", NLM4_FAILED};
  std::vector<uint8_t> bytes;
  xdr::Encoder enc(bytes);
  Encode(enc, NLM_VERS, res);
  ::nlm_res theirs{};
  ASSERT_TRUE(TirpcDecode(xdr_nlm_res, bytes, &theirs));
  EXPECT_EQ(theirs.stat.stat, nlm_denied_nolocks);
  xdr_free(reinterpret_cast<xdrproc_t>(xdr_nlm_res), reinterpret_cast<char*>(&theirs));
}

TEST(WireV1, HolderRangesWiderThan32BitsSaturate) {
  struct Case {
    uint64_t offset, len;
    uint32_t want_offset, want_len;
  };
  for (Case c :
       {Case{10, 20, 10, 20}, Case{10, 0, 10, 0}, Case{1ULL << 40, 5, 0xffffffffu, 1},
        Case{0xfffffff0u, 1ULL << 33, 0xfffffff0u, 0x10}, Case{0, 1ULL << 35, 0, 0xffffffffu}}) {
    nlm4_testres res;
    res.cookie = "c";
    res.stat = NLM4_DENIED;
    res.holder = nlm4_holder{false, 3, "o", c.offset, c.len};
    std::vector<uint8_t> bytes;
    xdr::Encoder enc(bytes);
    Encode(enc, NLM_VERS, res);
    ::nlm_testres theirs{};
    ASSERT_TRUE(TirpcDecode(xdr_nlm_testres, bytes, &theirs));
    ASSERT_EQ(theirs.stat.stat, nlm_denied);
    EXPECT_EQ(theirs.stat.nlm_testrply_u.holder.l_offset, c.want_offset) << c.offset;
    EXPECT_EQ(theirs.stat.nlm_testrply_u.holder.l_len, c.want_len) << c.offset << " " << c.len;
    xdr_free(reinterpret_cast<xdrproc_t>(xdr_nlm_testres), reinterpret_cast<char*>(&theirs));
  }
}

TEST(WireV1, NotifyAndShareArgsDecode) {
  char name[] = "oldhost";
  ::nlm_notify notify{name, 17};
  auto bytes = TirpcEncode(xdr_nlm_notify, &notify);
  nlm4_notify ours;
  xdr::Decoder dec(bytes);
  ASSERT_TRUE(Decode(dec, NLM_VERSX, ours));
  EXPECT_EQ(ours.name, "oldhost");
  EXPECT_EQ(ours.state, 17);

  std::string cookie = "c", fh = "f", oh = "o";
  char caller[] = "h";
  ::nlm_shareargs share{};
  share.cookie = NetObj(cookie);
  share.share.caller_name = caller;
  share.share.fh = NetObj(fh);
  share.share.oh = NetObj(oh);
  share.share.mode = ::fsm_DR;
  share.share.access = ::fsa_R;
  auto share_bytes = TirpcEncode(xdr_nlm_shareargs, &share);
  nlm4_shareargs our_share;
  xdr::Decoder dec2(share_bytes);
  ASSERT_TRUE(Decode(dec2, NLM_VERSX, our_share));
  EXPECT_EQ(our_share.share.mode, nlm::fsm_DR);

  nlm4_shareres res{"c", NLM4_GRANTED, 0};
  std::vector<uint8_t> res_bytes;
  xdr::Encoder enc(res_bytes);
  Encode(enc, NLM_VERSX, res);
  ::nlm_shareres theirs{};
  ASSERT_TRUE(TirpcDecode(xdr_nlm_shareres, res_bytes, &theirs));
  EXPECT_EQ(theirs.stat, nlm_granted);
  xdr_free(reinterpret_cast<xdrproc_t>(xdr_nlm_shareres), reinterpret_cast<char*>(&theirs));
}

}  // namespace
}  // namespace nlockd::nlm
