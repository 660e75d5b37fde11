// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "base/strong_id.hpp"

namespace nlockd::lock {

// What identifies a client host. The protocol layer chooses it: for NLM the client's source
// address by default, or its caller_name (nlockd --host-key). lock/ only compares it.
using HostId = StrongId<struct HostIdTag, std::string>;

// The opaque key of a locked file: for NLM the NFS file handle bytes.
using FileKey = StrongId<struct FileKeyTag, std::string>;

// The opaque owner handle (NLM `oh`), raw bytes.
using OwnerHandle = StrongId<struct OwnerHandleTag, std::string>;

// A lock owner: (host, svid, oh), all three compared. Linux clients send
// oh = "<svid>@<nodename>", so for them this equals Linux's (host, svid) identity; clients that
// use one svid with several owner handles get one owner per handle. Share reservations use the
// same type with svid 0, as nlm_share carries no svid.
struct LockOwner {
  HostId host;
  int32_t svid = 0;
  OwnerHandle oh;

  friend bool operator==(const LockOwner&, const LockOwner&) = default;

  // "host/svid/oh" with non-printable bytes of host and oh escaped as \xNN; for logs and tests.
  std::string ToString() const;
};

// Opaque bytes as text: printable ASCII as is, anything else (and '\\', '/') as \xNN.
std::string EscapeBytes(std::string_view bytes);

struct LockOwnerHash {
  size_t operator()(const LockOwner& owner) const noexcept;
};

}  // namespace nlockd::lock
