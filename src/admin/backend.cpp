// SPDX-License-Identifier: Apache-2.0
#include "admin/backend.hpp"

#include <string_view>

#include <fmt/format.h>

namespace nlockd::admin {
namespace {

// FNV-1a, 64 bits: stable across builds and restarts (std::hash is not).
class Fnv1a {
 public:
  void Add(std::string_view bytes) {
    // The length first, so that ("ab", "c") and ("a", "bc") differ.
    AddWord(bytes.size());
    for (const char c : bytes) AddByte(static_cast<uint8_t>(c));
  }
  void AddWord(uint64_t word) {
    for (int i = 0; i < 8; ++i) AddByte(static_cast<uint8_t>(word >> (8 * i)));
  }
  uint64_t value() const { return hash_; }

 private:
  void AddByte(uint8_t byte) {
    hash_ ^= byte;
    hash_ *= 0x100000001b3ULL;
  }
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

}  // namespace

std::string MakeRegistrationId(const std::string& mon_name, const std::string& my_name,
                               int32_t my_prog, int32_t my_vers, int32_t my_proc) {
  Fnv1a hash;
  hash.Add(mon_name);
  hash.Add(my_name);
  hash.AddWord(static_cast<uint32_t>(my_prog));
  hash.AddWord(static_cast<uint32_t>(my_vers));
  hash.AddWord(static_cast<uint32_t>(my_proc));
  return fmt::format("{:016x}", hash.value());
}

}  // namespace nlockd::admin
