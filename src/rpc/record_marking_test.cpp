// SPDX-License-Identifier: Apache-2.0
#include "rpc/record_marking.hpp"

#include <chrono>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

namespace nlockd::rpc {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes Fragment(const Bytes& data, bool last) {
  uint32_t mark = static_cast<uint32_t>(data.size()) | (last ? kLastFragmentBit : 0);
  Bytes out;
  for (int shift : {24, 16, 8, 0}) out.push_back(static_cast<uint8_t>(mark >> shift));
  for (uint8_t byte : data) out.push_back(byte);
  return out;
}

TEST(RecordAssembler, JoinsFragmentsIntoOneRecord) {
  Bytes stream = Fragment({1, 2, 3}, false);
  Bytes tail = Fragment({4, 5}, true);
  stream.insert(stream.end(), tail.begin(), tail.end());
  RecordAssembler assembler(1024);
  std::vector<Bytes> records;
  ASSERT_EQ(assembler.Feed(stream, records), RecordAssembler::Status::kOk);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0], (Bytes{1, 2, 3, 4, 5}));
  EXPECT_TRUE(assembler.idle());
}

TEST(RecordAssembler, AcceptsTheStreamOneByteAtATime) {
  Bytes stream = Fragment({9, 8, 7, 6, 5}, true);
  Bytes second = Fragment({1}, true);
  stream.insert(stream.end(), second.begin(), second.end());
  RecordAssembler assembler(1024);
  std::vector<Bytes> records;
  for (uint8_t byte : stream) {
    ASSERT_EQ(assembler.Feed(std::span(&byte, 1), records), RecordAssembler::Status::kOk);
  }
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0], (Bytes{9, 8, 7, 6, 5}));
  EXPECT_EQ(records[1], (Bytes{1}));
}

TEST(RecordAssembler, RefusesAFragmentClaimingMoreThanTheCapBeforeItArrives) {
  Bytes header{0xff, 0xff, 0xff, 0xff};  // Last fragment of 2 GiB - 1.
  RecordAssembler assembler(1 << 20);
  std::vector<Bytes> records;
  EXPECT_EQ(assembler.Feed(header, records), RecordAssembler::Status::kRecordTooLarge);
  EXPECT_TRUE(records.empty());
}

TEST(RecordAssembler, CapCountsTheWholeRecordAcrossFragments) {
  RecordAssembler assembler(6);
  std::vector<Bytes> records;
  ASSERT_EQ(assembler.Feed(Fragment({1, 2, 3, 4}, false), records), RecordAssembler::Status::kOk);
  EXPECT_EQ(assembler.Feed(Fragment({5, 6, 7}, true), records),
            RecordAssembler::Status::kRecordTooLarge);
}

TEST(RecordAssembler, PartialRecordIsNotIdle) {
  RecordAssembler assembler(64);
  std::vector<Bytes> records;
  Bytes partial = Fragment({1, 2, 3}, true);
  partial.pop_back();
  ASSERT_EQ(assembler.Feed(partial, records), RecordAssembler::Status::kOk);
  EXPECT_TRUE(records.empty());
  EXPECT_FALSE(assembler.idle());
}

TEST(RecordAssembler, AllocatesAsBytesArriveNotWhatTheHeaderClaims) {
  RecordAssembler assembler(1 << 20);
  std::vector<Bytes> records;
  Bytes start{0x80, 0x0f, 0xff, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8};  // Claims 1 MiB - 16; sends 8.
  ASSERT_EQ(assembler.Feed(start, records), RecordAssembler::Status::kOk);
  EXPECT_LT(assembler.held_bytes(), 4096u);
  assembler.Reset();
  EXPECT_EQ(assembler.held_bytes(), 0u);
  EXPECT_TRUE(assembler.idle());
}

TEST(RecordAssembler, OneByteFragmentsReassembleInLinearTime) {
  // 512 KiB of 1-byte fragments: each fragment used to reallocate the whole record (3.9 s of
  // CPU for this size in a release build); linear, it is milliseconds even under sanitizers.
  constexpr size_t kSize = 512 * 1024;
  Bytes stream(kSize * 5);
  for (size_t i = 0; i < kSize; ++i) {
    stream[i * 5] = i + 1 == kSize ? 0x80 : 0;
    stream[i * 5 + 3] = 1;
    stream[i * 5 + 4] = static_cast<uint8_t>(i);
  }
  RecordAssembler assembler(RecordLimits{.max_record_size = 1 << 20,
                                         .max_fragments = std::numeric_limits<size_t>::max()});
  std::vector<Bytes> records;
  const auto start = std::chrono::steady_clock::now();
  for (size_t offset = 0; offset < stream.size(); offset += 64 * 1024) {
    const size_t n = std::min<size_t>(64 * 1024, stream.size() - offset);
    ASSERT_EQ(assembler.Feed(std::span(stream).subspan(offset, n), records),
              RecordAssembler::Status::kOk);
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].size(), kSize);
  EXPECT_LT(elapsed, std::chrono::milliseconds(500));
}

TEST(RecordAssembler, RefusesARecordInTooManyFragments) {
  RecordAssembler assembler(RecordLimits{.max_record_size = 1024, .max_fragments = 3});
  std::vector<Bytes> records;
  Bytes three = Fragment({1}, false);
  for (int i = 0; i < 2; ++i) {
    Bytes more = Fragment({2}, i == 1);
    three.insert(three.end(), more.begin(), more.end());
  }
  ASSERT_EQ(assembler.Feed(three, records), RecordAssembler::Status::kOk);
  ASSERT_EQ(records.size(), 1u) << "three fragments are allowed";
  Bytes empties;
  for (int i = 0; i < 4; ++i) {
    Bytes empty = Fragment({}, false);  // Empty fragments count as well.
    empties.insert(empties.end(), empty.begin(), empty.end());
  }
  EXPECT_EQ(assembler.Feed(empties, records), RecordAssembler::Status::kTooManyFragments);
}

TEST(BeginFinishRecord, WritesALastFragmentMark) {
  Bytes out{0xee};
  size_t mark = BeginRecord(out);
  out.push_back(1);
  out.push_back(2);
  FinishRecord(out, mark);
  EXPECT_EQ(out, (Bytes{0xee, 0x80, 0, 0, 2, 1, 2}));
}

}  // namespace
}  // namespace nlockd::rpc
