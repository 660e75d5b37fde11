// SPDX-License-Identifier: Apache-2.0
#include "rpc/record_marking.hpp"

#include <algorithm>

#include "base/error.hpp"

namespace nlockd::rpc {

RecordAssembler::Status RecordAssembler::Feed(std::span<const uint8_t> bytes,
                                              std::vector<std::vector<uint8_t>>& records) {
  while (!bytes.empty()) {
    if (!in_fragment_) {
      size_t take = std::min(kRecordMarkSize - header_bytes_, bytes.size());
      std::copy_n(bytes.begin(), take, header_ + header_bytes_);
      header_bytes_ += take;
      bytes = bytes.subspan(take);
      if (header_bytes_ < kRecordMarkSize) break;
      uint32_t mark = (uint32_t{header_[0]} << 24) | (uint32_t{header_[1]} << 16) |
                      (uint32_t{header_[2]} << 8) | uint32_t{header_[3]};
      header_bytes_ = 0;
      last_fragment_ = (mark & kLastFragmentBit) != 0;
      fragment_left_ = mark & ~kLastFragmentBit;
      if (fragment_left_ > limits_.max_record_size - record_.size()) {
        return Status::kRecordTooLarge;
      }
      if (++fragments_ > limits_.max_fragments) return Status::kTooManyFragments;
      in_fragment_ = true;
    }
    // No reserve from the header's claim: insert grows the buffer geometrically as bytes come.
    size_t take = std::min(fragment_left_, bytes.size());
    record_.insert(record_.end(), bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(take));
    fragment_left_ -= take;
    bytes = bytes.subspan(take);
    if (fragment_left_ == 0) {
      in_fragment_ = false;
      if (last_fragment_) {
        records.push_back(std::move(record_));
        record_ = std::vector<uint8_t>();
        fragments_ = 0;
      }
    }
  }
  return Status::kOk;
}

void RecordAssembler::Reset() {
  header_bytes_ = 0;
  fragment_left_ = 0;
  fragments_ = 0;
  last_fragment_ = false;
  in_fragment_ = false;
  record_ = std::vector<uint8_t>();  // Not `= {}`: that keeps the capacity.
}

size_t BeginRecord(std::vector<uint8_t>& out) {
  size_t offset = out.size();
  out.insert(out.end(), kRecordMarkSize, 0);
  return offset;
}

void FinishRecord(std::vector<uint8_t>& out, size_t mark_offset) {
  NLOCKD_REQUIRE(mark_offset + kRecordMarkSize <= out.size());
  size_t length = out.size() - mark_offset - kRecordMarkSize;
  NLOCKD_REQUIRE(length < kLastFragmentBit);
  uint32_t mark = kLastFragmentBit | static_cast<uint32_t>(length);
  out[mark_offset] = static_cast<uint8_t>(mark >> 24);
  out[mark_offset + 1] = static_cast<uint8_t>(mark >> 16);
  out[mark_offset + 2] = static_cast<uint8_t>(mark >> 8);
  out[mark_offset + 3] = static_cast<uint8_t>(mark);
}

}  // namespace nlockd::rpc
