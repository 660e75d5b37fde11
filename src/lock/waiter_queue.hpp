// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <vector>

#include "base/clock.hpp"
#include "base/strong_id.hpp"
#include "lock/lock_type.hpp"
#include "lock/owner_table.hpp"
#include "lock/prior_state.hpp"
#include "lock/range.hpp"
#include "lock/range_set.hpp"

namespace nlockd::lock {

class LockTable;
struct Waiter;

// Names one blocked request, unique for the life of a LockManager (never reused). The NLM layer
// maps it to the cookie of its GRANTED callback, which must be unique on the server.
using WaiterId = StrongId<struct WaiterIdTag, uint64_t>;

// How to take back a grant (CANCEL of a granted block, a revoked grant): what the owner held over
// the waiter's range just before it. The owner's pending grants on a file stack up in grant order;
// see LockManager::UndoGrant for the rules.
struct GrantUndo {
  uint64_t seq = 0;  // Grant order within the manager: a later grant sits on top of this one.
  // Bytes whose locks the owner itself changed after the grant (its own LOCK, UNLOCK, or a grant
  // of it that was acknowledged since): the undo leaves them alone.
  RangeSet settled;
  std::vector<PriorLocks::Entry> prior;  // The owner's locks over the range, in offset order.
};

// A queued waiter's place in its owner's list of queued waiters across files (WaitFor), and
// the locks of its file; all null while not queued.
struct WaitLink {
  Waiter* prev = nullptr;
  Waiter* next = nullptr;
  const LockTable* locks = nullptr;
};

// A blocked lock request. It is queued until a release makes it grantable; then the manager
// takes the lock for it and the record stays, state kGranted, until the protocol layer
// acknowledges the grant (the client got its callback) or revokes it.
struct Waiter {
  enum class State : uint8_t { kQueued, kGranted };

  WaiterId id;
  OwnerId owner;
  ByteRange range;
  LockType type = LockType::kExclusive;
  State state = State::kQueued;
  Clock::time_point since;  // When it was queued, or granted.
  GrantUndo undo;           // Set when granted.
  WaitLink wait_link;       // Set while queued.
};

// The waiter records of one file in arrival order. Iterators stay valid until their record is
// erased, so the manager's id index can point into the queue.
// Thread safety: none; owned by the LockManager's executor.
class WaiterQueue {
 public:
  using iterator = std::list<Waiter>::iterator;
  using const_iterator = std::list<Waiter>::const_iterator;

  bool empty() const { return waiters_.empty(); }
  size_t size() const { return waiters_.size(); }
  size_t queued_count() const { return queued_; }

  iterator begin() { return waiters_.begin(); }
  iterator end() { return waiters_.end(); }
  const_iterator begin() const { return waiters_.begin(); }
  const_iterator end() const { return waiters_.end(); }

  // Appends a record at the back (the newest arrival).
  iterator Append(const Waiter& waiter);
  void Erase(iterator it);
  // Moves a queued record to kGranted at `now`, keeping its place.
  void MarkGranted(iterator it, Clock::time_point now);

  // The record of exactly this request (owner, range, type) in `state`, or end(): a retransmitted
  // blocking LOCK finds its queued record (one waiter per request, however often it is sent).
  iterator Find(OwnerId owner, const ByteRange& range, LockType type, Waiter::State state);

 private:
  std::list<Waiter> waiters_;
  size_t queued_ = 0;
};

}  // namespace nlockd::lock
