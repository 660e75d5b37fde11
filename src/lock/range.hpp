// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

namespace nlockd::lock {

// A non-empty byte range [first, last] with both ends inclusive, so that a range reaching the
// last addressable byte needs no end value past UINT64_MAX. "To the end of the file" (NLM's
// l_len 0) is last == kMaxOffset. A value type: cheap to copy, always valid.
class ByteRange {
 public:
  static constexpr uint64_t kMaxOffset = std::numeric_limits<uint64_t>::max();

  // The whole file, [0, end].
  constexpr ByteRange() = default;

  // NLM/fcntl form (RFC 1813 App. II): `length` bytes from `offset`, length 0
  // meaning to the end. nullopt when offset + length - 1 does not fit in 64 bits (NLM4_FBIG).
  static constexpr std::optional<ByteRange> FromOffsetLength(uint64_t offset, uint64_t length) {
    if (length == 0) return ByteRange(offset, kMaxOffset);
    if (length - 1 > kMaxOffset - offset) return std::nullopt;
    return ByteRange(offset, offset + (length - 1));
  }

  // REQUIRES: first <= last.
  static ByteRange FromFirstLast(uint64_t first, uint64_t last);

  constexpr uint64_t first() const { return first_; }
  constexpr uint64_t last() const { return last_; }
  constexpr bool ToEnd() const { return last_ == kMaxOffset; }

  // The NLM form again: the offset, and the length with 0 for a range that reaches the end
  // (a range [x, UINT64_MAX] given with an explicit length comes back as length 0).
  constexpr uint64_t offset() const { return first_; }
  constexpr uint64_t length() const { return ToEnd() ? 0 : last_ - first_ + 1; }

  constexpr bool Overlaps(const ByteRange& other) const {
    return first_ <= other.last_ && other.first_ <= last_;
  }
  constexpr bool Contains(const ByteRange& other) const {
    return first_ <= other.first_ && other.last_ <= last_;
  }
  // Overlapping or adjacent: the union is one range.
  constexpr bool Touches(const ByteRange& other) const {
    return Overlaps(other) || (last_ != kMaxOffset && last_ + 1 == other.first_) ||
           (other.last_ != kMaxOffset && other.last_ + 1 == first_);
  }
  // The smallest range that contains both.
  constexpr ByteRange Hull(const ByteRange& other) const {
    return ByteRange(first_ < other.first_ ? first_ : other.first_,
                     last_ > other.last_ ? last_ : other.last_);
  }

  friend constexpr bool operator==(const ByteRange&, const ByteRange&) = default;

  // "[10,19]" or "[10,end]".
  std::string ToString() const;

 private:
  constexpr ByteRange(uint64_t first, uint64_t last) : first_(first), last_(last) {}

  uint64_t first_ = 0;
  uint64_t last_ = kMaxOffset;
};

}  // namespace nlockd::lock
