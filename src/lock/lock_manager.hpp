// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/clock.hpp"
#include "lock/file_state.hpp"
#include "lock/grace_period.hpp"
#include "lock/host_registry.hpp"
#include "lock/outcomes.hpp"
#include "lock/owner_table.hpp"
#include "lock/prior_state.hpp"
#include "lock/requests.hpp"
#include "lock/snapshot.hpp"
#include "lock/wait_for.hpp"

namespace nlockd::lock {

struct LockManagerOptions {
  // Stops a flood of client identities (spoofed source addresses, invented caller_names).
  size_t max_hosts = 10'000;
  // Stops all clients together from exhausting memory (~100 bytes per lock entry).
  size_t max_locks = 10'000'000;
  // Stops one client from taking the whole budget by fragmenting ranges. Checked before a Lock;
  // one Lock adds at most two entries, and waiter grants and unlock splits are never refused, so
  // a host can exceed it by that much.
  size_t max_locks_per_host = 1'000'000;
  // Stops one client from filling a file's share list (share checks scan it).
  size_t max_shares_per_host = 10'000;
  // Stops one client from queuing unbounded blocked requests (each release scans the file's
  // queue).
  size_t max_waiters_per_host = 10'000;
  // Stops many clients together from doing the same: without it, max_hosts times the per-host
  // cap (10^8 waiters, tens of GiB with their callback records). At either cap a blocking
  // request is refused with kNoResources; the client retries.
  size_t max_waiters = 100'000;
  // Stops one client from taking memory through the size of its owners rather than their
  // number: NLM allows 1 KiB owner handles, and each distinct owner is kept with its handle and
  // host name (OwnerBytes). 16 MiB is 13,000 owners with the largest handles, or 60,000 with
  // Linux's ("svid@hostname"); past it a request that needs a new owner gets kNoResources.
  size_t max_owner_bytes_per_host = 16 << 20;
  // Refuse a blocking request that would close a cycle of waiting owners (kDenied with
  // `deadlock`), within `wait_for`'s limits. Off: every such request waits, for ever.
  bool detect_deadlocks = true;
  WaitForLimits wait_for{};
  // The grace period used when StartGrace() is given no duration (90 s, as Linux lockd).
  Clock::duration grace_duration = GracePeriod::kDefaultDuration;
  // Seeds the lock trees' priorities; pass a random value in production so that clients cannot
  // predict, and so unbalance, the tree shape. Tests use a fixed one.
  uint64_t seed = 0x6e6c6f636b64ULL;
};

// The protocol-free lock manager: POSIX byte-range locks (fcntl semantics as NLM carries them),
// blocked requests and their grants, share reservations, the client hosts, and the grace
// period. Protocol layers (NLM today) translate requests into these calls and outcomes into
// wire codes; nothing here knows XDR, sockets or SQL.
//
// Owns all lock state. Every call returns its outcome, including the blocked requests it granted
// (`grants`), for which the caller sends callbacks; there are no callbacks into the caller.
//
// Rules it implements (see the tests for each):
// - Owners are (host, svid, oh), compared whole. An owner's locks never conflict with each
//   other: a new lock replaces its overlapping ranges (upgrade, downgrade), touching ranges of
//   the same type merge, unlocking a middle part splits a lock. Unlocking what is not held
//   succeeds.
// - Blocked requests: one waiter per (file, owner, range, type), found again on a retransmit.
//   After any release (unlock, downgrade, cancel of a granted block, revoke, host release, drop
//   of restored locks) the file's waiters are examined in arrival order and each one that
//   conflicts with no held lock is granted at once, so the oldest waiter for a freed range gets
//   it first and no wake-up is lost. As in Linux (and as POSIX allows), a new request that
//   conflicts with no held lock is granted even if an older waiter wants the same range, and
//   a waiter is granted even if an older one is still blocked: holding requests back behind
//   older waiters would let an owner wait for an owner that waits for it (a deadlock that
//   POSIX programs do not expect). Readers can therefore overtake a waiting writer.
// - Unlock cancels the owner's queued waiters over the range (as Linux lockd), and forgets
//   its granted-unacknowledged ones there. A granted block is undone by Cancel or RevokeGrant:
//   the owner gets back what it held over the range just before the grant (an undone upgrade
//   leaves the shared lock), except on bytes it changed itself since (its own LOCK, or a grant
//   of it acknowledged since), which stay as they are, and on bytes where that prior lock would
//   now conflict with another owner's (the grant downgraded it and someone took the bytes),
//   which keep the grant's shared lock. An owner's pending grants stack in grant order; undoing
//   one below a later one hands its prior state to the later one.
// - Grace (docs/architecture.md, grace plans): reclaims are served only during grace (else
// kDeniedGrace) and
//   are granted unless they conflict; a reclaim takes over its owner's restored locks over the
//   range. New Lock/Test/Share get kDeniedGrace during classic grace, and during fine-grained
//   grace when they conflict with a restored lock or share still awaiting its reclaim. Unlock,
//   Cancel and Unshare are always served. When grace ends, still-awaiting restored state is
//   dropped.
// - Deadlocks (docs/architecture.md, deadlock detection): a blocking request that conflicts
//   is refused (kDenied, `deadlock` set) when one of the owners it would wait for waits,
//   directly or through others, for its owner, on any file of any host (WaitFor, within
//   options.wait_for's limits). So is a re-sent request of a queued waiter when such a cycle
//   formed since (a grant gave a waiting owner a lock that another waiter wants); that waiter is
//   the request and goes with it (waiters_removed). Nothing else changes: no other waiter is
//   dropped, no grant undone. Non-blocking requests and shares never wait, and a request refused
//   for grace is not queued, so none of them is checked or part of a cycle.
//
// Thread safety: none by design. One executor (a strand or a thread) owns the manager and makes
// every call; there are no mutexes. Returned references and views are valid until the next
// mutating call. `clock` must outlive the manager.
class LockManager {
 public:
  // Empty file records kept for reuse: up to this many, or as many as files in use.
  static constexpr size_t kMinIdleFiles = 1024;

  explicit LockManager(const Clock& clock, LockManagerOptions options = {});
  ~LockManager();
  LockManager(const LockManager&) = delete;
  LockManager& operator=(const LockManager&) = delete;

  // --- Byte-range locks -------------------------------------------------------------------

  // LOCK (and NM_LOCK). kGranted, kDenied (holder), kBlocked (block=true; holder and waiter),
  // kDeniedGrace, kNoResources or kInvalidRange.
  LockOutcome Lock(const LockRequest& request);
  // TEST: the first conflicting holder, lowest start first (block and reclaim are ignored).
  TestOutcome Test(const LockRequest& request);
  UnlockOutcome Unlock(const FileKey& file, const LockOwner& owner, uint64_t offset,
                       uint64_t length);
  // CANCEL of the blocked request (file, owner, range, type); undoes it if already granted
  // (see the class comment for what the owner gets back).
  CancelOutcome Cancel(const LockRequest& request);
  // The client refused the grant or could not be reached: undoes the grant as Cancel does. Does
  // nothing for an unknown or already acknowledged id, or for a waiter the owner's own Lock or
  // Unlock already settled.
  RevokeOutcome RevokeGrant(WaiterId id);
  // The client accepted the grant: forget the waiter. False if the id is not a pending grant.
  bool AcknowledgeGrant(WaiterId id);

  // --- Undo of a granted call (PriorLocks) -------------------------------------------------

  // The owner's locks over the range of a LOCK about to be made, to undo it exactly if it must
  // fail after the grant (lock_manager_undo.cpp). nullopt for a range Lock refuses anyway.
  // The owner's locks on the file that overlap `range` (all of them by default), unclipped, in
  // offset order: the lock journal's view of one owner.
  std::vector<PriorLocks::Entry> OwnedLocks(
      const FileKey& file, const LockOwner& owner,
      const ByteRange& range = ByteRange::FromFirstLast(0, ByteRange::kMaxOffset)) const;
  // The same into *held (cleared first), so that a caller per call reuses one buffer.
  void OwnedLocks(const FileKey& file, const LockOwner& owner, const ByteRange& range,
                  std::vector<PriorLocks::Entry>& held) const;
  std::optional<PriorLocks> SnapshotLocks(const FileKey& file, const LockOwner& owner,
                                          uint64_t offset, uint64_t length) const;
  // Gives the owner back, over the snapshot's range, exactly the locks it held then (making the
  // owner again if the undone call, an UNLOCK, released its last record), and serves the
  // waiters this frees. Does nothing (restored=false) if another owner now holds a lock that
  // conflicts with the prior ones; nothing either if the owner's host was released since the
  // snapshot (that release stands). Bytes that a grant of the owner's blocked request made
  // since the snapshot still decides stay as that grant made them (its undo gives back the
  // snapshot's state there).
  // REQUIRES: the owner made no other call on this file since the snapshot (NLM serialises an
  // owner's calls while one awaits its journal write).
  // REQUIRES: `file` and `owner` are those the snapshot was taken of.
  RestoreOutcome RestoreLocks(const FileKey& file, const LockOwner& owner, const PriorLocks& prior);
  PriorShare SnapshotShare(const FileKey& file, const LockOwner& owner) const;
  // The same for a SHARE or UNSHARE: puts the prior reservation back, or removes the owner's if
  // it had none.
  RestoreOutcome RestoreShare(const FileKey& file, const LockOwner& owner, const PriorShare& prior);

  // --- Share reservations -------------------------------------------------------------------

  ShareOutcome Share(const ShareRequest& request);
  UnshareOutcome Unshare(const FileKey& file, const LockOwner& owner);

  // --- Hosts ----------------------------------------------------------------------------------

  // Crash clean-up and FREE_ALL: drops every lock, share and waiter of the host and serves the
  // waiters this frees. Best effort per file. The host stays registered (idle).
  HostReleaseOutcome ReleaseHost(const HostId& host);
  // Removes an idle host from the registry (so its next lock reports host_added again).
  bool ForgetHost(const HostId& host) { return hosts_.Forget(host); }
  const HostRegistry& hosts() const { return hosts_; }

  // --- Grace and restored state -----------------------------------------------------------

  // Opens the grace period; `duration` overrides the configured one (a protocol's own window).
  void StartGrace(GraceMode mode, std::optional<Clock::duration> duration = std::nullopt);
  // Installs the persisted table as held locks and shares awaiting their reclaim. Records that
  // conflict with ones installed before them are rejected (a corrupt table); host limits do not
  // apply (this state was admitted before the restart).
  // REQUIRES: grace is active.
  LoadOutcome LoadRestored(std::span<const RestoredLock> locks,
                           std::span<const RestoredShare> shares);
  // Restored locks and shares not yet reclaimed; when it reaches zero in fine-grained grace the
  // caller may EndGrace(kAllReclaimed).
  size_t AwaitingReclaimCount() const { return awaiting_locks_ + awaiting_shares_; }
  // Drops a host's still-awaiting restored state (it rebooted again, or will never reclaim).
  DropOutcome DropRestored(const HostId& host);
  // Restored locks and shares removed before their reclaim, however that happened: grace ended,
  // DropRestored, or their host released everything (a reboot, FREE_ALL). A restored record is
  // either reclaimed, dropped (counted here), or still awaiting.
  uint64_t DroppedRestoredCount() const { return dropped_restored_; }
  // Ends grace now and drops all still-awaiting restored state.
  DropOutcome EndGrace(GraceEndReason reason);
  // Call from a timer: ends grace if its time ran out (every other call checks too).
  DropOutcome Tick();
  const GracePeriod& grace() const { return grace_; }

  // --- Snapshots (store, admin API) -----------------------------------------------------------

  LockCounts Counts() const;
  // Locks in (file, first, owner) order within a file; files in no particular order.
  void ForEachLock(const std::function<void(const LockView&)>& fn,
                   const StateFilter& filter = {}) const;
  std::vector<LockInfo> ListLocks(const StateFilter& filter = {}) const;
  std::vector<ShareInfo> ListShares(const StateFilter& filter = {}) const;
  // Waiters in arrival order within a file.
  std::vector<WaiterInfo> ListWaiters(const StateFilter& filter = {}) const;
  // The same waiters, each queued one with the locks it waits for (the wait-for graph's
  // edges; at most `max_blockers` each, with at most as many of each holder's own waiters):
  // what an operator follows to the head of a chain.
  std::vector<WaitForInfo> ListWaitFor(const StateFilter& filter = {},
                                       size_t max_blockers = kMaxBlockersListed) const;
  // Stops one waiter behind a wide fan of readers from filling a wait-for listing.
  static constexpr size_t kMaxBlockersListed = 32;
  // Blocking requests refused because they would close a cycle, and checks that a limit
  // stopped (the request waited; a cycle may have gone unseen).
  const DeadlockCounts& deadlock_counts() const { return deadlock_counts_; }
  // All state as text, files sorted by key; for tests and debugging.
  std::string DebugString() const;

 private:
  struct WaiterLocation {
    FileState* file;
    WaiterQueue::iterator it;
  };

  // Lookups that never create.
  FileState* FindFile(const FileKey& key);
  const FileState* FindFile(const FileKey& key) const;
  std::optional<OwnerId> FindOwner(const LockOwner& owner) const { return owners_.Find(owner); }
  // Get-or-create. `found` is what FindFile(key) returned. EnsureOwner returns nullopt when the
  // host registry is full, or (within limits) when the host's owners would pass
  // max_owner_bytes_per_host; `known` and `known_host` are what earlier lookups found for this
  // owner, to save repeating them.
  FileState& UseFile(FileState* found, const FileKey& key);
  struct OwnerRef {
    OwnerId id;
    bool host_added;
  };
  std::optional<OwnerRef> EnsureOwner(const LockOwner& owner, std::optional<OwnerId> known,
                                      HostInfo* known_host, HostRegistry::Admission admission);
  HostState& HostOf(OwnerId owner) const { return *owners_.host(owner); }
  // What one owner costs its host against max_owner_bytes_per_host: its handle and host name
  // (each kept in the owner's record) and the record itself.
  static uint64_t OwnerBytes(const LockOwner& owner) {
    constexpr uint64_t kRecordBytes = 256;  // The record, its index entries, string headers.
    return kRecordBytes + owner.host.value().size() + owner.oh.value().size();
  }

  // Adds `records` (lock entries, shares, waiter records; may be negative) to the owner's and
  // its host's bookkeeping, removing the owner and host state that drop to zero. Call after the
  // owner's last use; then ReleaseFileIfEmpty(file) once, which may destroy `file`.
  void Account(FileState& file, OwnerId owner, int64_t records);
  void AddLockCounts(OwnerId owner, const TableDelta& delta);
  void AddShareCounts(OwnerId owner, const ShareTable::Delta& delta);
  // Marks an empty file idle. Idle records are kept so that a file locked and unlocked in a loop
  // costs no allocation, up to max(kMinIdleFiles, files in use); past that all are freed (an
  // amortized O(1) sweep), which bounds what a client cycling through file handles can pin.
  void ReleaseFileIfEmpty(FileState& file);
  // Marks the owner's host as seen now; returns it (nullptr if unknown).
  HostInfo* TouchHost(const LockOwner& owner, std::optional<OwnerId> id);
  // The opening of a call on a byte range (LOCK, TEST, UNLOCK, CANCEL): checks grace (its
  // grants to `grants`), then finds the file, the owner and its host, and touches the host.
  // nullopt if offset and length make no range (they overflow).
  struct RangeCall {
    ByteRange range;
    FileState* file = nullptr;     // nullptr: nobody holds or waits for anything on it.
    std::optional<OwnerId> owner;  // nullopt: unknown owner.
    HostInfo* host = nullptr;      // nullptr: unknown host.
  };
  std::optional<RangeCall> OpenRangeCall(const FileKey& file, const LockOwner& owner,
                                         uint64_t offset, uint64_t length, Grants& grants);
  void NoteHost(HostInfo& host, std::optional<int32_t> nsm_state, const std::string& label,
                const std::string& address);

  // Grants, in arrival order, the queued waiters of `file` that overlap `released` and conflict
  // with nothing held; repeats when a grant itself downgrades a lock.
  void ServeWaiters(FileState& file, ByteRange released, Grants& grants);
  WaiterGrant MakeGrant(const FileState& file, const Waiter& waiter) const;
  void EraseWaiter(FileState& file, WaiterQueue::iterator it);
  // Whether `owner` waiting for the conflicting holders on `file` would close a cycle
  // (counted in deadlock_counts_).
  bool WouldDeadlock(const FileState& file, OwnerId owner, const ByteRange& range, LockType type);
  // Forgets the owner's granted-unacknowledged record of exactly this lock, if any; returns its
  // id.
  std::optional<WaiterId> SettlePendingGrant(FileState& file, OwnerId owner, const ByteRange& range,
                                             LockType type);

  // Undo of granted blocks and calls (lock_manager_undo.cpp).
  // The owner and file to restore a snapshot into: found, or made again when the undone call
  // released the owner's last record there. nullopt when there is nothing to restore: the
  // owner's host was released since the snapshot (`host_releases`), or the owner is gone and
  // held nothing then (`held_before` false).
  struct RestoreTarget {
    FileState* file;
    OwnerId owner;
  };
  std::optional<RestoreTarget> FindRestoreTarget(const FileKey& file, const LockOwner& owner,
                                                 uint64_t host_releases, bool held_before);
  uint64_t HostReleases(const HostId& host) const;
  // The owner's locks over `range`, clipped to it.
  static std::vector<PriorLocks::Entry> OwnerLocksOver(const FileState& file, OwnerId owner,
                                                       const ByteRange& range);
  // The owner changed its locks over `range` itself: its pending grants no longer decide there.
  void SettleOwnerGrants(FileState& file, OwnerId owner, const ByteRange& range);
  // `grant` stands (acknowledged, or kept by an Unlock): the owner's older pending grants no
  // longer decide the bytes it still decides.
  void SettleOlderGrants(FileState& file, const Waiter& grant);
  // The owner's pending grants overlapping `range` from grant number `first_seq` on, oldest
  // first: the ones that sit on top of a grant or call made before them.
  static std::vector<Waiter*> LaterGrants(FileState& file, OwnerId owner, uint64_t first_seq,
                                          const ByteRange& range);
  // Replaces the owner's locks over `bytes` by the `prior` ones there (restored locks awaiting
  // their reclaim only if `with_awaiting`); widens `released` by what became weaker. Returns
  // the record delta. Serve the waiters after.
  int64_t ReplaceOwnerLocks(FileState& file, OwnerId owner, const RangeSet& bytes,
                            const std::vector<PriorLocks::Entry>& prior, bool with_awaiting,
                            std::optional<ByteRange>& released);
  // Takes back a granted waiter (Cancel, RevokeGrant), erases it and serves the waiters this
  // frees; returns the record delta of its owner.
  int64_t UndoGrant(FileState& file, WaiterQueue::iterator grant, Grants& grants);
  // Releases the owner's locks over `range` and serves waiters; returns the record delta.
  int64_t ReleaseRange(FileState& file, OwnerId owner, const ByteRange& range, Grants& grants);

  // Ends grace if its timer ran out, dropping awaiting state; appends the grants.
  void CheckGrace(Grants& grants);
  bool ConflictsWithAwaiting(const FileState* file, std::optional<OwnerId> owner,
                             const ByteRange& range, LockType type) const;

  // Removes from `file` the records of owners for which owner_match(id) holds: every kind, or
  // only awaiting-reclaim locks and shares. Then serves the waiters this frees.
  struct Removal {
    size_t locks = 0;
    size_t shares = 0;
    size_t waiters = 0;
    size_t pending_grants = 0;
    size_t restored = 0;  // Of the locks and shares, those awaiting their reclaim.
  };
  Removal RemoveFromFile(FileState& file, const std::function<bool(OwnerId)>& owner_match,
                         bool awaiting_only, Grants& grants);
  DropOutcome DropAwaiting(const std::function<bool(OwnerId)>& owner_match,
                           std::vector<FileState*> files);

  const Clock& clock_;
  LockManagerOptions options_;
  HostRegistry hosts_;
  GracePeriod grace_;
  OwnerTable owners_;
  std::unordered_map<FileKey, FileState> files_;
  std::unordered_map<const HostInfo*, HostState> host_states_;
  std::unordered_map<uint64_t, WaiterLocation> waiter_index_;
  WaitFor wait_for_;  // The queued waiters by owner.
  DeadlockCounts deadlock_counts_;
  uint64_t next_waiter_id_ = 1;
  uint64_t next_grant_seq_ = 1;
  uint64_t files_created_ = 0;  // Seeds each file's tree differently.
  size_t idle_files_ = 0;
  size_t locks_ = 0;
  size_t awaiting_locks_ = 0;
  size_t shares_ = 0;
  size_t awaiting_shares_ = 0;
  size_t waiters_ = 0;
  size_t pending_grants_ = 0;
  uint64_t dropped_restored_ = 0;
};

}  // namespace nlockd::lock
