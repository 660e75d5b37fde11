// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string_view>

#if defined(__x86_64__)
#include <cpuid.h>
#include <nmmintrin.h>
#endif

namespace nlockd::store {

// CRC-32C (Castagnoli, RFC 3720's iSCSI checksum: reflected polynomial 0x82F63B78, initial and
// final value all ones), the lock log's record checksum. x86-64 CPUs since 2008 compute it with
// one instruction per eight bytes (SSE4.2's crc32), chosen at run time; elsewhere a table does it
// a byte at a time. Both give the same value.

namespace crc32c_detail {

inline constexpr uint32_t kPolynomial = 0x82F63B78U;

constexpr std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1U) != 0 ? kPolynomial ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  return table;
}
inline constexpr std::array<uint32_t, 256> kTable = MakeTable();

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) inline uint32_t Hardware(std::string_view bytes) {
  uint64_t c = 0xFFFFFFFFU;
  const char* p = bytes.data();
  size_t n = bytes.size();
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word = 0;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
  }
  auto c32 = static_cast<uint32_t>(c);
  for (; n > 0; ++p, --n) c32 = _mm_crc32_u8(c32, static_cast<uint8_t>(*p));
  return c32 ^ 0xFFFFFFFFU;
}

inline bool CpuHasSse42() {
  unsigned eax = 0;
  unsigned ebx = 0;
  unsigned ecx = 0;
  unsigned edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (ecx & bit_SSE4_2) != 0;
}
#endif

}  // namespace crc32c_detail

// The table's CRC-32C; public so that a test can hold the two implementations against each other.
inline uint32_t Crc32cSoftware(std::string_view bytes) {
  uint32_t c = 0xFFFFFFFFU;
  for (const char byte : bytes) {
    c = crc32c_detail::kTable[(c ^ static_cast<uint8_t>(byte)) & 0xFFU] ^ (c >> 8);
  }
  return c ^ 0xFFFFFFFFU;
}

// Whether Crc32c uses the CPU's instruction.
inline bool Crc32cInHardware() {
#if defined(__x86_64__)
  static const bool hardware = crc32c_detail::CpuHasSse42();
  return hardware;
#else
  return false;
#endif
}

inline uint32_t Crc32c(std::string_view bytes) {
#if defined(__x86_64__)
  if (Crc32cInHardware()) return crc32c_detail::Hardware(bytes);
#endif
  return Crc32cSoftware(bytes);
}

}  // namespace nlockd::store
