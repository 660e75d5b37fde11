// SPDX-License-Identifier: Apache-2.0
#include "lock/lock_table.hpp"

#include <algorithm>
#include <utility>

#include "base/error.hpp"

namespace nlockd::lock {
namespace {

// Entries are ordered by (first, owner); an owner's entries are disjoint, so the key is unique.
struct Key {
  uint64_t first;
  uint32_t owner;

  friend auto operator<=>(const Key&, const Key&) = default;
};

Key KeyOf(const LockEntry& e) { return Key{e.range.first(), e.owner.value()}; }

}  // namespace

// The treap algorithms work on unique_ptr links; recursion depth is the tree height, O(log n)
// expected.
namespace {

template <typename Node>
void Update(Node* node) {
  uint64_t max_last = node->entry.range.last();
  if (node->left) max_last = std::max(max_last, node->left->max_last);
  if (node->right) max_last = std::max(max_last, node->right->max_last);
  node->max_last = max_last;
}

// Splits `tree` into the keys below `key` (into `less`) and the rest (into `rest`).
template <typename NodePtr>
void Split(NodePtr tree, const Key& key, NodePtr& less, NodePtr& rest) {
  if (!tree) {
    less.reset();
    rest.reset();
    return;
  }
  if (KeyOf(tree->entry) < key) {
    Split(std::move(tree->right), key, tree->right, rest);
    Update(tree.get());
    less = std::move(tree);
  } else {
    Split(std::move(tree->left), key, less, tree->left);
    Update(tree.get());
    rest = std::move(tree);
  }
}

// Joins two treaps; every key of `low` is below every key of `high`.
template <typename NodePtr>
NodePtr Merge(NodePtr low, NodePtr high) {
  if (!low) return high;
  if (!high) return low;
  if (low->priority > high->priority) {
    low->right = Merge(std::move(low->right), std::move(high));
    Update(low.get());
    return low;
  }
  high->left = Merge(std::move(low), std::move(high->left));
  Update(high.get());
  return high;
}

template <typename NodePtr>
void InsertNode(NodePtr& tree, NodePtr node) {
  if (!tree) {
    tree = std::move(node);
    return;
  }
  if (node->priority > tree->priority) {
    Split(std::move(tree), KeyOf(node->entry), node->left, node->right);
    Update(node.get());
    tree = std::move(node);
    return;
  }
  // The new entry lands below: this subtree's largest last can only grow, and only to it.
  tree->max_last = std::max(tree->max_last, node->entry.range.last());
  // Pick the child before `node` is moved into the call (argument order is unspecified).
  NodePtr& child = KeyOf(node->entry) < KeyOf(tree->entry) ? tree->left : tree->right;
  InsertNode(child, std::move(node));
}

// Erases the entry with `key`, whose last byte is `last`.
template <typename NodePtr>
bool EraseKey(NodePtr& tree, const Key& key, uint64_t last) {
  if (!tree) return false;
  const Key here = KeyOf(tree->entry);
  if (key == here) {
    NodePtr old = std::move(tree);
    tree = Merge(std::move(old->left), std::move(old->right));
    return true;
  }
  if (!EraseKey(key < here ? tree->left : tree->right, key, last)) return false;
  // Only a subtree whose largest last was the erased one's can have a smaller one now.
  if (last == tree->max_last) Update(tree.get());
  return true;
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

LockTable::LockTable(uint64_t seed) : rng_(SplitMix64(seed) | 1) {}

LockTable::~LockTable() = default;

uint32_t LockTable::NextPriority() {
  // xorshift64*.
  rng_ ^= rng_ >> 12;
  rng_ ^= rng_ << 25;
  rng_ ^= rng_ >> 27;
  return static_cast<uint32_t>((rng_ * 0x2545f4914f6cdd1dULL) >> 32);
}

void LockTable::Insert(const LockEntry& entry) {
  // 56 bytes is one 64-byte malloc chunk: the memory budget per lock depends on it.
  static_assert(sizeof(Node) <= 56, "a lock node must fit a 64-byte malloc chunk");
  auto node =
      std::make_unique<Node>(Node{entry, entry.range.last(), nullptr, nullptr, NextPriority()});
  InsertNode(root_, std::move(node));
  ++size_;
  if (entry.awaiting_reclaim) ++awaiting_;
}

void LockTable::Erase(const LockEntry& entry) {
  const bool erased = EraseKey(root_, KeyOf(entry), entry.range.last());
  NLOCKD_ASSERT(erased, "erasing a lock entry that is not in the table");
  --size_;
  if (entry.awaiting_reclaim) --awaiting_;
}

void LockTable::CollectOwned(const Node* node, OwnerId owner, uint64_t first, uint64_t last) {
  while (node != nullptr && node->max_last >= first) {
    CollectOwned(node->left.get(), owner, first, last);
    if (node->entry.range.first() > last) return;
    if (node->entry.range.last() >= first && node->entry.owner == owner) {
      scratch_.push_back(node->entry);
    }
    node = node->right.get();
  }
}

bool LockTable::Holds(OwnerId owner, const ByteRange& range, LockType type,
                      bool awaiting_reclaim) const {
  const LockEntry* entry = FindFirst(range, [&](const LockEntry& e) { return e.owner == owner; });
  return entry != nullptr && entry->range.Contains(range) && entry->type == type &&
         entry->awaiting_reclaim == awaiting_reclaim;
}

TableDelta LockTable::Lock(OwnerId owner, const ByteRange& range, LockType type,
                           bool awaiting_reclaim) {
  // Own entries that overlap or touch the range: the only ones this call can change.
  const uint64_t near_first = range.first() == 0 ? 0 : range.first() - 1;
  const uint64_t near_last = range.ToEnd() ? range.last() : range.last() + 1;
  scratch_.clear();
  CollectOwned(root_.get(), owner, near_first, near_last);

  auto same_kind = [&](const LockEntry& e) {
    return e.type == type && e.awaiting_reclaim == awaiting_reclaim;
  };
  for (const LockEntry& e : scratch_) {
    if (same_kind(e) && e.range.Contains(range)) return {};  // Already held exactly so.
  }

  TableDelta delta;
  auto note_erased = [&](const LockEntry& e) {
    Erase(e);
    --delta.entries;
    if (e.awaiting_reclaim) --delta.awaiting;
  };
  auto add = [&](const LockEntry& e) {
    Insert(e);
    ++delta.entries;
    if (e.awaiting_reclaim) ++delta.awaiting;
  };
  auto release = [&](const ByteRange& r) {
    delta.released = delta.released ? delta.released->Hull(r) : r;
  };

  uint64_t merged_first = range.first();
  uint64_t merged_last = range.last();
  for (const LockEntry& e : scratch_) {
    if (same_kind(e)) {
      merged_first = std::min(merged_first, e.range.first());
      merged_last = std::max(merged_last, e.range.last());
      note_erased(e);
      continue;
    }
    if (!e.range.Overlaps(range)) continue;  // Adjacent but of another kind: stays as it is.
    note_erased(e);
    if (e.range.first() < range.first()) {
      add(LockEntry{ByteRange::FromFirstLast(e.range.first(), range.first() - 1), owner, e.type,
                    e.awaiting_reclaim});
    }
    if (e.range.last() > range.last()) {
      add(LockEntry{ByteRange::FromFirstLast(range.last() + 1, e.range.last()), owner, e.type,
                    e.awaiting_reclaim});
    }
    if (e.type == LockType::kExclusive && type == LockType::kShared) {
      release(ByteRange::FromFirstLast(std::max(e.range.first(), range.first()),
                                       std::min(e.range.last(), range.last())));
    }
  }
  add(LockEntry{ByteRange::FromFirstLast(merged_first, merged_last), owner, type,
                awaiting_reclaim});
  if (scratch_.capacity() > 1024) std::vector<LockEntry>().swap(scratch_);
  return delta;
}

TableDelta LockTable::Unlock(OwnerId owner, const ByteRange& range) {
  scratch_.clear();
  CollectOwned(root_.get(), owner, range.first(), range.last());
  TableDelta delta;
  for (const LockEntry& e : scratch_) {
    Erase(e);
    --delta.entries;
    if (e.awaiting_reclaim) --delta.awaiting;
    if (e.range.first() < range.first()) {
      Insert(LockEntry{ByteRange::FromFirstLast(e.range.first(), range.first() - 1), owner, e.type,
                       e.awaiting_reclaim});
      ++delta.entries;
      if (e.awaiting_reclaim) ++delta.awaiting;
    }
    if (e.range.last() > range.last()) {
      Insert(LockEntry{ByteRange::FromFirstLast(range.last() + 1, e.range.last()), owner, e.type,
                       e.awaiting_reclaim});
      ++delta.entries;
      if (e.awaiting_reclaim) ++delta.awaiting;
    }
    const ByteRange freed = ByteRange::FromFirstLast(std::max(e.range.first(), range.first()),
                                                     std::min(e.range.last(), range.last()));
    delta.released = delta.released ? delta.released->Hull(freed) : freed;
  }
  if (scratch_.capacity() > 1024) std::vector<LockEntry>().swap(scratch_);
  return delta;
}

}  // namespace nlockd::lock
