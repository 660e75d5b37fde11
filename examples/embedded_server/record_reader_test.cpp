// SPDX-License-Identifier: Apache-2.0
#include "record_reader.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace example {
namespace {

using Bytes = std::vector<uint8_t>;

// A fragment: its mark (last or not) and `payload`.
Bytes Fragment(const std::string& payload, bool last = true) {
  const uint32_t mark = (last ? 0x80000000U : 0) | static_cast<uint32_t>(payload.size());
  Bytes out{static_cast<uint8_t>(mark >> 24), static_cast<uint8_t>(mark >> 16),
            static_cast<uint8_t>(mark >> 8), static_cast<uint8_t>(mark)};
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

Bytes Join(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

// Feeds `stream` in reads of at most `read_size` bytes and renders what comes out:
// each record as "[payload]", then "too-large" if the reader gave up.
std::string ReadAll(RecordReader& reader, const Bytes& stream, size_t read_size) {
  std::string out;
  size_t pos = 0;
  while (pos < stream.size()) {
    std::span<uint8_t> space = reader.Space();
    const size_t n = std::min({read_size, space.size(), stream.size() - pos});
    std::copy_n(stream.begin() + static_cast<std::ptrdiff_t>(pos), n, space.begin());
    pos += n;
    reader.Filled(n);
    std::span<const uint8_t> record;
    RecordReader::Status status;
    while ((status = reader.Next(record)) == RecordReader::Status::kRecord) {
      out += "[" + std::string(record.begin(), record.end()) + "]";
    }
    if (status == RecordReader::Status::kTooLarge) return out + "too-large";
  }
  return out;
}

TEST(RecordReader, SeveralRecordsInOneReadComeOutInOrder) {
  RecordReader reader(1024);
  EXPECT_EQ(ReadAll(reader, Join({Fragment("one"), Fragment("two"), Fragment("three")}), 1 << 20),
            "[one][two][three]");
}

TEST(RecordReader, RecordsSplitAcrossReadsAtEveryByte) {
  const Bytes stream = Join({Fragment("first call"), Fragment("second"), Fragment("")});
  for (size_t read_size = 1; read_size <= stream.size(); ++read_size) {
    RecordReader reader(1024);
    EXPECT_EQ(ReadAll(reader, stream, read_size), "[first call][second][]") << read_size;
  }
}

TEST(RecordReader, FragmentsAreJoinedIntoOneRecord) {
  RecordReader reader(1024);
  const Bytes stream =
      Join({Fragment("ab", false), Fragment("cd", false), Fragment("ef"), Fragment("next")});
  EXPECT_EQ(ReadAll(reader, stream, 3), "[abcdef][next]");
}

TEST(RecordReader, ARecordLargerThanOneReadBufferGrowsIt) {
  RecordReader reader(1 << 20);
  const std::string big(100 * 1024, 'x');
  EXPECT_EQ(ReadAll(reader, Join({Fragment(big), Fragment("after")}), 1 << 20),
            "[" + big + "][after]");
}

TEST(RecordReader, ARecordOverTheLimitStopsBeforeItIsRead) {
  RecordReader reader(8);
  EXPECT_EQ(ReadAll(reader, Join({Fragment("12345678"), Fragment("123456789")}), 1 << 20),
            "[12345678]too-large");
  // The limit covers all fragments of a record together.
  RecordReader joined(8);
  EXPECT_EQ(ReadAll(joined, Join({Fragment("12345", false), Fragment("6789")}), 1 << 20),
            "too-large");
}

}  // namespace
}  // namespace example
