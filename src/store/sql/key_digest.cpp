// SPDX-License-Identifier: Apache-2.0
#include "store/sql/key_digest.hpp"

#include <cstdint>
#include <string>

#include <nettle/sha2.h>

namespace nlockd::store {
namespace {

// Builds the unambiguous encoding: a tag naming the record kind, then each field as a 4-byte
// big-endian length (or value, for integers) followed by its bytes.
class KeyEncoder {
 public:
  explicit KeyEncoder(char tag) {
    bytes_.reserve(128);  // A typical key (a file handle, a host, an owner handle) in one go.
    bytes_.push_back(tag);
  }

  KeyEncoder& Int(int32_t value) {
    const auto bits = static_cast<uint32_t>(value);
    for (int shift = 24; shift >= 0; shift -= 8) {
      bytes_.push_back(static_cast<char>((bits >> shift) & 0xFFU));
    }
    return *this;
  }
  KeyEncoder& Bytes(std::string_view field) {
    Int(static_cast<int32_t>(field.size()));
    bytes_.append(field);
    return *this;
  }

  std::string Digest() const {
    // Nettle's SHA-256: a direct call with no library state, where OpenSSL's EVP needed its
    // initialisation (and libcrypto's four thousand relocations at every start).
    sha256_ctx context{};
    sha256_init(&context);
    sha256_update(&context, bytes_.size(), reinterpret_cast<const uint8_t*>(bytes_.data()));
    std::string digest(SHA256_DIGEST_SIZE, '\0');
    sha256_digest(&context, SHA256_DIGEST_SIZE, reinterpret_cast<uint8_t*>(digest.data()));
    return digest;
  }

 private:
  std::string bytes_;
};

}  // namespace

std::string RegistrationDigest(std::string_view mon_name, const MyId& my_id) {
  return KeyEncoder('R')
      .Bytes(mon_name)
      .Bytes(my_id.my_name)
      .Int(my_id.my_prog)
      .Int(my_id.my_vers)
      .Int(my_id.my_proc)
      .Digest();
}

std::string LockOwnerDigest(std::string_view file_key, std::string_view host, int32_t svid,
                            std::string_view owner_handle) {
  return KeyEncoder('L').Bytes(file_key).Bytes(host).Int(svid).Bytes(owner_handle).Digest();
}

std::string ShareDigest(std::string_view file_key, std::string_view host,
                        std::string_view owner_handle) {
  return KeyEncoder('S').Bytes(file_key).Bytes(host).Bytes(owner_handle).Digest();
}

}  // namespace nlockd::store
