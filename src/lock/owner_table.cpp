// SPDX-License-Identifier: Apache-2.0
#include "lock/owner_table.hpp"

#include "base/error.hpp"

namespace nlockd::lock {

std::optional<OwnerId> OwnerTable::Find(const LockOwner& owner) const {
  auto it = by_owner_.find(owner);
  if (it == by_owner_.end()) return std::nullopt;
  return it->second.id;
}

OwnerId OwnerTable::Add(const LockOwner& owner, HostState* host) {
  uint32_t slot;
  if (!free_ids_.empty()) {
    slot = free_ids_.back();
  } else {
    NLOCKD_ASSERT(slots_.size() < UINT32_MAX, "owner ids exhausted");
    slot = static_cast<uint32_t>(slots_.size());
    slots_.push_back(nullptr);
  }
  auto [it, inserted] = by_owner_.try_emplace(owner, Record{host, 0, OwnerId(slot)});
  NLOCKD_REQUIRE(inserted, "owner already interned");
  if (!free_ids_.empty() && free_ids_.back() == slot) free_ids_.pop_back();
  slots_[slot] = &*it;
  return OwnerId(slot);
}

bool OwnerTable::AddRefs(OwnerId id, int64_t delta) {
  Entry* entry = slots_[id.value()];
  NLOCKD_ASSERT(entry != nullptr);
  Record& record = entry->second;
  NLOCKD_REQUIRE(delta >= 0 || record.refs >= static_cast<uint64_t>(-delta),
                 "owner record count below zero");
  record.refs = static_cast<uint64_t>(static_cast<int64_t>(record.refs) + delta);
  if (record.refs != 0) return false;
  slots_[id.value()] = nullptr;
  free_ids_.push_back(id.value());
  by_owner_.erase(by_owner_.find(entry->first));
  return true;
}

}  // namespace nlockd::lock
