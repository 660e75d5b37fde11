// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

// TCP record marking (RFC 5531 §11): a record is a sequence of fragments, each preceded by a
// 4-byte header whose high bit marks the last fragment and whose low 31 bits give its length.
namespace nlockd::rpc {

inline constexpr uint32_t kLastFragmentBit = 0x80000000u;
inline constexpr size_t kRecordMarkSize = 4;

struct RecordLimits {
  // A record larger than this is refused before its bytes arrive, so that a peer cannot make
  // us buffer the 2 GiB a header can claim.
  size_t max_record_size = 1 << 20;
  // A record split into more fragments than this is refused: 1-byte fragments cost five wire
  // bytes and one header parse per byte of record. Clients send one fragment per record, or
  // split at their buffer size (libtirpc: 4 KiB and up), so a 1 MiB record needs at most 256.
  size_t max_fragments = 1024;
};

// Reassembles records from a byte stream. No I/O: the connection feeds it what it read.
// A record's buffer grows as its bytes arrive (geometrically, so reassembly is linear in the
// bytes), never from the length a header claims: a peer that announces a large record and
// sends nothing more holds only what it sent.
class RecordAssembler {
 public:
  enum class Status { kOk, kRecordTooLarge, kTooManyFragments };

  explicit RecordAssembler(RecordLimits limits) : limits_(limits) {}
  explicit RecordAssembler(size_t max_record_size)
      : RecordAssembler(RecordLimits{.max_record_size = max_record_size}) {}

  // Consumes `bytes` up to the end or up to an error, appending each completed record to
  // `records`. After an error the stream cannot be resynchronised: close the connection.
  Status Feed(std::span<const uint8_t> bytes, std::vector<std::vector<uint8_t>>& records);

  // True when no partial record is buffered.
  bool idle() const {
    return header_bytes_ == 0 && fragment_left_ == 0 && fragments_ == 0 && record_.empty();
  }
  // Memory held for the record being assembled.
  size_t held_bytes() const { return record_.capacity(); }
  // Drops the partial record and its memory.
  void Reset();

 private:
  RecordLimits limits_;
  uint8_t header_[kRecordMarkSize] = {};
  size_t header_bytes_ = 0;
  size_t fragment_left_ = 0;
  size_t fragments_ = 0;  // Fragment headers read for the record being assembled.
  bool last_fragment_ = false;
  bool in_fragment_ = false;
  std::vector<uint8_t> record_;
};

// Writes a placeholder record mark at the end of `out`; returns its offset for FinishRecord.
size_t BeginRecord(std::vector<uint8_t>& out);
// Fills in the mark written by BeginRecord: one last fragment holding everything after it.
void FinishRecord(std::vector<uint8_t>& out, size_t mark_offset);

}  // namespace nlockd::rpc
