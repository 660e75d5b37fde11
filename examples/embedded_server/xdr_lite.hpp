// SPDX-License-Identifier: Apache-2.0
#pragma once

// The few XDR pieces the example's transport needs (RFC 4506): big-endian words, opaque data
// padded to four bytes. A real NFS server has its own.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace example {

class XdrReader {
 public:
  explicit XdrReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  std::optional<uint32_t> U32() {
    if (bytes_.size() - pos_ < 4) return std::nullopt;
    uint32_t v = (uint32_t{bytes_[pos_]} << 24) | (uint32_t{bytes_[pos_ + 1]} << 16) |
                 (uint32_t{bytes_[pos_ + 2]} << 8) | uint32_t{bytes_[pos_ + 3]};
    pos_ += 4;
    return v;
  }
  // Variable-length opaque of at most `max` bytes.
  std::optional<std::span<const uint8_t>> Opaque(uint32_t max) {
    auto length = U32();
    if (!length || *length > max) return std::nullopt;
    const size_t padded = (size_t{*length} + 3) & ~size_t{3};
    if (bytes_.size() - pos_ < padded) return std::nullopt;
    auto out = bytes_.subspan(pos_, *length);
    pos_ += padded;
    return out;
  }
  std::span<const uint8_t> Rest() const { return bytes_.subspan(pos_); }

 private:
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

class XdrWriter {
 public:
  explicit XdrWriter(std::vector<uint8_t>& out) : out_(out) {}
  void U32(uint32_t v) {
    out_.push_back(static_cast<uint8_t>(v >> 24));
    out_.push_back(static_cast<uint8_t>(v >> 16));
    out_.push_back(static_cast<uint8_t>(v >> 8));
    out_.push_back(static_cast<uint8_t>(v));
  }
  void Opaque(std::span<const uint8_t> bytes) {
    U32(static_cast<uint32_t>(bytes.size()));
    out_.insert(out_.end(), bytes.begin(), bytes.end());
    out_.resize((out_.size() + 3) & ~size_t{3});
  }
  void String(const std::string& text) {
    Opaque({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
  }

 private:
  std::vector<uint8_t>& out_;
};

}  // namespace example
