// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "lock/lock_type.hpp"
#include "lock/owner.hpp"
#include "lock/range.hpp"
#include "lock/share_table.hpp"

namespace nlockd::lock {

// A LOCK, TEST or CANCEL as the protocol layer hands it to the LockManager. The range is in the
// protocol's (offset, length) form, length 0 meaning to the end; the manager validates it.
struct LockRequest {
  FileKey file;
  LockOwner owner;
  uint64_t offset = 0;
  uint64_t length = 0;
  LockType type = LockType::kExclusive;
  bool block = false;    // Queue a waiter instead of answering kDenied (Lock only).
  bool reclaim = false;  // Re-take a lock held before a server restart (Lock only).
  // Recorded on the host when the call leaves it holding state (Lock only):
  std::optional<int32_t> nsm_state;  // The client's NSM state (nlm_lockargs.state).
  std::string host_label;            // E.g. caller_name when hosts are keyed by address.
  std::string host_address;          // Where the request came from (NLM: its source address).
};

// A SHARE reservation request (nlm_shareargs).
struct ShareRequest {
  FileKey file;
  LockOwner owner;  // svid 0: nlm_share has none.
  ShareAccess access = ShareAccess::kReadWrite;
  ShareDeny deny = ShareDeny::kNone;
  bool reclaim = false;
  std::string host_label;
  std::string host_address;
};

// A lock from the persisted table, installed at start-up as held but awaiting its reclaim.
struct RestoredLock {
  FileKey file;
  LockOwner owner;
  ByteRange range;
  LockType type = LockType::kExclusive;
};

// A share reservation from the persisted table.
struct RestoredShare {
  FileKey file;
  LockOwner owner;
  ShareAccess access = ShareAccess::kReadWrite;
  ShareDeny deny = ShareDeny::kNone;
};

}  // namespace nlockd::lock
