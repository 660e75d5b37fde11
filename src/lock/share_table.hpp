// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "lock/owner_table.hpp"

namespace nlockd::lock {

// DOS-style share reservations as NLM SHARE carries them (nlm_share): what
// the opener does (fsh_access) and what it denies others (fsh_mode). Bit 1 read, bit 2 write.
enum class ShareAccess : uint8_t { kNone = 0, kRead = 1, kWrite = 2, kReadWrite = 3 };
enum class ShareDeny : uint8_t { kNone = 0, kRead = 1, kWrite = 2, kReadWrite = 3 };

std::string_view ToString(ShareAccess access);
std::string_view ToString(ShareDeny deny);

// Two reservations of different owners conflict when one accesses what the other denies.
constexpr bool SharesConflict(ShareAccess access_a, ShareDeny deny_a, ShareAccess access_b,
                              ShareDeny deny_b) {
  return (static_cast<uint8_t>(access_a) & static_cast<uint8_t>(deny_b)) != 0 ||
         (static_cast<uint8_t>(deny_a) & static_cast<uint8_t>(access_b)) != 0;
}

struct ShareEntry {
  OwnerId owner;
  ShareAccess access = ShareAccess::kNone;
  ShareDeny deny = ShareDeny::kNone;
  bool awaiting_reclaim = false;  // Restored after a restart; its owner has not reclaimed it.

  friend bool operator==(const ShareEntry&, const ShareEntry&) = default;
};

// The share reservations on one file: at most one per owner (a new SHARE by the same owner
// replaces its reservation), in the order they were first taken. Files have few shares, so a
// vector with linear scans is the right size.
// Thread safety: none; owned by the LockManager's executor.
class ShareTable {
 public:
  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  size_t awaiting_count() const { return awaiting_; }
  const std::vector<ShareEntry>& entries() const { return entries_; }

  // The first reservation of another owner that conflicts with `owner` taking (access, deny).
  const ShareEntry* FindConflict(OwnerId owner, ShareAccess access, ShareDeny deny) const;
  // As FindConflict, among awaiting-reclaim reservations only.
  const ShareEntry* FindAwaitingConflict(OwnerId owner, ShareAccess access, ShareDeny deny) const;
  const ShareEntry* Find(OwnerId owner) const;

  struct Delta {
    int64_t entries = 0;
    int64_t awaiting = 0;
  };
  // Adds the owner's reservation or replaces it (conflicts are the caller's check).
  Delta Set(const ShareEntry& entry);
  // Removes the owner's reservation, if any.
  Delta Remove(OwnerId owner);

  // Removes every reservation for which pred(entry) holds and returns them.
  template <typename Pred>
  std::vector<ShareEntry> RemoveIf(Pred&& pred) {
    std::vector<ShareEntry> removed;
    for (const ShareEntry& e : entries_) {
      if (pred(e)) removed.push_back(e);
    }
    for (const ShareEntry& e : removed) Remove(e.owner);
    return removed;
  }

 private:
  std::vector<ShareEntry> entries_;
  size_t awaiting_ = 0;
};

}  // namespace nlockd::lock
