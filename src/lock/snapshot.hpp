// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "base/clock.hpp"
#include "lock/lock_type.hpp"
#include "lock/owner.hpp"
#include "lock/range.hpp"
#include "lock/share_table.hpp"
#include "lock/waiter_queue.hpp"

namespace nlockd::lock {

// Selects the state of one host, one file, both, or (empty) everything.
struct StateFilter {
  std::optional<HostId> host;
  std::optional<FileKey> file;
};

// A held lock, as the store persists it and the admin API lists it.
struct LockInfo {
  FileKey file;
  LockOwner owner;
  ByteRange range;
  LockType type = LockType::kExclusive;
  bool awaiting_reclaim = false;

  friend bool operator==(const LockInfo&, const LockInfo&) = default;
};

// A held lock without copies; valid only during the callback that receives it.
struct LockView {
  const FileKey& file;
  const LockOwner& owner;
  ByteRange range;
  LockType type;
  bool awaiting_reclaim;
};

struct ShareInfo {
  FileKey file;
  LockOwner owner;
  ShareAccess access = ShareAccess::kNone;
  ShareDeny deny = ShareDeny::kNone;
  bool awaiting_reclaim = false;

  friend bool operator==(const ShareInfo&, const ShareInfo&) = default;
};

struct WaiterInfo {
  WaiterId id;
  FileKey file;
  LockOwner owner;
  ByteRange range;
  LockType type = LockType::kExclusive;
  bool granted = false;     // Granted, awaiting AcknowledgeGrant/RevokeGrant.
  Clock::time_point since;  // Queued at, or granted at.
};

// A held lock a queued waiter waits for: it conflicts with the waiter's request.
struct Blocker {
  LockOwner owner;
  ByteRange range;
  LockType type = LockType::kExclusive;
  // The holder's own queued waiters (the first few), on any file: empty when the holder is not
  // blocked (the chain ends there).
  std::vector<WaiterId> holder_waits;
};

struct WaitForInfo {
  WaiterInfo waiter;
  std::vector<Blocker> blocked_by;  // Empty for a granted waiter.
  size_t blockers = 0;              // All of them; blocked_by may list fewer.
};

// Since the manager was made.
struct DeadlockCounts {
  uint64_t refused = 0;  // Blocking requests refused: they would have closed a cycle.
  uint64_t gave_up = 0;  // Checks stopped by a WaitForLimits limit; their request waited.
};

struct LockCounts {
  size_t locks = 0;           // Lock entries (after merging), awaiting-reclaim ones included.
  size_t awaiting_locks = 0;  // Restored lock entries not yet reclaimed.
  size_t shares = 0;
  size_t awaiting_shares = 0;
  size_t waiters = 0;         // Queued.
  size_t pending_grants = 0;  // Granted, not acknowledged.
  size_t owners = 0;
  size_t files = 0;         // With any state.
  size_t idle_files = 0;    // Empty file records kept for reuse.
  size_t hosts = 0;         // In the registry, idle ones included.
  size_t active_hosts = 0;  // Holding any state.
};

}  // namespace nlockd::lock
