// SPDX-License-Identifier: Apache-2.0
// The NSM codec against rpcgen's routines for the system's sm_inter.x (with SM_NOTIFY added).
#include "nsm/wire.hpp"

#include <cstring>

#include <gtest/gtest.h>
#include <rpc/rpc.h>

#include "sm_inter_test.h"
#include "testutil/tirpc_xdr.hpp"

namespace nlockd::nsm {
namespace {

using testutil::TirpcEncode;

TEST(NsmWire, MonMatchesRpcgenIncludingTheFixedPriv) {
  char mon_name[] = "client.example", my_name[] = "localhost";
  ::mon theirs{};
  theirs.mon_id.mon_name = mon_name;
  theirs.mon_id.my_id.my_name = my_name;
  theirs.mon_id.my_id.my_prog = 100021;
  theirs.mon_id.my_id.my_vers = 3;
  theirs.mon_id.my_id.my_proc = 16;
  for (int i = 0; i < 16; ++i) theirs.priv[i] = static_cast<char>(i);
  auto bytes = TirpcEncode(xdr_mon, &theirs);

  mon ours;
  xdr::Decoder dec(bytes);
  ASSERT_TRUE(Decode(dec, ours));
  EXPECT_EQ(dec.remaining(), 0u);
  EXPECT_EQ(ours.mon_id_.mon_name, "client.example");
  EXPECT_EQ(ours.mon_id_.my_id_.my_name, "localhost");
  EXPECT_EQ(ours.mon_id_.my_id_.my_prog, 100021);
  EXPECT_EQ(ours.mon_id_.my_id_.my_proc, 16);
  EXPECT_EQ(ours.priv[15], 15);

  std::vector<uint8_t> again;
  xdr::Encoder enc(again);
  Encode(enc, ours);
  EXPECT_EQ(again, bytes);
}

TEST(NsmWire, StatChgeAndStatusMatchRpcgen) {
  char name[] = "rebooted";
  ::stat_chge theirs{name, 7};
  auto bytes = TirpcEncode(xdr_stat_chge, &theirs);
  stat_chge ours{"rebooted", 7};
  std::vector<uint8_t> mine;
  xdr::Encoder enc(mine);
  Encode(enc, ours);
  EXPECT_EQ(mine, bytes);

  ::status their_status{};
  their_status.mon_name = name;
  their_status.state = 9;
  std::memset(their_status.priv, 0x5a, 16);
  auto status_bytes = TirpcEncode(xdr_status, &their_status);
  status our_status{"rebooted", 9, {}};
  our_status.priv.fill(0x5a);
  std::vector<uint8_t> mine2;
  xdr::Encoder enc2(mine2);
  Encode(enc2, our_status);
  EXPECT_EQ(mine2, status_bytes);
}

TEST(NsmWire, OverlongNamesTruncationsAndBadResultsFail) {
  std::vector<uint8_t> bytes;
  xdr::Encoder enc(bytes);
  Encode(enc, stat_chge{std::string(1025, 'x'), 1});
  stat_chge out;
  xdr::Decoder dec(bytes);
  EXPECT_FALSE(Decode(dec, out));
  EXPECT_EQ(dec.failure()->error, xdr::DecodeError::kTooLong);

  std::vector<uint8_t> mon_bytes;
  xdr::Encoder mon_enc(mon_bytes);
  Encode(mon_enc, mon{{"host", {"me", 100021, 3, 16}}, {}});
  for (size_t len = 0; len < mon_bytes.size(); ++len) {
    mon m;
    xdr::Decoder truncated(std::span(mon_bytes.data(), len));
    EXPECT_FALSE(Decode(truncated, m)) << len;
  }

  std::vector<uint8_t> res_bytes{0, 0, 0, 2, 0, 0, 0, 1};
  sm_stat_res res;
  xdr::Decoder res_dec(res_bytes);
  EXPECT_FALSE(Decode(res_dec, res));
}

}  // namespace
}  // namespace nlockd::nsm
