// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "lock/lock_table.hpp"
#include "lock/lock_type.hpp"
#include "lock/owner_table.hpp"
#include "lock/range.hpp"
#include "lock/waiter_queue.hpp"

namespace nlockd::lock {

// How far the wait-for check looks (LockManagerOptions carries them).
struct WaitForLimits {
  // Cycles of at most this many owners, the requester included, are found; a longer one is
  // not (its requester waits, as on a server without the check). Linux finds up to 12. Stops
  // a client queueing its owners in one long chain from making every blocking request behind
  // it follow the whole chain.
  size_t max_cycle = 16;
  // Stops owners that hold many locks over one range (a wide fan of readers) from making every
  // blocking request against them expensive: the check examines at most this many lock entries
  // (about 20 ns each), then gives up and the request waits.
  size_t max_steps = 4096;
};

// The wait-for graph of blocked owners, and the check that a blocking request would close a
// cycle in it (EDEADLK). An owner waits for every other owner holding a lock that conflicts
// with one of its queued waiters; waiters never wait for waiters (a request that fits is
// granted whatever is queued), and share reservations never wait. The graph is kept as each
// owner's queued waiters across files (an intrusive list through the Waiter records); the
// edges from a waiter to its holders are read from its file's LockTable when the check runs,
// so locks taken and released cost nothing here.
//
// Thread safety: none; owned by the LockManager's executor. Linked waiters and their lock
// tables must stay put until removed (WaiterQueue and the manager's file map keep them so).
class WaitFor {
 public:
  enum class Result : uint8_t {
    kNoCycle,  // Every owner the request would wait for was followed to its end.
    kCycle,    // One of them waits, directly or through others, for the requester.
    kGaveUp,   // A limit stopped the search first (no cycle found within it).
  };

  WaitFor() = default;
  WaitFor(const WaitFor&) = delete;
  WaitFor& operator=(const WaitFor&) = delete;

  // `waiter` (queued, of `waiter.owner`) now waits on the file whose locks are `locks`.
  void Add(Waiter& waiter, const LockTable& locks);
  // The waiter is no longer queued (granted or erased).
  // REQUIRES: Add()ed and not removed since.
  void Remove(Waiter& waiter);

  // True if the owner has a queued waiter on any file.
  bool Waiting(OwnerId owner) const {
    return owner.value() < heads_.size() && heads_[owner.value()] != nullptr;
  }

  // Calls fn(const Waiter&) for each queued waiter of the owner, newest first.
  template <typename Fn>
  void ForEachWaiter(OwnerId owner, Fn&& fn) const {
    if (!Waiting(owner)) return;
    for (const Waiter* w = heads_[owner.value()]; w != nullptr; w = w->wait_link.next) fn(*w);
  }

  // Whether `requester`, waiting for the holders in `locks` that conflict with it taking `type`
  // over `range`, would close a cycle. A breadth-first search from those holders through the
  // owners they wait for, each owner visited once, so the shortest cycle is the one found.
  // Costs O(entries examined), at most limits.max_steps; nothing is allocated once the
  // scratch vectors have grown to the number of owners.
  Result Check(OwnerId requester, const LockTable& locks, const ByteRange& range, LockType type,
               const WaitForLimits& limits);

 private:
  // Marks the owner visited in this check; false if it already was.
  bool Mark(OwnerId owner);

  std::vector<Waiter*> heads_;  // By owner id: its newest queued waiter, or nullptr.
  // Check() scratch: a visit mark per owner id (the check's epoch when visited) and the owners
  // of the level being expanded and of the next one.
  std::vector<uint32_t> marks_;
  uint32_t epoch_ = 0;
  std::vector<OwnerId> level_;
  std::vector<OwnerId> next_;
};

}  // namespace nlockd::lock
