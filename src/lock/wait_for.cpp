// SPDX-License-Identifier: Apache-2.0
#include "lock/wait_for.hpp"

#include <utility>

#include "base/error.hpp"

namespace nlockd::lock {

void WaitFor::Add(Waiter& waiter, const LockTable& locks) {
  NLOCKD_ASSERT(waiter.wait_link.locks == nullptr);
  const size_t index = waiter.owner.value();
  if (index >= heads_.size()) heads_.resize(index + 1, nullptr);
  Waiter*& head = heads_[index];
  waiter.wait_link = WaitLink{nullptr, head, &locks};
  if (head != nullptr) head->wait_link.prev = &waiter;
  head = &waiter;
}

void WaitFor::Remove(Waiter& waiter) {
  WaitLink& link = waiter.wait_link;
  NLOCKD_ASSERT(link.locks != nullptr);
  if (link.prev != nullptr) {
    link.prev->wait_link.next = link.next;
  } else {
    heads_[waiter.owner.value()] = link.next;
  }
  if (link.next != nullptr) link.next->wait_link.prev = link.prev;
  link = WaitLink{};
}

bool WaitFor::Mark(OwnerId owner) {
  const size_t index = owner.value();
  if (index >= marks_.size()) marks_.resize(index + 1, 0);
  if (marks_[index] == epoch_) return false;
  marks_[index] = epoch_;
  return true;
}

WaitFor::Result WaitFor::Check(OwnerId requester, const LockTable& locks, const ByteRange& range,
                               LockType type, const WaitForLimits& limits) {
  if (++epoch_ == 0) {  // Wrapped: forget every old mark.
    marks_.assign(marks_.size(), 0);
    epoch_ = 1;
  }
  size_t steps = 0;
  bool cycle = false;
  bool gave_up = false;
  // Examines one entry that `waiting` conflicts with; true stops the search.
  const auto visit = [&](const LockEntry& entry) {
    if (entry.owner == requester) {
      cycle = true;
      return true;
    }
    if (Waiting(entry.owner) && Mark(entry.owner)) next_.push_back(entry.owner);
    return false;
  };
  // The entries of owners other than `waiting` in `table` that conflict with `type` over
  // `over`, each counted as a step.
  const auto expand = [&](OwnerId waiting, const LockTable& table, const ByteRange& over,
                          LockType want) {
    table.FindFirst(over, [&](const LockEntry& entry) {
      if (++steps > limits.max_steps) {
        gave_up = true;
        return true;
      }
      return entry.owner != waiting && TypesConflict(entry.type, want) && visit(entry);
    });
  };

  next_.clear();
  expand(requester, locks, range, type);  // Level 1: the holders the request would wait for.
  // Level d holds the waiting owners d steps from the requester; expanding it finds the
  // requester at d + 1, a cycle of d + 1 owners.
  for (size_t depth = 1; !cycle && !gave_up && !next_.empty(); ++depth) {
    if (depth >= limits.max_cycle) {
      gave_up = true;
      break;
    }
    std::swap(level_, next_);
    next_.clear();
    for (size_t i = 0; i < level_.size() && !cycle && !gave_up; ++i) {
      const OwnerId owner = level_[i];
      for (const Waiter* w = heads_[owner.value()]; w != nullptr && !cycle && !gave_up;
           w = w->wait_link.next) {
        expand(owner, *w->wait_link.locks, w->range, w->type);
      }
    }
  }
  if (cycle) return Result::kCycle;
  return gave_up ? Result::kGaveUp : Result::kNoCycle;
}

}  // namespace nlockd::lock
