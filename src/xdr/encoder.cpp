// SPDX-License-Identifier: Apache-2.0
#include "xdr/encoder.hpp"

#include "base/error.hpp"

namespace nlockd::xdr {

void Encoder::U32(uint32_t value) {
  const uint8_t bytes[4] = {static_cast<uint8_t>(value >> 24), static_cast<uint8_t>(value >> 16),
                            static_cast<uint8_t>(value >> 8), static_cast<uint8_t>(value)};
  out_.insert(out_.end(), bytes, bytes + 4);
}

void Encoder::U64(uint64_t value) {
  U32(static_cast<uint32_t>(value >> 32));
  U32(static_cast<uint32_t>(value));
}

void Encoder::Pad(size_t data_length) {
  size_t pad = (4 - data_length % 4) % 4;
  out_.insert(out_.end(), pad, 0);
}

void Encoder::FixedOpaque(std::span<const uint8_t> bytes) {
  out_.insert(out_.end(), bytes.begin(), bytes.end());
  Pad(bytes.size());
}

void Encoder::Opaque(std::span<const uint8_t> bytes) {
  NLOCKD_REQUIRE(bytes.size() <= UINT32_MAX);
  U32(static_cast<uint32_t>(bytes.size()));
  FixedOpaque(bytes);
}

void Encoder::Opaque(std::string_view bytes) {
  Opaque(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

void Encoder::PatchU32(size_t offset, uint32_t value) {
  NLOCKD_REQUIRE(offset + 4 <= out_.size());
  out_[offset] = static_cast<uint8_t>(value >> 24);
  out_[offset + 1] = static_cast<uint8_t>(value >> 16);
  out_[offset + 2] = static_cast<uint8_t>(value >> 8);
  out_[offset + 3] = static_cast<uint8_t>(value);
}

}  // namespace nlockd::xdr
