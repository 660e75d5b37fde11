// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <unordered_map>

#include "lock/host_registry.hpp"
#include "lock/lock_table.hpp"
#include "lock/owner.hpp"
#include "lock/share_table.hpp"
#include "lock/waiter_queue.hpp"

namespace nlockd::lock {

// The LockManager's private bookkeeping, in a header of its own so that the manager's .cpp
// files share it. Nothing outside lock_manager*.cpp uses these.

// Everything held or awaited on one file. When all of it is gone the record is kept, idle, for
// reuse (see LockManager::ReleaseFileIfEmpty).
struct FileState {
  explicit FileState(uint64_t seed) : locks(seed) {}

  bool Empty() const { return locks.empty() && shares.empty() && waiters.empty(); }

  const FileKey* key = nullptr;  // The key of this entry in the manager's file map.
  bool idle = false;             // Empty, kept for reuse; counted in idle_files_.
  LockTable locks;
  ShareTable shares;
  WaiterQueue waiters;
};

// A host that currently has owners, with the files where they hold records, so that
// ReleaseHost() visits only those files.
struct HostState {
  HostInfo* info;  // In the HostRegistry; never evicted while this exists (it holds state).
  // Records (lock entries, shares, waiter records) of the host's owners, per file.
  std::unordered_map<FileState*, uint64_t> files;
  uint64_t owners = 0;
  uint64_t owner_bytes = 0;  // What its owners cost (LockManager::OwnerBytes), all together.
};

}  // namespace nlockd::lock
