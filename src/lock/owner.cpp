// SPDX-License-Identifier: Apache-2.0
#include "lock/owner.hpp"

#include <string_view>

namespace nlockd::lock {
namespace {

void AppendEscaped(std::string& out, std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f && byte != '\\' && byte != '/') {
      out += c;
    } else {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    }
  }
}

}  // namespace

std::string EscapeBytes(std::string_view bytes) {
  std::string out;
  AppendEscaped(out, bytes);
  return out;
}

std::string LockOwner::ToString() const {
  std::string out;
  AppendEscaped(out, host.value());
  out += '/';
  out += std::to_string(svid);
  out += '/';
  AppendEscaped(out, oh.value());
  return out;
}

size_t LockOwnerHash::operator()(const LockOwner& owner) const noexcept {
  size_t h = std::hash<std::string>{}(owner.host.value());
  h ^= std::hash<std::string>{}(owner.oh.value()) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= std::hash<int32_t>{}(owner.svid) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

}  // namespace nlockd::lock
