// SPDX-License-Identifier: Apache-2.0
#include "store/sql/key_digest.hpp"

#include <memory>

#include <openssl/evp.h>

#include "base/error.hpp"

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
    // Fetched once: EVP_sha256() makes OpenSSL 3 look the algorithm up by name on every digest,
    // which cost more than the hashing on the lock journal's path.
    static EVP_MD* const sha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    NLOCKD_ASSERT(sha256 != nullptr, "SHA-256 unavailable");
    thread_local const std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> context(EVP_MD_CTX_new(),
                                                                                  EVP_MD_CTX_free);
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    const int ok = context != nullptr && EVP_DigestInit_ex2(context.get(), sha256, nullptr) == 1 &&
                   EVP_DigestUpdate(context.get(), bytes_.data(), bytes_.size()) == 1 &&
                   EVP_DigestFinal_ex(context.get(), digest, &size) == 1;
    NLOCKD_ASSERT(ok && size == 32, "SHA-256 failed");
    return std::string(reinterpret_cast<const char*>(digest), size);
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
