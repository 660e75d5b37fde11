// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "lock/lock_type.hpp"
#include "lock/owner_table.hpp"
#include "lock/range.hpp"

namespace nlockd::lock {

// One held lock as a LockTable stores it.
struct LockEntry {
  ByteRange range;
  OwnerId owner;
  LockType type = LockType::kExclusive;
  bool awaiting_reclaim = false;  // Restored after a restart; its owner has not reclaimed it.

  friend bool operator==(const LockEntry&, const LockEntry&) = default;
};

// What a mutation of a LockTable changed, for the caller's counters and waiter service.
struct TableDelta {
  int64_t entries = 0;   // Net change in the number of entries.
  int64_t awaiting = 0;  // Net change in the number of awaiting-reclaim entries.
  // The hull of the bytes whose lock became weaker (removed, or exclusive turned shared): only
  // waiters overlapping it can have become grantable.
  std::optional<ByteRange> released;
};

// The byte-range locks held on one file, with POSIX same-owner rules: an owner's entries are
// disjoint, and adjacent entries of one owner never have the same (type, awaiting_reclaim).
// Entries of different owners may overlap (shared locks); whether they may is the caller's
// check (FindConflict) before Lock().
//
// Storage is a treap ordered by (first, owner) whose nodes also carry the largest `last` of
// their subtree, so finding the entries that overlap a range costs O(log n + k) for k entries
// visited, and inserting or erasing one costs O(log n) expected. A node is 56 bytes. Priorities
// come from a generator seeded by the owner of the table, so clients cannot shape the tree.
// Thread safety: none; owned by the LockManager's executor.
class LockTable {
 public:
  explicit LockTable(uint64_t seed);
  ~LockTable();
  LockTable(const LockTable&) = delete;
  LockTable& operator=(const LockTable&) = delete;

  bool empty() const { return root_ == nullptr; }
  size_t size() const { return size_; }
  size_t awaiting_count() const { return awaiting_; }

  // The first entry in (first, owner) order that overlaps `range` and satisfies `pred`, or
  // nullptr. Pred: bool(const LockEntry&).
  template <typename Pred>
  const LockEntry* FindFirst(const ByteRange& range, Pred&& pred) const {
    return FindFirstIn(root_.get(), range.first(), range.last(), pred);
  }

  // The first entry of another owner that conflicts with `owner` taking `type` over `range`.
  const LockEntry* FindConflict(OwnerId owner, const ByteRange& range, LockType type) const {
    return FindFirst(
        range, [&](const LockEntry& e) { return e.owner != owner && TypesConflict(e.type, type); });
  }

  // Calls fn(const LockEntry&) for every entry that overlaps `range`, in (first, owner) order.
  template <typename Fn>
  void ForEachOverlapping(const ByteRange& range, Fn&& fn) const {
    FindFirst(range, [&](const LockEntry& e) {
      fn(e);
      return false;
    });
  }

  // True if `owner` holds `type` (with this awaiting mark) over all of `range` in one entry.
  bool Holds(OwnerId owner, const ByteRange& range, LockType type, bool awaiting_reclaim) const;

  // Calls fn(const LockEntry&) for every entry, in (first, owner) order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    ForEachIn(root_.get(), fn);
  }

  // POSIX F_SETLK for `owner`, conflicts aside: the owner's entries over `range` are replaced
  // (upgrade, downgrade), split where they stick out, and merged with touching entries of the
  // same type and mark.
  TableDelta Lock(OwnerId owner, const ByteRange& range, LockType type, bool awaiting_reclaim);

  // POSIX F_UNLCK for `owner`: removes its entries over `range`, splitting those that stick out.
  // Unlocking bytes that are not held is fine.
  TableDelta Unlock(OwnerId owner, const ByteRange& range);

  // Removes every entry for which pred(entry) holds and returns them, in order. The collection
  // happens before anything is erased, so an allocation failure changes nothing.
  template <typename Pred>
  std::vector<LockEntry> RemoveIf(Pred&& pred) {
    std::vector<LockEntry> removed;
    ForEach([&](const LockEntry& e) {
      if (pred(e)) removed.push_back(e);
    });
    for (const LockEntry& e : removed) Erase(e);
    return removed;
  }

 private:
  struct Node {
    LockEntry entry;
    uint64_t max_last;  // The largest entry.range.last() in this subtree.
    std::unique_ptr<Node> left;
    std::unique_ptr<Node> right;
    uint32_t priority;
  };

  template <typename Pred>
  static const LockEntry* FindFirstIn(const Node* node, uint64_t first, uint64_t last, Pred& pred) {
    while (node != nullptr && node->max_last >= first) {
      if (const LockEntry* hit = FindFirstIn(node->left.get(), first, last, pred)) return hit;
      // Everything from here on (this node and its right subtree) starts at or after it.
      if (node->entry.range.first() > last) return nullptr;
      if (node->entry.range.last() >= first && pred(node->entry)) return &node->entry;
      node = node->right.get();
    }
    return nullptr;
  }

  template <typename Fn>
  static void ForEachIn(const Node* node, Fn& fn) {
    while (node != nullptr) {
      ForEachIn(node->left.get(), fn);
      fn(node->entry);
      node = node->right.get();
    }
  }

  // Appends the entries of `owner` that overlap [first, last] to scratch_.
  void CollectOwned(const Node* node, OwnerId owner, uint64_t first, uint64_t last);
  void Insert(const LockEntry& entry);
  void Erase(const LockEntry& entry);
  uint32_t NextPriority();

  std::unique_ptr<Node> root_;
  size_t size_ = 0;
  size_t awaiting_ = 0;
  uint64_t rng_;
  std::vector<LockEntry> scratch_;  // Reused by Lock/Unlock to avoid an allocation per call.
};

}  // namespace nlockd::lock
