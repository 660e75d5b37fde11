// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace nlockd::store {

// The rows nlockd persists. Plain values: store/ knows nothing of lock/ or of wire types.
// Strings hold raw bytes (names, addresses and handles come off the wire and need not be text).

// The callback target of an SM_MON registration (sm_inter.x `my_id`).
struct MyId {
  std::string my_name;
  int32_t my_prog = 0;
  int32_t my_vers = 0;
  int32_t my_proc = 0;

  friend bool operator==(const MyId&, const MyId&) = default;
};

// "Monitor mon_name; when it reboots call my_id with priv." Keyed by (node, mon_name, my_id): a
// second put with the same key updates priv, source_address and updated.
struct Registration {
  std::string mon_name;
  MyId my_id;
  std::array<uint8_t, 16> priv{};
  std::string source_address;  // where the SM_MON came from
  // The monitored host's last NSM state seen (0: none). Kept across restarts so that a replayed
  // SM_NOTIFY is still recognised after nlockd restarts.
  int32_t peer_state = 0;
  // Set by the store (from StoreOptions::wall_clock, truncated to microseconds); ignored on put.
  std::chrono::system_clock::time_point created;
  std::chrono::system_clock::time_point updated;

  friend bool operator==(const Registration&, const Registration&) = default;
};

// A byte-range lock held by owner (host, svid, owner_handle) on file_key. An owner's locks on one
// file never overlap (POSIX), so (file_key, host, svid, owner_handle, offset) identifies a lock.
struct LockRecord {
  std::string file_key;  // the opaque file handle
  std::string host;
  int32_t svid = 0;
  std::string owner_handle;
  bool exclusive = false;
  uint64_t offset = 0;
  uint64_t length = 0;  // 0 = to the end of the file

  friend bool operator==(const LockRecord&, const LockRecord&) = default;
};

// A DOS-style share reservation, identified by (file_key, host, owner_handle).
struct ShareRecord {
  std::string file_key;
  std::string host;
  std::string owner_handle;
  int32_t mode = 0;
  int32_t access = 0;

  friend bool operator==(const ShareRecord&, const ShareRecord&) = default;
};

// A host that is still owed an SM_NOTIFY from us, identified by mon_name.
struct NotifyOwed {
  std::string mon_name;  // the host to notify
  std::string address;   // where to send it, as the notifier understands it
  int32_t state = 0;     // our state number to announce
  int32_t attempts = 0;

  friend bool operator==(const NotifyOwed&, const NotifyOwed&) = default;
};

// One change of the NSM state number: odd when a run began or SM_SIMU_CRASH, even at a clean
// shutdown.
struct StateChange {
  int32_t state = 0;
  std::chrono::system_clock::time_point at;  // truncated to microseconds

  friend bool operator==(const StateChange&, const StateChange&) = default;
};

// Lock-table changes, applied in order by Store::ApplyLockChanges.

// Inserts the lock, or updates exclusive and length of the lock with the same identity.
struct PutLock {
  LockRecord lock;
};
// Removes the lock with the identity of `lock` (exclusive and length are ignored), if any.
struct RemoveLock {
  LockRecord lock;
};
// The part of a lock that ReplaceLocks lists per range.
struct LockRange {
  bool exclusive = false;
  uint64_t offset = 0;
  uint64_t length = 0;

  friend bool operator==(const LockRange&, const LockRange&) = default;
};
// Offsets first..last, both included.
struct OffsetSpan {
  uint64_t first = 0;
  uint64_t last = 0;

  bool Contains(uint64_t offset) const { return offset >= first && offset <= last; }
  friend bool operator==(const OffsetSpan&, const OffsetSpan&) = default;
};
// Makes `ranges` the complete set of locks of one owner on one file (empty: the owner holds none)
// or, with `within`, the complete set of that owner's locks that start within it: the locks
// starting elsewhere stay as they are. (A change of one call touches only the owner's locks
// near its range, so the lock journal rewrites only those, not all of an owner's locks.)
// REQUIRES: every range of `ranges` starts within `within`, if set.
struct ReplaceLocks {
  std::string file_key;
  std::string host;
  int32_t svid = 0;
  std::string owner_handle;
  std::vector<LockRange> ranges;
  std::optional<OffsetSpan> within;
};
// Inserts the share, or updates mode and access of the share with the same identity.
struct PutShare {
  ShareRecord share;
};
// Removes the share with the identity of `share`, if any.
struct RemoveShare {
  ShareRecord share;
};

using LockChange = std::variant<PutLock, RemoveLock, ReplaceLocks, PutShare, RemoveShare>;

}  // namespace nlockd::store
