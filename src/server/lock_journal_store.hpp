// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>

#include "lock/lock_manager.hpp"
#include "nlm/lock_journal.hpp"
#include "rpc/event.hpp"
#include "store/async_write.hpp"
#include "store/records.hpp"
#include "store/store.hpp"

namespace nlockd::store {
class LoggedStore;
class LockChangesRecord;
}  // namespace nlockd::store

namespace nlockd::server {

// NLM's lock journal over the store (docs/architecture.md, journal-before-answer: lock-table
// changes are written before the answer). Each entry becomes the current state of that owner on
// that file, read from the LockManager at the moment Record is called (same executor, so it is what
// NLM answers), and written as one ApplyLockChanges (kCommitted: survives a process crash; a host
// crash is caught by the store's lock_table_complete). Runs on the lock executor; `locks` and
// `store` must outlive it, and so must the executor's pending handlers.
//
// Group journal: NLM gathers the calls of one turn of the executor (nlm::JournalBarrier) and
// records their entries at once; they are written as a single store write, and the calls resume
// when that write is done. The owners' state is read when the batch is written, so two calls of
// an owner on the same range in one batch are written once. One store write, one wake-up of the
// writer thread and one completion per batch, not per call.
class StoreLockJournal final : public nlm::LockJournal {
 public:
  StoreLockJournal(const lock::LockManager& locks, store::Store& store);

  asio::awaitable<bool> Record(std::vector<nlm::JournalEntry> entries) override;
  // Inline where the store acknowledges lock writes at once (the lock log): a write per call
  // then costs less than gathering the calls of a turn and resuming them. In front of the lock
  // log itself, the record is encoded straight from the manager's state and the entries (no
  // store::LockChange with copied strings) into a buffer kept from call to call.
  bool records_inline() const override { return store_.AcknowledgesLockChangesAtOnce(); }
  bool RecordInline(std::span<const nlm::JournalEntryRef> entries) override;

  // The owners whose restored locks or shares were loaded at start-up. When grace ends (or a
  // host's restored state is dropped) their persisted rows are rewritten from what they hold
  // now, so that an unreclaimed restored lock does not come back at the next start.
  // Until something of an owner's locks on that file is written, its rows are known to be the
  // restored ones: a call that leaves the owner holding exactly those (a reclaim of its
  // restored locks) is journaled without a store write, and settling skips an owner that
  // holds them all, so a reclaim storm after a restart or takeover writes nothing.
  void RememberRestoredLock(const lock::RestoredLock& lock);
  void RememberRestoredShare(const lock::FileKey& file, const lock::LockOwner& owner);
  size_t restored_pending() const { return restored_.size(); }
  // Rewrites the persisted state of every remembered owner (of `host` only, when given) and
  // forgets them; awaits the write. False if the store failed.
  asio::awaitable<bool> SettleRestored(std::optional<lock::HostId> host = std::nullopt);

  uint64_t failures() const { return failures_; }

  // The store changes that make the persisted copy of `entries` equal the manager's state;
  // host releases become their own writes. Public for tests.
  struct Plan {
    std::vector<store::Write> writes;
    size_t changes = 0;
  };
  Plan PlanWrites(const std::vector<nlm::JournalEntry>& entries);

 private:
  // The store change that writes a kLocks or kShare entry, or nullopt when the store holds it
  // already (the owner holds exactly its restored rows).
  std::optional<store::LockChange> ChangeFor(const nlm::JournalEntryRef& entry);

  // (file, host, svid, oh) of an owner on a file.
  using OwnerKeyView = std::tuple<std::string_view, std::string_view, int32_t, std::string_view>;
  static OwnerKeyView OwnerKey(const nlm::JournalEntryRef& entry);
  // The owner's current locks as a store change: only near entry.range when it has one and the
  // owner's rows are in sync, else all of them.
  store::ReplaceLocks CurrentLocks(const nlm::JournalEntryRef& entry);
  // The same, its ranges put in ranges_: returns the span of rows they replace (nullopt: all).
  std::optional<store::OffsetSpan> CurrentRanges(const nlm::JournalEntryRef& entry);
  // RecordInline in front of the lock log: the changes of `entries` as one record.
  bool AppendInline(std::span<const nlm::JournalEntryRef> entries);
  // RecordInline through Store::ApplyLockChanges.
  bool ApplyInline(std::span<const nlm::JournalEntryRef> entries);
  // After a failed write: the persisted rows of these owners may differ from their state
  // anywhere, so their next write replaces all of their rows.
  template <typename Entries>
  void MarkUnsynced(const Entries& entries);
  // Before writing entries: the owners they write in full are in sync again (unless the write
  // fails, which marks them again).
  template <typename Entries>
  void MarkSynced(const Entries& entries);
  store::LockChange CurrentShare(const lock::FileKey& file, const lock::LockOwner& owner) const;
  asio::awaitable<bool> Write(std::vector<store::Write> writes, size_t changes);
  // A batch of lock and share entries being written, and its outcome.
  struct Batch {
    std::vector<nlm::JournalEntry> entries;
    // Made only when the write is not done on return from WriteBatch (the lock log
    // acknowledges at once): set when the write is done, which wakes the call waiting on it.
    std::optional<rpc::Event> written;
    bool ok = false;
    bool finished = false;  // the write completed (ok says how)
  };
  // Writes `entries` (no host releases) as one batch now. A store that acknowledges at once (the
  // lock log) has finished the batch when this returns; otherwise it completes on `executor`.
  std::shared_ptr<Batch> WriteBatch(const asio::any_io_executor& executor,
                                    std::vector<nlm::JournalEntry> entries);
  void Failed(size_t changes, const std::exception_ptr& error);

  const lock::LockManager& locks_;
  store::Store& store_;
  // `store_` when it is the lock log (store::LoggedStore), else null.
  store::LoggedStore* const log_;
  // Reused by every inline write: the owner's locks, as rows, and the record.
  std::vector<lock::PriorLocks::Entry> held_;
  std::vector<store::LockRange> ranges_;
  std::string record_;
  // (is share, file, host, svid, oh) of restored state not yet settled.
  using RestoredKey = std::tuple<bool, std::string, std::string, int32_t, std::string>;
  std::set<RestoredKey> restored_;
  // (file, host, svid, oh) of owners whose rows a failed write left out of date.
  std::set<std::tuple<std::string, std::string, int32_t, std::string>, std::less<>> unsynced_;
  // The rows restored for (file, host, svid, oh), sorted, while no write has touched that
  // owner's locks on that file since: what the store holds for it.
  std::map<std::tuple<std::string, std::string, int32_t, std::string>,
           std::vector<store::LockRange>, std::less<>>
      restored_rows_;
  // Whether the owner of `entry` holds exactly its restored rows (false once written).
  bool HoldsRestoredRows(const nlm::JournalEntryRef& entry) const;
  // A write of `entry`'s owner is planned: its rows are no longer known.
  void ForgetRestoredRows(const nlm::JournalEntryRef& entry);
  uint64_t failures_ = 0;
};

}  // namespace nlockd::server
