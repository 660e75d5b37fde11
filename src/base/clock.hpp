// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>

namespace nlockd {

// The time source, injected so that tests drive grace periods, retries and backoff without
// sleeping. Monotonic: wall-clock jumps must not shorten a grace period.
class Clock {
 public:
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<std::chrono::steady_clock, duration>;

  virtual ~Clock() = default;
  virtual time_point Now() const = 0;
};

// The real monotonic clock.
class SteadyClock final : public Clock {
 public:
  time_point Now() const override { return std::chrono::steady_clock::now(); }
};

// A clock that moves only when told to; for tests.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(time_point start = time_point{}) : now_(start) {}
  time_point Now() const override { return now_; }
  void Advance(duration by) { now_ += by; }
  void Set(time_point to) { now_ = to; }

 private:
  time_point now_;
};

}  // namespace nlockd
