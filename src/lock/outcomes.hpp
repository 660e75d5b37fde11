// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "lock/lock_type.hpp"
#include "lock/owner.hpp"
#include "lock/range.hpp"
#include "lock/share_table.hpp"
#include "lock/waiter_queue.hpp"

namespace nlockd::lock {

// The protocol outcome of a request: a value, never an exception. One function per protocol maps it
// to wire codes: for NLM v4 kGranted→GRANTED, kDenied→DENIED, kBlocked→BLOCKED,
// kDeniedGrace→DENIED_GRACE_PERIOD, kNoResources→DENIED_NOLOCKS, kInvalidRange→FBIG.
enum class LockStatus : uint8_t {
  kGranted,
  kDenied,        // Conflicts with a holder; see `holder`.
  kBlocked,       // Conflicts; queued as waiter `waiter`.
  kDeniedGrace,   // Refused because of the grace period (a new request during it, or a reclaim
                  // outside it).
  kNoResources,   // A limit (hosts, locks, shares, waiters) was reached.
  kInvalidRange,  // offset + length - 1 overflows 64 bits.
};

std::string_view ToString(LockStatus status);

// A lock that conflicts with a request: NLM's nlm4_holder.
struct Holder {
  LockOwner owner;
  LockType type = LockType::kExclusive;
  ByteRange range;

  friend bool operator==(const Holder&, const Holder&) = default;
};

// A blocked request the manager has just granted: the lock is held on the waiter's behalf from
// this moment, and the protocol layer sends the GRANTED callback, then calls AcknowledgeGrant()
// or RevokeGrant().
struct WaiterGrant {
  WaiterId id;
  FileKey file;
  LockOwner owner;
  ByteRange range;
  LockType type = LockType::kExclusive;

  friend bool operator==(const WaiterGrant&, const WaiterGrant&) = default;
};

// Every outcome carries the waiters that the call granted (a release, a downgrade, or the grace
// timer running out, noticed by this call). The caller sends their callbacks.
using Grants = std::vector<WaiterGrant>;

// The waiters (queued, or granted and unacknowledged) that a call of their owner removed: the
// protocol layer forgets what it kept for them and stops their callbacks. Only LOCK, UNLOCK and
// CANCEL remove waiters of the caller; RevokeGrant and AcknowledgeGrant remove the one they name,
// ReleaseHost all of the host's.
using WaiterIds = std::vector<WaiterId>;

struct LockOutcome {
  LockStatus status = LockStatus::kGranted;
  std::optional<Holder> holder;    // kDenied, kBlocked: the first conflicting holder.
  std::optional<WaiterId> waiter;  // kBlocked: the queued waiter (the same one on a retransmit).
  // kDenied of a blocking request: waiting would have closed a cycle of waiting owners (POSIX
  // EDEADLK; NLM v4 DEADLCK, versions 1 and 3 DENIED). A kind of denial, so that a caller that
  // does not tell it apart answers what those versions answer.
  bool deadlock = false;
  // The host entered the HostRegistry with this call (its first state ever, or since it was
  // forgotten or evicted): the NLM layer monitors it (SM_MON) now, once per host.
  bool host_added = false;
  // The host went from holding nothing to holding something (more frequent than host_added).
  bool host_activated = false;
  Grants grants;
  // kGranted: the owner's pending grant of this very lock, settled by the LOCK itself.
  WaiterIds waiters_removed;
};

struct TestOutcome {
  LockStatus status = LockStatus::kGranted;  // kGranted: no conflict; kDenied: see `holder`.
  std::optional<Holder> holder;
  Grants grants;
};

struct UnlockOutcome {
  LockStatus status = LockStatus::kGranted;  // kGranted or kInvalidRange.
  size_t waiters_cancelled = 0;              // The owner's queued waiters over the range.
  Grants grants;
  // The owner's waiters over the range: the queued ones cancelled, the pending grants settled.
  WaiterIds waiters_removed;
};

enum class CancelResult : uint8_t {
  kCancelled,    // A queued waiter was removed.
  kGrantUndone,  // The block had been granted but not acknowledged: its lock was released.
  kNotFound,     // No such blocked request.
  kInvalidRange,
};

struct CancelOutcome {
  CancelResult result = CancelResult::kNotFound;
  Grants grants;
  WaiterIds waiters_removed;  // kCancelled, kGrantUndone: the waiter.
};

struct RevokeOutcome {
  bool revoked = false;  // False if the id named no granted, unacknowledged waiter.
  Grants grants;
};

struct ShareHolder {
  LockOwner owner;
  ShareAccess access = ShareAccess::kNone;
  ShareDeny deny = ShareDeny::kNone;

  friend bool operator==(const ShareHolder&, const ShareHolder&) = default;
};

struct ShareOutcome {
  LockStatus status = LockStatus::kGranted;  // Never kBlocked or kInvalidRange.
  std::optional<ShareHolder> holder;         // kDenied: the conflicting reservation.
  bool host_added = false;
  bool host_activated = false;
  Grants grants;
};

struct UnshareOutcome {
  bool removed = false;  // False if the owner had no reservation (UNSHARE still succeeds).
  Grants grants;
};

struct HostReleaseOutcome {
  size_t locks = 0;           // Lock entries released.
  size_t shares = 0;          // Share reservations released.
  size_t waiters = 0;         // Queued waiters dropped.
  size_t pending_grants = 0;  // Granted, unacknowledged waiters dropped (their locks released).
  // Of the locks and shares, restored ones still awaiting their reclaim: dropped unreclaimed.
  size_t restored = 0;
  size_t files_failed = 0;  // Files whose clean-up threw; the others were still done.
  Grants grants;            // Waiters of other hosts that became granted.
};

// What dropping restored, still-awaiting state released.
struct DropOutcome {
  size_t locks = 0;
  size_t shares = 0;
  Grants grants;
};

// What putting an owner's prior locks or share back did (LockManager::RestoreLocks/RestoreShare).
struct RestoreOutcome {
  // False when another owner took, while the undone call was in flight, what that call gave up
  // (it downgraded a lock or weakened a reservation): the prior state cannot come back without
  // a conflict, so nothing was changed and the call's result stands.
  bool restored = false;
  Grants grants;  // Waiters granted because the restore released bytes the call had taken.
};

struct LoadOutcome {
  size_t locks = 0;     // Restored lock records installed.
  size_t shares = 0;    // Restored share records installed.
  size_t rejected = 0;  // Records that conflicted with one installed before them.
  Grants grants;        // Waiters granted because a restored lock downgraded a held one.
};

}  // namespace nlockd::lock
