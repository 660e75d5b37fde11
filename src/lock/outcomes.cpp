// SPDX-License-Identifier: Apache-2.0
#include "lock/outcomes.hpp"

namespace nlockd::lock {

std::string_view ToString(LockStatus status) {
  switch (status) {
    case LockStatus::kGranted:
      return "granted";
    case LockStatus::kDenied:
      return "denied";
    case LockStatus::kBlocked:
      return "blocked";
    case LockStatus::kDeniedGrace:
      return "denied-grace";
    case LockStatus::kNoResources:
      return "no-resources";
    case LockStatus::kInvalidRange:
      return "invalid-range";
  }
  return "?";
}

}  // namespace nlockd::lock
