// SPDX-License-Identifier: Apache-2.0
#include "rpc/event.hpp"

#include <algorithm>

#include "rpc/use_tuple.hpp"

namespace nlockd::rpc {

void Event::Set() {
  set_ = true;
  for (Waiter* waiter : waiters_) {
    waiter->fired = true;
    waiter->timer->cancel();
  }
  waiters_.clear();
}

asio::awaitable<bool> Event::Wait() {
  return WaitUntil(std::chrono::steady_clock::time_point::max());
}

asio::awaitable<bool> Event::WaitFor(std::chrono::steady_clock::duration timeout) {
  return WaitUntil(std::chrono::steady_clock::now() + timeout);
}

asio::awaitable<bool> Event::WaitUntil(std::chrono::steady_clock::time_point deadline) {
  if (set_) co_return true;
  asio::steady_timer timer(executor_, deadline);
  Waiter waiter{&timer};
  waiters_.push_back(&waiter);
  // Also when the frame is destroyed without resuming (its executor went away).
  struct Leave {
    std::vector<Waiter*>& waiters;
    Waiter& waiter;
    ~Leave() {
      if (!waiter.fired) std::erase(waiters, &waiter);
    }
  } leave{waiters_, waiter};
  // The timer completes at the deadline, when Set() cancels it, or when the coroutine's own
  // cancellation slot cancels the wait.
  co_await timer.async_wait(kUseTuple);
  co_return waiter.fired;
}

}  // namespace nlockd::rpc
