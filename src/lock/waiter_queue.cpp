// SPDX-License-Identifier: Apache-2.0
#include "lock/waiter_queue.hpp"

#include "base/error.hpp"

namespace nlockd::lock {

WaiterQueue::iterator WaiterQueue::Append(const Waiter& waiter) {
  auto it = waiters_.insert(waiters_.end(), waiter);
  if (waiter.state == Waiter::State::kQueued) ++queued_;
  return it;
}

void WaiterQueue::Erase(iterator it) {
  if (it->state == Waiter::State::kQueued) --queued_;
  waiters_.erase(it);
}

void WaiterQueue::MarkGranted(iterator it, Clock::time_point now) {
  NLOCKD_REQUIRE(it->state == Waiter::State::kQueued, "granting a waiter twice");
  it->state = Waiter::State::kGranted;
  it->since = now;
  --queued_;
}

WaiterQueue::iterator WaiterQueue::Find(OwnerId owner, const ByteRange& range, LockType type,
                                        Waiter::State state) {
  for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
    if (it->owner == owner && it->range == range && it->type == type && it->state == state) {
      return it;
    }
  }
  return waiters_.end();
}

}  // namespace nlockd::lock
