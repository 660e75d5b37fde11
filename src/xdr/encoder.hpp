// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace nlockd::xdr {

// Appends XDR (RFC 4506) items to a byte buffer. Encoding cannot fail: callers encode values
// that they built, and bounds are the decoder's business. REQUIRES: the buffer outlives the
// encoder.
class Encoder {
 public:
  explicit Encoder(std::vector<uint8_t>& out) : out_(out) {}

  void U32(uint32_t value);
  void I32(int32_t value) { U32(static_cast<uint32_t>(value)); }
  void U64(uint64_t value);
  void I64(int64_t value) { U64(static_cast<uint64_t>(value)); }
  void Bool(bool value) { U32(value ? 1 : 0); }
  void Enum(int32_t value) { I32(value); }

  void FixedOpaque(std::span<const uint8_t> bytes);
  template <size_t N>
  void FixedOpaque(const std::array<uint8_t, N>& bytes) {
    FixedOpaque(std::span<const uint8_t>(bytes));
  }
  void Opaque(std::span<const uint8_t> bytes);
  void Opaque(std::string_view bytes);
  void String(std::string_view text) { Opaque(text); }

  template <typename T, typename EncodeItem>
  void Optional(const std::optional<T>& value, EncodeItem encode_item) {
    Bool(value.has_value());
    if (value) encode_item(*this, *value);
  }
  template <typename T, typename EncodeItem>
  void Array(const std::vector<T>& items, EncodeItem encode_item) {
    U32(static_cast<uint32_t>(items.size()));
    for (const T& item : items) encode_item(*this, item);
  }

  size_t size() const { return out_.size(); }
  // Overwrites the 4-byte word at `offset` (reply headers patch their status this way).
  // REQUIRES: offset + 4 <= size().
  void PatchU32(size_t offset, uint32_t value);

 private:
  void Pad(size_t data_length);

  std::vector<uint8_t>& out_;
};

}  // namespace nlockd::xdr
