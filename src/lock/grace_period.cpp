// SPDX-License-Identifier: Apache-2.0
#include "lock/grace_period.hpp"

#include "base/error.hpp"

namespace nlockd::lock {

std::string_view ToString(GraceMode mode) {
  switch (mode) {
    case GraceMode::kClassic:
      return "classic";
    case GraceMode::kFineGrained:
      return "fine-grained";
  }
  return "?";
}

std::string_view ToString(GraceEndReason reason) {
  switch (reason) {
    case GraceEndReason::kTimer:
      return "timer";
    case GraceEndReason::kAllReclaimed:
      return "all-reclaimed";
    case GraceEndReason::kAdmin:
      return "admin";
  }
  return "?";
}

GracePeriod::GracePeriod(const Clock& clock, Clock::duration default_duration)
    : clock_(clock), default_duration_(default_duration) {
  NLOCKD_REQUIRE(default_duration > Clock::duration::zero(), "grace period must be positive");
}

void GracePeriod::Start(GraceMode mode, std::optional<Clock::duration> duration) {
  const Clock::duration length = duration.value_or(default_duration_);
  NLOCKD_REQUIRE(length > Clock::duration::zero(), "grace period must be positive");
  open_ = true;
  mode_ = mode;
  deadline_ = clock_.Now() + length;
}

Clock::duration GracePeriod::Remaining() const {
  if (!IsActive()) return Clock::duration::zero();
  return deadline_ - clock_.Now();
}

bool GracePeriod::End(GraceEndReason reason) {
  if (!open_) return false;
  open_ = false;
  last_end_reason_ = reason;
  return true;
}

}  // namespace nlockd::lock
