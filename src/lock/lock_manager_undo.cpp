// LockManager: undoing a LOCK or SHARE that was granted but must still fail (the protocol
// layer could not persist it). The undo gives the owner back exactly what it held before over
// the call's range, not nothing: an upgrade that fails leaves the shared lock it upgraded.

#include <algorithm>

#include "lock/lock_manager.hpp"

namespace nlockd::lock {

std::optional<PriorLocks> LockManager::SnapshotLocks(const FileKey& file_key,
                                                     const LockOwner& lock_owner, uint64_t offset,
                                                     uint64_t length) const {
  const std::optional<ByteRange> range = ByteRange::FromOffsetLength(offset, length);
  if (!range) return std::nullopt;
  PriorLocks prior{file_key, lock_owner, *range, {}};
  const FileState* file = FindFile(file_key);
  const std::optional<OwnerId> owner = FindOwner(lock_owner);
  if (file == nullptr || !owner) return prior;
  file->locks.ForEachOverlapping(*range, [&](const LockEntry& e) {
    if (e.owner != *owner) return;
    const ByteRange clipped = ByteRange::FromFirstLast(std::max(e.range.first(), range->first()),
                                                       std::min(e.range.last(), range->last()));
    prior.locks.push_back(PriorLocks::Entry{clipped, e.type, e.awaiting_reclaim});
  });
  return prior;
}

std::vector<PriorLocks::Entry> LockManager::OwnedLocks(const FileKey& file_key,
                                                      const LockOwner& lock_owner,
                                                      const ByteRange& range) const {
  std::vector<PriorLocks::Entry> held;
  const FileState* file = FindFile(file_key);
  const std::optional<OwnerId> owner = FindOwner(lock_owner);
  if (file == nullptr || !owner) return held;
  file->locks.ForEachOverlapping(range, [&](const LockEntry& e) {
    if (e.owner == *owner) held.push_back(PriorLocks::Entry{e.range, e.type, e.awaiting_reclaim});
  });
  return held;
}

RestoreOutcome LockManager::RestoreLocks(const PriorLocks& prior) {
  RestoreOutcome out;
  CheckGrace(out.grants);
  FileState* file = FindFile(prior.file);
  const std::optional<OwnerId> owner = FindOwner(prior.owner);
  out.restored = true;
  if (file == nullptr || !owner) return out;  // Nothing held now; a host release stands.
  // While the call was in flight the owner held at least the call's lock over the range, so
  // only what the call gave up (a downgrade's exclusivity) can have been taken by others.
  for (const PriorLocks::Entry& e : prior.locks) {
    if (file->locks.FindConflict(*owner, e.range, e.type) != nullptr) {
      out.restored = false;
      return out;
    }
  }
  // Replace the owner's entries over the range by the prior ones before any waiter is served,
  // so that no waiter is granted bytes the owner takes back.
  const TableDelta removed = file->locks.Unlock(*owner, prior.range);
  AddLockCounts(*owner, removed);
  int64_t records = removed.entries;
  for (const PriorLocks::Entry& e : prior.locks) {
    const TableDelta added = file->locks.Lock(*owner, e.range, e.type, e.awaiting_reclaim);
    AddLockCounts(*owner, added);
    records += added.entries;
  }
  if (removed.released) ServeWaiters(*file, *removed.released, out.grants);
  Account(*file, *owner, records);
  ReleaseFileIfEmpty(*file);
  return out;
}

PriorShare LockManager::SnapshotShare(const FileKey& file_key, const LockOwner& lock_owner) const {
  PriorShare prior{file_key, lock_owner, std::nullopt};
  const FileState* file = FindFile(file_key);
  const std::optional<OwnerId> owner = FindOwner(lock_owner);
  if (file == nullptr || !owner) return prior;
  if (const ShareEntry* e = file->shares.Find(*owner)) {
    prior.share = PriorShare::Entry{e->access, e->deny, e->awaiting_reclaim};
  }
  return prior;
}

RestoreOutcome LockManager::RestoreShare(const PriorShare& prior) {
  RestoreOutcome out;
  CheckGrace(out.grants);
  FileState* file = FindFile(prior.file);
  const std::optional<OwnerId> owner = FindOwner(prior.owner);
  out.restored = true;
  if (file == nullptr || !owner) return out;  // Nothing held now; a host release stands.
  ShareTable::Delta delta;
  if (prior.share) {
    if (file->shares.FindConflict(*owner, prior.share->access, prior.share->deny) != nullptr) {
      out.restored = false;  // The call weakened the reservation and another owner used that.
      return out;
    }
    delta = file->shares.Set(
        ShareEntry{*owner, prior.share->access, prior.share->deny, prior.share->awaiting_reclaim});
  } else {
    delta = file->shares.Remove(*owner);
  }
  HostInfo& info = *HostOf(*owner).info;
  info.shares = static_cast<uint64_t>(static_cast<int64_t>(info.shares) + delta.entries);
  shares_ = static_cast<size_t>(static_cast<int64_t>(shares_) + delta.entries);
  awaiting_shares_ = static_cast<size_t>(static_cast<int64_t>(awaiting_shares_) + delta.awaiting);
  Account(*file, *owner, delta.entries);
  ReleaseFileIfEmpty(*file);
  return out;
}

}  // namespace nlockd::lock
