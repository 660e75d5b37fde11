// SPDX-License-Identifier: Apache-2.0
#include "xdr/decoder.hpp"

#include <cstring>

namespace nlockd::xdr {

std::string_view ToString(DecodeError error) {
  switch (error) {
    case DecodeError::kTruncated:
      return "truncated";
    case DecodeError::kTooLong:
      return "too long";
    case DecodeError::kBadPadding:
      return "non-zero padding";
    case DecodeError::kBadBool:
      return "bad boolean";
    case DecodeError::kBadValue:
      return "bad value";
  }
  return "unknown";
}

bool Decoder::Fail(DecodeError error, std::string_view field, size_t at) {
  if (!failure_) failure_ = DecodeFailure{error, field, at};
  return false;
}

bool Decoder::Take(size_t n, std::string_view field, const uint8_t*& out) {
  if (failure_) return false;
  if (n > remaining()) return Fail(DecodeError::kTruncated, field, offset_);
  out = bytes_.data() + offset_;
  offset_ += n;
  return true;
}

bool Decoder::U32(uint32_t& out, std::string_view field) {
  const uint8_t* p = nullptr;
  if (!Take(4, field, p)) return false;
  out = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
  return true;
}

bool Decoder::I32(int32_t& out, std::string_view field) {
  uint32_t raw = 0;
  if (!U32(raw, field)) return false;
  out = static_cast<int32_t>(raw);
  return true;
}

bool Decoder::U64(uint64_t& out, std::string_view field) {
  uint32_t high = 0;
  uint32_t low = 0;
  if (!U32(high, field) || !U32(low, field)) return false;
  out = (uint64_t{high} << 32) | low;
  return true;
}

bool Decoder::I64(int64_t& out, std::string_view field) {
  uint64_t raw = 0;
  if (!U64(raw, field)) return false;
  out = static_cast<int64_t>(raw);
  return true;
}

bool Decoder::Bool(bool& out, std::string_view field) {
  size_t start = offset_;
  uint32_t raw = 0;
  if (!U32(raw, field)) return false;
  if (raw > 1) return Fail(DecodeError::kBadBool, field, start);
  out = raw == 1;
  return true;
}

bool Decoder::SkipPadding(size_t data_length, std::string_view field) {
  size_t pad = (4 - data_length % 4) % 4;
  size_t start = offset_;
  const uint8_t* p = nullptr;
  if (!Take(pad, field, p)) return false;
  for (size_t i = 0; i < pad; ++i) {
    if (p[i] != 0) return Fail(DecodeError::kBadPadding, field, start);
  }
  return true;
}

bool Decoder::FixedOpaque(std::span<uint8_t> out, std::string_view field) {
  const uint8_t* p = nullptr;
  if (!Take(out.size(), field, p)) return false;
  if (!out.empty()) std::memcpy(out.data(), p, out.size());
  return SkipPadding(out.size(), field);
}

bool Decoder::OpaqueView(std::span<const uint8_t>& out, uint32_t max, std::string_view field) {
  size_t start = offset_;
  uint32_t length = 0;
  if (!U32(length, field)) return false;
  if (length > max) return Fail(DecodeError::kTooLong, field, start);
  const uint8_t* p = nullptr;
  if (!Take(length, field, p)) return false;
  if (!SkipPadding(length, field)) return false;
  out = std::span<const uint8_t>(p, length);
  return true;
}

bool Decoder::Opaque(std::string& out, uint32_t max, std::string_view field) {
  std::span<const uint8_t> view;
  if (!OpaqueView(view, max, field)) return false;
  out.assign(reinterpret_cast<const char*>(view.data()), view.size());
  return true;
}

}  // namespace nlockd::xdr
