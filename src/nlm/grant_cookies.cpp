// SPDX-License-Identifier: Apache-2.0
#include "nlm/grant_cookies.hpp"

#include <bit>

namespace nlockd::nlm {

namespace {

uint64_t LoadLittleEndian(const uint8_t* p, size_t n) {
  uint64_t value = 0;
  for (size_t i = 0; i < n; ++i) value |= static_cast<uint64_t>(p[i]) << (8 * i);
  return value;
}

struct SipState {
  uint64_t v0, v1, v2, v3;

  void Round() {
    v0 += v1;
    v1 = std::rotl(v1, 13);
    v1 ^= v0;
    v0 = std::rotl(v0, 32);
    v2 += v3;
    v3 = std::rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = std::rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = std::rotl(v1, 17);
    v1 ^= v2;
    v2 = std::rotl(v2, 32);
  }

  void Absorb(uint64_t m) {
    v3 ^= m;
    Round();
    Round();
    v0 ^= m;
  }
};

}  // namespace

uint64_t GrantCookies::SipHash24(const Key& key, const uint8_t* data, size_t size) {
  // Initialisation constants: "somepseudorandomlygeneratedbytes" (the paper, section 2).
  SipState s{key[0] ^ 0x736f6d6570736575ULL, key[1] ^ 0x646f72616e646f6dULL,
             key[0] ^ 0x6c7967656e657261ULL, key[1] ^ 0x7465646279746573ULL};
  size_t full = size - size % 8;
  for (size_t i = 0; i < full; i += 8) s.Absorb(LoadLittleEndian(data + i, 8));
  // The last block: the remaining bytes, and the length mod 256 in the top byte.
  s.Absorb(LoadLittleEndian(data + full, size - full) | (static_cast<uint64_t>(size) << 56));
  s.v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) s.Round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

std::string GrantCookies::Next() {
  uint8_t counter[8];
  for (size_t i = 0; i < 8; ++i) counter[i] = static_cast<uint8_t>(counter_ >> (8 * i));
  ++counter_;
  uint64_t value = SipHash24(key_, counter, sizeof counter);
  std::string cookie(8, '\0');
  for (size_t i = 0; i < 8; ++i) cookie[i] = static_cast<char>(value >> (8 * i));
  return cookie;
}

}  // namespace nlockd::nlm
