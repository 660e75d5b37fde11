// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/strong_id.hpp"
#include "lock/owner.hpp"

namespace nlockd::lock {

// A small id for an interned owner, unique among the owners that currently hold state. The
// per-file tables store it instead of the owner (4 bytes per lock instead of ~100).
using OwnerId = StrongId<struct OwnerIdTag, uint32_t>;

// An id OwnerTable never hands out: "the requester holds nothing yet", so that every entry is
// another owner's.
inline OwnerId NoOwner() { return OwnerId(UINT32_MAX); }

struct HostState;  // The LockManager's per-host bookkeeping; opaque here.

// Interns lock owners: one record per distinct LockOwner that holds any lock, share or waiter,
// counting those records; an owner whose count drops to zero is removed and its id reused.
// Thread safety: none; owned by the LockManager's executor.
class OwnerTable {
 public:
  OwnerTable() = default;
  OwnerTable(const OwnerTable&) = delete;
  OwnerTable& operator=(const OwnerTable&) = delete;

  std::optional<OwnerId> Find(const LockOwner& owner) const;

  // Adds an owner with no records yet; the caller gives it records at once (AddRefs) or
  // removes it with AddRefs(id, 0).
  // REQUIRES: `owner` is not present.
  OwnerId Add(const LockOwner& owner, HostState* host);

  // REQUIRES (all accessors below): `id` is present.
  const LockOwner& owner(OwnerId id) const { return slots_[id.value()]->first; }
  HostState* host(OwnerId id) const { return slots_[id.value()]->second.host; }
  uint64_t refs(OwnerId id) const { return slots_[id.value()]->second.refs; }

  // Adds `delta` (possibly negative or zero) to the owner's record count and removes the owner
  // when the count is zero afterwards. Returns true if it removed the owner.
  // REQUIRES: the count stays >= 0.
  bool AddRefs(OwnerId id, int64_t delta);

  size_t size() const { return by_owner_.size(); }

 private:
  struct Record {
    HostState* host;
    uint64_t refs;
    OwnerId id;
  };
  using Entry = std::pair<const LockOwner, Record>;

  std::unordered_map<LockOwner, Record, LockOwnerHash> by_owner_;
  std::vector<Entry*> slots_;  // By id; nullptr for a free id.
  std::vector<uint32_t> free_ids_;
};

}  // namespace nlockd::lock
