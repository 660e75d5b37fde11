// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "lock/lock_type.hpp"
#include "lock/owner.hpp"
#include "lock/range.hpp"
#include "lock/range_set.hpp"
#include "lock/share_table.hpp"

namespace nlockd::lock {

// What one owner held on one file before a LOCK, UNLOCK, SHARE or UNSHARE, so that the protocol
// layer can undo that call exactly when it must still fail after the manager applied it (the
// lock journal could not record it): LockManager::SnapshotLocks/SnapshotShare take it,
// RestoreLocks and RestoreShare put it back. A plain value that does not name the file or the
// owner: the caller keeps those (the call's request) and hands them to the restore, by value
// (not the manager's owner id), so that the snapshot stays valid if the owner is gone by the
// undo (an UNLOCK of its last lock). Taken on every journaled call, so it copies no strings.
// The same entries, kept in each granted waiter, undo a granted block (GrantUndo).
struct PriorLocks {
  ByteRange range;  // The call's range; `locks` are the owner's entries in it, clipped to it.
  struct Entry {
    ByteRange range;
    LockType type = LockType::kExclusive;
    bool awaiting_reclaim = false;

    friend bool operator==(const Entry&, const Entry&) = default;
  };
  std::vector<Entry> locks;  // In offset order.
  // The first grant sequence number after the snapshot: grants of blocked requests of the owner
  // made since sit on top of the call, and RestoreLocks leaves their bytes alone.
  uint64_t next_grant = 0;
  // The owner's pending grants then (by WaiterId value) with the bytes of the range each still
  // decided: the call takes them over, and RestoreLocks hands them back. Usually empty.
  std::vector<std::pair<uint64_t, RangeSet>> grants_below;
  // The owner's host's HostInfo::releases then: a host release since stands.
  uint64_t host_releases = 0;
};

struct PriorShare {
  struct Entry {
    ShareAccess access = ShareAccess::kNone;
    ShareDeny deny = ShareDeny::kNone;
    bool awaiting_reclaim = false;
  };
  std::optional<Entry> share;  // nullopt: the owner had no reservation on the file.
  uint64_t host_releases = 0;  // As in PriorLocks.
};

}  // namespace nlockd::lock
