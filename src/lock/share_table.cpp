// SPDX-License-Identifier: Apache-2.0
#include "lock/share_table.hpp"

#include <algorithm>

namespace nlockd::lock {

std::string_view ToString(ShareAccess access) {
  switch (access) {
    case ShareAccess::kNone:
      return "none";
    case ShareAccess::kRead:
      return "read";
    case ShareAccess::kWrite:
      return "write";
    case ShareAccess::kReadWrite:
      return "read-write";
  }
  return "?";
}

std::string_view ToString(ShareDeny deny) {
  switch (deny) {
    case ShareDeny::kNone:
      return "deny-none";
    case ShareDeny::kRead:
      return "deny-read";
    case ShareDeny::kWrite:
      return "deny-write";
    case ShareDeny::kReadWrite:
      return "deny-read-write";
  }
  return "?";
}

const ShareEntry* ShareTable::FindConflict(OwnerId owner, ShareAccess access,
                                           ShareDeny deny) const {
  for (const ShareEntry& e : entries_) {
    if (e.owner != owner && SharesConflict(access, deny, e.access, e.deny)) return &e;
  }
  return nullptr;
}

const ShareEntry* ShareTable::FindAwaitingConflict(OwnerId owner, ShareAccess access,
                                                   ShareDeny deny) const {
  if (awaiting_ == 0) return nullptr;
  for (const ShareEntry& e : entries_) {
    if (e.awaiting_reclaim && e.owner != owner && SharesConflict(access, deny, e.access, e.deny)) {
      return &e;
    }
  }
  return nullptr;
}

const ShareEntry* ShareTable::Find(OwnerId owner) const {
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [&](const ShareEntry& e) { return e.owner == owner; });
  return it == entries_.end() ? nullptr : &*it;
}

ShareTable::Delta ShareTable::Set(const ShareEntry& entry) {
  Delta delta;
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [&](const ShareEntry& e) { return e.owner == entry.owner; });
  if (it == entries_.end()) {
    entries_.push_back(entry);
    delta.entries = 1;
  } else {
    if (it->awaiting_reclaim) --delta.awaiting;
    *it = entry;
  }
  if (entry.awaiting_reclaim) ++delta.awaiting;
  awaiting_ = static_cast<size_t>(static_cast<int64_t>(awaiting_) + delta.awaiting);
  return delta;
}

ShareTable::Delta ShareTable::Remove(OwnerId owner) {
  Delta delta;
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [&](const ShareEntry& e) { return e.owner == owner; });
  if (it == entries_.end()) return delta;
  delta.entries = -1;
  if (it->awaiting_reclaim) {
    delta.awaiting = -1;
    --awaiting_;
  }
  entries_.erase(it);
  return delta;
}

}  // namespace nlockd::lock
