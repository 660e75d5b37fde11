// SPDX-License-Identifier: Apache-2.0
// LockManager: undoing a change that was made but must not stand. A LOCK, UNLOCK, SHARE or
// UNSHARE the protocol layer could not persist, and a granted block taken back (CANCEL, a
// revoked grant), give the owner back exactly what it held before over the range, not nothing:
// an upgrade that is undone leaves the shared lock it upgraded.

#include <algorithm>
#include <utility>

#include "base/error.hpp"
#include "lock/lock_manager.hpp"

namespace nlockd::lock {

namespace {

using PriorEntries = std::vector<PriorLocks::Entry>;

// Replaces the entries of `prior` over `piece` by those of `below` over it.
void HandDown(PriorEntries& prior, const ByteRange& piece, const PriorEntries& below) {
  PriorEntries out;
  out.reserve(prior.size() + below.size() + 1);
  for (const PriorLocks::Entry& e : prior) {
    if (!e.range.Overlaps(piece)) {
      out.push_back(e);
      continue;
    }
    if (e.range.first() < piece.first()) {
      out.push_back({ByteRange::FromFirstLast(e.range.first(), piece.first() - 1), e.type,
                     e.awaiting_reclaim});
    }
    if (e.range.last() > piece.last()) {
      out.push_back(
          {ByteRange::FromFirstLast(piece.last() + 1, e.range.last()), e.type, e.awaiting_reclaim});
    }
  }
  for (const PriorLocks::Entry& e : below) {
    if (std::optional<ByteRange> both = Intersect(e.range, piece)) {
      out.push_back({*both, e.type, e.awaiting_reclaim});
    }
  }
  std::sort(out.begin(), out.end(), [](const PriorLocks::Entry& a, const PriorLocks::Entry& b) {
    return a.range.first() < b.range.first();
  });
  prior = std::move(out);
}

// The bytes of `grant`'s range that it still decides.
RangeSet Undecided(const Waiter& grant) {
  RangeSet live(grant.range);
  live.Subtract(grant.undo.settled);
  return live;
}

bool IsGrantOf(const Waiter& waiter, OwnerId owner) {
  return waiter.state == Waiter::State::kGranted && waiter.owner == owner;
}

}  // namespace

PriorEntries LockManager::OwnerLocksOver(const FileState& file, OwnerId owner,
                                         const ByteRange& range) {
  PriorEntries locks;
  file.locks.ForEachOverlapping(range, [&](const LockEntry& e) {
    if (e.owner != owner) return;
    locks.push_back(PriorLocks::Entry{*Intersect(e.range, range), e.type, e.awaiting_reclaim});
  });
  return locks;
}

std::optional<PriorLocks> LockManager::SnapshotLocks(const FileKey& file_key,
                                                     const LockOwner& lock_owner, uint64_t offset,
                                                     uint64_t length) const {
  const std::optional<ByteRange> range = ByteRange::FromOffsetLength(offset, length);
  if (!range) return std::nullopt;
  const std::optional<OwnerId> owner = FindOwner(lock_owner);
  // A known owner leads to its host without a look-up by name.
  const uint64_t releases = owner ? HostOf(*owner).info->releases : HostReleases(lock_owner.host);
  PriorLocks prior{*range, {}, next_grant_seq_, {}, releases};
  if (!owner) return prior;
  const FileState* file = FindFile(file_key);
  if (file == nullptr) return prior;
  prior.locks = OwnerLocksOver(*file, *owner, *range);
  for (const Waiter& below : file->waiters) {
    if (!IsGrantOf(below, *owner) || !below.range.Overlaps(*range)) continue;
    RangeSet decided = Undecided(below).Within(*range);
    if (!decided.empty()) prior.grants_below.emplace_back(below.id.value(), std::move(decided));
  }
  return prior;
}

std::vector<PriorLocks::Entry> LockManager::OwnedLocks(const FileKey& file_key,
                                                       const LockOwner& lock_owner,
                                                       const ByteRange& range) const {
  std::vector<PriorLocks::Entry> held;
  OwnedLocks(file_key, lock_owner, range, held);
  return held;
}

void LockManager::OwnedLocks(const FileKey& file_key, const LockOwner& lock_owner,
                             const ByteRange& range, std::vector<PriorLocks::Entry>& held) const {
  held.clear();
  const std::optional<OwnerId> owner = FindOwner(lock_owner);
  if (!owner) return;  // an owner holds something: no file to look up
  const FileState* file = FindFile(file_key);
  if (file == nullptr) return;
  file->locks.ForEachOverlapping(range, [&](const LockEntry& e) {
    if (e.owner == *owner) held.push_back(PriorLocks::Entry{e.range, e.type, e.awaiting_reclaim});
  });
}

void LockManager::SettleOwnerGrants(FileState& file, OwnerId owner, const ByteRange& range) {
  for (Waiter& waiter : file.waiters) {
    if (!IsGrantOf(waiter, owner)) continue;
    if (std::optional<ByteRange> both = Intersect(waiter.range, range)) {
      waiter.undo.settled.Add(*both);
    }
  }
}

void LockManager::SettleOlderGrants(FileState& file, const Waiter& grant) {
  const auto older = [&](const Waiter& w) {
    return &w != &grant && IsGrantOf(w, grant.owner) && w.undo.seq < grant.undo.seq &&
           w.range.Overlaps(grant.range);
  };
  if (std::none_of(file.waiters.begin(), file.waiters.end(), older)) return;
  const RangeSet decided = Undecided(grant);
  for (Waiter& waiter : file.waiters) {
    if (!older(waiter)) continue;
    for (const ByteRange& piece : decided.Within(waiter.range)) waiter.undo.settled.Add(piece);
  }
}

std::vector<Waiter*> LockManager::LaterGrants(FileState& file, OwnerId owner, uint64_t first_seq,
                                              const ByteRange& range) {
  std::vector<Waiter*> later;
  for (Waiter& waiter : file.waiters) {
    if (IsGrantOf(waiter, owner) && waiter.undo.seq >= first_seq && waiter.range.Overlaps(range)) {
      later.push_back(&waiter);
    }
  }
  std::sort(later.begin(), later.end(),
            [](const Waiter* a, const Waiter* b) { return a->undo.seq < b->undo.seq; });
  return later;
}

int64_t LockManager::ReplaceOwnerLocks(FileState& file, OwnerId owner, const RangeSet& bytes,
                                       const std::vector<PriorLocks::Entry>& prior,
                                       bool with_awaiting, std::optional<ByteRange>& released) {
  int64_t records = 0;
  for (const ByteRange& piece : bytes) {
    const TableDelta removed = file.locks.Unlock(owner, piece);
    AddLockCounts(owner, removed);
    records += removed.entries;
    if (removed.released) {
      released = released ? released->Hull(*removed.released) : *removed.released;
    }
  }
  for (const PriorLocks::Entry& e : prior) {
    if (e.awaiting_reclaim && !with_awaiting) continue;
    for (const ByteRange& piece : bytes.Within(e.range)) {
      const TableDelta added = file.locks.Lock(owner, piece, e.type, e.awaiting_reclaim);
      AddLockCounts(owner, added);
      records += added.entries;
    }
  }
  return records;
}

int64_t LockManager::UndoGrant(FileState& file, WaiterQueue::iterator grant, Grants& grants) {
  const OwnerId owner = grant->owner;
  const PriorEntries prior = std::move(grant->undo.prior);
  RangeSet top = Undecided(*grant);
  // Later grants of the owner sit on top of this one where they overlap: the table stays as
  // they made it, and what this grant replaced becomes what they give back if undone.
  for (Waiter* above : LaterGrants(file, owner, grant->undo.seq + 1, grant->range)) {
    const RangeSet covered = top.Within(Undecided(*above));
    for (const ByteRange& piece : covered) HandDown(above->undo.prior, piece, prior);
    top.Subtract(covered);
  }
  EraseWaiter(file, grant);
  int64_t records = -1;
  if (top.empty()) return records;

  // A restored lock the grant replaced comes back only while grace lasts (its end dropped the
  // unclaimed ones). A prior lock another owner's lock now conflicts with stays as the grant
  // left it (shared): the grant downgraded it and someone took what it gave up.
  const bool grace = grace_.IsActive();
  for (const PriorLocks::Entry& e : prior) {
    if (e.awaiting_reclaim && !grace) continue;
    for (const ByteRange& piece : top.Within(e.range)) {
      file.locks.ForEachOverlapping(piece, [&](const LockEntry& held) {
        if (held.owner != owner && TypesConflict(held.type, e.type)) {
          top.Subtract(*Intersect(held.range, piece));
        }
      });
    }
  }
  // Replace the owner's locks before any waiter is served, so that no waiter is granted bytes
  // the owner takes back.
  std::optional<ByteRange> released;
  records += ReplaceOwnerLocks(file, owner, top, prior, grace, released);
  if (released) ServeWaiters(file, *released, grants);
  return records;
}

uint64_t LockManager::HostReleases(const HostId& host) const {
  const HostInfo* info = hosts_.Find(host);
  return info != nullptr ? info->releases : 0;
}

std::optional<LockManager::RestoreTarget> LockManager::FindRestoreTarget(
    const FileKey& file_key, const LockOwner& lock_owner, uint64_t host_releases,
    bool held_before) {
  if (HostReleases(lock_owner.host) != host_releases) return std::nullopt;
  FileState* file = FindFile(file_key);
  std::optional<OwnerId> owner = FindOwner(lock_owner);
  if (file != nullptr && owner) return RestoreTarget{file, *owner};
  if (!held_before) return std::nullopt;
  // The undone call released the owner's last record here: admitted before, so past limits.
  const std::optional<OwnerRef> ref =
      EnsureOwner(lock_owner, owner, nullptr, HostRegistry::Admission::kForce);
  NLOCKD_ASSERT(ref.has_value());
  return RestoreTarget{&UseFile(file, file_key), ref->id};
}

RestoreOutcome LockManager::RestoreLocks(const FileKey& file_key, const LockOwner& lock_owner,
                                         const PriorLocks& prior) {
  RestoreOutcome out;
  CheckGrace(out.grants);
  out.restored = true;
  const std::optional<RestoreTarget> target =
      FindRestoreTarget(file_key, lock_owner, prior.host_releases, !prior.locks.empty());
  if (!target) return out;
  FileState* file = target->file;
  const std::optional<OwnerId> owner = target->owner;
  // Grants of the owner's blocked requests made since the snapshot sit on top of the call: the
  // bytes they decide stay as they made them, and they inherit the prior state there.
  const std::vector<Waiter*> later = LaterGrants(*file, *owner, prior.next_grant, prior.range);
  RangeSet top(prior.range);
  std::vector<RangeSet> covered;
  covered.reserve(later.size());
  for (const Waiter* above : later) {
    covered.push_back(top.Within(Undecided(*above)));
    top.Subtract(covered.back());
  }
  // Only what the call gave up (a downgrade's exclusivity, an unlock's locks) can have been
  // taken by others while it was in flight.
  for (const PriorLocks::Entry& e : prior.locks) {
    for (const ByteRange& piece : top.Within(e.range)) {
      if (file->locks.FindConflict(*owner, piece, e.type) != nullptr) {
        out.restored = false;
        Account(*file, *owner, 0);  // Forgets an owner made again for nothing.
        ReleaseFileIfEmpty(*file);
        return out;
      }
    }
  }
  for (size_t i = 0; i < later.size(); ++i) {
    for (const ByteRange& piece : covered[i]) HandDown(later[i]->undo.prior, piece, prior.locks);
  }
  for (const auto& [id, decided] : prior.grants_below) {
    auto found = waiter_index_.find(id);
    if (found == waiter_index_.end() || !IsGrantOf(*found->second.it, *owner)) continue;
    for (const ByteRange& piece : decided) found->second.it->undo.settled.Subtract(piece);
  }
  std::optional<ByteRange> released;
  const int64_t records =
      ReplaceOwnerLocks(*file, *owner, top, prior.locks, /*with_awaiting=*/true, released);
  if (released) ServeWaiters(*file, *released, out.grants);
  Account(*file, *owner, records);
  ReleaseFileIfEmpty(*file);
  return out;
}

PriorShare LockManager::SnapshotShare(const FileKey& file_key, const LockOwner& lock_owner) const {
  PriorShare prior{std::nullopt, HostReleases(lock_owner.host)};
  const FileState* file = FindFile(file_key);
  const std::optional<OwnerId> owner = FindOwner(lock_owner);
  if (file == nullptr || !owner) return prior;
  if (const ShareEntry* e = file->shares.Find(*owner)) {
    prior.share = PriorShare::Entry{e->access, e->deny, e->awaiting_reclaim};
  }
  return prior;
}

RestoreOutcome LockManager::RestoreShare(const FileKey& file_key, const LockOwner& lock_owner,
                                         const PriorShare& prior) {
  RestoreOutcome out;
  CheckGrace(out.grants);
  out.restored = true;
  const std::optional<RestoreTarget> target =
      FindRestoreTarget(file_key, lock_owner, prior.host_releases, prior.share.has_value());
  if (!target) return out;
  FileState* file = target->file;
  const std::optional<OwnerId> owner = target->owner;
  ShareTable::Delta delta;
  if (prior.share) {
    if (file->shares.FindConflict(*owner, prior.share->access, prior.share->deny) != nullptr) {
      out.restored = false;       // The call weakened the reservation and another owner used that.
      Account(*file, *owner, 0);  // Forgets an owner made again for nothing.
      ReleaseFileIfEmpty(*file);
      return out;
    }
    delta = file->shares.Set(
        ShareEntry{*owner, prior.share->access, prior.share->deny, prior.share->awaiting_reclaim});
  } else {
    delta = file->shares.Remove(*owner);
  }
  AddShareCounts(*owner, delta);
  Account(*file, *owner, delta.entries);
  ReleaseFileIfEmpty(*file);
  return out;
}

}  // namespace nlockd::lock
