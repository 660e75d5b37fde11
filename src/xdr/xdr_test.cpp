// SPDX-License-Identifier: Apache-2.0
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "xdr/decoder.hpp"
#include "xdr/encoder.hpp"

namespace nlockd::xdr {
namespace {

using Bytes = std::vector<uint8_t>;

TEST(Encoder, IntegersAreBigEndianAndFourByteAligned) {
  Bytes out;
  Encoder enc(out);
  enc.U32(0x01020304);
  enc.I32(-2);
  enc.U64(0x0102030405060708ULL);
  enc.Bool(true);
  EXPECT_EQ(out, (Bytes{1, 2, 3, 4, 0xff, 0xff, 0xff, 0xfe, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 1}));
}

TEST(Encoder, OpaqueAndStringCarryLengthAndZeroPadding) {
  Bytes out;
  Encoder enc(out);
  enc.String("abcde");
  enc.Opaque(std::string_view(""));
  std::array<uint8_t, 3> fixed{7, 8, 9};
  enc.FixedOpaque(fixed);
  EXPECT_EQ(out, (Bytes{0, 0, 0, 5, 'a', 'b', 'c', 'd', 'e', 0, 0, 0,  // string<>
                        0, 0, 0, 0,                                    // empty opaque
                        7, 8, 9, 0}));                                 // opaque[3]
}

TEST(Decoder, RoundTripsEveryKind) {
  Bytes out;
  Encoder enc(out);
  enc.U32(UINT32_MAX);
  enc.I32(INT32_MIN);
  enc.U64(UINT64_MAX);
  enc.I64(-5);
  enc.Bool(false);
  enc.Enum(3);
  enc.String("host");
  std::array<uint8_t, 16> priv{};
  priv[15] = 0xaa;
  enc.FixedOpaque(priv);
  enc.Optional(std::optional<uint32_t>(9), [](Encoder& e, uint32_t v) { e.U32(v); });
  enc.Array(std::vector<uint32_t>{1, 2}, [](Encoder& e, uint32_t v) { e.U32(v); });

  Decoder dec(out);
  uint32_t u32 = 0;
  int32_t i32 = 0, en = 0;
  uint64_t u64 = 0;
  int64_t i64 = 0;
  bool b = true;
  std::string s;
  std::array<uint8_t, 16> p{};
  std::optional<uint32_t> opt;
  std::vector<uint32_t> arr;
  auto item = [](Decoder& d, uint32_t& v) { return d.U32(v, "item"); };
  ASSERT_TRUE(dec.U32(u32, "u32") && dec.I32(i32, "i32") && dec.U64(u64, "u64") &&
              dec.I64(i64, "i64") && dec.Bool(b, "b") && dec.Enum(en, "en") &&
              dec.String(s, 1024, "s") && dec.FixedOpaque(p, "priv") &&
              dec.Optional(opt, item, "opt") && dec.Array(arr, 10, 4, item, "arr"));
  EXPECT_EQ(u32, UINT32_MAX);
  EXPECT_EQ(i32, INT32_MIN);
  EXPECT_EQ(u64, UINT64_MAX);
  EXPECT_EQ(i64, -5);
  EXPECT_FALSE(b);
  EXPECT_EQ(en, 3);
  EXPECT_EQ(s, "host");
  EXPECT_EQ(p, priv);
  EXPECT_EQ(opt, 9u);
  EXPECT_EQ(arr, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(dec.remaining(), 0u);
  EXPECT_TRUE(dec.ok());
}

TEST(Decoder, TruncatedIntegerFailsAndNamesTheField) {
  Bytes in{0, 0, 1};
  Decoder dec(in);
  uint32_t v = 0;
  EXPECT_FALSE(dec.U32(v, "svid"));
  ASSERT_TRUE(dec.failure().has_value());
  EXPECT_EQ(dec.failure()->error, DecodeError::kTruncated);
  EXPECT_EQ(dec.failure()->field, "svid");
  EXPECT_EQ(dec.failure()->offset, 0u);
}

TEST(Decoder, FirstFailureSticksAndLaterReadsFail) {
  Bytes in{0, 0, 0, 2, 0, 0, 0, 1};
  Decoder dec(in);
  bool b = false;
  uint32_t v = 0;
  EXPECT_FALSE(dec.Bool(b, "block"));
  EXPECT_FALSE(dec.U32(v, "next"));
  EXPECT_EQ(dec.failure()->error, DecodeError::kBadBool);
  EXPECT_EQ(dec.failure()->field, "block");
}

TEST(Decoder, LengthAboveBoundFailsWithoutReadingFurther) {
  Bytes in{0, 0, 4, 1};  // Claims 1025 bytes; none follow.
  Decoder dec(in);
  std::string s;
  EXPECT_FALSE(dec.String(s, 1024, "caller_name"));
  EXPECT_EQ(dec.failure()->error, DecodeError::kTooLong);
  EXPECT_TRUE(s.empty());
}

TEST(Decoder, HugeClaimedLengthWithinBoundButPastInputIsTruncated) {
  Bytes in{0x7f, 0xff, 0xff, 0xff, 'a'};
  Decoder dec(in);
  std::string s;
  EXPECT_FALSE(dec.Opaque(s, UINT32_MAX, "fh"));
  EXPECT_EQ(dec.failure()->error, DecodeError::kTruncated);
}

TEST(Decoder, MissingPaddingIsTruncated) {
  Bytes in{0, 0, 0, 1, 'x'};
  Decoder dec(in);
  std::string s;
  EXPECT_FALSE(dec.String(s, 10, "name"));
  EXPECT_EQ(dec.failure()->error, DecodeError::kTruncated);
}

TEST(Decoder, NonZeroPaddingIsRejected) {
  Bytes in{0, 0, 0, 1, 'x', 0, 1, 0};
  Decoder dec(in);
  std::string s;
  EXPECT_FALSE(dec.String(s, 10, "name"));
  EXPECT_EQ(dec.failure()->error, DecodeError::kBadPadding);
  EXPECT_EQ(dec.failure()->offset, 5u);
}

TEST(Decoder, FixedOpaqueNeedsAllItsBytes) {
  Bytes in(15, 0);
  Decoder dec(in);
  std::array<uint8_t, 16> priv{};
  EXPECT_FALSE(dec.FixedOpaque(priv, "priv"));
  EXPECT_EQ(dec.failure()->error, DecodeError::kTruncated);
}

TEST(Decoder, ArrayCountAboveBoundOrAboveBytesLeftFailsBeforeAllocating) {
  auto item = [](Decoder& d, uint32_t& v) { return d.U32(v, "item"); };
  std::vector<uint32_t> out;
  Bytes too_many{0, 0, 0, 17};
  Decoder dec1(too_many);
  EXPECT_FALSE(dec1.Array(out, 16, 4, item, "gids"));
  EXPECT_EQ(dec1.failure()->error, DecodeError::kTooLong);

  Bytes claims_more{0, 0, 0, 3, 0, 0, 0, 1};
  Decoder dec2(claims_more);
  EXPECT_FALSE(dec2.Array(out, 16, 4, item, "gids"));
  EXPECT_EQ(dec2.failure()->error, DecodeError::kTruncated);
  EXPECT_EQ(out.capacity(), 0u);
}

TEST(Decoder, OptionalAbsentAndBadDiscriminant) {
  auto item = [](Decoder& d, uint32_t& v) { return d.U32(v, "item"); };
  std::optional<uint32_t> opt = 5;
  Bytes absent{0, 0, 0, 0};
  Decoder dec(absent);
  EXPECT_TRUE(dec.Optional(opt, item, "opt"));
  EXPECT_FALSE(opt.has_value());

  Bytes bad{0, 0, 0, 7};
  Decoder dec2(bad);
  EXPECT_FALSE(dec2.Optional(opt, item, "opt"));
  EXPECT_EQ(dec2.failure()->error, DecodeError::kBadBool);
}

TEST(Decoder, OpaqueViewPointsIntoInput) {
  Bytes in{0, 0, 0, 2, 9, 8, 0, 0};
  Decoder dec(in);
  std::span<const uint8_t> view;
  ASSERT_TRUE(dec.OpaqueView(view, 4, "oh"));
  EXPECT_EQ(view.data(), in.data() + 4);
  EXPECT_EQ(view.size(), 2u);
}

TEST(Encoder, PatchOverwritesAWord) {
  Bytes out;
  Encoder enc(out);
  enc.U32(0);
  enc.U32(7);
  enc.PatchU32(0, 0x0a0b0c0d);
  EXPECT_EQ(out, (Bytes{10, 11, 12, 13, 0, 0, 0, 7}));
}

}  // namespace
}  // namespace nlockd::xdr
