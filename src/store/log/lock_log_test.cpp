#include "store/log/lock_log.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "store/testing/store_test_util.hpp"

namespace nlockd::store {
namespace {

LockRecord Lock(uint64_t offset) {
  return LockRecord{"fh\x00\xff", "client-a", 7, "oh", true, offset, 10};
}

std::vector<LoggedOp> SampleOps() {
  ReplaceLocks replace;
  replace.file_key = std::string("f\0h", 3);
  replace.host = "client-b";
  replace.svid = -3;
  replace.owner_handle = "owner";
  replace.ranges = {LockRange{false, 0, 5}, LockRange{true, 9, 0}};
  replace.within = OffsetSpan{0, UINT64_MAX};
  ReplaceLocks none = replace;
  none.ranges.clear();
  none.within.reset();
  LockChangesOp changes;
  changes.changes = {PutLock{Lock(1)},
                     RemoveLock{Lock(2)},
                     replace,
                     none,
                     PutShare{ShareRecord{"fh", "client-c", "oh", 2, 3}},
                     RemoveShare{ShareRecord{"fh", "client-c", "oh", 0, 0}}};
  return {changes, ReleaseHostOp{"client-d"}, LockChangesOp{}};
}

// The ops as text, for comparison.
std::string Render(const std::vector<LoggedOp>& ops) {
  std::string out;
  for (const LoggedOp& op : ops) {
    out += EncodeLogRecord(op);
    out += "|";
  }
  return out;
}

TEST(LockLog, CrcIsTheIeeeCrc32) {
  EXPECT_EQ(LogCrc32("123456789"), 0xCBF43926U);  // the standard check value
  EXPECT_EQ(LogCrc32(""), 0U);
  std::string long_input;
  for (int i = 0; i < 1000; ++i) long_input.push_back(static_cast<char>(i * 7));
  // Every split of the eight-byte steps and the tail agrees with the byte-wise definition.
  for (size_t n = 0; n < 40; ++n) {
    uint32_t c = 0xFFFFFFFFU;
    for (size_t i = 0; i < n; ++i) {
      c ^= static_cast<uint8_t>(long_input[i]);
      for (int k = 0; k < 8; ++k) c = (c & 1U) != 0 ? 0xEDB88320U ^ (c >> 1) : c >> 1;
    }
    EXPECT_EQ(LogCrc32(std::string_view(long_input).substr(0, n)), c ^ 0xFFFFFFFFU) << n;
  }
}

TEST(LockLog, RecordsDecodeToWhatWasEncoded) {
  std::string bytes;
  for (const LoggedOp& op : SampleOps()) bytes += EncodeLogRecord(op);
  size_t valid = 0;
  const std::vector<LoggedOp> decoded = DecodeLogRecords(bytes, &valid);
  EXPECT_EQ(valid, bytes.size());
  ASSERT_EQ(decoded.size(), 3U);
  EXPECT_EQ(Render(decoded), Render(SampleOps()));
  const auto& changes = std::get<LockChangesOp>(decoded[0]).changes;
  const auto& replace = std::get<ReplaceLocks>(changes[2]);
  EXPECT_EQ(replace.file_key, std::string("f\0h", 3));
  EXPECT_EQ(replace.svid, -3);
  EXPECT_EQ(replace.ranges, (std::vector<LockRange>{{false, 0, 5}, {true, 9, 0}}));
  EXPECT_EQ(replace.within, (OffsetSpan{0, UINT64_MAX}));
  EXPECT_EQ(std::get<ReleaseHostOp>(decoded[1]).host, "client-d");
}

TEST(LockLog, ATornLastRecordEndsTheLog) {
  std::string bytes;
  for (const LoggedOp& op : SampleOps()) bytes += EncodeLogRecord(op);
  const size_t first = EncodeLogRecord(SampleOps()[0]).size();
  const size_t two = first + EncodeLogRecord(SampleOps()[1]).size();
  for (size_t cut = two; cut < bytes.size(); ++cut) {
    size_t valid = 0;
    EXPECT_EQ(DecodeLogRecords(std::string_view(bytes).substr(0, cut), &valid).size(), 2U) << cut;
    EXPECT_EQ(valid, two);
  }
  for (size_t cut = 0; cut < first; ++cut) {
    EXPECT_TRUE(DecodeLogRecords(std::string_view(bytes).substr(0, cut)).empty()) << cut;
  }
}

TEST(LockLog, ADamagedRecordEndsTheLog) {
  std::string bytes;
  for (const LoggedOp& op : SampleOps()) bytes += EncodeLogRecord(op);
  const size_t first = EncodeLogRecord(SampleOps()[0]).size();
  for (size_t at = first; at < first + 12; ++at) {
    std::string damaged = bytes;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x40);
    EXPECT_EQ(DecodeLogRecords(damaged).size(), 1U) << at;
  }
  std::string huge = bytes.substr(0, first) + std::string("\xff\xff\xff\xff\0\0\0\0", 8);
  EXPECT_EQ(DecodeLogRecords(huge).size(), 1U);
}

TEST(LockLog, ASegmentHoldsWhatWasAppended) {
  testutil::TempDir dir;
  const std::string path = (dir.path() / "log.0").string();
  std::string expected;
  {
    LogSegment segment(path);
    for (const LoggedOp& op : SampleOps()) {
      const std::string record = EncodeLogRecord(op);
      segment.Append(record);
      expected += record;
    }
    EXPECT_EQ(segment.size(), expected.size());
  }
  EXPECT_EQ(ReadLogFile(path), expected);
  EXPECT_EQ(ReadLogFile(path + ".missing"), "");
}

}  // namespace
}  // namespace nlockd::store
