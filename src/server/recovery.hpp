// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "lock/grace_period.hpp"
#include "lock/requests.hpp"
#include "store/records.hpp"
#include "store/store.hpp"

namespace nlockd::server {

// What the start-up does about grace (docs/architecture.md, "Grace plans").
struct GracePlan {
  enum class Kind { kNone, kClassic, kFineGrained };
  Kind kind = Kind::kClassic;
  std::string reason;  // For the log line, the admin API and /readyz.

  std::optional<lock::GraceMode> mode() const {
    if (kind == Kind::kClassic) return lock::GraceMode::kClassic;
    if (kind == Kind::kFineGrained) return lock::GraceMode::kFineGrained;
    return std::nullopt;
  }
};

// Decides the grace period from what the store knew at start-up:
// - `configured` zero: none (the operator turned grace off);
// - a store that is not persistent (memory:): classic, since nothing proves what was held;
// - a persistent store that is new, or recorded no monitored host, lock or share: none, as
//   sm-notify's lift-grace does;
// - a lock table known complete (a process crash or clean stop on the same boot): fine-grained;
// - otherwise (a host crash, or a PostgreSQL restart, may have lost lock writes): classic.
GracePlan DecideGrace(const store::StartupInfo& startup, const store::LoadedState& loaded,
                      std::chrono::seconds configured);

// The persisted lock and share rows as the lock manager installs them.
std::vector<lock::RestoredLock> ToRestoredLocks(const std::vector<store::LockRecord>& rows);
std::vector<lock::RestoredShare> ToRestoredShares(const std::vector<store::ShareRecord>& rows);

}  // namespace nlockd::server
