// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace nlockd::xdr {

// Why a decode failed. Untrusted bytes never throw: a failure is a value that names the field,
// and the dispatcher turns it into GARBAGE_ARGS.
enum class DecodeError {
  kTruncated,   // Fewer bytes left than the item needs.
  kTooLong,     // A length or count above the field's bound.
  kBadPadding,  // Non-zero padding after opaque data (RFC 4506 §4.10 says pad with zeros).
  kBadBool,     // A boolean other than 0 or 1 (RFC 4506 §4.4).
  kBadValue,    // A value outside its enum or union.
};

std::string_view ToString(DecodeError error);

struct DecodeFailure {
  DecodeError error;
  std::string_view field;  // Names the field in the decode call; points to a string literal.
  size_t offset;           // Where in the input the failing item starts.
};

// Reads XDR (RFC 4506) items from a byte span. Never reads past the span and never allocates a
// claimed length before checking it against both the field's bound and the bytes left, so a
// hostile 4-byte length costs nothing.
//
// Every read returns false on failure and records the first failure; later reads fail too, so a
// decode function can chain reads with && and ask failure() once at the end.
// REQUIRES: the span outlives the decoder.
class Decoder {
 public:
  explicit Decoder(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  [[nodiscard]] bool U32(uint32_t& out, std::string_view field);
  [[nodiscard]] bool I32(int32_t& out, std::string_view field);
  [[nodiscard]] bool U64(uint64_t& out, std::string_view field);
  [[nodiscard]] bool I64(int64_t& out, std::string_view field);
  [[nodiscard]] bool Bool(bool& out, std::string_view field);
  // An enum is an int32 (RFC 4506 §4.3); the caller checks its range with Fail() if needed.
  [[nodiscard]] bool Enum(int32_t& out, std::string_view field) { return I32(out, field); }

  // Fixed-length opaque: exactly out.size() bytes, then padding.
  [[nodiscard]] bool FixedOpaque(std::span<uint8_t> out, std::string_view field);
  template <size_t N>
  [[nodiscard]] bool FixedOpaque(std::array<uint8_t, N>& out, std::string_view field) {
    return FixedOpaque(std::span<uint8_t>(out), field);
  }
  // Variable-length opaque<max> and string<max> (RFC 4506 §4.10, §4.11). Bytes are kept
  // as they are; strings are not checked for any encoding.
  [[nodiscard]] bool Opaque(std::string& out, uint32_t max, std::string_view field);
  [[nodiscard]] bool String(std::string& out, uint32_t max, std::string_view field) {
    return Opaque(out, max, field);
  }
  // A view into the input instead of a copy; valid while the input is.
  [[nodiscard]] bool OpaqueView(std::span<const uint8_t>& out, uint32_t max,
                                std::string_view field);

  // Optional data (RFC 4506 §4.19): a bool, then the item if true.
  template <typename T, typename DecodeItem>
  [[nodiscard]] bool Optional(std::optional<T>& out, DecodeItem decode_item,
                              std::string_view field) {
    bool present = false;
    if (!Bool(present, field)) return false;
    if (!present) {
      out.reset();
      return true;
    }
    out.emplace();
    return decode_item(*this, *out);
  }

  // Variable-length array<max> (RFC 4506 §4.13). min_item_size (at least 4 for any XDR item)
  // lets the count be checked against the bytes left before anything is allocated.
  template <typename T, typename DecodeItem>
  [[nodiscard]] bool Array(std::vector<T>& out, uint32_t max, size_t min_item_size,
                           DecodeItem decode_item, std::string_view field) {
    uint32_t count = 0;
    size_t start = offset_;
    if (!U32(count, field)) return false;
    if (count > max) return Fail(DecodeError::kTooLong, field, start);
    if (min_item_size != 0 && count > remaining() / min_item_size) {
      return Fail(DecodeError::kTruncated, field, start);
    }
    out.clear();
    out.reserve(count);
    for (uint32_t i = 0; i < count; ++i) {
      if (!decode_item(*this, out.emplace_back())) return false;
    }
    return true;
  }

  // Records a failure found by the caller (an enum out of range, say). Always returns false.
  bool Fail(DecodeError error, std::string_view field) { return Fail(error, field, offset_); }

  bool ok() const { return !failure_.has_value(); }
  const std::optional<DecodeFailure>& failure() const { return failure_; }
  size_t offset() const { return offset_; }
  size_t remaining() const { return bytes_.size() - offset_; }
  // The bytes not yet read.
  std::span<const uint8_t> rest() const { return bytes_.subspan(offset_); }

 private:
  bool Fail(DecodeError error, std::string_view field, size_t at);
  bool Take(size_t n, std::string_view field, const uint8_t*& out);
  bool SkipPadding(size_t data_length, std::string_view field);

  std::span<const uint8_t> bytes_;
  size_t offset_ = 0;
  std::optional<DecodeFailure> failure_;
};

}  // namespace nlockd::xdr
