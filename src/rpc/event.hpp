// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>

namespace nlockd::rpc {

// A flag that coroutines wait for: Set() wakes every waiter, and the flag stays set until
// Reset(). The one way nlockd waits for "something happened" (a timer never stands in for it).
// A wait also ends when the awaiting coroutine is cancelled (its cancellation slot, as
// TaskGate::Cancel emits). Runs on one executor; not thread-safe. Waiters must be gone before
// the Event is destroyed.
class Event {
 public:
  explicit Event(asio::any_io_executor executor) : executor_(std::move(executor)) {}
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void Set();
  void Reset() { set_ = false; }
  bool IsSet() const { return set_; }

  // Completes once the event is set (at once if it is); false if the wait was cancelled first.
  asio::awaitable<bool> Wait();
  // As Wait, but at most `timeout`: true if the event fired, false if the time ran out (or the
  // wait was cancelled).
  asio::awaitable<bool> WaitFor(std::chrono::steady_clock::duration timeout);

 private:
  struct Waiter {
    asio::steady_timer* timer = nullptr;
    bool fired = false;
  };

  asio::awaitable<bool> WaitUntil(std::chrono::steady_clock::time_point deadline);

  asio::any_io_executor executor_;
  bool set_ = false;
  std::vector<Waiter*> waiters_;  // each lives in its waiting coroutine's frame
};

}  // namespace nlockd::rpc
