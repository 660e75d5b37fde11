// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

#include "base/clock.hpp"

namespace nlockd::lock {

// How new (non-reclaim) requests are treated during a grace period (docs/architecture.md, grace
// plans).
enum class GraceMode : uint8_t {
  kClassic,      // The restored lock table may be incomplete: every new request is refused.
  kFineGrained,  // The restored table is complete: only requests that conflict with a restored
                 // lock or share still awaiting its reclaim are refused.
};

enum class GraceEndReason : uint8_t {
  kTimer,         // The window ran out.
  kAllReclaimed,  // The caller knows every expected reclaim is in.
  kAdmin,         // An operator ended it.
};

std::string_view ToString(GraceMode mode);
std::string_view ToString(GraceEndReason reason);

// The recovery window after a restart: its mode and its deadline on the injected clock. It never
// acts by itself; the LockManager asks Expired() on every call (and the caller's timer calls
// LockManager::Tick()), so there are no threads and tests need no sleeping.
// Thread safety: none; owned by the LockManager's executor. `clock` must outlive it.
class GracePeriod {
 public:
  static constexpr Clock::duration kDefaultDuration = std::chrono::seconds(90);

  // `default_duration` is the configured window; a protocol may pass its own to Start().
  explicit GracePeriod(const Clock& clock, Clock::duration default_duration = kDefaultDuration);

  // Opens (or reopens, restarting the timer) the window.
  // REQUIRES: duration, when given, is positive.
  void Start(GraceMode mode, std::optional<Clock::duration> duration = std::nullopt);

  // Open and its deadline not reached.
  bool IsActive() const { return open_ && clock_.Now() < deadline_; }
  // Open but past its deadline: the owner should End(kTimer).
  bool Expired() const { return open_ && clock_.Now() >= deadline_; }
  // The mode while open.
  std::optional<GraceMode> mode() const {
    return open_ ? std::optional<GraceMode>(mode_) : std::nullopt;
  }
  // Time left; zero when not active.
  Clock::duration Remaining() const;

  // Closes the window. Returns false (and records nothing) if it was not open.
  bool End(GraceEndReason reason);
  // Why the last window closed, if one did.
  std::optional<GraceEndReason> last_end_reason() const { return last_end_reason_; }
  Clock::duration default_duration() const { return default_duration_; }

 private:
  const Clock& clock_;
  Clock::duration default_duration_;
  bool open_ = false;
  GraceMode mode_ = GraceMode::kClassic;
  Clock::time_point deadline_{};
  std::optional<GraceEndReason> last_end_reason_;
};

}  // namespace nlockd::lock
