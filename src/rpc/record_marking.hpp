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

// Reassembles records from a byte stream. No I/O: the connection feeds it what it read.
// The cap on a record's total size stops a peer from making us buffer up to the 2 GiB a
// header can claim: the record is refused before anything is allocated for it.
class RecordAssembler {
 public:
  enum class Status { kOk, kRecordTooLarge };

  explicit RecordAssembler(size_t max_record_size) : max_record_size_(max_record_size) {}

  // Consumes all of `bytes`, appending each completed record to `records`. After
  // kRecordTooLarge the stream cannot be resynchronised: close the connection.
  Status Feed(std::span<const uint8_t> bytes, std::vector<std::vector<uint8_t>>& records);

  // True when no partial record is buffered.
  bool idle() const { return header_bytes_ == 0 && fragment_left_ == 0 && record_.empty(); }

 private:
  size_t max_record_size_;
  uint8_t header_[kRecordMarkSize] = {};
  size_t header_bytes_ = 0;
  size_t fragment_left_ = 0;
  bool last_fragment_ = false;
  bool in_fragment_ = false;
  std::vector<uint8_t> record_;
};

// Writes a placeholder record mark at the end of `out`; returns its offset for FinishRecord.
size_t BeginRecord(std::vector<uint8_t>& out);
// Fills in the mark written by BeginRecord: one last fragment holding everything after it.
void FinishRecord(std::vector<uint8_t>& out, size_t mark_offset);

}  // namespace nlockd::rpc
