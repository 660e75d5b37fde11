// SPDX-License-Identifier: Apache-2.0
// LockManager: host release, grace period and restored state.

#include <exception>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "lock/lock_manager.hpp"

namespace nlockd::lock {

HostReleaseOutcome LockManager::ReleaseHost(const HostId& host) {
  HostReleaseOutcome out;
  CheckGrace(out.grants);
  HostInfo* info = hosts_.Find(host);
  if (info == nullptr) return out;
  ++info->releases;
  auto state = host_states_.find(info);
  if (state == host_states_.end()) return out;
  std::vector<FileState*> files;
  files.reserve(state->second.files.size());
  for (const auto& [file, records] : state->second.files) files.push_back(file);

  const auto of_host = [&](OwnerId id) { return owners_.owner(id).host == host; };
  for (FileState* file : files) {
    // Best effort: a failure in one file (only an allocation can fail) leaves the rest to do.
    try {
      const Removal removed = RemoveFromFile(*file, of_host, /*awaiting_only=*/false, out.grants);
      out.locks += removed.locks;
      out.shares += removed.shares;
      out.waiters += removed.waiters;
      out.pending_grants += removed.pending_grants;
      out.restored += removed.restored;
    } catch (const std::exception&) {
      ++out.files_failed;
    }
  }
  return out;
}

LockManager::Removal LockManager::RemoveFromFile(FileState& file,
                                                 const std::function<bool(OwnerId)>& owner_match,
                                                 bool awaiting_only, Grants& grants) {
  Removal out;
  // Record deltas per owner, applied last so that no owner disappears while still in use.
  std::unordered_map<uint32_t, int64_t> records;
  std::optional<ByteRange> released;

  if (awaiting_only) {
    // A pending grant that replaced a restored lock now dropped gives nothing back there.
    for (Waiter& waiter : file.waiters) {
      if (waiter.state != Waiter::State::kGranted || !owner_match(waiter.owner)) continue;
      std::erase_if(waiter.undo.prior,
                    [](const PriorLocks::Entry& e) { return e.awaiting_reclaim; });
    }
  } else {
    for (auto it = file.waiters.begin(); it != file.waiters.end();) {
      auto next = std::next(it);
      if (owner_match(it->owner)) {
        ++(it->state == Waiter::State::kQueued ? out.waiters : out.pending_grants);
        --records[it->owner.value()];
        EraseWaiter(file, it);
      }
      it = next;
    }
  }
  if (!awaiting_only || file.locks.awaiting_count() != 0) {
    const std::vector<LockEntry> removed = file.locks.RemoveIf([&](const LockEntry& e) {
      return (!awaiting_only || e.awaiting_reclaim) && owner_match(e.owner);
    });
    for (const LockEntry& e : removed) {
      AddLockCounts(e.owner, TableDelta{-1, e.awaiting_reclaim ? -1 : 0, std::nullopt});
      --records[e.owner.value()];
      released = released ? released->Hull(e.range) : e.range;
      if (e.awaiting_reclaim) ++out.restored;
    }
    out.locks = removed.size();
  }
  if (!awaiting_only || file.shares.awaiting_count() != 0) {
    const std::vector<ShareEntry> removed = file.shares.RemoveIf([&](const ShareEntry& e) {
      return (!awaiting_only || e.awaiting_reclaim) && owner_match(e.owner);
    });
    for (const ShareEntry& e : removed) {
      --HostOf(e.owner).info->shares;
      --shares_;
      if (e.awaiting_reclaim) {
        --awaiting_shares_;
        ++out.restored;
      }
      --records[e.owner.value()];
    }
    out.shares = removed.size();
  }
  dropped_restored_ += out.restored;
  if (released) ServeWaiters(file, *released, grants);
  for (const auto& [owner, delta] : records) Account(file, OwnerId(owner), delta);
  ReleaseFileIfEmpty(file);
  return out;
}

void LockManager::StartGrace(GraceMode mode, std::optional<Clock::duration> duration) {
  grace_.Start(mode, duration);
}

void LockManager::CheckGrace(Grants& grants) {
  if (!grace_.Expired()) return;
  DropOutcome dropped = EndGrace(GraceEndReason::kTimer);
  if (grants.empty()) {
    grants = std::move(dropped.grants);
  } else {
    grants.insert(grants.end(), dropped.grants.begin(), dropped.grants.end());
  }
}

DropOutcome LockManager::Tick() {
  if (!grace_.Expired()) return {};
  return EndGrace(GraceEndReason::kTimer);
}

DropOutcome LockManager::EndGrace(GraceEndReason reason) {
  if (!grace_.End(reason)) return {};
  if (AwaitingReclaimCount() == 0) return {};
  std::vector<FileState*> files;
  for (auto& [key, file] : files_) {
    if (file.locks.awaiting_count() != 0 || file.shares.awaiting_count() != 0) {
      files.push_back(&file);
    }
  }
  return DropAwaiting([](OwnerId) { return true; }, std::move(files));
}

DropOutcome LockManager::DropRestored(const HostId& host) {
  HostInfo* info = hosts_.Find(host);
  if (info == nullptr) return {};
  auto state = host_states_.find(info);
  if (state == host_states_.end()) return {};
  std::vector<FileState*> files;
  for (const auto& [file, records] : state->second.files) {
    // Also where a pending grant may have replaced a restored lock (its undo must not bring
    // that back).
    const bool grants = file->waiters.size() > file->waiters.queued_count();
    if (file->locks.awaiting_count() != 0 || file->shares.awaiting_count() != 0 || grants) {
      files.push_back(file);
    }
  }
  return DropAwaiting([&](OwnerId id) { return owners_.owner(id).host == host; }, std::move(files));
}

DropOutcome LockManager::DropAwaiting(const std::function<bool(OwnerId)>& owner_match,
                                      std::vector<FileState*> files) {
  DropOutcome out;
  for (FileState* file : files) {
    const Removal removed = RemoveFromFile(*file, owner_match, /*awaiting_only=*/true, out.grants);
    out.locks += removed.locks;
    out.shares += removed.shares;
  }
  return out;
}

LoadOutcome LockManager::LoadRestored(std::span<const RestoredLock> locks,
                                      std::span<const RestoredShare> shares) {
  NLOCKD_REQUIRE(grace_.IsActive(), "restored state is loaded during grace");
  LoadOutcome out;
  for (const RestoredLock& lock : locks) {
    FileState* file = FindFile(lock.file);
    const std::optional<OwnerId> owner = FindOwner(lock.owner);
    if (file != nullptr &&
        file->locks.FindConflict(owner.value_or(NoOwner()), lock.range, lock.type)) {
      ++out.rejected;
      continue;
    }
    const std::optional<OwnerRef> ref =
        EnsureOwner(lock.owner, owner, nullptr, HostRegistry::Admission::kForce);
    NLOCKD_ASSERT(ref.has_value());
    FileState& target = UseFile(file, lock.file);
    if (!target.waiters.empty()) SettleOwnerGrants(target, ref->id, lock.range);
    const TableDelta delta = target.locks.Lock(ref->id, lock.range, lock.type, true);
    AddLockCounts(ref->id, delta);
    if (delta.released) ServeWaiters(target, *delta.released, out.grants);
    Account(target, ref->id, delta.entries);
    ++out.locks;
  }
  for (const RestoredShare& share : shares) {
    FileState* file = FindFile(share.file);
    const std::optional<OwnerId> owner = FindOwner(share.owner);
    if (file != nullptr &&
        file->shares.FindConflict(owner.value_or(NoOwner()), share.access, share.deny)) {
      ++out.rejected;
      continue;
    }
    const std::optional<OwnerRef> ref =
        EnsureOwner(share.owner, owner, nullptr, HostRegistry::Admission::kForce);
    NLOCKD_ASSERT(ref.has_value());
    FileState& target = UseFile(file, share.file);
    const ShareTable::Delta delta =
        target.shares.Set(ShareEntry{ref->id, share.access, share.deny, true});
    AddShareCounts(ref->id, delta);
    Account(target, ref->id, delta.entries);
    ++out.shares;
  }
  return out;
}

}  // namespace nlockd::lock
