// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "store/records.hpp"

namespace nlockd::store {

// The writes a Store queues, one struct per Store method. Implementations apply them in the order
// submitted; each is idempotent, so that a batch whose commit outcome is unknown can be replayed.

struct PutRegistrationOp {
  Registration registration;
};
struct RemoveRegistrationOp {
  std::string mon_name;
  MyId my_id;
};
struct RemoveRegistrationsOfOp {
  MyId my_id;
};
struct PutNotifyOwedOp {
  std::vector<NotifyOwed> owed;
};
struct ClearOp {};
// Moves the state number to the next odd number, or to `to` when set, and writes it to
// *new_state.
// REQUIRES: new_state outlives the write (its submitter waits for it); `to` is odd.
struct BumpStateOp {
  int32_t* new_state = nullptr;
  std::optional<int32_t> to = std::nullopt;
};
struct MarkCleanShutdownOp {};
struct LockChangesOp {
  std::vector<LockChange> changes;
};
struct ReleaseHostOp {
  std::string host;
};
struct RemoveNotifyOwedOp {
  std::string mon_name;
};
struct MarkLockTableCompleteOp {};

using WriteOp =
    std::variant<PutRegistrationOp, RemoveRegistrationOp, RemoveRegistrationsOfOp, PutNotifyOwedOp,
                 ClearOp, BumpStateOp, MarkCleanShutdownOp, LockChangesOp, ReleaseHostOp,
                 RemoveNotifyOwedOp, MarkLockTableCompleteOp>;

// The two durability classes (see store.hpp).
enum class Durability {
  kSynced,     // on stable storage before the caller is told: survives a power loss
  kCommitted,  // committed before the caller is told, fsync may follow later: survives a
               // crash of the process, perhaps not of the host
};

Durability DurabilityOf(const WriteOp& op);

// The next state number: the next odd one, wrapping around like the 32-bit int it is on the wire
// (peers compare states with serial-number arithmetic).
int32_t NextOddState(int32_t state);
// The state while down after a clean shutdown: the next even number (or `state` if even).
int32_t NextEvenState(int32_t state);

}  // namespace nlockd::store
