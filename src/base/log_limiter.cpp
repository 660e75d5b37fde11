// SPDX-License-Identifier: Apache-2.0
#include "base/log_limiter.hpp"

#include <algorithm>
#include <chrono>

namespace nlockd {

LogLimiter::LogLimiter(std::string what, LogRate rate, const Clock* clock)
    : what_(std::move(what)),
      rate_(rate),
      clock_(clock != nullptr ? *clock : steady_),
      tokens_(static_cast<double>(rate.burst)),
      refilled_(clock_.Now()) {}

bool LogLimiter::Admit(uint64_t& suppressed_before) {
  std::lock_guard lock(mutex_);
  const Clock::time_point now = clock_.Now();
  if (now > refilled_) {
    const double elapsed = std::chrono::duration<double>(now - refilled_).count();
    tokens_ = std::min(static_cast<double>(rate_.burst), tokens_ + elapsed * rate_.per_second);
    refilled_ = now;
  }
  if (tokens_ < 1.0) {
    ++suppressed_;
    return false;
  }
  tokens_ -= 1.0;
  suppressed_before = std::exchange(suppressed_, 0);
  return true;
}

}  // namespace nlockd
