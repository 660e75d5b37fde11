// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "store/records.hpp"

namespace nlockd::store {

// Row keys of the SQL stores: the SHA-256 (32 bytes) of a length-prefixed encoding of a record's
// identity. Names and handles may each be 1 KiB (the protocols' bounds), too long together for a
// PostgreSQL index entry (about 2.7 KB); a digest keeps keys short, and a cryptographic one
// keeps a client from crafting two identities that collide.

// (mon_name, my_id): a registration.
std::string RegistrationDigest(std::string_view mon_name, const MyId& my_id);
// (file_key, host, svid, owner_handle): a lock owner on one file.
std::string LockOwnerDigest(std::string_view file_key, std::string_view host, int32_t svid,
                            std::string_view owner_handle);
// (file_key, host, owner_handle): a share reservation.
std::string ShareDigest(std::string_view file_key, std::string_view host,
                        std::string_view owner_handle);

}  // namespace nlockd::store
