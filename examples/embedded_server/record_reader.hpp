// SPDX-License-Identifier: Apache-2.0
#pragma once

// ONC RPC record marking over TCP (RFC 5531 section 11), read from a buffered stream: a read
// fills the buffer with as many bytes as the socket has (often several pipelined calls), then
// the records in it are taken out one by one without copying. No I/O, so that it is tested on
// its own (record_reader_test.cpp).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace example {

class RecordReader {
 public:
  enum class Status {
    kRecord,    // A whole record is ready.
    kNeedMore,  // Read more bytes into Space().
    kTooLarge,  // A record would exceed the limit: close the connection.
  };

  // `max_record` bounds one record (all its fragments), so that a peer cannot make the host
  // allocate without limit.
  explicit RecordReader(size_t max_record) : max_record_(max_record), buffer_(kMinRead) {}

  // Where the next read puts its bytes: at least kMinRead free, or room for the rest of the
  // fragment being read. Invalidates the record Next() returned last.
  std::span<uint8_t> Space() {
    if (begin_ == end_) {
      begin_ = end_ = 0;
    } else if (begin_ > 0) {
      std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    const size_t wanted = std::max(end_ + kMinRead, FragmentBytes());
    if (buffer_.size() < wanted) buffer_.resize(std::max(wanted, 2 * buffer_.size()));
    return std::span(buffer_).subspan(end_);
  }

  // `n` bytes were read into Space().
  void Filled(size_t n) { end_ += n; }

  // Takes the next whole record out of the bytes read. For kRecord, `record` points into the
  // reader until the next Space() or Next().
  Status Next(std::span<const uint8_t>& record) {
    if (assembled_done_) {
      assembled_.clear();
      assembled_done_ = false;
    }
    for (;;) {
      if (end_ - begin_ < 4) return Status::kNeedMore;
      const uint8_t* mark_bytes = buffer_.data() + begin_;
      const uint32_t mark = (uint32_t{mark_bytes[0]} << 24) | (uint32_t{mark_bytes[1]} << 16) |
                            (uint32_t{mark_bytes[2]} << 8) | mark_bytes[3];
      const size_t length = mark & 0x7fffffffU;
      const bool last = (mark & 0x80000000U) != 0;
      if (assembled_.size() + length > max_record_) return Status::kTooLarge;
      if (end_ - begin_ - 4 < length) return Status::kNeedMore;
      const std::span<const uint8_t> fragment(buffer_.data() + begin_ + 4, length);
      begin_ += 4 + length;
      if (last && assembled_.empty()) {
        record = fragment;  // The common case: one fragment, read in place.
        return Status::kRecord;
      }
      assembled_.insert(assembled_.end(), fragment.begin(), fragment.end());
      if (last) {
        record = assembled_;
        assembled_done_ = true;
        return Status::kRecord;
      }
    }
  }

 private:
  static constexpr size_t kMinRead = 16 * 1024;

  // The bytes the fragment at begin_ takes with its mark, once the mark is in; else 0.
  size_t FragmentBytes() const {
    if (end_ - begin_ < 4) return 0;
    const uint8_t* m = buffer_.data() + begin_;
    const uint32_t mark =
        (uint32_t{m[0]} << 24) | (uint32_t{m[1]} << 16) | (uint32_t{m[2]} << 8) | m[3];
    return 4 + (mark & 0x7fffffffU);
  }

  size_t max_record_;
  std::vector<uint8_t> buffer_;
  size_t begin_ = 0;  // The first byte not yet taken.
  size_t end_ = 0;    // One past the last byte read.
  // The fragments of a record that came in several, joined.
  std::vector<uint8_t> assembled_;
  bool assembled_done_ = false;
};

}  // namespace example
