// SPDX-License-Identifier: Apache-2.0
#include "lock/lock_manager.hpp"

#include <algorithm>
#include <iterator>
#include <utility>

#include "base/error.hpp"

namespace nlockd::lock {

LockManager::LockManager(const Clock& clock, LockManagerOptions options)
    : clock_(clock),
      options_(options),
      hosts_(clock, options.max_hosts),
      grace_(clock, options.grace_duration) {}

LockManager::~LockManager() = default;

// --- Bookkeeping -------------------------------------------------------------------------------

FileState* LockManager::FindFile(const FileKey& key) {
  auto it = files_.find(key);
  return it == files_.end() ? nullptr : &it->second;
}

const FileState* LockManager::FindFile(const FileKey& key) const {
  auto it = files_.find(key);
  return it == files_.end() ? nullptr : &it->second;
}

FileState& LockManager::UseFile(FileState* found, const FileKey& key) {
  if (found != nullptr) {
    if (found->idle) {
      found->idle = false;
      --idle_files_;
    }
    return *found;
  }
  auto [pos, inserted] =
      files_.try_emplace(key, options_.seed + (files_created_ + 1) * 0x9e3779b97f4a7c15ULL);
  if (inserted) {
    ++files_created_;
    pos->second.key = &pos->first;
  }
  return pos->second;
}

std::optional<LockManager::OwnerRef> LockManager::EnsureOwner(const LockOwner& owner,
                                                              std::optional<OwnerId> known,
                                                              HostInfo* known_host,
                                                              HostRegistry::Admission admission) {
  if (known) return OwnerRef{*known, false};
  const HostRegistry::AddResult added = known_host != nullptr
                                            ? HostRegistry::AddResult{known_host, false}
                                            : hosts_.FindOrAdd(owner.host, admission);
  if (added.host == nullptr) return std::nullopt;
  const uint64_t bytes = OwnerBytes(owner);
  if (admission == HostRegistry::Admission::kWithinLimit) {
    auto known_state = host_states_.find(added.host);
    if (known_state != host_states_.end() &&
        known_state->second.owner_bytes + bytes > options_.max_owner_bytes_per_host) {
      return std::nullopt;
    }
  }
  HostState& host = host_states_[added.host];
  host.info = added.host;
  const OwnerId id = owners_.Add(owner, &host);
  ++host.owners;
  host.owner_bytes += bytes;
  return OwnerRef{id, added.added};
}

void LockManager::Account(FileState& file, OwnerId owner, int64_t records) {
  HostState& host = HostOf(owner);
  if (records != 0) {
    auto it = host.files.try_emplace(&file, 0).first;
    NLOCKD_ASSERT(records > 0 || it->second >= static_cast<uint64_t>(-records));
    it->second = static_cast<uint64_t>(static_cast<int64_t>(it->second) + records);
    if (it->second == 0) host.files.erase(it);
  }
  const uint64_t bytes = OwnerBytes(owners_.owner(owner));  // Before AddRefs may drop it.
  if (!owners_.AddRefs(owner, records)) return;
  host.owner_bytes -= bytes;
  if (--host.owners == 0) {
    NLOCKD_ASSERT(host.files.empty() && host.owner_bytes == 0);
    host_states_.erase(host.info);
  }
}

void LockManager::AddLockCounts(OwnerId owner, const TableDelta& delta) {
  HostInfo& info = *HostOf(owner).info;
  info.locks = static_cast<uint64_t>(static_cast<int64_t>(info.locks) + delta.entries);
  locks_ = static_cast<size_t>(static_cast<int64_t>(locks_) + delta.entries);
  awaiting_locks_ = static_cast<size_t>(static_cast<int64_t>(awaiting_locks_) + delta.awaiting);
}

void LockManager::AddShareCounts(OwnerId owner, const ShareTable::Delta& delta) {
  HostInfo& info = *HostOf(owner).info;
  info.shares = static_cast<uint64_t>(static_cast<int64_t>(info.shares) + delta.entries);
  shares_ = static_cast<size_t>(static_cast<int64_t>(shares_) + delta.entries);
  awaiting_shares_ = static_cast<size_t>(static_cast<int64_t>(awaiting_shares_) + delta.awaiting);
}

void LockManager::ReleaseFileIfEmpty(FileState& file) {
  if (file.idle || !file.Empty()) return;
  file.idle = true;
  ++idle_files_;
  if (idle_files_ <= std::max(kMinIdleFiles, files_.size() - idle_files_)) return;
  for (auto it = files_.begin(); it != files_.end();) {
    it = it->second.idle ? files_.erase(it) : std::next(it);
  }
  idle_files_ = 0;
}

HostInfo* LockManager::TouchHost(const LockOwner& owner, std::optional<OwnerId> id) {
  HostInfo* info = id ? HostOf(*id).info : hosts_.Find(owner.host);
  if (info != nullptr) hosts_.Touch(*info);
  return info;
}

std::optional<LockManager::RangeCall> LockManager::OpenRangeCall(const FileKey& file_key,
                                                                 const LockOwner& lock_owner,
                                                                 uint64_t offset, uint64_t length,
                                                                 Grants& grants) {
  CheckGrace(grants);
  const std::optional<ByteRange> range = ByteRange::FromOffsetLength(offset, length);
  if (!range) return std::nullopt;
  const std::optional<OwnerId> owner = FindOwner(lock_owner);
  return RangeCall{*range, FindFile(file_key), owner, TouchHost(lock_owner, owner)};
}

void LockManager::NoteHost(HostInfo& host, std::optional<int32_t> nsm_state,
                           const std::string& label, const std::string& address) {
  if (nsm_state) host.nsm_state = nsm_state;
  if (!label.empty() && host.label != label) host.label = label;
  if (!address.empty() && host.address != address) host.address = address;
}

// --- Waiters -----------------------------------------------------------------------------------

WaiterGrant LockManager::MakeGrant(const FileState& file, const Waiter& waiter) const {
  return WaiterGrant{waiter.id, *file.key, owners_.owner(waiter.owner), waiter.range, waiter.type};
}

void LockManager::EraseWaiter(FileState& file, WaiterQueue::iterator it) {
  HostInfo& info = *HostOf(it->owner).info;
  if (it->state == Waiter::State::kQueued) {
    --info.waiters;
    --waiters_;
    wait_for_.Remove(*it);
  } else {
    --info.pending_grants;
    --pending_grants_;
  }
  waiter_index_.erase(it->id.value());
  file.waiters.Erase(it);
}

void LockManager::ServeWaiters(FileState& file, ByteRange released, Grants& grants) {
  bool again = true;
  while (again) {
    again = false;
    for (auto it = file.waiters.begin(); it != file.waiters.end(); ++it) {
      Waiter& waiter = *it;
      if (waiter.state != Waiter::State::kQueued || !waiter.range.Overlaps(released)) continue;
      if (file.locks.FindConflict(waiter.owner, waiter.range, waiter.type) != nullptr) continue;
      // What a Cancel or RevokeGrant of this grant gives back.
      waiter.undo.seq = next_grant_seq_++;
      waiter.undo.prior = OwnerLocksOver(file, waiter.owner, waiter.range);
      const TableDelta delta = file.locks.Lock(waiter.owner, waiter.range, waiter.type, false);
      AddLockCounts(waiter.owner, delta);
      HostInfo& info = *HostOf(waiter.owner).info;
      --info.waiters;
      ++info.pending_grants;
      --waiters_;
      ++pending_grants_;
      wait_for_.Remove(waiter);
      file.waiters.MarkGranted(it, clock_.Now());
      Account(file, waiter.owner, delta.entries);  // The waiter record keeps the owner alive.
      grants.push_back(MakeGrant(file, waiter));
      if (delta.released) {
        // The grant downgraded the owner's own exclusive lock: older waiters may fit now.
        released = released.Hull(*delta.released);
        again = true;
        break;
      }
    }
  }
}

bool LockManager::WouldDeadlock(const FileState& file, OwnerId owner, const ByteRange& range,
                                LockType type) {
  // Nobody waits at all: no cycle can close (the common case of a lone blocked client).
  if (!options_.detect_deadlocks || waiters_ == 0) return false;
  switch (wait_for_.Check(owner, file.locks, range, type, options_.wait_for)) {
    case WaitFor::Result::kCycle:
      ++deadlock_counts_.refused;
      return true;
    case WaitFor::Result::kGaveUp:
      ++deadlock_counts_.gave_up;
      return false;
    case WaitFor::Result::kNoCycle:
      return false;
  }
  return false;
}

std::optional<WaiterId> LockManager::SettlePendingGrant(FileState& file, OwnerId owner,
                                                        const ByteRange& range, LockType type) {
  auto it = file.waiters.Find(owner, range, type, Waiter::State::kGranted);
  if (it == file.waiters.end()) return std::nullopt;
  const WaiterId id = it->id;
  EraseWaiter(file, it);
  return id;
}

int64_t LockManager::ReleaseRange(FileState& file, OwnerId owner, const ByteRange& range,
                                  Grants& grants) {
  const TableDelta delta = file.locks.Unlock(owner, range);
  AddLockCounts(owner, delta);
  if (delta.released) ServeWaiters(file, *delta.released, grants);
  return delta.entries;
}

bool LockManager::ConflictsWithAwaiting(const FileState* file, std::optional<OwnerId> owner,
                                        const ByteRange& range, LockType type) const {
  if (file == nullptr || file->locks.awaiting_count() == 0) return false;
  const OwnerId requester = owner.value_or(NoOwner());
  return file->locks.FindFirst(range, [&](const LockEntry& e) {
    return e.awaiting_reclaim && e.owner != requester && TypesConflict(e.type, type);
  }) != nullptr;
}

// --- Byte-range locks --------------------------------------------------------------------------

LockOutcome LockManager::Lock(const LockRequest& request) {
  LockOutcome out;
  const std::optional<RangeCall> call =
      OpenRangeCall(request.file, request.owner, request.offset, request.length, out.grants);
  if (!call) {
    out.status = LockStatus::kInvalidRange;
    return out;
  }
  const auto [range, file, owner, host] = *call;

  // A reclaim of a lock its owner still holds changes nothing and is granted even outside
  // grace: after SM_SIMU_CRASH (a restart notification without a restart) clients reclaim
  // what nlockd never lost. Any other reclaim outside grace is refused, as Linux lockd does.
  if (request.reclaim && !grace_.IsActive() && owner && file != nullptr &&
      file->locks.Holds(*owner, range, request.type, false)) {
    out.status = LockStatus::kGranted;
    return out;
  }
  if (request.reclaim
          ? !grace_.IsActive()
          : grace_.IsActive() && (grace_.mode() == GraceMode::kClassic ||
                                  ConflictsWithAwaiting(file, owner, range, request.type))) {
    out.status = LockStatus::kDeniedGrace;
    return out;
  }

  const LockEntry* conflict =
      file == nullptr ? nullptr
                      : file->locks.FindConflict(owner.value_or(NoOwner()), range, request.type);
  const bool was_active = host != nullptr && host->HoldsState();

  if (conflict != nullptr) {
    out.holder = Holder{owners_.owner(conflict->owner), conflict->type, conflict->range};
    if (!request.block) {
      out.status = LockStatus::kDenied;
      return out;
    }
    out.status = LockStatus::kBlocked;
    // An owner that is not known yet holds nothing, so nobody waits for it: no cycle.
    if (owner) {
      auto queued = file->waiters.Find(*owner, range, request.type, Waiter::State::kQueued);
      if (WouldDeadlock(*file, *owner, range, request.type)) {
        out.status = LockStatus::kDenied;
        out.deadlock = true;
        if (queued != file->waiters.end()) {
          // A re-sent request whose waiter a cycle now runs through: the client is told to
          // stop waiting, so the waiter goes (a conflict remains, so the file stays in use).
          out.waiters_removed.push_back(queued->id);
          EraseWaiter(*file, queued);
          Account(*file, *owner, -1);
        }
        return out;
      }
      if (queued != file->waiters.end()) {  // A retransmission: same waiter.
        out.waiter = queued->id;
        return out;
      }
    }
    if ((host != nullptr && host->waiters >= options_.max_waiters_per_host) ||
        waiters_ >= options_.max_waiters) {
      out.status = LockStatus::kNoResources;
      return out;
    }
    const std::optional<OwnerRef> ref =
        EnsureOwner(request.owner, owner, host, HostRegistry::Admission::kWithinLimit);
    if (!ref) {
      out.status = LockStatus::kNoResources;
      return out;
    }
    const WaiterId id(next_waiter_id_++);
    auto it = file->waiters.Append(
        Waiter{id, ref->id, range, request.type, Waiter::State::kQueued, clock_.Now(), {}, {}});
    waiter_index_.emplace(id.value(), WaiterLocation{file, it});
    wait_for_.Add(*it, file->locks);
    HostInfo& info = *HostOf(ref->id).info;
    ++info.waiters;
    ++waiters_;
    NoteHost(info, request.nsm_state, request.host_label, request.host_address);
    Account(*file, ref->id, 1);
    out.waiter = id;
    out.host_added = ref->host_added;
    out.host_activated = !was_active;
    return out;
  }

  const bool at_limit = locks_ >= options_.max_locks ||
                        (host != nullptr && host->locks >= options_.max_locks_per_host);
  // At the limit, a lock the owner already holds (a retransmission) is still answered.
  if (at_limit &&
      !(owner && file != nullptr && file->locks.Holds(*owner, range, request.type, false))) {
    out.status = LockStatus::kNoResources;
    return out;
  }
  const std::optional<OwnerRef> ref =
      EnsureOwner(request.owner, owner, host, HostRegistry::Admission::kWithinLimit);
  if (!ref) {
    out.status = LockStatus::kNoResources;
    return out;
  }
  FileState& target = UseFile(file, request.file);
  const TableDelta delta = target.locks.Lock(ref->id, range, request.type, false);
  AddLockCounts(ref->id, delta);
  int64_t records = delta.entries;
  // The owner's own LOCK decides these bytes from now on, whatever its pending grants there
  // become; and the client holds the lock now whatever happened to a GRANTED callback for it.
  if (!target.waiters.empty()) {
    SettleOwnerGrants(target, ref->id, range);
    if (auto settled = SettlePendingGrant(target, ref->id, range, request.type)) {
      --records;
      out.waiters_removed.push_back(*settled);
    }
  }
  NoteHost(*HostOf(ref->id).info, request.nsm_state, request.host_label, request.host_address);
  if (delta.released) ServeWaiters(target, *delta.released, out.grants);
  Account(target, ref->id, records);
  out.status = LockStatus::kGranted;
  out.host_added = ref->host_added;
  out.host_activated = !was_active;
  return out;
}

TestOutcome LockManager::Test(const LockRequest& request) {
  TestOutcome out;
  const std::optional<RangeCall> call =
      OpenRangeCall(request.file, request.owner, request.offset, request.length, out.grants);
  if (!call) {
    out.status = LockStatus::kInvalidRange;
    return out;
  }
  const auto [range, file, owner, host] = *call;
  if (grace_.IsActive() && (grace_.mode() == GraceMode::kClassic ||
                            ConflictsWithAwaiting(file, owner, range, request.type))) {
    out.status = LockStatus::kDeniedGrace;
    return out;
  }
  const LockEntry* conflict =
      file == nullptr ? nullptr
                      : file->locks.FindConflict(owner.value_or(NoOwner()), range, request.type);
  if (conflict != nullptr) {
    out.status = LockStatus::kDenied;
    out.holder = Holder{owners_.owner(conflict->owner), conflict->type, conflict->range};
  }
  return out;
}

UnlockOutcome LockManager::Unlock(const FileKey& file_key, const LockOwner& lock_owner,
                                  uint64_t offset, uint64_t length) {
  UnlockOutcome out;
  const std::optional<RangeCall> call =
      OpenRangeCall(file_key, lock_owner, offset, length, out.grants);
  if (!call) {
    out.status = LockStatus::kInvalidRange;
    return out;
  }
  const auto [range, file, owner, host] = *call;
  if (file == nullptr || !owner) return out;

  // UNLOCK also cancels the owner's blocks over the range (as Linux lockd), and settles
  // its granted ones there: the client is done with that range.
  int64_t records = 0;
  for (auto it = file->waiters.begin(); it != file->waiters.end();) {
    auto next = std::next(it);
    if (it->owner == *owner && it->range.Overlaps(range)) {
      if (it->state == Waiter::State::kQueued) {
        ++out.waiters_cancelled;
      } else {
        SettleOlderGrants(*file, *it);  // The rest of the grant stands.
      }
      out.waiters_removed.push_back(it->id);
      EraseWaiter(*file, it);
      --records;
    }
    it = next;
  }
  records += ReleaseRange(*file, *owner, range, out.grants);
  Account(*file, *owner, records);
  ReleaseFileIfEmpty(*file);
  return out;
}

CancelOutcome LockManager::Cancel(const LockRequest& request) {
  CancelOutcome out;
  const std::optional<RangeCall> call =
      OpenRangeCall(request.file, request.owner, request.offset, request.length, out.grants);
  if (!call) {
    out.result = CancelResult::kInvalidRange;
    return out;
  }
  const auto [range, file, owner, host] = *call;
  if (file == nullptr || !owner) return out;

  auto it = file->waiters.Find(*owner, range, request.type, Waiter::State::kQueued);
  if (it != file->waiters.end()) {
    // A queued waiter holds nothing and blocks no one: removing it frees nothing.
    out.waiters_removed.push_back(it->id);
    EraseWaiter(*file, it);
    Account(*file, *owner, -1);
    ReleaseFileIfEmpty(*file);
    out.result = CancelResult::kCancelled;
    return out;
  }
  it = file->waiters.Find(*owner, range, request.type, Waiter::State::kGranted);
  if (it == file->waiters.end()) return out;
  // CANCEL of a block that was already granted (not yet acknowledged) undoes the grant.
  out.waiters_removed.push_back(it->id);
  const int64_t records = UndoGrant(*file, it, out.grants);
  Account(*file, *owner, records);
  ReleaseFileIfEmpty(*file);
  out.result = CancelResult::kGrantUndone;
  return out;
}

RevokeOutcome LockManager::RevokeGrant(WaiterId id) {
  RevokeOutcome out;
  CheckGrace(out.grants);
  auto found = waiter_index_.find(id.value());
  if (found == waiter_index_.end() || found->second.it->state != Waiter::State::kGranted) {
    return out;
  }
  FileState& file = *found->second.file;
  const OwnerId owner = found->second.it->owner;
  const int64_t records = UndoGrant(file, found->second.it, out.grants);
  Account(file, owner, records);
  ReleaseFileIfEmpty(file);
  out.revoked = true;
  return out;
}

bool LockManager::AcknowledgeGrant(WaiterId id) {
  auto found = waiter_index_.find(id.value());
  if (found == waiter_index_.end() || found->second.it->state != Waiter::State::kGranted) {
    return false;
  }
  FileState& file = *found->second.file;
  const OwnerId owner = found->second.it->owner;
  SettleOlderGrants(file, *found->second.it);
  EraseWaiter(file, found->second.it);
  Account(file, owner, -1);
  ReleaseFileIfEmpty(file);
  return true;
}

// --- Share reservations ------------------------------------------------------------------------

ShareOutcome LockManager::Share(const ShareRequest& request) {
  ShareOutcome out;
  CheckGrace(out.grants);
  FileState* file = FindFile(request.file);
  const std::optional<OwnerId> owner = FindOwner(request.owner);
  HostInfo* host = TouchHost(request.owner, owner);
  const OwnerId requester = owner.value_or(NoOwner());

  // As for locks: re-reclaiming the reservation the owner still holds is granted.
  if (request.reclaim && !grace_.IsActive() && owner && file != nullptr) {
    const ShareEntry* held = file->shares.Find(*owner);
    if (held != nullptr && !held->awaiting_reclaim && held->access == request.access &&
        held->deny == request.deny) {
      out.status = LockStatus::kGranted;
      return out;
    }
  }
  const bool refused_by_grace =
      request.reclaim
          ? !grace_.IsActive()
          : grace_.IsActive() &&
                (grace_.mode() == GraceMode::kClassic ||
                 (file != nullptr && file->shares.FindAwaitingConflict(requester, request.access,
                                                                       request.deny) != nullptr));
  if (refused_by_grace) {
    out.status = LockStatus::kDeniedGrace;
    return out;
  }
  if (file != nullptr) {
    if (const ShareEntry* conflict =
            file->shares.FindConflict(requester, request.access, request.deny)) {
      out.status = LockStatus::kDenied;
      out.holder = ShareHolder{owners_.owner(conflict->owner), conflict->access, conflict->deny};
      return out;
    }
  }
  const bool was_active = host != nullptr && host->HoldsState();
  const bool replaces = owner && file != nullptr && file->shares.Find(*owner) != nullptr;
  if (!replaces && host != nullptr && host->shares >= options_.max_shares_per_host) {
    out.status = LockStatus::kNoResources;
    return out;
  }
  const std::optional<OwnerRef> ref =
      EnsureOwner(request.owner, owner, host, HostRegistry::Admission::kWithinLimit);
  if (!ref) {
    out.status = LockStatus::kNoResources;
    return out;
  }
  FileState& target = UseFile(file, request.file);
  const ShareTable::Delta delta =
      target.shares.Set(ShareEntry{ref->id, request.access, request.deny, false});
  AddShareCounts(ref->id, delta);
  NoteHost(*HostOf(ref->id).info, std::nullopt, request.host_label, request.host_address);
  Account(target, ref->id, delta.entries);
  out.host_added = ref->host_added;
  out.host_activated = !was_active;
  return out;
}

UnshareOutcome LockManager::Unshare(const FileKey& file_key, const LockOwner& lock_owner) {
  UnshareOutcome out;
  CheckGrace(out.grants);
  FileState* file = FindFile(file_key);
  const std::optional<OwnerId> owner = FindOwner(lock_owner);
  TouchHost(lock_owner, owner);
  if (file == nullptr || !owner) return out;
  const ShareTable::Delta delta = file->shares.Remove(*owner);
  if (delta.entries == 0) return out;
  AddShareCounts(*owner, delta);
  Account(*file, *owner, -1);
  ReleaseFileIfEmpty(*file);
  out.removed = true;
  return out;
}

}  // namespace nlockd::lock
