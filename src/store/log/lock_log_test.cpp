// SPDX-License-Identifier: Apache-2.0
#include "store/log/lock_log.hpp"

#include <algorithm>
#include <fstream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "store/log/crc32c.hpp"
#include "store/log/old_format_log_test_data.hpp"
#include "store/memory/memory_store.hpp"
#include "store/testing/store_test_util.hpp"
#include "testutil/temp_dir.hpp"

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

TEST(LockLog, Crc32cIsTheCastagnoliCrcInHardwareAndSoftwareAlike) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283U);  // RFC 3720's check value
  EXPECT_EQ(Crc32cSoftware("123456789"), 0xE3069283U);
  EXPECT_EQ(Crc32c(""), 0U);
  std::string long_input;
  for (int i = 0; i < 1000; ++i) long_input.push_back(static_cast<char>(i * 7 + 3));
  // Every split of the eight-byte steps and the tail, at every alignment.
  for (size_t from = 0; from < 8; ++from) {
    for (size_t n = 0; n < 70; ++n) {
      const std::string_view bytes = std::string_view(long_input).substr(from, n);
      uint32_t c = 0xFFFFFFFFU;
      for (const char byte : bytes) {
        c ^= static_cast<uint8_t>(byte);
        for (int k = 0; k < 8; ++k) c = (c & 1U) != 0 ? 0x82F63B78U ^ (c >> 1) : c >> 1;
      }
      EXPECT_EQ(Crc32c(bytes), c ^ 0xFFFFFFFFU) << from << " " << n;
      EXPECT_EQ(Crc32cSoftware(bytes), c ^ 0xFFFFFFFFU) << from << " " << n;
    }
  }
}

TEST(LockLog, RecordsAreWrittenInTheCurrentFormatWithItsChecksum) {
  const std::string record = EncodeLogRecord(SampleOps()[1]);
  const auto byte = [&](size_t i) {
    return static_cast<uint32_t>(static_cast<uint8_t>(record[i]));
  };
  const uint32_t word = byte(0) | byte(1) << 8 | byte(2) << 16 | byte(3) << 24;
  EXPECT_EQ(word >> 28, static_cast<uint32_t>(LogFormat::kCrc32c));
  EXPECT_EQ(word & 0x0FFFFFFFU, record.size() - 8);
  const uint32_t crc = byte(4) | byte(5) << 8 | byte(6) << 16 | byte(7) << 24;
  EXPECT_EQ(crc, Crc32c(std::string_view(record).substr(8)));
}

// A log the first format's nlockd left (its own bytes, old_format_log_test_data.hpp) decodes
// to what it wrote; so do records of both formats in one log.
TEST(LockLog, ALogOfTheFirstFormatStillDecodes) {
  size_t valid = 0;
  const std::vector<LoggedOp> ops = DecodeLogRecords(testdata::kOldFormatLog, &valid);
  EXPECT_EQ(valid, testdata::kOldFormatLog.size());
  ASSERT_EQ(ops.size(), 3U);
  const auto& first = std::get<LockChangesOp>(ops[0]).changes;
  ASSERT_EQ(first.size(), 2U);
  const auto& replace = std::get<ReplaceLocks>(first[0]);
  EXPECT_EQ(replace.file_key, "fh-1");
  EXPECT_EQ(replace.host, "client-a");
  EXPECT_EQ(replace.svid, 7);
  EXPECT_EQ(replace.owner_handle, "oh-a");
  EXPECT_EQ(replace.ranges, (std::vector<LockRange>{{true, 0, 10}, {false, 20, 5}}));
  EXPECT_FALSE(replace.within.has_value());
  EXPECT_EQ(std::get<PutShare>(first[1]).share.host, "client-b");
  EXPECT_EQ(std::get<ReplaceLocks>(std::get<LockChangesOp>(ops[1]).changes.at(0)).within,
            (OffsetSpan{100, 100}));
  EXPECT_EQ(std::get<ReleaseHostOp>(ops[2]).host, "client-c");
  // Re-encoded in the old format, the bytes are the old ones: the test data is what it says.
  std::string old;
  for (const LoggedOp& op : ops) EncodeLogRecordTo(op, old, LogFormat::kCrc32);
  EXPECT_EQ(old, testdata::kOldFormatLog);

  std::string mixed(testdata::kOldFormatLog);
  for (const LoggedOp& op : SampleOps()) EncodeLogRecordTo(op, mixed);
  EXPECT_EQ(DecodeLogRecords(mixed).size(), 3U + SampleOps().size());
  // The old format's checksum is still checked.
  std::string damaged(testdata::kOldFormatLog);
  damaged[20] = static_cast<char>(damaged[20] ^ 1);
  EXPECT_TRUE(DecodeLogRecords(damaged).empty());
}

TEST(LockLog, ARecordOfAFormatThisBuildDoesNotKnowEndsTheLog) {
  std::string bytes = EncodeLogRecord(SampleOps()[0]);
  const size_t first = bytes.size();
  bytes += EncodeLogRecord(SampleOps()[1]);
  bytes[first + 3] = static_cast<char>(bytes[first + 3] | 0x20);  // format 3
  size_t valid = 0;
  EXPECT_EQ(DecodeLogRecords(bytes, &valid).size(), 1U);
  EXPECT_EQ(valid, first);
  EXPECT_EQ(DecodeLogRecords(bytes, nullptr, Checksums::kTrust).size(), 1U);
}

// The journal's records, built change by change from views, are the bytes of the same op.
TEST(LockLog, ARecordBuiltFromViewsIsTheRecordOfTheSameOp) {
  const LockChangesOp op = std::get<LockChangesOp>(SampleOps()[0]);
  std::string built = "prefix";
  LockChangesRecord record(built);
  for (const LockChange& change : op.changes) {
    if (const auto* r = std::get_if<ReplaceLocks>(&change)) {
      record.Add(
          ReplaceLocksView{r->file_key, r->host, r->svid, r->owner_handle, r->ranges, r->within});
    } else {
      record.Add(change);
    }
  }
  record.Finish();
  EXPECT_EQ(record.changes(), op.changes.size());
  EXPECT_EQ(built, "prefix" + EncodeLogRecord(op));

  std::string empty;
  LockChangesRecord none(empty);
  none.Finish();
  EXPECT_EQ(empty, EncodeLogRecord(LockChangesOp{}));
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

// The hand-on thread reads back records this process encoded in memory: it skips their
// checksums, and only their checksums.
TEST(LockLog, TrustedRecordsSkipOnlyTheChecksum) {
  std::string bytes;
  for (const LoggedOp& op : SampleOps()) bytes += EncodeLogRecord(op);
  std::string bad_crc = bytes;
  bad_crc[4] = static_cast<char>(bad_crc[4] ^ 0x40);  // the first record's CRC field
  EXPECT_TRUE(DecodeLogRecords(bad_crc).empty());
  EXPECT_EQ(DecodeLogRecords(bad_crc, nullptr, Checksums::kTrust).size(), SampleOps().size());
  std::string cut = bytes.substr(0, bytes.size() - 1);
  EXPECT_EQ(DecodeLogRecords(cut, nullptr, Checksums::kTrust).size(), SampleOps().size() - 1)
      << "a record cut short still ends the log";
}

TEST(LockLog, ASegmentHoldsWhatWasAppended) {
  nlockd::testutil::TempDir dir("lock-log");
  const std::string path = dir.path() + "/log.0";
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

TEST(LockLog, AMappedSegmentHoldsEveryRecordWhileOpenAndOnlyThemOnceClosed) {
  nlockd::testutil::TempDir dir("lock-log");
  const std::string path = dir.path() + "/log.0";
  std::string expected;
  {
    LogSegment segment(path, 1U << 20);
    ASSERT_TRUE(segment.mapped());
    for (const LoggedOp& op : SampleOps()) {
      const std::string record = EncodeLogRecord(op);
      segment.Append(record);
      expected += record;
    }
    EXPECT_EQ(segment.size(), expected.size());
    // What a process killed now leaves: the records, then the reserved space as zeros, which
    // ends the log.
    const std::string open = ReadLogFile(path);
    EXPECT_EQ(open.size(), 1U << 20);
    size_t valid = 0;
    EXPECT_EQ(DecodeLogRecords(open, &valid).size(), SampleOps().size());
    EXPECT_EQ(valid, expected.size());
    EXPECT_EQ(open.substr(0, valid), expected);
  }
  EXPECT_EQ(ReadLogFile(path), expected);
}

TEST(LockLog, ReadLogRecordsReadsWhatAKilledProcessLeftAndWhatAClosedSegmentHolds) {
  nlockd::testutil::TempDir dir("lock-log");
  const std::string path = dir.path() + "/log.0";
  EXPECT_TRUE(ReadLogRecords(path).empty());  // no file
  {
    LogSegment segment(path, 1U << 20);
    EXPECT_TRUE(ReadLogRecords(path).empty());  // only reserved zeros
    for (const LoggedOp& op : SampleOps()) segment.Append(EncodeLogRecord(op));
    // Killed now: the records, then the reserved space.
    EXPECT_EQ(Render(ReadLogRecords(path)), Render(SampleOps()));
  }
  EXPECT_EQ(Render(ReadLogRecords(path)), Render(SampleOps()));
  // A torn last record ends the log, as DecodeLogRecords reads it.
  const std::string whole = ReadLogFile(path);
  {
    std::ofstream cut(path, std::ios::binary | std::ios::trunc);
    cut << whole.substr(0, whole.size() - 3);
  }
  EXPECT_EQ(ReadLogRecords(path).size(), SampleOps().size() - 1);
  { std::ofstream empty(path, std::ios::binary | std::ios::trunc); }
  EXPECT_TRUE(ReadLogRecords(path).empty());
}

TEST(LockLog, RecordsPastAMappedSegmentsCapacityAreWrittenAfterIt) {
  nlockd::testutil::TempDir dir("lock-log");
  const std::string path = dir.path() + "/log.0";
  std::string expected;
  const size_t first = EncodeLogRecord(SampleOps()[0]).size();
  {
    // Room for the first record and part of the second: the second goes past the mapping.
    LogSegment segment(path, first + 5);
    ASSERT_TRUE(segment.mapped());
    for (const LoggedOp& op : SampleOps()) {
      const std::string record = EncodeLogRecord(op);
      segment.Append(record);
      expected += record;
    }
    EXPECT_EQ(ReadLogFile(path), expected);
  }
  EXPECT_EQ(ReadLogFile(path), expected);
  EXPECT_EQ(DecodeLogRecords(expected).size(), SampleOps().size());
}

ReplaceLocks Replace(std::string host, int32_t svid, std::vector<LockRange> ranges,
                     std::optional<OffsetSpan> within) {
  return ReplaceLocks{"fh", std::move(host), svid, "oh", std::move(ranges), within};
}

TEST(CoalesceLogged, ALockAndItsUnlockLeaveTheUnlock) {
  const OffsetSpan span{10, 19};
  std::vector<LoggedOp> ops{LockChangesOp{{Replace("a", 1, {{true, 10, 10}}, span)}},
                            LockChangesOp{{Replace("a", 1, {}, span)}},
                            LockChangesOp{{Replace("a", 1, {{true, 10, 10}}, span)}},
                            LockChangesOp{{Replace("a", 1, {}, span)}}};
  const std::vector<CoalescedOp> kept = CoalesceLogged(ops);
  ASSERT_EQ(kept.size(), 1U);
  EXPECT_EQ(kept[0].through, 3U);
  EXPECT_EQ(Render({kept[0].op}), Render({LockChangesOp{{Replace("a", 1, {}, span)}}}));
}

TEST(CoalesceLogged, KeepsWhatNoSingleLaterWriteSetsInOrder) {
  std::vector<LoggedOp> ops{
      LockChangesOp{{Replace("a", 1, {{true, 0, 5}}, OffsetSpan{0, 4}),
                     Replace("a", 2, {{true, 0, 5}}, OffsetSpan{0, 4})}},
      // Wider than the span before: a later write within 0..4 alone does not cover it.
      LockChangesOp{{Replace("a", 1, {{true, 0, 9}}, OffsetSpan{0, 8})}},
      LockChangesOp{{Replace("a", 1, {}, OffsetSpan{0, 4})}},
      LockChangesOp{{PutShare{ShareRecord{"fh", "a", "oh", 1, 1}}}},
  };
  const std::vector<CoalescedOp> kept = CoalesceLogged(ops);
  ASSERT_EQ(kept.size(), 1U);
  EXPECT_EQ(kept[0].through, 3U);
  const auto& changes = std::get<LockChangesOp>(kept[0].op).changes;
  // The first of owner 1 is covered by its second (0..8); owner 2's stays.
  ASSERT_EQ(changes.size(), 4U);
  EXPECT_EQ(std::get<ReplaceLocks>(changes[0]).svid, 2);
  EXPECT_EQ(std::get<ReplaceLocks>(changes[1]).within, (OffsetSpan{0, 8}));
  EXPECT_EQ(std::get<ReplaceLocks>(changes[2]).within, (OffsetSpan{0, 4}));
  EXPECT_TRUE(std::holds_alternative<PutShare>(changes[3]));
}

TEST(CoalesceLogged, AHostReleaseOverwritesThatHostsEarlierChangesAndStaysInPlace) {
  std::vector<LoggedOp> ops{
      LockChangesOp{{Replace("a", 1, {{true, 0, 5}}, {}), Replace("b", 1, {{true, 0, 5}}, {}),
                     PutShare{ShareRecord{"fh", "a", "oh", 1, 1}}}},
      ReleaseHostOp{"a"},
      LockChangesOp{{Replace("a", 1, {{true, 0, 5}}, {})}},
      ReleaseHostOp{"c"},
      ReleaseHostOp{"c"},
  };
  const std::vector<CoalescedOp> kept = CoalesceLogged(ops);
  ASSERT_EQ(kept.size(), 4U);
  EXPECT_EQ(std::get<LockChangesOp>(kept[0].op).changes.size(), 1U);  // host b's
  EXPECT_EQ(kept[0].through, 0U);
  EXPECT_EQ(std::get<ReleaseHostOp>(kept[1].op).host, "a");
  EXPECT_EQ(kept[1].through, 1U);
  EXPECT_EQ(std::get<LockChangesOp>(kept[2].op).changes.size(), 1U);
  EXPECT_EQ(kept[2].through, 3U);  // and the first release of c, which the second overwrites
  EXPECT_EQ(std::get<ReleaseHostOp>(kept[3].op).host, "c");  // the first of two dropped
  EXPECT_EQ(kept[3].through, 4U);
}

TEST(CoalesceLogged, EmptyWritesAreAccountedFor) {
  EXPECT_TRUE(CoalesceLogged({}).empty());
  const std::vector<CoalescedOp> kept = CoalesceLogged({LockChangesOp{}, LockChangesOp{}});
  ASSERT_EQ(kept.size(), 1U);
  EXPECT_EQ(kept[0].through, 1U);
}

// Random lock-table writes over a few owners, offsets and hosts.
std::vector<LoggedOp> RandomOps(std::mt19937& rng, size_t count) {
  auto pick = [&](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
  const std::vector<std::string> hosts{"a", "b", "c"};
  std::vector<LoggedOp> ops;
  for (size_t i = 0; i < count; ++i) {
    if (pick(12) == 0) {
      ops.push_back(ReleaseHostOp{hosts[pick(3)]});
      continue;
    }
    LockChangesOp op;
    const uint32_t changes = 1 + pick(3);
    for (uint32_t c = 0; c < changes; ++c) {
      const std::string file = pick(2) == 0 ? "f1" : "f2";
      const std::string& host = hosts[pick(3)];
      const auto svid = static_cast<int32_t>(pick(2));
      const uint64_t at = pick(8);
      switch (pick(6)) {
        case 0:
        case 1:
        case 2: {
          ReplaceLocks r{file, host, svid, "oh", {}, {}};
          uint64_t first = 0;
          uint64_t last = 7;
          if (pick(4) != 0) {
            first = at;
            last = at + pick(4);
            r.within = OffsetSpan{first, last};
          }
          for (uint64_t o = first; o <= last; ++o) {
            if (pick(3) == 0) r.ranges.push_back(LockRange{pick(2) == 0, o, 1 + pick(3)});
          }
          op.changes.push_back(std::move(r));
          break;
        }
        case 3:
          op.changes.push_back(PutLock{LockRecord{file, host, svid, "oh", true, at, 1}});
          break;
        case 4:
          op.changes.push_back(RemoveLock{LockRecord{file, host, svid, "oh", true, at, 1}});
          break;
        default:
          if (pick(2) == 0) {
            op.changes.push_back(
                PutShare{ShareRecord{file, host, "oh", 1, static_cast<int32_t>(at)}});
          } else {
            op.changes.push_back(RemoveShare{ShareRecord{file, host, "oh", 0, 0}});
          }
      }
    }
    ops.push_back(std::move(op));
  }
  return ops;
}

void Apply(Store& store, const LoggedOp& op) {
  if (const auto* release = std::get_if<ReleaseHostOp>(&op)) {
    testutil::Sync([&](Done d) { store.ReleaseHost(release->host, d); });
  } else {
    testutil::Sync([&](Done d) { store.ApplyLockChanges(std::get<LockChangesOp>(op).changes, d); });
  }
}

// The lock and share tables, sorted, as text.
std::string Table(Store& store) {
  LoadedState state = store.LoadAll();
  std::vector<std::string> rows;
  for (const LockRecord& l : state.locks) {
    rows.push_back(fmt::format("L {} {} {} {} {} {} {}", l.file_key, l.host, l.svid, l.owner_handle,
                               l.exclusive, l.offset, l.length));
  }
  for (const ShareRecord& s : state.shares) {
    rows.push_back(
        fmt::format("S {} {} {} {} {}", s.file_key, s.host, s.owner_handle, s.mode, s.access));
  }
  std::sort(rows.begin(), rows.end());
  std::string out;
  for (const std::string& row : rows) out += row + "\n";
  return out;
}

// Applying the coalesced writes gives the table applying every write gives, from any table; and
// so does a crash after any prefix of them followed by a replay of the log from any record not
// yet reported applied (what the log still holds then).
TEST(CoalesceLogged, ConvergesToTheSameTableAsEveryWriteAndAfterACrashAndReplay) {
  std::mt19937 rng(20261126);
  size_t changes_in = 0;
  size_t changes_kept = 0;
  for (int round = 0; round < 150; ++round) {
    const std::vector<LoggedOp> before = RandomOps(rng, 6);
    const std::vector<LoggedOp> ops = RandomOps(rng, 1 + rng() % 30);
    MemoryStore all(StoreOptions{});
    for (const LoggedOp& op : before) Apply(all, op);
    for (const LoggedOp& op : ops) Apply(all, op);
    const std::string expected = Table(all);

    const std::vector<CoalescedOp> kept = CoalesceLogged(ops);
    ASSERT_FALSE(kept.empty());
    for (const LoggedOp& op : ops) {
      const auto* c = std::get_if<LockChangesOp>(&op);
      changes_in += c != nullptr ? c->changes.size() : 1;
    }
    for (const CoalescedOp& k : kept) {
      const auto* c = std::get_if<LockChangesOp>(&k.op);
      changes_kept += c != nullptr ? c->changes.size() : 1;
    }
    ASSERT_EQ(kept.back().through, ops.size() - 1);
    for (size_t applied = 0; applied <= kept.size(); ++applied) {
      MemoryStore crashed(StoreOptions{});
      for (const LoggedOp& op : before) Apply(crashed, op);
      for (size_t k = 0; k < applied; ++k) Apply(crashed, kept[k].op);
      // The log still holds every record after the last one reported applied, maybe more.
      const size_t unapplied = applied == 0 ? 0 : kept[applied - 1].through + 1;
      for (const size_t from : {size_t{0}, unapplied / 2, unapplied}) {
        MemoryStore replayed(StoreOptions{});
        for (const LoggedOp& op : before) Apply(replayed, op);
        for (size_t k = 0; k < applied; ++k) Apply(replayed, kept[k].op);
        for (size_t i = from; i < ops.size(); ++i) Apply(replayed, ops[i]);
        ASSERT_EQ(Table(replayed), expected)
            << "round " << round << " applied " << applied << " replay from " << from;
      }
      if (applied == kept.size()) {
        EXPECT_EQ(Table(crashed), expected) << "round " << round;
      }
    }
  }
  // The rounds did drop changes (else they would prove nothing).
  EXPECT_LT(changes_kept, changes_in * 3 / 4);
}

}  // namespace
}  // namespace nlockd::store
